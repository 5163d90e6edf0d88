//! Test clients and set-ups shared by the core's integration tests (`--cfg loom`: none run).
#![allow(dead_code, unused_imports, unused_macros)] // each test binary uses a different part

// The standard items and the core's that most tests use, for `use common::*`.
pub use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
pub use std::sync::{Arc, Barrier, Mutex, mpsc};
pub use std::thread;
pub use std::time::{Duration, Instant};
pub use zerodispatch_core::*;

use zerodispatch_core::testing::TestDispatcher;

/// A client that keeps the defaults of [`Client`]: it runs callbacks and drops messages.
pub struct Sink;

impl Client<u64> for Sink {}

/// A client with the defaults of [`Client`] that counts its drops (a capture, too).
pub struct DropCounted(pub Counter);

impl Client<u64> for DropCounted {}

impl Drop for DropCounted {
    fn drop(&mut self) {
        self.0.incr();
    }
}

/// What a [`Recorder`] saw, in order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Seen {
    Message(u64),
    Callback,
    Flush,
}

/// A client that runs callbacks and records every event and flush.
pub struct Recorder {
    pub log: Arc<Mutex<Vec<Seen>>>,
    pub panic_on: Option<u64>,
}

impl Recorder {
    /// A recorder that never panics, and its log.
    pub fn new() -> (Self, Log) {
        let (log, panic_on) = (Log::default(), None);
        let recorder = Self { log, panic_on };
        let log = recorder.log.clone();
        (recorder, log)
    }
}

impl Client<u64> for Recorder {
    fn on_event(&mut self, event: ClientEvent<u64>, _ctx: &mut Context<u64>) {
        match event {
            ClientEvent::Message(m) => {
                self.log.lock().unwrap().push(Seen::Message(m));
                if self.panic_on == Some(m) {
                    panic!("test client panics on message {m}");
                }
            }
            ClientEvent::Callback(cb) => {
                self.log.lock().unwrap().push(Seen::Callback);
                cb.call();
            }
        }
    }

    fn flush(&mut self, _ctx: &mut Context<u64>) {
        self.log.lock().unwrap().push(Seen::Flush);
    }
}

/// Forwards each message `m` to `.0` as `.1(m)`.
pub struct Forwarder(pub ClientHandle, pub fn(u64) -> u64);

impl Client<u64> for Forwarder {
    fn on_message(&mut self, m: u64, ctx: &mut Context<u64>) {
        let sent = ctx.dispatcher().dispatch(self.0, Event::Message(self.1(m)));
        sent.unwrap();
    }
}

/// What a [`Recorder`] saw, shared with the test.
pub type Log = Arc<Mutex<Vec<Seen>>>;

/// `client` registered on the least loaded queue processor of `d`.
pub fn on_queue<C: Client<u64>>(d: &DispatcherHandle<u64>, client: C) -> ClientHandle<C> {
    d.register(ClientType::Queue, client, Placement::LeastLoaded)
        .expect("a queue processor takes the client")
}

/// `client` registered on the queue processor of index `index` of `d`.
pub fn on_queue_processor<C: Client<u64>>(
    d: &DispatcherHandle<u64>,
    index: u16,
    client: C,
) -> ClientHandle<C> {
    d.register(ClientType::Queue, client, Placement::Processor(index))
        .expect("the queue processor takes the client")
}

/// `client` registered on the least loaded session processor of `d`.
pub fn on_session<C: Client<u64>>(d: &DispatcherHandle<u64>, client: C) -> ClientHandle<C> {
    d.register(ClientType::Session, client, Placement::LeastLoaded)
        .expect("a session processor takes the client")
}

/// A [`Recorder`] registered on the least loaded queue processor of `d`, and its log.
pub fn recorder_on(d: &DispatcherHandle<u64>) -> (ClientHandle<Recorder>, Log) {
    recorder_at(d, Placement::LeastLoaded)
}

/// A [`Recorder`] that panics on message `m`, registered as [`recorder_on`] does.
pub fn panicking_recorder_on(d: &DispatcherHandle<u64>, m: u64) -> (ClientHandle<Recorder>, Log) {
    let (mut recorder, log) = Recorder::new();
    recorder.panic_on = Some(m);
    (on_queue(d, recorder), log)
}

/// A [`Recorder`] registered on the queue processor `placement` names, and its log.
pub fn recorder_at(
    d: &DispatcherHandle<u64>,
    placement: Placement,
) -> (ClientHandle<Recorder>, Log) {
    let (recorder, log) = Recorder::new();
    let handle = d.register(ClientType::Queue, recorder, placement);
    (handle.expect("a queue processor takes the recorder"), log)
}

/// Everything a [`Recorder`] saw but its flushes, in order.
pub fn without_flushes(log: &Mutex<Vec<Seen>>) -> Vec<Seen> {
    let log = log.lock().unwrap();
    log.iter().filter(|s| **s != Seen::Flush).cloned().collect()
}

/// The messages a [`Recorder`] saw, in order.
pub fn messages(log: &Mutex<Vec<Seen>>) -> Vec<u64> {
    let log = log.lock().unwrap();
    let message = |s: &Seen| match s {
        Seen::Message(m) => Some(*m),
        _ => None,
    };
    log.iter().filter_map(message).collect()
}

/// The messages `log` saw once `target` handled everything enqueued before.
pub fn handled(d: &DispatcherHandle<u64>, target: impl Into<ProcessorId>, log: &Log) -> Vec<u64> {
    d.synchronize(target).unwrap();
    messages(log)
}

/// A builder of one queue pool, for a dispatcher of messages `M`.
pub fn queue_pool<M: Send + 'static>(config: PoolConfig) -> DispatcherBuilder<M> {
    Dispatcher::builder().pool(ClientType::Queue, config)
}

/// A dispatcher of one queue pool, its monitor probing at `monitor` (the default if none).
fn queues_monitored(config: PoolConfig, monitor: Option<Duration>) -> Dispatcher<u64> {
    let builder = queue_pool(config);
    let builder = match monitor {
        Some(interval) => builder.monitor_interval(interval),
        None => builder,
    };
    builder.build().expect("valid config")
}

/// A dispatcher of one queue pool.
pub fn one_queue(config: PoolConfig) -> Dispatcher<u64> {
    queues_monitored(config, None)
}

/// A stepped dispatcher (`zerodispatch_core::testing`) of one queue pool.
pub fn one_queue_stepped(config: PoolConfig) -> TestDispatcher<u64> {
    queue_pool(config).build_stepped().expect("valid config")
}

/// A dispatcher of a session pool and a queue pool.
pub fn sessions_and_queues(sessions: PoolConfig, queues: PoolConfig) -> Dispatcher<u64> {
    let builder = queue_pool(queues).pool(ClientType::Session, sessions);
    builder.build().expect("valid config")
}

/// A session pool and a queue pool never probed in a test's lifetime (a probe takes a slot).
pub fn sessions_and_queues_unprobed(sessions: PoolConfig, queues: PoolConfig) -> Dispatcher<u64> {
    let builder = queue_pool(queues).pool(ClientType::Session, sessions);
    let unprobed = builder.monitor_interval(Duration::from_secs(3600));
    unprobed.build().expect("valid config")
}

/// One queue processor and a monitor that probes it every millisecond while it is awake.
pub fn one_queue_probed(config: PoolConfig) -> Dispatcher<u64> {
    queues_monitored(config, Some(Duration::from_millis(1)))
}

/// One queue processor never probed in a test's lifetime (a probe takes a queue slot).
pub fn one_queue_unprobed(config: PoolConfig) -> Dispatcher<u64> {
    queues_monitored(config, Some(Duration::from_secs(3600)))
}

/// A dispatcher of one queue pool with a [`Recorder`] on it, and its log.
pub fn recorded(config: PoolConfig) -> (Dispatcher<u64>, ClientHandle<Recorder>, Log) {
    let d = one_queue(config);
    let (handle, log) = recorder_on(&d);
    (d, handle, log)
}

/// An unprobed queue processor of `capacity` with a [`Recorder`] on it, and its log.
pub fn recorded_queue(capacity: usize) -> (Dispatcher<u64>, ClientHandle<Recorder>, Log) {
    let d = one_queue_unprobed(PoolConfig::new(1).capacity(capacity));
    let (handle, log) = recorder_on(&d);
    (d, handle, log)
}

/// A count shared by a test and the closures and clients that add to it.
#[derive(Clone, Debug, Default)]
pub struct Counter(pub Arc<AtomicUsize>);

impl Counter {
    /// Adds `n`; returns the count before.
    pub fn add(&self, n: usize) -> usize {
        self.0.fetch_add(n, Ordering::SeqCst)
    }

    /// The count now.
    pub fn get(&self) -> usize {
        self.0.load(Ordering::SeqCst)
    }

    /// Adds one.
    pub fn incr(&self) {
        self.add(1);
    }

    /// A closure that adds one each time it runs.
    pub fn adder(&self) -> impl Fn() + Send + Sync + 'static {
        let count = self.clone();
        move || count.incr()
    }

    /// A callback that adds one when it runs.
    pub fn callback(&self) -> Callback {
        Callback::new(self.adder())
    }
}

/// The first queue processor of `d`.
pub fn first_queue(d: &DispatcherHandle<u64>) -> ProcessorId {
    d.processors(ClientType::Queue)[0]
}

/// The events of producer `t` among `seen`, each tagged `t << 32 | i`, as their `i`.
pub fn of_producer(seen: &[u64], t: u64) -> Vec<u64> {
    let mine = seen.iter().filter(|m| *m >> 32 == t);
    mine.map(|m| m & 0xffff_ffff).collect()
}

/// Blocks `handle`'s processor until the barrier is waited on again (it returns blocked).
pub fn block_processor<C>(d: &DispatcherHandle<u64>, handle: ClientHandle<C>) -> Arc<Barrier> {
    let barrier = Arc::new(Barrier::new(2));
    let b = barrier.clone();
    let hold = Callback::new(move || {
        b.wait();
        b.wait();
    });
    d.execute(handle.processor(), hold).unwrap();
    barrier.wait();
    barrier
}

/// Blocks `handle`'s processor and fills its queue with messages `0..n`, each finding room.
pub fn hold_full<C>(d: &DispatcherHandle<u64>, handle: ClientHandle<C>, n: u64) -> Arc<Barrier> {
    let held = block_processor(d, handle);
    for m in 0..n {
        d.try_dispatch(handle, Event::Message(m)).unwrap();
    }
    held
}

/// Waits until `ready` holds, failing with `what` after 10 s.
pub fn eventually(what: &str, ready: impl FnMut() -> bool) {
    eventually_within(Duration::from_secs(10), what, ready);
}

/// Waits until `ready` holds, failing with `what` after `limit`.
pub fn eventually_within(limit: Duration, what: &str, mut ready: impl FnMut() -> bool) {
    let deadline = Instant::now() + limit;
    while !ready() {
        assert!(Instant::now() < deadline, "never happened: {what}");
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Polls `done` every `step` until it holds or `limit` passed; whether it held.
pub fn wait_until(limit: Duration, step: Duration, mut done: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + limit;
    while !done() && Instant::now() < deadline {
        std::thread::sleep(step);
    }
    done()
}

/// The sum of figure `of` over the processors of `d`.
pub fn total(d: &DispatcherHandle<u64>, of: impl Fn(&ProcessorSnapshot) -> u64) -> u64 {
    d.stats().iter().map(of).sum()
}

/// `0..n` as a vector, the messages a test expects.
pub fn upto(n: u64) -> Vec<u64> {
    (0..n).collect()
}

/// The first processor's stats once `ready` holds (`synchronize` wakes it to publish).
pub fn stats_once_published(
    d: &Dispatcher<u64>,
    ready: impl Fn(&ProcessorSnapshot) -> bool,
) -> ProcessorSnapshot {
    let deadline = Instant::now() + Duration::from_secs(10);
    let processor = d.processors(ClientType::Queue)[0];
    loop {
        let s = d.stats()[0].clone();
        if ready(&s) || Instant::now() > deadline {
            return s;
        }
        d.synchronize(processor).unwrap();
    }
}

/// Dispatches the messages `ms` to `h` one by one, each of which must be accepted.
pub fn dispatch_all<C>(
    d: &DispatcherHandle<u64>,
    h: ClientHandle<C>,
    ms: impl IntoIterator<Item = u64>,
) {
    for m in ms {
        d.dispatch(h, Event::Message(m)).unwrap();
    }
}

/// The messages `ms` as a [`Recorder`] logs them.
pub fn seen_messages(ms: impl IntoIterator<Item = u64>) -> Vec<Seen> {
    ms.into_iter().map(Seen::Message).collect()
}

/// What a proof's client handled and the sum of the values (one writer: plain loads, stores).
#[derive(Clone, Default)]
pub struct Tally {
    pub handled: Arc<AtomicU64>,
    pub sum: Arc<AtomicU64>,
}

impl Tally {
    /// Counts one more event, adding `value` to the sum.
    pub fn count(&self, value: u64) {
        let sum = self.sum.load(Ordering::Relaxed);
        self.sum.store(sum + value, Ordering::Relaxed);
        let handled = self.handled.load(Ordering::Relaxed);
        self.handled.store(handled + 1, Ordering::Release);
    }

    /// Waits, spinning, until `n` events were handled.
    pub fn wait_for(&self, n: u64) {
        while self.handled.load(Ordering::Acquire) < n {
            std::thread::yield_now();
        }
    }
}

/// A client that tallies the messages it handles.
impl Client<u64> for Tally {
    fn on_message(&mut self, m: u64, _ctx: &mut Context<u64>) {
        self.count(m);
    }
}

/// A confirm, the broker's typical message: queue id, message GUID, sub-queue id.
#[derive(Clone, Copy)]
pub struct Confirm {
    pub queue: u32,
    pub guid: [u8; 16],
    pub sub_queue: u32,
}

/// Fails a zero-allocation proof whose measured window (`what`) allocated.
pub fn assert_none_allocated(allocations: u64, what: impl std::fmt::Display) {
    assert_eq!(allocations, 0, "{what} allocated {allocations} times");
}

/// A proof's `main`: runs the function `$proof` under its name without libtest.
macro_rules! proof_main {
    ($proof:ident) => {
        fn main() {
            zerodispatch_testkit::proof_main(stringify!($proof), $proof);
        }
    };
}
pub(crate) use proof_main;
