//! Refusals by the real server: a message's problem is its outcome, once; its producer goes on.

mod support;

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use support::*;
use zerodispatch_broker::{Ack, Broker, Payload, ProducerConfig};
use zerodispatch_client::{
    Client, ClientError, ConfirmStatus, ProducerOptions, PublishId, QueueId,
};
use zerodispatch_server::Limits;

/// Runs `test` on a [`runtime`] against a server whose payload slots hold 64 bytes.
fn on_small_slots<F: Future<Output = ()>>(test: impl FnOnce(SocketAddr, Arc<Broker>) -> F) {
    let limits = Limits {
        slot_size: 64,
        ..Limits::default()
    };
    let server = real_server(one_queue(), limits);
    let broker = Arc::clone(server.broker());
    runtime(2).block_on(test(server.local_addr(), broker));
    server.shutdown();
}

/// Too large for the server's `Welcome` limits: refused by `send`, the messages around stored.
#[test]
fn a_payload_too_large_for_the_server_is_refused_by_send_and_the_producer_goes_on() {
    on_small_slots(|addr, broker| async move {
        let options = reliable("too-large", 16, backoff(1, 5));
        let (producer, outcomes) = reliable_producer(addr, options).await;
        producer.send(b"small before").await.unwrap();
        let too_large = Err(ClientError::PayloadTooLarge { len: 200, max: 64 });
        assert_eq!(producer.send(&[7; 200]).await, too_large);
        producer.send(b"small after").await.unwrap();
        wait_settled(&outcomes, 2, ConfirmStatus::Stored).await;
        tokio::time::sleep(ms(100)).await;
        assert_eq!(outcomes.lock().unwrap().len(), 2);
        let stats = producer.stats();
        assert_eq!((stats.reconnects, stats.resent), (0, 0), "{stats:?}");
        assert_eq!(broker.queue_stats()[0].stored, 2);
        producer.close().await;
    });
}

/// A refused message leaves its named producer open on both sides; the name reopens after close.
#[test]
fn a_named_producer_refused_one_message_stays_open_and_its_name_reopens_after_close() {
    on_small_slots(|addr, broker| async move {
        let client = Client::connect(addr, quiet()).await.unwrap();
        let (producer, outcomes) = named_producer_of(&client, "plain", Default::default()).await;
        let producer = producer.unwrap();
        assert_eq!(client.limits().max_payload, 64, "told at the handshake");
        let too_large = Err(ClientError::PayloadTooLarge { len: 65, max: 64 });
        assert_eq!(producer.send(&[1; 65]).await, too_large);
        producer.send(b"fits").await.unwrap();
        wait_outcomes(&outcomes, 1).await;
        assert_eq!(outcomes.lock().unwrap()[0].status, ConfirmStatus::Stored);
        producer.close().await.unwrap();
        let (again, _) = named_producer_of(&client, "plain", Default::default()).await;
        let again = again.expect("the name is free again once its producer closed");
        assert_eq!(again.last_stored().map(|id| id.0), Some(0));
        assert_eq!(again.stored_when_opened(PublishId(0)), Some(true));
        assert_eq!(again.stored_when_opened(PublishId(1)), Some(false));
        assert_eq!(broker.queue_stats()[0].stored, 1);
        again.close().await.unwrap();
        client.close().await;
    });
}

/// A name stored up to `u64::MAX` has no next id: said, not reused as a duplicate would be.
#[test]
fn a_name_stored_up_to_u64_max_has_no_next_id() {
    on_small_slots(|addr, broker| async move {
        let client = Client::connect(addr, quiet()).await.unwrap();
        // The name's last message, u64::MAX, published by a broker-side producer of the name.
        {
            let (config, payload) = (ProducerConfig::default(), Payload { handle: 0, len: 0 });
            let named = broker.open_named_producer("exhausted", config, |_: &[Ack]| {});
            let (named, queue) = (named.unwrap(), zerodispatch_broker::QueueId(0));
            named.publish_with_id(queue, payload, u64::MAX).unwrap();
            broker.quiesce().unwrap();
            assert!(named.close(Duration::from_secs(5)));
        }
        let (producer, _) = named_producer_of(&client, "exhausted", Default::default()).await;
        let producer = producer.unwrap();
        assert_eq!(producer.last_stored().map(|id| id.0), Some(u64::MAX));
        let start = Instant::now();
        let one_more = producer.send(b"one more").await;
        assert_eq!(one_more, Err(ClientError::IdsExhausted));
        assert!(start.elapsed() < Duration::from_secs(5));
        assert_eq!(broker.queue_stats()[0].stored, 1);
        producer.close().await.unwrap();
        client.close().await;
    });
}

/// A cap over the limits told at the handshake is refused by the client, naming the limit.
#[test]
fn a_cap_over_the_brokers_told_limits_is_refused_before_anything_is_sent() {
    let mut config = one_queue();
    config.dedup_window = 64;
    let limits = Limits {
        max_unconfirmed_per_connection: 100,
        ..Limits::default()
    };
    let server = real_server(config, limits);
    runtime(2).block_on(async {
        let client = Client::connect(server.local_addr(), quiet()).await.unwrap();
        let told = client.limits();
        assert_eq!(told.max_unconfirmed_per_connection, 100);
        assert_eq!(told.max_unconfirmed_named, 64);
        let anonymous = client.open_producer(QueueId(0), capped(101), |_| {}).await;
        let Err(ClientError::OverLimit { value, max, .. }) = &anonymous else {
            panic!("{anonymous:?}");
        };
        assert_eq!((*value, *max), (101, 100), "{anonymous:?}");
        let (named, _) = named_producer_of(&client, "n", capped(65)).await;
        let Err(error @ ClientError::OverLimit { max: 64, .. }) = named else {
            panic!("{named:?}");
        };
        let named_limit = error.to_string().contains("max_unconfirmed_named");
        assert!(named_limit, "{error}");
        let (fits, _) = named_producer_of(&client, "n", capped(64)).await;
        let fits = fits.expect("at the limit: opened");
        fits.close().await.unwrap();
        client.close().await;
    });
    server.shutdown();
}

/// A close right after a send sends the message on: its outcome is `Stored`.
#[test]
fn a_close_right_after_a_send_gives_the_message_its_real_outcome() {
    on_small_slots(|addr, broker| async move {
        let client = Client::connect(addr, quiet()).await.unwrap();
        for round in 0..20 {
            let (producer, outcomes) = producer_of(&client, ProducerOptions::default()).await;
            producer.send(b"last words").await.unwrap();
            producer.close().await.unwrap();
            let statuses: Vec<_> = outcomes.lock().unwrap().iter().map(|o| o.status).collect();
            assert_eq!(statuses, [ConfirmStatus::Stored], "round {round}");
        }
        assert_eq!(broker.queue_stats()[0].stored, 20);
        client.close().await;
    });
}
