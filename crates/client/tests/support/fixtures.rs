//! Fixtures that build the fake peer and the client side of a test in one call, so that
//! each test reads as the scenario it checks.

use std::time::{Duration, Instant};

use std::sync::{Arc, Mutex};

use zerodispatch_client::{
    AppId, Client, ClientOptions, Deliveries, Flush, Guid, Producer, ProducerOptions, QueueId,
    ReliableConsumer, ReliableConsumerOptions, ReliableProducer, ReliableProducerOptions,
};

use super::{Config, FakeBroker, Outcomes, collector};

/// Client options without heartbeats, so that a test's frames are its own.
pub fn quiet() -> ClientOptions {
    ClientOptions {
        heartbeat: Duration::ZERO,
        ..ClientOptions::default()
    }
}

/// Producer options with dynamic send, cut at `batch_size`.
pub fn dynamic(batch_size: u32) -> ProducerOptions {
    ProducerOptions {
        flush: Flush::Dynamic { batch_size },
        ..ProducerOptions::default()
    }
}

/// A fake broker started with `config`, and a [`quiet`] client connected to it.
pub async fn connected(config: Config) -> (FakeBroker, Client) {
    let broker = FakeBroker::start(config).await;
    let client = Client::connect(broker.addr, quiet()).await.unwrap();
    (broker, client)
}

/// A fake broker started with `config`, a [`quiet`] client of it, and a producer on queue
/// 0 with `options` whose outcomes are collected.
pub async fn producing(
    config: Config,
    options: ProducerOptions,
) -> (FakeBroker, Client, Producer, Outcomes) {
    let (broker, client) = connected(config).await;
    let (producer, outcomes) = producer_of(&client, options).await;
    (broker, client, producer, outcomes)
}

/// A producer on queue 0 of `client` with `options`, whose outcomes are collected.
pub async fn producer_of(client: &Client, options: ProducerOptions) -> (Producer, Outcomes) {
    let (outcomes, on_confirm) = collector();
    let producer = client
        .open_producer(QueueId(0), options, on_confirm)
        .await
        .unwrap();
    (producer, outcomes)
}

/// A fake broker started with `config`, and a reliable producer of it on queue 0 with
/// `options` whose outcomes are collected.
pub async fn producing_reliably(
    config: Config,
    options: ReliableProducerOptions,
) -> (FakeBroker, ReliableProducer, Outcomes) {
    let broker = FakeBroker::start(config).await;
    let (outcomes, on_confirm) = collector();
    let producer = ReliableProducer::connect(broker.addr, QueueId(0), options, on_confirm)
        .await
        .unwrap();
    (broker, producer, outcomes)
}

/// What a consumer handed the application, in order: each message's GUID and payload.
pub type Handed = Arc<Mutex<Vec<(Guid, Vec<u8>)>>>;

/// A reliable consumer of app 0 on queue 0 of `broker` with `options`, whose handler
/// records each message it is handed, then calls `then` with the batch (to confirm).
pub async fn consuming_reliably(
    broker: &FakeBroker,
    options: ReliableConsumerOptions,
    then: impl Fn(&Deliveries<'_>) + Send + 'static,
) -> (ReliableConsumer, Handed) {
    let handed: Handed = Arc::default();
    let sink = Arc::clone(&handed);
    let consumer =
        ReliableConsumer::connect(broker.addr, QueueId(0), AppId(0), options, move |batch| {
            let mut sink = sink.lock().unwrap();
            for message in batch.iter() {
                sink.push((message.guid, message.payload.to_vec()));
            }
            drop(sink);
            then(batch);
        })
        .await
        .unwrap();
    (consumer, handed)
}

/// Waits (up to 5 s) until `cond` holds; `what` names it in the failure.
pub async fn wait_until(what: &str, cond: impl Fn() -> bool) {
    let start = Instant::now();
    while !cond() {
        assert!(
            start.elapsed() < Duration::from_secs(5),
            "5 s waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}
