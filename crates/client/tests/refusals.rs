//! Refusals and their scope, against the real server: a problem with one message is that
//! message's outcome, once, and its producer goes on; reliable or plain, named or not, no
//! refusal of one message closes a producer on one side and leaves it open on the other.

mod support;

use std::sync::Arc;
use std::time::{Duration, Instant};

use support::{
    backoff, capped, collector, exactly_once, one_queue, quiet, real_server, reliable,
    reliable_producer, runtime, wait_outcomes,
};
use zerodispatch_broker::{Broker, BrokerConfig};
use zerodispatch_client::{Client, ClientError, ConfirmStatus, ProducerOptions, QueueId};
use zerodispatch_server::{Limits, Server};

/// A server whose payload slots hold 64 bytes.
fn small_slots() -> (Server, Arc<Broker>) {
    let limits = Limits {
        slot_size: 64,
        ..Limits::default()
    };
    let server = real_server(one_queue(), limits);
    let broker = Arc::clone(server.broker());
    (server, broker)
}

/// Issue: a reliable producer's 200-byte payload, refused by a server of 64-byte slots,
/// made it reconnect about 800 times in 5 s without an outcome, and a small message sent
/// before it was not stored either. Now the server's `Welcome` tells its largest payload:
/// the big one is refused by `send` itself, and the messages around it are stored.
#[test]
fn a_payload_too_large_for_the_server_is_refused_by_send_and_the_producer_goes_on() {
    let (server, broker) = small_slots();
    runtime().block_on(async {
        let options = reliable("too-large", 16, backoff(1, 5));
        let (producer, outcomes) = reliable_producer(server.local_addr(), options).await;
        producer.send(b"small before").await.unwrap();
        assert_eq!(
            producer.send(&[7; 200]).await,
            Err(ClientError::PayloadTooLarge { len: 200, max: 64 })
        );
        producer.send(b"small after").await.unwrap();
        wait_outcomes(&outcomes, 2).await;
        for outcome in exactly_once(&outcomes, 2) {
            assert_eq!(outcome.status, ConfirmStatus::Stored);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert_eq!(outcomes.lock().unwrap().len(), 2);
        let stats = producer.stats();
        assert_eq!((stats.reconnects, stats.resent), (0, 0), "{stats:?}");
        assert_eq!(broker.queue_stats()[0].stored, 2);
        producer.close().await;
    });
    server.shutdown();
}

/// Issue: the same refusal closed a plain named producer on the client while the server
/// held it open, so its name could not be opened again (`NAME_IN_USE`). Now the refusal is
/// the message's outcome, the producer stays open on both sides, and after its close the
/// name opens again.
#[test]
fn a_named_producer_refused_one_message_stays_open_and_its_name_reopens_after_close() {
    let (server, broker) = small_slots();
    runtime().block_on(async {
        let client = Client::connect(server.local_addr(), quiet()).await.unwrap();
        let (outcomes, on_confirm) = collector();
        let producer = client
            .open_named_producer(QueueId(0), "plain", ProducerOptions::default(), on_confirm)
            .await
            .unwrap();
        assert_eq!(client.limits().max_payload, 64, "told at the handshake");
        assert_eq!(
            producer.send(&[1; 65]).await,
            Err(ClientError::PayloadTooLarge { len: 65, max: 64 })
        );
        producer.send(b"fits").await.unwrap();
        wait_outcomes(&outcomes, 1).await;
        assert_eq!(outcomes.lock().unwrap()[0].status, ConfirmStatus::Stored);
        producer.close().await.unwrap();
        let (_, on_confirm) = collector();
        let again = client
            .open_named_producer(QueueId(0), "plain", ProducerOptions::default(), on_confirm)
            .await
            .expect("the name is free again once its producer closed");
        assert_eq!(again.last_stored().map(|id| id.0), Some(0));
        assert_eq!(
            again.stored_when_opened(zerodispatch_client::PublishId(0)),
            Some(true)
        );
        assert_eq!(
            again.stored_when_opened(zerodispatch_client::PublishId(1)),
            Some(false)
        );
        assert_eq!(broker.queue_stats()[0].stored, 1);
        again.close().await.unwrap();
        client.close().await;
    });
    server.shutdown();
}

/// A name whose ids are used up to `u64::MAX` has no next id: the producer says so,
/// rather than reusing one (which the broker would take for a duplicate and confirm
/// `Stored` without storing).
#[test]
fn a_name_stored_up_to_u64_max_has_no_next_id() {
    let (server, broker) = small_slots();
    runtime().block_on(async {
        let client = Client::connect(server.local_addr(), quiet()).await.unwrap();
        // The name's last message is u64::MAX, published with its id by the broker's API (a
        // broker-side producer of the name, say).
        {
            let named = broker
                .open_named_producer(
                    "exhausted",
                    zerodispatch_broker::ProducerConfig::default(),
                    |_: &[zerodispatch_broker::Ack]| {},
                )
                .unwrap();
            named
                .publish_with_id(
                    zerodispatch_broker::QueueId(0),
                    zerodispatch_broker::Payload { handle: 0, len: 0 },
                    u64::MAX,
                )
                .unwrap();
            broker.quiesce().unwrap();
            assert!(named.close(Duration::from_secs(5)));
        }
        let (_, on_confirm) = collector();
        let producer = client
            .open_named_producer(
                QueueId(0),
                "exhausted",
                ProducerOptions::default(),
                on_confirm,
            )
            .await
            .unwrap();
        assert_eq!(producer.last_stored().map(|id| id.0), Some(u64::MAX));
        let start = Instant::now();
        assert_eq!(
            producer.send(b"one more").await,
            Err(ClientError::IdsExhausted)
        );
        assert!(start.elapsed() < Duration::from_secs(5));
        assert_eq!(broker.queue_stats()[0].stored, 1);
        producer.close().await.unwrap();
        client.close().await;
    });
    server.shutdown();
}

/// A cap the broker told it would refuse is refused by the client itself, with the limit's
/// name and value: a client learns the limits at the handshake, not by being refused.
#[test]
fn a_cap_over_the_brokers_told_limits_is_refused_before_anything_is_sent() {
    let config = BrokerConfig {
        dedup_window: 64,
        ..one_queue()
    };
    let limits = Limits {
        max_unconfirmed_per_connection: 100,
        ..Limits::default()
    };
    let server = real_server(config, limits);
    runtime().block_on(async {
        let client = Client::connect(server.local_addr(), quiet()).await.unwrap();
        let limits = client.limits();
        assert_eq!(
            (
                limits.max_unconfirmed_per_connection,
                limits.max_unconfirmed_named
            ),
            (100, 64)
        );
        let cap = capped;
        let (_, on_confirm) = collector();
        let anonymous = client.open_producer(QueueId(0), cap(101), on_confirm).await;
        assert!(
            matches!(
                anonymous,
                Err(ClientError::OverLimit {
                    value: 101,
                    max: 100,
                    ..
                })
            ),
            "{anonymous:?}"
        );
        let (_, on_confirm) = collector();
        let named = client
            .open_named_producer(QueueId(0), "n", cap(65), on_confirm)
            .await;
        let Err(error @ ClientError::OverLimit { max: 64, .. }) = named else {
            panic!("{named:?}");
        };
        assert!(
            error.to_string().contains("max_unconfirmed_named"),
            "{error}"
        );
        let (_, on_confirm) = collector();
        let fits = client
            .open_named_producer(QueueId(0), "n", cap(64), on_confirm)
            .await
            .expect("at the limit: opened");
        fits.close().await.unwrap();
        client.close().await;
    });
    server.shutdown();
}

/// Issue: a producer closed right after a send, on a live connection, had the message
/// reported `NotSent` in most runs: the broker's close dropped what its session had not
/// sent to the queue yet. Now the close sends it, and the message gets its real outcome.
#[test]
fn a_close_right_after_a_send_gives_the_message_its_real_outcome() {
    let (server, broker) = small_slots();
    runtime().block_on(async {
        let client = Client::connect(server.local_addr(), quiet()).await.unwrap();
        for round in 0..20 {
            let (outcomes, on_confirm) = collector();
            let producer = client
                .open_producer(QueueId(0), ProducerOptions::default(), on_confirm)
                .await
                .unwrap();
            producer.send(b"last words").await.unwrap();
            producer.close().await.unwrap();
            let statuses: Vec<_> = outcomes.lock().unwrap().iter().map(|o| o.status).collect();
            assert_eq!(statuses, [ConfirmStatus::Stored], "round {round}");
        }
        assert_eq!(broker.queue_stats()[0].stored, 20);
        client.close().await;
    });
    server.shutdown();
}
