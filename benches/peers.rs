//! The peers the dispatcher is compared against: other ways to hop a confirm-sized unit of
//! work from one thread to another, each running the same work
//! ([`zerodispatch_bench_support::workload::handle_confirm`]).
//!
//! * [`CrossbeamBoxed`]: a `Box<dyn FnOnce() + Send>` per item over a bounded
//!   `crossbeam_channel`, the consumer blocking in `recv`.
//! * [`StdMpscBoxed`]: the same over `std::sync::mpsc::sync_channel`.
//! * [`DisruptorTyped`]: plain [`Confirm`] events in a `disruptor` ring buffer, one
//!   producer publishing one event at a time, the consumer busy-spinning.
//! * [`DisruptorTypedBatch`]: the same, publishing [`BATCH`] events at a time: what
//!   batching buys.
//! * [`CrossbeamBoxedFanOut`]: several producers sending boxed functors round-robin over
//!   several crossbeam channels, each with its own consumer thread: the channel-based shape
//!   of a dispatcher with one processor per client type.
//!
//! Every peer is started once and then [`run`](CrossbeamBoxed::run) many times (criterion
//! calls with small iteration counts, and a thread start would swamp them); each run returns
//! the wall time from the first send until the consumer has handled every item of the run.
//! Dropping a peer stops and joins its threads.
//!
//! A busy-spinning disruptor consumer keeps a core busy for as long as its peer lives, even
//! between runs: drop each peer before measuring the next.
//!
//! This file is a module, not a bench target: benches include it with `mod peers;`.

// Shared between bench binaries, each of which may use only some of the peers: an item one
// binary leaves unused is not dead in another.
#![allow(dead_code)]

use std::ops::Range;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, mpsc};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use crossbeam_queue::ArrayQueue;
use crossbeam_utils::{Backoff, CachePadded};
use disruptor::{
    BusySpin, ProcessorSettings, Producer, Sequence, SingleConsumerBarrier, SingleProducer,
};
use zerodispatch_bench_support::workload::{
    Confirm, confirm_functor, handle_confirm, handle_confirm_slowly,
};

/// While set, subjects started from then on pin their consumer thread (processor, channel
/// consumer, disruptor handler) to [`CONSUMER_CORE`]; the bench that sets it pins its own
/// thread, the producer, to [`PRODUCER_CORE`] (`benches/hop.rs`).
pub static PINNED: AtomicBool = AtomicBool::new(false);

/// The core a pinned producer runs on.
pub const PRODUCER_CORE: usize = 0;

/// The core a pinned consumer runs on.
pub const CONSUMER_CORE: usize = 1;

/// Pins the calling thread to `core` if [`PINNED`] is set; `false` if the OS refused.
pub fn pin_if_asked(core: usize) -> bool {
    !PINNED.load(Ordering::Relaxed)
        || core_affinity::set_for_current(core_affinity::CoreId { id: core })
}

/// The capacity of the channel peers' channels.
pub const CHANNEL_CAPACITY: usize = 4096;

/// The size of the disruptor peers' ring buffers (the crate requires a power of two).
pub const RING_SIZE: usize = 4096;

/// How many events [`DisruptorTypedBatch`] publishes at a time.
pub const BATCH: u64 = 16;

/// The item the channel peers carry: a boxed confirm functor.
type Task = Box<dyn FnOnce() + Send>;

/// How many items a consumer has handled, on a cache line of its own; written only by the
/// consumer, with Release, so that an Acquire load that sees `n` sees `n` items done.
type Progress = Arc<CachePadded<AtomicU64>>;

/// A new [`Progress`] at zero.
fn new_progress() -> Progress {
    Arc::new(CachePadded::new(AtomicU64::new(0)))
}

/// Waits until `progress` reaches `target`, spinning with a short backoff.
///
/// # Panics
///
/// If `consumer_gone` says the consumer has exited first: the target would never come.
fn wait_until(progress: &AtomicU64, target: u64, consumer_gone: impl Fn() -> bool) {
    let backoff = Backoff::new();
    while progress.load(Ordering::Acquire) < target {
        assert!(!consumer_gone(), "the consumer thread exited during a run");
        backoff.snooze();
    }
}

/// `producers - 1` persistent helper producer threads, besides the caller of a run.
///
/// A helper blocks on a job channel of its own between runs, so that it costs nothing while
/// idle (the machine may have few cores); a run hands each helper its share of the items as
/// a range of sequence numbers, so that the per-run cost of several producers is one
/// wake-up per helper, not a thread start. Dropping them closes the job channels and joins
/// the threads, which drops what their `send` captured (senders, dispatcher handles).
#[derive(Default)]
pub struct Helpers {
    /// Each helper's job channel and thread.
    threads: Vec<(mpsc::Sender<Range<u64>>, JoinHandle<()>)>,
}

impl Helpers {
    /// Starts `producers - 1` helpers, each calling its own clone of `send` with the
    /// sequence numbers of every share it is handed.
    ///
    /// # Panics
    ///
    /// If `producers` is zero.
    pub fn start(producers: usize, send: impl Fn(Range<u64>) + Clone + Send + 'static) -> Self {
        assert!(producers >= 1, "a run needs at least one producer");
        let threads = (1..producers)
            .map(|_| {
                let (jobs, job_receiver) = mpsc::channel::<Range<u64>>();
                let send = send.clone();
                let helper = thread::spawn(move || {
                    while let Ok(seqs) = job_receiver.recv() {
                        send(seqs);
                    }
                });
                (jobs, helper)
            })
            .collect();
        Self { threads }
    }

    /// Hands each helper an even share of `seqs` (the first shares, in order) and returns
    /// the caller's share: the rest, remainder included.
    pub fn hand_out(&self, seqs: Range<u64>) -> Range<u64> {
        let share = (seqs.end - seqs.start) / (self.threads.len() as u64 + 1);
        let mut next = seqs.start;
        for (jobs, _) in &self.threads {
            jobs.send(next..next + share)
                .expect("a helper waits for jobs until its job channel closes");
            next += share;
        }
        next..seqs.end
    }

    /// Whether a helper thread has exited (it would never finish its share).
    pub fn any_finished(&self) -> bool {
        self.threads.iter().any(|(_, h)| h.is_finished())
    }
}

impl Drop for Helpers {
    fn drop(&mut self) {
        // Closing a helper's job channel ends the helper.
        for (jobs, helper) in self.threads.drain(..) {
            drop(jobs);
            // A helper that panicked has nothing left to report here.
            let _ = helper.join();
        }
    }
}

/// Starts a consumer thread that runs every task it receives until the channel closes,
/// counting them in the returned [`Progress`].
fn spawn_consumer<R: TaskReceiver>(receiver: R) -> (Progress, JoinHandle<()>) {
    let progress = new_progress();
    let consumer = {
        let progress = progress.clone();
        thread::spawn(move || {
            pin_if_asked(CONSUMER_CORE);
            let mut n = 0_u64;
            while let Some(task) = receiver.recv_task() {
                task();
                n += 1;
                progress.store(n, Ordering::Release);
            }
        })
    };
    (progress, consumer)
}

/// The sending half of a channel that carries [`Task`]s.
trait TaskSender: Clone + Send + 'static {
    /// Sends `task`, blocking while the channel is full.
    ///
    /// # Panics
    ///
    /// If the receiver is gone, which happens only when the consumer thread has exited.
    fn send_task(&self, task: Task);
}

/// The receiving half of a channel that carries [`Task`]s.
trait TaskReceiver: Send + 'static {
    /// Receives a task, blocking while the channel is empty; `None` once every sender is
    /// gone and the channel is drained.
    fn recv_task(&self) -> Option<Task>;
}

/// [`TaskSender`] and [`TaskReceiver`] for the halves of a channel whose `send` and `recv`
/// mean the same (crossbeam's and std's, which share no trait).
macro_rules! task_channel {
    ($sender:ty, $receiver:ty) => {
        impl TaskSender for $sender {
            fn send_task(&self, task: Task) {
                self.send(task)
                    .expect("the consumer holds the receiver until every sender is gone");
            }
        }

        impl TaskReceiver for $receiver {
            fn recv_task(&self) -> Option<Task> {
                self.recv().ok()
            }
        }
    };
}

task_channel!(
    crossbeam_channel::Sender<Task>,
    crossbeam_channel::Receiver<Task>
);
task_channel!(mpsc::SyncSender<Task>, mpsc::Receiver<Task>);

/// Sends the confirm functors of the messages `seqs`, boxed, one at a time.
fn send_confirms<S: TaskSender>(sender: &S, seqs: Range<u64>) {
    for seq in seqs {
        sender.send_task(Box::new(confirm_functor(seq)));
    }
}

/// A channel peer: a consumer thread that runs every task it receives, the caller as a
/// producer, and `producers - 1` persistent [`Helpers`].
struct ChannelPeer<S> {
    /// The caller's sender; `None` only while dropping, so that the consumer sees the
    /// channel close.
    sender: Option<S>,
    /// The other producers.
    helpers: Helpers,
    /// How many tasks the consumer has run.
    progress: Progress,
    /// The sequence number of the next confirm to send.
    next_seq: AtomicU64,
    /// The consumer thread; `None` only once joined.
    consumer: Option<JoinHandle<()>>,
}

impl<S: TaskSender> ChannelPeer<S> {
    /// Starts the consumer on `receiver` and `producers - 1` helpers on clones of `sender`.
    ///
    /// # Panics
    ///
    /// If `producers` is zero.
    fn start<R: TaskReceiver>(producers: usize, (sender, receiver): (S, R)) -> Self {
        let (progress, consumer) = spawn_consumer(receiver);
        let helpers = {
            let sender = sender.clone();
            Helpers::start(producers, move |seqs| send_confirms(&sender, seqs))
        };
        Self {
            sender: Some(sender),
            helpers,
            progress,
            next_seq: AtomicU64::new(0),
            consumer: Some(consumer),
        }
    }

    /// Sends `count` confirm functors, split evenly among the producers (the caller takes
    /// the remainder), waits until the consumer has run all of them, and returns the time
    /// from handing out the first share to the last run.
    ///
    /// Runs on one peer must not overlap: the target is read at the start of the run.
    fn run(&self, count: u64) -> Duration {
        let sender = self
            .sender
            .as_ref()
            .expect("the sender is taken only when dropping");
        let first = self.next_seq.fetch_add(count, Ordering::Relaxed);
        let target = self.progress.load(Ordering::Acquire) + count;
        let start = Instant::now();
        send_confirms(sender, self.helpers.hand_out(first..first + count));
        wait_until(&self.progress, target, || {
            self.consumer.as_ref().is_none_or(JoinHandle::is_finished)
        });
        start.elapsed()
    }
}

impl<S> Drop for ChannelPeer<S> {
    fn drop(&mut self) {
        // The helpers end and drop their senders.
        drop(std::mem::take(&mut self.helpers));
        // With the last sender gone, the consumer drains the channel and ends.
        self.sender = None;
        if let Some(consumer) = self.consumer.take() {
            // A consumer that panicked (in a task) has nothing left to report here.
            let _ = consumer.join();
        }
    }
}

/// Boxed confirm functors over a `crossbeam_channel::bounded(CHANNEL_CAPACITY)` channel to
/// one consumer thread that blocks in `recv`.
///
/// With one producer the caller of [`run`](Self::run) sends everything; with more, it sends
/// its share while persistent helper threads, woken once per run, send theirs.
pub struct CrossbeamBoxed(ChannelPeer<crossbeam_channel::Sender<Task>>);

impl CrossbeamBoxed {
    /// Starts the consumer thread and `producers - 1` helper producer threads.
    ///
    /// # Panics
    ///
    /// If `producers` is zero.
    #[must_use]
    pub fn new(producers: usize) -> Self {
        Self(ChannelPeer::start(
            producers,
            crossbeam_channel::bounded(CHANNEL_CAPACITY),
        ))
    }

    /// Sends `count` confirm functors split among the producers and returns the time from
    /// the first send until the consumer has run them all.
    pub fn run(&self, count: u64) -> Duration {
        self.0.run(count)
    }
}

/// Boxed confirm functors over a `std::sync::mpsc::sync_channel(CHANNEL_CAPACITY)` to one
/// consumer thread that blocks in `recv`; producers as in [`CrossbeamBoxed`].
pub struct StdMpscBoxed(ChannelPeer<mpsc::SyncSender<Task>>);

impl StdMpscBoxed {
    /// Starts the consumer thread and `producers - 1` helper producer threads.
    ///
    /// # Panics
    ///
    /// If `producers` is zero.
    #[must_use]
    pub fn new(producers: usize) -> Self {
        Self(ChannelPeer::start(
            producers,
            mpsc::sync_channel(CHANNEL_CAPACITY),
        ))
    }

    /// Sends `count` confirm functors split among the producers and returns the time from
    /// the first send until the consumer has run them all.
    pub fn run(&self, count: u64) -> Duration {
        self.0.run(count)
    }
}

/// An event a disruptor peer's ring carries: made in its slot from a sequence number,
/// handled in place by the consumer.
pub trait RingEvent: Send + Sync + 'static {
    /// The event for the confirm of message `seq`.
    fn make(seq: u64) -> Self;
    /// The consumer's work for it, reading it where it lies in the ring.
    fn handle(&self);
}

impl RingEvent for Confirm {
    #[inline]
    fn make(seq: u64) -> Self {
        Confirm::for_seq(seq)
    }

    #[inline]
    fn handle(&self) {
        handle_confirm(*self);
    }
}

/// A callback's shape, called in place: its captures (a confirm, padded to our inline
/// space of 48 bytes) and a pointer to the code that runs on them, 56 bytes as our
/// `Callback`. The consumer calls through the pointer on the captures where they lie in
/// the ring, moving nothing: what a ring filled and called in place would pay for
/// callbacks.
#[derive(Clone, Copy, Debug)]
pub struct InPlaceCall {
    confirm: Confirm,
    padding: [u64; 3],
    call: fn(&Confirm),
}

impl RingEvent for InPlaceCall {
    #[inline]
    fn make(seq: u64) -> Self {
        Self {
            confirm: Confirm::for_seq(seq),
            padding: [seq; 3],
            call: |confirm| handle_confirm(*confirm),
        }
    }

    #[inline]
    fn handle(&self) {
        (self.call)(&self.confirm);
    }
}

/// The state a disruptor run needs exclusively: `Producer::publish` takes `&mut self`.
struct Ring<E> {
    /// The single producer; dropping it stops and joins the consumer thread.
    producer: SingleProducer<E, SingleConsumerBarrier>,
    /// The sequence number of the next confirm to publish.
    next_seq: u64,
}

/// A disruptor peer: a ring of `E` events (by default [`Confirm`]) with one busy-spinning
/// consumer thread (managed by the `disruptor` crate) that handles each event in place.
struct DisruptorPeer<E = Confirm> {
    /// The producer, behind a lock so that runs can take `&self`; a run locks it once.
    ring: Mutex<Ring<E>>,
    /// How many events the consumer has handled.
    progress: Progress,
}

impl<E: RingEvent> DisruptorPeer<E> {
    /// Builds the ring and starts its consumer thread.
    fn start() -> Self {
        let progress = new_progress();
        let handler = {
            let progress = progress.clone();
            let mut n = 0_u64;
            move |event: &E, _: Sequence, _: bool| {
                event.handle();
                n += 1;
                progress.store(n, Ordering::Release);
            }
        };
        let builder = disruptor::build_single_producer(RING_SIZE, || E::make(0), BusySpin);
        let builder = if PINNED.load(Ordering::Relaxed) {
            builder.pin_at_core(CONSUMER_CORE)
        } else {
            builder
        };
        let producer = builder.handle_events_with(handler).build();
        Self {
            ring: Mutex::new(Ring {
                producer,
                next_seq: 0,
            }),
            progress,
        }
    }

    /// Publishes `count` confirms, `batch` at a time (the last batch takes the remainder),
    /// waits until the consumer has handled them, and returns the time from the first
    /// publication to the last handling.
    ///
    /// # Panics
    ///
    /// If `batch` is zero or larger than the ring.
    fn run(&self, count: u64, batch: u64) -> Duration {
        assert!(
            (1..=RING_SIZE as u64).contains(&batch),
            "a batch must fit the ring"
        );
        // Nothing panics while the lock is held (the update closures cannot), so a poisoned
        // lock would not mean a half-published ring; take the guard either way.
        let mut ring = self.ring.lock().unwrap_or_else(PoisonError::into_inner);
        let Ring { producer, next_seq } = &mut *ring;
        let target = self.progress.load(Ordering::Acquire) + count;
        let end = *next_seq + count;
        let start = Instant::now();
        if batch == 1 {
            for seq in *next_seq..end {
                producer.publish(|slot| *slot = E::make(seq));
            }
        } else {
            let mut seq = *next_seq;
            while seq < end {
                let n = batch.min(end - seq);
                producer.batch_publish(n as usize, |slots| {
                    for (slot, s) in slots.zip(seq..) {
                        *slot = E::make(s);
                    }
                });
                seq += n;
            }
        }
        *next_seq = end;
        // The crate does not expose its consumer thread: a panicking handler would hang
        // this wait, but `handle_confirm` does not panic.
        wait_until(&self.progress, target, || false);
        start.elapsed()
    }
}

/// Plain [`Confirm`] events through a `disruptor` ring of [`RING_SIZE`] slots: a single
/// producer (the caller of [`run`](Self::run)) publishing one event at a time and one
/// consumer thread, busy-spinning (`BusySpin`), that calls `handle_confirm` on each.
///
/// The consumer spins for as long as the peer lives; dropping the peer drops the producer,
/// which stops and joins it.
pub struct DisruptorTyped(DisruptorPeer);

impl DisruptorTyped {
    /// Builds the ring and starts the consumer thread.
    #[must_use]
    pub fn new() -> Self {
        Self(DisruptorPeer::start())
    }

    /// Publishes `count` confirms one at a time and returns the time from the first
    /// publication until the consumer has handled them all.
    pub fn run(&self, count: u64) -> Duration {
        self.0.run(count, 1)
    }
}

impl Default for DisruptorTyped {
    fn default() -> Self {
        Self::new()
    }
}

/// A disruptor peer publishing [`BATCH`] events `E` at a time with `batch_publish`; a
/// count that is not a multiple of [`BATCH`] ends with one smaller batch.
pub struct DisruptorBatch<E: RingEvent = Confirm>(DisruptorPeer<E>);

/// [`DisruptorTyped`] publishing [`BATCH`] confirms at a time: what batching buys.
pub type DisruptorTypedBatch = DisruptorBatch<Confirm>;

/// [`InPlaceCall`]s [`BATCH`] at a time, each called through its pointer where it lies in
/// the ring: the floor of a ring that holds callbacks and calls them in place.
pub type DisruptorInPlaceBatch = DisruptorBatch<InPlaceCall>;

impl<E: RingEvent> DisruptorBatch<E> {
    /// Builds the ring and starts the consumer thread.
    #[must_use]
    pub fn new() -> Self {
        Self(DisruptorPeer::start())
    }

    /// Publishes `count` events [`BATCH`] at a time and returns the time from the first
    /// publication until the consumer has handled them all.
    pub fn run(&self, count: u64) -> Duration {
        self.0.run(count, BATCH)
    }
}

impl<E: RingEvent> Default for DisruptorBatch<E> {
    fn default() -> Self {
        Self::new()
    }
}

/// Boxed confirm functors from several producers, round-robin over several
/// `crossbeam_channel::bounded(CHANNEL_CAPACITY)` channels, each drained by a consumer thread
/// of its own that blocks in `recv`: the channel-based counterpart of a dispatcher with one
/// processor per client type and one client on each.
///
/// Each producer sends its share of a run's items to the channels in turn (its first item
/// to channel 0). The caller of [`run`](Self::run) is one producer; `producers - 1`
/// persistent helper threads, woken once per run as in [`CrossbeamBoxed`], are the others.
pub struct CrossbeamBoxedFanOut {
    /// The caller's senders, one per channel; `None` only while dropping, so that the
    /// consumers see their channels close.
    senders: Option<Vec<crossbeam_channel::Sender<Task>>>,
    /// The other producers.
    helpers: Helpers,
    /// Each consumer's progress and thread.
    consumers: Vec<(Progress, JoinHandle<()>)>,
    /// The sequence number of the next confirm to send.
    next_seq: AtomicU64,
}

/// Sends the confirm functors of the messages `seqs`, boxed, one at a time, to `senders` in
/// turn, starting with the first.
fn send_confirms_round_robin(senders: &[crossbeam_channel::Sender<Task>], seqs: Range<u64>) {
    let mut next = 0;
    for seq in seqs {
        senders[next].send_task(Box::new(confirm_functor(seq)));
        next += 1;
        if next == senders.len() {
            next = 0;
        }
    }
}

impl CrossbeamBoxedFanOut {
    /// Starts `consumers` channels with a consumer thread each, and `producers - 1` helper
    /// producer threads.
    ///
    /// # Panics
    ///
    /// If `producers` or `consumers` is zero.
    #[must_use]
    pub fn new(producers: usize, consumers: usize) -> Self {
        assert!(consumers >= 1, "a peer needs at least one consumer");
        let (senders, consumers): (Vec<_>, Vec<_>) = (0..consumers)
            .map(|_| {
                let (sender, receiver) = crossbeam_channel::bounded::<Task>(CHANNEL_CAPACITY);
                (sender, spawn_consumer(receiver))
            })
            .unzip();
        let helpers = {
            let senders = senders.clone();
            Helpers::start(producers, move |seqs| {
                send_confirms_round_robin(&senders, seqs)
            })
        };
        Self {
            senders: Some(senders),
            helpers,
            consumers,
            next_seq: AtomicU64::new(0),
        }
    }

    /// Items the consumers have run so far, all together.
    fn handled(&self) -> u64 {
        self.consumers
            .iter()
            .map(|(progress, _)| progress.load(Ordering::Acquire))
            .sum()
    }

    /// Sends `count` confirm functors, split evenly among the producers (the caller takes
    /// the remainder), waits until the consumers have run all of them, and returns the time
    /// from handing out the first share to the last run.
    ///
    /// Runs must not overlap: the target is read at the start of the run.
    ///
    /// # Panics
    ///
    /// If a consumer thread exits during the run.
    pub fn run(&self, count: u64) -> Duration {
        let senders = self
            .senders
            .as_ref()
            .expect("the senders are taken only when dropping");
        let first = self.next_seq.fetch_add(count, Ordering::Relaxed);
        let target = self.handled() + count;
        let start = Instant::now();
        send_confirms_round_robin(senders, self.helpers.hand_out(first..first + count));
        let backoff = Backoff::new();
        while self.handled() < target {
            assert!(
                !self.consumers.iter().any(|(_, c)| c.is_finished()),
                "a consumer thread exited during a run"
            );
            backoff.snooze();
        }
        start.elapsed()
    }
}

impl Drop for CrossbeamBoxedFanOut {
    fn drop(&mut self) {
        // The helpers end and drop their senders.
        drop(std::mem::take(&mut self.helpers));
        // With the last senders gone, each consumer drains its channel and ends.
        self.senders = None;
        for (_, consumer) in self.consumers.drain(..) {
            // A consumer that panicked (in a task) has nothing left to report here.
            let _ = consumer.join();
        }
    }
}

/// What a [`RawArrayQueue`] carries: plain data made from a sequence number, holding a
/// confirm.
pub trait RawItem: Send + 'static {
    /// The item for the confirm of message `seq`.
    fn make(seq: u64) -> Self;
    /// Its confirm.
    fn confirm(&self) -> Confirm;
    /// The consumer's work for it: the confirm's handling.
    #[inline]
    fn handle(&self) {
        handle_confirm(self.confirm());
    }
}

/// 40 bytes of plain data (a 48-byte `ArrayQueue` slot): a confirm with a target handle
/// and a sequence number, as a broker would hop it with nothing around it.
#[derive(Clone, Copy, Debug)]
pub struct Plain40 {
    confirm: Confirm,
    seq: u64,
    target: u64,
}

impl RawItem for Plain40 {
    #[inline]
    fn make(seq: u64) -> Self {
        Self {
            confirm: Confirm::for_seq(seq),
            seq,
            target: 7,
        }
    }

    #[inline]
    fn confirm(&self) -> Confirm {
        self.confirm
    }
}

/// [`Plain40`] whose consumer handles it slowly ([`handle_confirm_slowly`]): the bare
/// queue under a producer that outruns its consumer (`dispatch_outrun`).
#[derive(Clone, Copy, Debug)]
pub struct Slow40(Plain40);

impl RawItem for Slow40 {
    #[inline]
    fn make(seq: u64) -> Self {
        Self(Plain40::make(seq))
    }

    #[inline]
    fn confirm(&self) -> Confirm {
        self.0.confirm
    }

    #[inline]
    fn handle(&self) {
        handle_confirm_slowly(self.0.confirm);
    }
}

/// 56 bytes of plain data, 8-aligned: the size of our queued item, so that an
/// `ArrayQueue` slot (item and 8-byte stamp) is 64 bytes, straddling two cache lines unless
/// the buffer happens to start on a line.
#[derive(Clone, Copy, Debug)]
pub struct Plain56 {
    inner: Plain40,
    padding: [u64; 2],
}

impl RawItem for Plain56 {
    #[inline]
    fn make(seq: u64) -> Self {
        Self {
            inner: Plain40::make(seq),
            padding: [seq, !seq],
        }
    }

    #[inline]
    fn confirm(&self) -> Confirm {
        self.inner.confirm
    }
}

/// The floor under our dispatcher: the same `crossbeam_queue::ArrayQueue` (capacity 4096)
/// carrying plain data `T` from the caller to one consumer thread that pops in a loop
/// (spinning with a short backoff when empty) and runs `handle_confirm`; the producer
/// retries on a full queue. No wake-up, no client, no stats.
///
/// `RMWS` read-modify-writes on a padded word of their own go with each push: 0, none; 1,
/// a `fetch_add` before it (the gate that counts entries, `gate.rs`); 2, a `fetch_add`
/// before and a `fetch_sub` after (the gate before it). What they cost, measured apart
/// from everything else.
pub struct RawArrayQueue<T, const RMWS: u8> {
    queue: Arc<ArrayQueue<T>>,
    gate: CachePadded<AtomicU64>,
    progress: Progress,
    next_seq: AtomicU64,
    stop: Arc<AtomicBool>,
    consumer: Option<JoinHandle<()>>,
}

impl<T: RawItem, const RMWS: u8> RawArrayQueue<T, RMWS> {
    /// Starts the consumer thread.
    #[must_use]
    pub fn new() -> Self {
        let queue = Arc::new(ArrayQueue::<T>::new(CHANNEL_CAPACITY));
        let progress = new_progress();
        let stop = Arc::new(AtomicBool::new(false));
        let consumer = {
            let (queue, progress, stop) = (queue.clone(), progress.clone(), stop.clone());
            thread::spawn(move || {
                pin_if_asked(CONSUMER_CORE);
                let mut n = 0_u64;
                let backoff = Backoff::new();
                while !stop.load(Ordering::Relaxed) {
                    match queue.pop() {
                        Some(item) => {
                            item.handle();
                            n += 1;
                            progress.store(n, Ordering::Release);
                            backoff.reset();
                        }
                        None => backoff.snooze(),
                    }
                }
            })
        };
        Self {
            queue,
            gate: CachePadded::new(AtomicU64::new(0)),
            progress,
            next_seq: AtomicU64::new(0),
            stop,
            consumer: Some(consumer),
        }
    }

    /// Pushes `count` items (retrying each on a full queue), waits until the consumer has
    /// handled them, and returns the time taken.
    pub fn run(&self, count: u64) -> Duration {
        let first = self.next_seq.fetch_add(count, Ordering::Relaxed);
        let target = self.progress.load(Ordering::Acquire) + count;
        let start = Instant::now();
        for seq in first..first + count {
            let mut item = T::make(seq);
            loop {
                if RMWS >= 1 {
                    self.gate.fetch_add(4, Ordering::AcqRel);
                }
                let pushed = self.queue.push(item);
                if RMWS >= 2 {
                    self.gate.fetch_sub(4, Ordering::AcqRel);
                }
                match pushed {
                    Ok(()) => break,
                    Err(back) => {
                        item = back;
                        std::hint::spin_loop();
                    }
                }
            }
        }
        wait_until(&self.progress, target, || {
            self.consumer.as_ref().is_none_or(JoinHandle::is_finished)
        });
        start.elapsed()
    }
}

impl<T: RawItem, const RMWS: u8> Default for RawArrayQueue<T, RMWS> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T, const RMWS: u8> Drop for RawArrayQueue<T, RMWS> {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(consumer) = self.consumer.take() {
            let _ = consumer.join();
        }
    }
}

/// What a [`RawPacks`] pack holds, one per event: made from a sequence number, handled by
/// value (as a processor hands an event over).
pub trait PackItem: Send + 'static {
    /// The item for the confirm of message `seq`.
    fn make(seq: u64) -> Self;
    /// The consumer's work for it.
    fn handle(self);
}

impl PackItem for Confirm {
    #[inline]
    fn make(seq: u64) -> Self {
        Confirm::for_seq(seq)
    }

    #[inline]
    fn handle(self) {
        handle_confirm(self);
    }
}

impl PackItem for zerodispatch::Callback {
    #[inline]
    fn make(seq: u64) -> Self {
        zerodispatch::Callback::new(confirm_functor(seq))
    }

    #[inline]
    fn handle(self) {
        self.call();
    }
}

/// The ring the processors are to sit on (`zerodispatch_ring`), with nothing else around
/// it: one producer pushes `RUN` items at a time (a [`Run`](zerodispatch_ring::Run) of 16
/// gathered on its stack and claimed with one compare-and-swap, or one item a push), one
/// consumer thread spins on it, moves each item out and handles it, counting it (a release
/// store of its progress, as every subject does). With `T = Callback`, what
/// `dispatch_batch(16)` would cost on it before the dispatcher's own work; against
/// [`RawPacks`], what the packs' two queues cost.
pub struct RawRing<T, const RUN: usize> {
    ring: Arc<zerodispatch_ring::Ring<T>>,
    progress: Progress,
    next_seq: AtomicU64,
    stop: Arc<AtomicBool>,
    consumer: Option<JoinHandle<()>>,
}

impl<T: PackItem, const RUN: usize> RawRing<T, RUN> {
    /// Makes the ring (`CHANNEL_CAPACITY` slots) and starts the consumer thread.
    #[must_use]
    pub fn new() -> Self {
        let ring = Arc::new(zerodispatch_ring::Ring::<T>::new(CHANNEL_CAPACITY));
        let progress = new_progress();
        let stop = Arc::new(AtomicBool::new(false));
        let consumer = {
            let ring = ring.clone();
            let (progress, stop) = (progress.clone(), stop.clone());
            thread::spawn(move || {
                pin_if_asked(CONSUMER_CORE);
                let mut consumer = ring.consumer().expect("the ring's one consumer");
                let mut n = 0_u64;
                let backoff = Backoff::new();
                while !stop.load(Ordering::Relaxed) {
                    let Some(item) = consumer.pop() else {
                        backoff.snooze();
                        continue;
                    };
                    item.handle();
                    n += 1;
                    progress.store(n, Ordering::Release);
                    backoff.reset();
                }
            })
        };
        Self {
            ring,
            progress,
            next_seq: AtomicU64::new(0),
            stop,
            consumer: Some(consumer),
        }
    }

    /// Sends `count` items, `RUN` a push (spinning while the ring is full), waits until the
    /// consumer has handled them, and returns the time taken.
    pub fn run(&self, count: u64) -> Duration {
        let first = self.next_seq.fetch_add(count, Ordering::Relaxed);
        let target = self.progress.load(Ordering::Acquire) + count;
        let start = Instant::now();
        let mut run = zerodispatch_ring::Run::<T, RUN>::new();
        for seq in first..first + count {
            if run.push(T::make(seq)).is_err() {
                unreachable!("the run is pushed when full");
            }
            if run.is_full() || seq + 1 == first + count {
                while self.ring.push_run(&mut run).is_err() {
                    // Full: wait for room for a burst (a quarter of the ring), reading the
                    // head's line, not the slot the consumer is at (as the core's wait for
                    // room does, `room.rs`).
                    while self.ring.len() > CHANNEL_CAPACITY - CHANNEL_CAPACITY / 4 {
                        std::hint::spin_loop();
                    }
                }
            }
        }
        wait_until(&self.progress, target, || {
            self.consumer.as_ref().is_none_or(JoinHandle::is_finished)
        });
        start.elapsed()
    }
}

impl<T: PackItem, const RUN: usize> Default for RawRing<T, RUN> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T, const RUN: usize> Drop for RawRing<T, RUN> {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(consumer) = self.consumer.take() {
            let _ = consumer.join();
        }
    }
}

/// The floor under `dispatch_batch(16)`: our pack design with nothing else around it. A
/// pool of `CHANNEL_CAPACITY / 16` packs (`Vec<T>` of 16), an `ArrayQueue` of
/// `CHANNEL_CAPACITY` carrying full packs to one consumer thread, which moves each item out
/// of its pack, handles it, counts it, and gives the pack back to the pool. No gate, no
/// client, no wake-up, no stats: what carrying `T` in packs costs at the least. With
/// `T = Confirm`, the data the disruptor carries; with `T = Callback`, our inline callbacks.
pub struct RawPacks<T> {
    full: Arc<ArrayQueue<Vec<T>>>,
    free: Arc<ArrayQueue<Vec<T>>>,
    progress: Progress,
    next_seq: AtomicU64,
    stop: Arc<AtomicBool>,
    consumer: Option<JoinHandle<()>>,
}

impl<T: PackItem> RawPacks<T> {
    /// Makes the packs and starts the consumer thread.
    ///
    /// # Panics
    ///
    /// Never: the pool has room for every pack made.
    #[must_use]
    pub fn new() -> Self {
        let packs = CHANNEL_CAPACITY / BATCH as usize;
        let free = Arc::new(ArrayQueue::new(packs));
        for _ in 0..packs {
            assert!(free.push(Vec::with_capacity(BATCH as usize)).is_ok());
        }
        let full = Arc::new(ArrayQueue::<Vec<T>>::new(CHANNEL_CAPACITY));
        let progress = new_progress();
        let stop = Arc::new(AtomicBool::new(false));
        let consumer = {
            let (full, free) = (full.clone(), free.clone());
            let (progress, stop) = (progress.clone(), stop.clone());
            thread::spawn(move || {
                pin_if_asked(CONSUMER_CORE);
                let mut n = 0_u64;
                let backoff = Backoff::new();
                while !stop.load(Ordering::Relaxed) {
                    let Some(mut pack) = full.pop() else {
                        backoff.snooze();
                        continue;
                    };
                    for item in pack.drain(..) {
                        item.handle();
                        n += 1;
                        progress.store(n, Ordering::Release);
                    }
                    // The pool holds every pack: a give-back always fits.
                    let _ = free.push(pack);
                    backoff.reset();
                }
            })
        };
        Self {
            full,
            free,
            progress,
            next_seq: AtomicU64::new(0),
            stop,
            consumer: Some(consumer),
        }
    }

    /// Sends `count` items in packs of 16 (waiting for a free pack, then for room, by
    /// spinning), waits until the consumer has handled them, and returns the time taken.
    pub fn run(&self, count: u64) -> Duration {
        let first = self.next_seq.fetch_add(count, Ordering::Relaxed);
        let target = self.progress.load(Ordering::Acquire) + count;
        let start = Instant::now();
        let mut seq = first;
        while seq < first + count {
            let end = (seq + BATCH).min(first + count);
            let mut pack = loop {
                match self.free.pop() {
                    Some(pack) => break pack,
                    None => std::hint::spin_loop(),
                }
            };
            pack.extend((seq..end).map(T::make));
            while let Err(back) = self.full.push(pack) {
                pack = back;
                std::hint::spin_loop();
            }
            seq = end;
        }
        wait_until(&self.progress, target, || {
            self.consumer.as_ref().is_none_or(JoinHandle::is_finished)
        });
        start.elapsed()
    }
}

impl<T: PackItem> Default for RawPacks<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T> Drop for RawPacks<T> {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(consumer) = self.consumer.take() {
            let _ = consumer.join();
        }
    }
}
