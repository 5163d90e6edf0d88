//! Fixtures that build the fake peer and the client side of a test in one call.

use std::collections::HashSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use zerodispatch_broker::{BrokerConfig, QueueConfig, QueueMode};
use zerodispatch_client::{
    AppId, Backoff, Client, ClientError, ClientOptions, ConfirmStatus, Consumer, ConsumerOptions,
    Deliveries, DeliveryToken, Flush, Guid, Outcome, Producer, ProducerOptions, QueueId,
    ReliableConsumer, ReliableConsumerOptions, ReliableProducer, ReliableProducerOptions,
};
use zerodispatch_server::{Limits, Server};
use zerodispatch_wire::{ErrorCode, ErrorFrame, Frame, FrameKind};

use super::{Config, FakeBroker, Outcomes, collector};

/// Client options without heartbeats, so that a test's frames are its own.
pub fn quiet() -> ClientOptions {
    ClientOptions {
        heartbeat: Duration::ZERO,
        ..ClientOptions::default()
    }
}

/// Consumer options of `credit`, given back on each confirm if `auto_credit`.
pub fn credit(credit: u32, auto_credit: bool) -> ConsumerOptions {
    ConsumerOptions {
        credit,
        auto_credit,
    }
}

/// The GUIDs and tokens of what a consumer handed the application, in order.
pub fn handed_tokens(handed: &Handed) -> Vec<(Guid, DeliveryToken)> {
    let handed = handed.lock().unwrap();
    handed.iter().map(|(g, t, _)| (*g, *t)).collect()
}

/// Producer options with dynamic send, cut at `batch_size`.
pub fn dynamic(batch_size: u32) -> ProducerOptions {
    ProducerOptions {
        flush: Flush::Dynamic { batch_size },
        ..ProducerOptions::default()
    }
}

/// Producer options with at most `max_unconfirmed` messages unconfirmed.
pub fn capped(max_unconfirmed: u32) -> ProducerOptions {
    ProducerOptions {
        max_unconfirmed,
        ..ProducerOptions::default()
    }
}

/// Producer options that send on the ticks of a timer of `period`.
pub fn timer(period: Duration) -> ProducerOptions {
    ProducerOptions {
        flush: Flush::Timer(period),
        ..ProducerOptions::default()
    }
}

/// A backoff from `initial` to `max` (milliseconds), with the default factor and jitter.
pub fn backoff(initial: u64, max: u64) -> Backoff {
    Backoff {
        initial: ms(initial),
        max: ms(max),
        ..Backoff::default()
    }
}

/// A reliable producer's options: named `name`, a [`quiet`] client, capped, with `backoff`.
pub fn reliable(name: &str, max_unconfirmed: u32, backoff: Backoff) -> ReliableProducerOptions {
    ReliableProducerOptions {
        producer: capped(max_unconfirmed),
        client: quiet(),
        backoff,
        ..ReliableProducerOptions::new(name)
    }
}

/// The bytes of `frame`, for a fake peer to write.
pub fn frame_bytes(frame: Frame<'_>) -> Vec<u8> {
    let mut raw = Vec::new();
    frame.encode(&mut raw).expect("a valid frame encodes");
    raw
}

/// The bytes of an `Error` frame.
pub fn error_bytes(
    code: ErrorCode,
    refused: Option<FrameKind>,
    subject: u32,
    message: &str,
) -> Vec<u8> {
    let error = ErrorFrame {
        code,
        refused,
        subject,
        message,
    };
    frame_bytes(Frame::Error(error))
}

/// A consumer on queue 0 of `client` recording what it is handed, then calling `then` with it.
pub async fn consuming(
    client: &Client,
    options: ConsumerOptions,
    then: impl Fn(&Deliveries<'_>) + Send + 'static,
) -> (Consumer, Handed) {
    let (handed, handler) = recording(then);
    let consumer = client.open_consumer(QueueId(0), AppId(0), options, handler);
    (consumer.await.unwrap(), handed)
}

/// A handler recording each message it is handed, then calling `then` with the batch; its record.
fn recording(
    then: impl Fn(&Deliveries<'_>) + Send + 'static,
) -> (Handed, impl FnMut(&Deliveries<'_>) + Send + 'static) {
    let handed: Handed = Arc::default();
    let sink = Arc::clone(&handed);
    (handed, move |batch: &Deliveries<'_>| {
        let mut handed = sink.lock().unwrap();
        for message in batch.iter() {
            handed.push((message.guid, message.token, message.payload.to_vec()));
        }
        drop(handed);
        then(batch);
    })
}

/// Counters of the outcomes settled and of those `Stored`, and a confirm handler counting them.
pub fn counting() -> (
    Arc<AtomicU64>,
    Arc<AtomicU64>,
    impl FnMut(&[Outcome]) + Send + 'static,
) {
    let (settled, stored): (Arc<AtomicU64>, Arc<AtomicU64>) = Default::default();
    let (count, ok) = (Arc::clone(&settled), Arc::clone(&stored));
    (settled, stored, move |outcomes: &[Outcome]| {
        let stored_here = outcomes
            .iter()
            .filter(|o| o.status == ConfirmStatus::Stored)
            .count() as u64;
        ok.fetch_add(stored_here, Ordering::Relaxed);
        count.fetch_add(outcomes.len() as u64, Ordering::Release);
    })
}

/// The proofs' producer options: a cap of 1,024, batches cut at 256, a timeout never reached.
pub fn proof_options() -> ProducerOptions {
    ProducerOptions {
        max_unconfirmed: 1024,
        flush: Flush::Dynamic { batch_size: 256 },
        confirm_timeout: Some(Duration::from_secs(60)),
    }
}

/// A runtime of `workers` worker threads.
pub fn runtime(workers: usize) -> tokio::runtime::Runtime {
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    builder.worker_threads(workers).enable_all();
    builder.build().unwrap()
}

/// A runtime on the current thread only.
pub fn current_thread() -> tokio::runtime::Runtime {
    let mut builder = tokio::runtime::Builder::new_current_thread();
    builder.enable_all().build().unwrap()
}

/// A listener on a free loopback port, and its address, for a hand-written peer.
pub async fn listen() -> (tokio::net::TcpListener, std::net::SocketAddr) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    (listener, addr)
}

/// A hand-written broker's handshake (its `Welcome` asks for `heartbeat_ms`) and one open.
pub async fn answer_hello_and_open(stream: &mut tokio::net::TcpStream, heartbeat_ms: u32) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut hello = [0; 16];
    stream.read_exact(&mut hello).await.unwrap();
    let welcome = frame_bytes(super::welcome(heartbeat_ms));
    stream.write_all(&welcome).await.unwrap();
    let mut open = [0; 23];
    stream.read_exact(&mut open).await.unwrap();
    let Some((Frame::OpenProducer(open), _)) = zerodispatch_wire::decode(&open).unwrap() else {
        panic!("not an OpenProducer");
    };
    let (producer, stored) = (open.producer, zerodispatch_wire::StoredWindow::NOTHING);
    let opened = Frame::ProducerOpened(zerodispatch_wire::ProducerOpened { producer, stored });
    stream.write_all(&frame_bytes(opened)).await.unwrap();
}

/// Sends `n` one-byte messages `[0]`, `[1]`, ... in order.
pub async fn send_n(producer: &Producer, n: u8) {
    for i in 0..n {
        producer.send(&[i]).await.unwrap();
    }
}

/// A broker of one priority queue.
pub fn one_queue() -> BrokerConfig {
    BrokerConfig {
        queues: vec![QueueConfig::new(QueueMode::Priority)],
        ..BrokerConfig::default()
    }
}

/// The real server on a free loopback port, serving a broker of `config` under `limits`.
pub fn real_server(config: BrokerConfig, limits: Limits) -> Server {
    Server::builder()
        .listen("127.0.0.1:0".parse().unwrap())
        .broker_config(config)
        .limits(limits)
        .start()
        .expect("the server starts")
}

/// A fake broker started with `config`, and a [`quiet`] client connected to it.
pub async fn connected(config: Config) -> (FakeBroker, Client) {
    let broker = FakeBroker::start(config).await;
    let client = Client::connect(broker.addr, quiet()).await.unwrap();
    (broker, client)
}

/// [`connected`], and a producer on queue 0 with `options` whose outcomes are collected.
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
    let producer = client.open_producer(QueueId(0), options, on_confirm);
    (producer.await.unwrap(), outcomes)
}

/// As [`producer_of`], named `name` (`Err` as the open answered).
pub async fn named_producer_of(
    client: &Client,
    name: &str,
    options: ProducerOptions,
) -> (Result<Producer, ClientError>, Outcomes) {
    let (outcomes, on_confirm) = collector();
    let open = client.open_named_producer(QueueId(0), name, options, on_confirm);
    (open.await, outcomes)
}

/// A fake broker started with `config`, and a [`reliable_producer`] of it with `options`.
pub async fn producing_reliably(
    config: Config,
    options: ReliableProducerOptions,
) -> (FakeBroker, ReliableProducer, Outcomes) {
    let broker = FakeBroker::start(config).await;
    let (producer, outcomes) = reliable_producer(broker.addr, options).await;
    (broker, producer, outcomes)
}

/// A reliable producer on queue 0 of the broker at `addr` with `options`, outcomes collected.
pub async fn reliable_producer(
    addr: std::net::SocketAddr,
    options: ReliableProducerOptions,
) -> (ReliableProducer, Outcomes) {
    let (outcomes, on_confirm) = collector();
    let producer = ReliableProducer::connect(addr, QueueId(0), options, on_confirm)
        .await
        .unwrap();
    (producer, outcomes)
}

/// What a consumer handed the application, in order: each message's GUID, token and payload.
pub type Handed = Arc<Mutex<Vec<(Guid, DeliveryToken, Vec<u8>)>>>;

/// The distinct payloads of `handed`.
pub fn handed_payloads(handed: &[(Guid, DeliveryToken, Vec<u8>)]) -> HashSet<Vec<u8>> {
    handed.iter().map(|(_, _, p)| p.clone()).collect()
}

/// A reliable consumer on queue 0 at `addr`, recording what it is handed, then calling `then`.
pub async fn consuming_reliably(
    addr: std::net::SocketAddr,
    options: ReliableConsumerOptions,
    then: impl Fn(&Deliveries<'_>) + Send + 'static,
) -> (ReliableConsumer, Handed) {
    let (handed, handler) = recording(then);
    let consumer = ReliableConsumer::connect(addr, QueueId(0), AppId(0), options, handler);
    (consumer.await.unwrap(), handed)
}

/// The option an `InvalidOption` error names.
pub fn invalid_option(error: &ClientError) -> Option<&'static str> {
    match error {
        ClientError::InvalidOption { option, .. } => Some(option),
        _ => None,
    }
}

/// A duration of `n` milliseconds.
pub fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// Waits (up to 5 s) until `cond` holds; `what` names it in the failure.
pub async fn wait_until(what: &str, cond: impl Fn() -> bool) {
    let (start, limit) = (Instant::now(), Duration::from_secs(5));
    while !cond() {
        assert!(start.elapsed() < limit, "5 s waiting for {what}");
        tokio::time::sleep(ms(1)).await;
    }
}
