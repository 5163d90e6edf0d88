//! Set-up shared by the broker's tests (each binary uses some of it): brokers, logging
//! producers and consumers, payloads, receipts, waits and a small random generator.

#![allow(dead_code)]

use std::collections::HashMap;
use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Barrier, Mutex};
use std::time::{Duration, Instant};

use zerodispatch_broker::*;

/// What a handler was handed, in order.
pub type Log<T> = Arc<Mutex<Vec<T>>>;

/// Each message's one outcome.
pub type Outcome = HashMap<Guid, AckStatus>;

/// A broker started from `config`, which the test means to be valid.
pub fn start(config: BrokerConfig) -> Broker {
    Broker::start(config).expect("valid config")
}

/// A configuration with one queue of `mode`, the rest default.
pub fn one_queue(mode: QueueMode) -> BrokerConfig {
    queues(vec![QueueConfig::new(mode)])
}

/// A configuration of `queues`, the rest default.
pub fn queues(queues: Vec<QueueConfig>) -> BrokerConfig {
    with(BrokerConfig::default(), |c| c.queues = queues)
}

/// Replication by `replicas` nodes, ACKs at `quorum` receipts.
pub fn replication(replicas: u8, quorum: u8) -> Option<Replication> {
    Some(Replication { replicas, quorum })
}

/// One priority queue whose ACKs wait for its one replica's [`receipt`].
pub fn replicated() -> BrokerConfig {
    let replicas = |c: &mut BrokerConfig| c.replication = replication(1, 1);
    with(one_queue(QueueMode::Priority), replicas)
}

/// The payload of handle `handle`, 8 bytes long.
pub fn payload(handle: u64) -> Payload {
    Payload { handle, len: 8 }
}

/// `value` changed by `f` (a configuration differing from another in a field or two).
pub fn with<T>(mut value: T, f: impl FnOnce(&mut T)) -> T {
    f(&mut value);
    value
}

/// The default producer configuration changed by `f`.
pub fn producer_config(f: impl FnOnce(&mut ProducerConfig)) -> ProducerConfig {
    with(ProducerConfig::default(), f)
}

/// The default consumer options changed by `f`.
pub fn options(f: impl FnOnce(&mut ConsumerOptions)) -> ConsumerOptions {
    with(ConsumerOptions::default(), f)
}

/// A broker of `queues` on `session_processors` session processors, the rest default.
pub fn start_on(queues: Vec<QueueConfig>, session_processors: usize) -> Broker {
    start(with(self::queues(queues), |c| {
        c.session_processors = session_processors
    }))
}

/// A broker of one priority queue, configured further by `f`.
pub fn priority_broker(f: impl FnOnce(&mut BrokerConfig)) -> Broker {
    start(with(one_queue(QueueMode::Priority), f))
}

/// One priority queue, default settings.
pub fn priority() -> QueueConfig {
    QueueConfig::new(QueueMode::Priority)
}

/// One fanout queue of `apps` apps, default settings.
pub fn fanout(apps: u16) -> QueueConfig {
    QueueConfig::new(QueueMode::Fanout { apps })
}

/// A producer of at most `max_unconfirmed` messages in flight, and the log of its outcomes.
pub fn producer(broker: &Broker, max_unconfirmed: usize) -> (Producer, Log<Ack>) {
    producer_with(broker, capped(max_unconfirmed))
}

/// A producer configured with `config`, and the log of its outcomes.
pub fn producer_with(broker: &Broker, config: ProducerConfig) -> (Producer, Log<Ack>) {
    let acks = Log::default();
    let p = broker.open_producer_with(config, recording(&acks)).unwrap();
    (p, acks)
}

/// A consumer of `queue`'s app `app` with `options` that hands each batch to `on_delivery`.
pub fn open_consumer(
    broker: &Broker,
    (queue, app): (u32, u16),
    options: ConsumerOptions,
    on_delivery: impl FnMut(&[Delivery]) + Send + 'static,
) -> Consumer {
    let c = broker.open_consumer(QueueId(queue), AppId(app), options, on_delivery);
    c.unwrap()
}

/// A consumer of `queue`'s app `app`, and the log of its deliveries.
pub fn consumer(
    broker: &Broker,
    queue: u32,
    app: u16,
    options: ConsumerOptions,
) -> (Consumer, Log<Delivery>) {
    let seen = Log::default();
    let c = open_consumer(broker, (queue, app), options, recording(&seen));
    (c, seen)
}

/// A consumer of queue 0's `app` with the default options, and the log of its deliveries.
pub fn consumer_of(broker: &Broker, app: u16) -> (Consumer, Log<Delivery>) {
    consumer(broker, 0, app, ConsumerOptions::default())
}

/// A consumer of queue 0's app 0 (default options) that hands each batch to `on_delivery`.
pub fn consumer_calling(
    broker: &Broker,
    on_delivery: impl FnMut(&[Delivery]) + Send + 'static,
) -> Consumer {
    open_consumer(broker, (0, 0), ConsumerOptions::default(), on_delivery)
}

/// A consumer of `queue`'s app 0 that takes everything and keeps nothing.
pub fn drain(broker: &Broker, queue: u32) -> Consumer {
    drain_app(broker, (queue, 0))
}

/// A consumer of `queue`'s app `app` that takes everything and keeps nothing.
pub fn drain_app(broker: &Broker, (queue, app): (u32, u16)) -> Consumer {
    let options = ConsumerOptions::default();
    open_consumer(broker, (queue, app), options, |_: &[Delivery]| {})
}

/// Publishes the payloads of `handles` to `queue`; their GUIDs, in order.
pub fn publish(p: &Producer, queue: u32, handles: Range<u64>) -> Vec<Guid> {
    let publish = |handle| p.publish(QueueId(queue), payload(handle)).unwrap();
    handles.map(publish).collect()
}

/// A producer of `max_unconfirmed`, its log and the GUIDs of `n` messages it published.
pub fn published(
    broker: &Broker,
    max_unconfirmed: usize,
    n: u64,
) -> (Producer, Log<Ack>, Vec<Guid>) {
    let (p, acks) = producer(broker, max_unconfirmed);
    let guids = publish(&p, 0, 0..n);
    broker.quiesce().unwrap();
    (p, acks, guids)
}

/// Replica `replica`'s receipt of `guid`, stored by queue 0.
pub fn receipt(broker: &Broker, guid: Guid, replica: u8) -> Result<(), BrokerError> {
    broker.replica_receipt(Receipt {
        queue: QueueId(0),
        guid,
        replica: ReplicaId(replica),
    })
}

/// Each GUID's single outcome in `acks`; panics on a second one.
pub fn outcomes(acks: &Log<Ack>) -> Outcome {
    let acks = acks.lock().unwrap();
    let mut map = HashMap::new();
    for a in acks.iter() {
        let first = map.insert(a.guid, a.status).is_none();
        assert!(first, "{:?} reported twice: {acks:?}", a.guid);
    }
    map
}

/// Waits until `done` holds, failing the test after 10 s.
pub fn wait_for(what: &str, done: impl FnMut() -> bool) {
    wait_up_to(Duration::from_secs(10), what, done);
}

/// Waits until `done` holds (as [`wait_for`]), then until the broker is quiet.
pub fn settled(broker: &Broker, what: &str, done: impl FnMut() -> bool) {
    wait_for(what, done);
    broker.quiesce().unwrap();
}

/// Waits until `done` holds, failing the test after `limit`.
pub fn wait_up_to(limit: Duration, what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + limit;
    while !done() {
        assert!(Instant::now() < deadline, "{what}: not within {limit:?}");
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// A handler that appends each batch it is handed to `log`.
pub fn recording<T: Clone + Send + 'static>(log: &Log<T>) -> impl FnMut(&[T]) + Send + 'static {
    let sink = log.clone();
    move |batch: &[T]| sink.lock().unwrap().extend_from_slice(batch)
}

/// What `log` holds now.
pub fn logged<T: Clone>(log: &Log<T>) -> Vec<T> {
    log.lock().unwrap().clone()
}

/// How many entries `log` holds now.
pub fn len<T>(log: &Log<T>) -> usize {
    log.lock().unwrap().len()
}

/// What `f` makes of each entry `log` holds, in order.
pub fn mapped<T, U>(log: &Log<T>, f: impl FnMut(&T) -> U) -> Vec<U> {
    log.lock().unwrap().iter().map(f).collect()
}

/// The statuses of the outcomes `acks` holds, in order.
pub fn statuses(acks: &Log<Ack>) -> Vec<AckStatus> {
    mapped(acks, |a| a.status)
}

/// The GUIDs of the deliveries `seen` holds, in order.
pub fn guids(seen: &Log<Delivery>) -> Vec<Guid> {
    mapped(seen, |d| d.guid)
}

/// Checks that each of `guids` has the outcome `status` in `outcome`.
pub fn assert_each(outcome: &Outcome, guids: &[Guid], status: AckStatus) {
    for g in guids {
        assert_eq!(outcome.get(g), Some(&status), "{g:?}: {outcome:?}");
    }
}

/// The default producer configuration with `max_unconfirmed`.
pub fn capped(max_unconfirmed: usize) -> ProducerConfig {
    producer_config(|c| c.max_unconfirmed = max_unconfirmed)
}

/// The default producer configuration with timer aggregation every `interval`.
pub fn timer(interval: Duration) -> ProducerConfig {
    producer_config(|c| c.flush = FlushStrategy::Timer(interval))
}

/// The default producer configuration with a confirm timeout of `timeout`.
pub fn timeout(timeout: Duration) -> ProducerConfig {
    producer_config(|c| c.confirm_timeout = Some(timeout))
}

/// A producer of the name `name` configured with `config`, and the log of its outcomes.
pub fn named(broker: &Broker, name: &str, config: ProducerConfig) -> (Producer, Log<Ack>) {
    let acks = Log::default();
    let p = broker.open_named_producer(name, config, recording(&acks));
    (p.unwrap(), acks)
}

/// A producer that drops its outcomes.
pub fn deaf_producer(broker: &Broker, max_unconfirmed: usize) -> Producer {
    let p = broker.open_producer(max_unconfirmed, |_: &[Ack]| {});
    p.unwrap()
}

/// Consumer options confirming explicitly (`Confirms::Explicit`), paced by `credit`.
pub fn explicit(credit: Option<u32>) -> ConsumerOptions {
    options(|o| (o.confirms, o.credit) = (Confirms::Explicit, credit))
}

/// Consumer options confirming by `mode` along `route`.
pub fn confirming(mode: ConfirmMode, route: ConfirmRoute) -> ConsumerOptions {
    options(|o| (o.mode, o.route) = (mode, route))
}

/// Consumer options paced by a credit of `credit`, confirming on return.
pub fn paced(credit: u32) -> ConsumerOptions {
    options(|o| o.credit = Some(credit))
}

/// A queue of `mode` with a table of `capacity` messages.
pub fn sized(mode: QueueMode, capacity: usize) -> QueueConfig {
    with(QueueConfig::new(mode), |q| q.capacity = capacity)
}

/// Replica `replica`'s receipts of each of `guids`, stored by queue 0.
pub fn receipts(broker: &Broker, guids: &[Guid], replica: u8) {
    for &guid in guids {
        receipt(broker, guid, replica).unwrap();
    }
}

/// [`receipts`], then a wait until the broker has handled them.
pub fn receipted(broker: &Broker, guids: &[Guid], replica: u8) {
    receipts(broker, guids, replica);
    broker.quiesce().unwrap();
}

/// `processor`'s statistics now.
pub fn stats_of(broker: &Broker, processor: ProcessorId) -> Option<ProcessorSnapshot> {
    let stats = broker.processor_stats();
    stats.into_iter().find(|s| s.processor == processor)
}

/// Clients registered on each session processor, in the order of the processors.
pub fn session_clients(broker: &Broker) -> Vec<usize> {
    let clients = |&p: &ProcessorId| stats_of(broker, p).map_or(0, |s| s.clients);
    let sessions = broker.processors(ClientType::Session);
    sessions.iter().map(clients).collect()
}

/// Clients registered on the session processors: the sessions still alive.
pub fn sessions_alive(broker: &Broker) -> usize {
    session_clients(broker).iter().sum()
}

/// Events the processors dropped as stale, in all.
pub fn stale(broker: &Broker) -> u64 {
    broker.processor_stats().iter().map(|s| s.stale).sum()
}

/// The confirm of `guid` delivered at `token` to `consumer` of queue `queue`'s app `app`.
pub fn confirm_of(
    (queue, app): (u32, u16),
    guid: Guid,
    token: DeliveryToken,
    consumer: ConsumerId,
) -> Confirm {
    let (queue, app) = (QueueId(queue), AppId(app));
    Confirm {
        queue,
        guid,
        token,
        consumer,
        app,
    }
}

/// Runs `f` on `processor`, as a dispatcher callback.
pub fn on(broker: &Broker, processor: ProcessorId, f: impl FnOnce() + Send + 'static) {
    broker.execute(processor, Callback::new(f)).unwrap();
}

/// Holds `processor` busy in a handler until the returned barrier is waited on.
pub fn hold(broker: &Broker, processor: ProcessorId) -> Arc<Barrier> {
    let gate = Arc::new(Barrier::new(2));
    let g = gate.clone();
    on(broker, processor, move || {
        g.wait();
        g.wait();
    });
    gate.wait();
    gate
}

/// Waits until `processor` has handled what was sent to it before (a callback behind it ran).
pub fn handled(broker: &Broker, processor: ProcessorId) {
    let (done, ran) = std::sync::mpsc::channel();
    on(broker, processor, move || done.send(()).unwrap());
    ran.recv().unwrap();
}

/// The first session processor.
pub fn session(broker: &Broker) -> ProcessorId {
    broker.processors(ClientType::Session)[0]
}

/// Where a handler leaves its answer for the test's thread.
pub type Slot<T> = Arc<Mutex<Option<T>>>;

/// The answer left in `slot`, waited for up to `limit`.
pub fn answer<T>(slot: &Slot<T>, limit: Duration, what: &str) -> T {
    wait_up_to(limit, what, || slot.lock().unwrap().is_some());
    slot.lock().unwrap().take().unwrap()
}

/// A tokio runtime on the calling thread.
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap()
}

/// xorshift64*: a small deterministic generator, for choices reproducible from a seed.
pub struct Rng(pub u64);

impl Rng {
    /// The next number.
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// A number below `n`.
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// A priority and a two-app fanout queue, on two session and two queue processors.
pub fn two_queues(capacity: usize, window: u32, events: usize) -> BrokerConfig {
    let of = |mode| with(sized(mode, capacity), |q| q.window = window);
    let modes = [QueueMode::Priority, QueueMode::Fanout { apps: 2 }];
    with(queues(modes.map(of).to_vec()), |c| {
        (c.session_processors, c.queue_processors, c.event_capacity) = (2, 2, events);
    })
}

/// Each app of [`two_queues`], as (queue, app).
pub const TWO_QUEUES_APPS: [(u32, u16); 3] = [(0, 0), (1, 0), (1, 1)];

/// Every outcome reported, by message, and how many there were (a watchdog's progress).
#[derive(Default)]
pub struct Outcomes {
    by_guid: Mutex<Outcome>,
    duplicates: Mutex<Vec<Guid>>,
    count: AtomicU64,
}

impl Outcomes {
    /// Records a batch an `on_ack` was handed.
    pub fn record(&self, batch: &[Ack]) {
        let mut by_guid = self.by_guid.lock().unwrap();
        for a in batch {
            if by_guid.insert(a.guid, a.status).is_some() {
                self.duplicates.lock().unwrap().push(a.guid);
            }
        }
        let added = batch.len() as u64;
        self.count.fetch_add(added, Ordering::Relaxed);
    }

    /// Outcomes recorded so far.
    pub fn count(&self) -> u64 {
        self.count.load(Ordering::Relaxed)
    }

    /// Each message's outcome, checked to be exactly one for each of `published`, none else.
    pub fn one_each(&self, published: &[Guid]) -> Outcome {
        let outcome = self.by_guid.lock().unwrap().clone();
        let duplicates = self.duplicates.lock().unwrap();
        let two = format!("messages with two outcomes: {duplicates:?}");
        assert!(duplicates.is_empty(), "{two}");
        let without = |g: &&Guid| !outcome.contains_key(g);
        let missing: Vec<_> = published.iter().filter(without).take(5).collect();
        assert!(missing.is_empty(), "without an outcome: {missing:?}");
        let never = "no outcome for a message never published";
        assert_eq!(outcome.len(), published.len(), "{never}");
        outcome
    }
}

/// How many of the outcomes in `outcome` are `status`.
pub fn count_of(outcome: &Outcome, status: AckStatus) -> u64 {
    outcome.values().filter(|s| **s == status).count() as u64
}
