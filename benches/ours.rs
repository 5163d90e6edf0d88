//! The dispatcher's side of the dispatch benches: a [`Dispatcher`] with one processor per
//! client type asked for, one counting client on each, and persistent producer threads,
//! run many times like the peers of `peers.rs`.
//!
//! * [`Variant`]: what one event carries ([`Inline`], [`Typed`], [`Boxed`]), each doing
//!   the same confirm work ([`handle_confirm`]).
//! * [`Ours`]: the running dispatcher; [`Ours::run`] measures a stream of events,
//!   [`Ours::round_trips`] one event at a time.
//! * [`throughput_group`] and [`bench_runs`]: the criterion settings and the
//!   start-bench-drop shape every function of the dispatch benches follows.
//!
//! This file is a module, not a bench target: benches include it with `mod ours;`.

// Shared between bench binaries, each of which uses only some of it: an item one binary
// leaves unused is not dead in another.
#![allow(dead_code)]

use std::hint::spin_loop;
use std::marker::PhantomData;
use std::ops::Range;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use criterion::measurement::WallTime;
use criterion::{BenchmarkGroup, Criterion, Throughput};
use crossbeam_utils::{Backoff, CachePadded};
use zerodispatch::core::{Dispatcher, DispatcherHandle};

use crate::peers::Helpers;
use zerodispatch::{
    BoxedCallback, Callback, Client, ClientEvent, ClientHandle, ClientType, Context, Event,
    Placement, PoolConfig, WaitStrategy,
};
use zerodispatch_bench_support::workload::{
    Confirm, confirm_functor, handle_confirm, handle_confirm_slowly, slow_confirm_functor,
};

/// The capacity of each processor's queue: the dispatcher's default, the same as the
/// channel peers' capacity.
pub const CAPACITY: usize = PoolConfig::DEFAULT_CAPACITY;

/// When this environment variable is set, each [`Ours`] prints its processors' statistics
/// (parks, flushes, batch sizes) to stderr when it is dropped, at the end of its function:
/// what to look at when retuning the wait strategy.
pub const STATS_VAR: &str = "ZERODISPATCH_BENCH_STATS";

/// Sets up a group of the dispatch benches: throughput per message, and few samples of many
/// items each, so that a sample measures a steady stream (hundreds of thousands of items)
/// rather than the start and end of a short burst.
pub fn throughput_group<'a>(c: &'a mut Criterion, name: &str) -> BenchmarkGroup<'a, WallTime> {
    let mut group = c.benchmark_group(name);
    group
        .throughput(Throughput::Elements(1))
        .sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3));
    group
}

/// Starts a subject with `start`, benches `run` on it as `name` (`run(subject, n)` handles
/// `n` items and returns the time they took), and drops it before returning, so that its
/// threads (a spinning one would take a core of its own) are gone before the next function
/// starts.
pub fn bench_runs<P>(
    group: &mut BenchmarkGroup<'_, WallTime>,
    name: &str,
    start: impl FnOnce() -> P,
    run: impl Fn(&P, u64) -> Duration,
) {
    let subject = start();
    group.bench_function(name, |b| b.iter_custom(|iters| run(&subject, iters)));
    drop(subject);
}

/// Benches our three kinds of event (`inline`, `typed`, `boxed`) with `producers`
/// producers into one processor, then `Box<dyn FnOnce>` over crossbeam-channel in the same
/// shape (`crossbeam_channel_boxed`): the functions every throughput group starts with.
pub fn bench_ours_then_crossbeam(group: &mut BenchmarkGroup<'_, WallTime>, producers: usize) {
    bench_one_to_one::<Inline>(group, "inline", producers);
    bench_one_to_one::<Typed>(group, "typed", producers);
    // Our dispatcher carrying boxed callbacks as its message type (`M = BoxedCallback`).
    bench_one_to_one::<Boxed>(group, "boxed", producers);
    bench_one_to_one::<InlineBatch16>(group, "inline_batch16", producers);
    bench_runs(
        group,
        "crossbeam_channel_boxed",
        || crate::peers::CrossbeamBoxed::new(producers),
        crate::peers::CrossbeamBoxed::run,
    );
}

/// Benches `name`: `V`'s events from `producers` producers into one processor
/// ([`Ours::one_to_one`]).
fn bench_one_to_one<V: Variant>(
    group: &mut BenchmarkGroup<'_, WallTime>,
    name: &str,
    producers: usize,
) {
    bench_runs(group, name, || Ours::<V>::one_to_one(producers), Ours::run);
}

/// The work a typed message does when its client receives it.
pub trait Work: Send + 'static {
    /// Does the message's work.
    fn run(self);
}

impl Work for Confirm {
    #[inline]
    fn run(self) {
        handle_confirm(self);
    }
}

impl Work for BoxedCallback {
    #[inline]
    fn run(self) {
        self.call();
    }
}

/// What one event carries: the dispatcher's message type and how the event for the confirm
/// of message `seq` is made.
pub trait Variant: Send + Sync + 'static {
    /// The dispatcher's message type `M`.
    type Message: Work;

    /// The event for the confirm of message `seq`.
    fn event(seq: u64) -> Event<Self::Message>;

    /// Events a producer hands to `dispatch_batch` at once; 1 sends each with `dispatch`.
    const BATCH: u64 = 1;
}

/// Defines each [`Variant`] of the list: a unit type, its message type, and the event it
/// makes for the confirm of message `seq`.
macro_rules! variants {
    ($($(#[$doc:meta])* $name:ident($message:ty) = |$seq:ident| $event:expr;)+) => {
        $(
            $(#[$doc])*
            pub struct $name;

            impl Variant for $name {
                type Message = $message;

                #[inline]
                fn event($seq: u64) -> Event<$message> {
                    $event
                }
            }
        )+
    };
}

variants! {
    /// Our inline callbacks: `Event::Callback(Callback::new(confirm_functor(seq)))`, run by
    /// the client with `call()`.
    Inline(Confirm) = |seq| Event::Callback(Callback::new(confirm_functor(seq)));
    /// Typed messages: `Event::Message(Confirm::for_seq(seq))`, handled by the client with
    /// `handle_confirm`.
    Typed(Confirm) = |seq| Event::Message(Confirm::for_seq(seq));
    /// Our dispatcher carrying boxed callbacks: a dispatcher whose message type `M` is
    /// `BoxedCallback`, each event an `Event::Message(BoxedCallback::new(confirm_functor(seq)))`
    /// that the client calls. The same queue, processor and client as [`Inline`], with one
    /// heap allocation per event (and its free on the processor thread): what inline
    /// callbacks save.
    Boxed(BoxedCallback) = |seq| Event::Message(BoxedCallback::new(confirm_functor(seq)));
    /// Typed [`SlowConfirm`] messages: a producer that outruns its processor.
    SlowTyped(SlowConfirm) = |seq| Event::Message(SlowConfirm(Confirm::for_seq(seq)));
    /// Inline callbacks doing the work of [`SlowTyped`] ([`slow_confirm_functor`]).
    SlowInline(SlowConfirm) = |seq| Event::Callback(Callback::new(slow_confirm_functor(seq)));
}

/// `V`'s events sent 16 at a time with `dispatch_batch` (one pass through the processor's
/// gate per 16 events): the counterpart of the disruptor's `batch_publish` of 16.
pub struct Batch16<V>(PhantomData<fn() -> V>);

impl<V: Variant> Variant for Batch16<V> {
    type Message = V::Message;

    #[inline]
    fn event(seq: u64) -> Event<V::Message> {
        V::event(seq)
    }

    const BATCH: u64 = 16;
}

/// [`Inline`] events sent 16 at a time.
pub type InlineBatch16 = Batch16<Inline>;

/// [`Typed`] events sent 16 at a time.
pub type TypedBatch16 = Batch16<Typed>;

/// [`SlowInline`] sent 16 at a time.
pub type SlowInlineBatch16 = Batch16<SlowInline>;

/// A confirm whose handling is slower than a producer's dispatch
/// ([`handle_confirm_slowly`]): the message type of the `dispatch_outrun` subjects, whose
/// producer outruns its processor.
#[derive(Clone, Copy, Debug)]
pub struct SlowConfirm(pub Confirm);

impl Work for SlowConfirm {
    #[inline]
    fn run(self) {
        handle_confirm_slowly(self.0);
    }
}

/// How many events a client has handled, on a cache line of its own; written only by the
/// client's processor thread, with Release, so that an Acquire load that sees `n` sees `n`
/// events handled.
type Progress = Arc<CachePadded<AtomicU64>>;

/// A client that runs each event's work and counts the events it has handled.
struct Counting {
    /// Events handled, published for the producer that waits for them.
    progress: Progress,
    /// Events handled: the thread's own copy, so that counting needs no read-modify-write.
    handled: u64,
}

impl<M: Work> Client<M> for Counting {
    #[inline]
    fn on_event(&mut self, event: ClientEvent<M>, _ctx: &mut Context<M>) {
        match event {
            ClientEvent::Callback(callback) => callback.call(),
            ClientEvent::Message(message) => message.run(),
        }
        self.handled += 1;
        self.progress.store(self.handled, Ordering::Release);
    }

    fn flush(&mut self, _ctx: &mut Context<M>) {
        // Nothing buffered: the bench measures the dispatch path, not a client's output.
    }
}

/// Dispatches the events of the messages `seqs` to `targets` in turn (the first message to
/// the first target), each with the blocking `dispatch`, which waits with backoff while a
/// queue is full.
///
/// # Panics
///
/// If the dispatcher hands an event back: it is shut down only after the producers stop.
fn send<V: Variant>(
    dispatcher: &DispatcherHandle<V::Message>,
    targets: &[ClientHandle],
    seqs: Range<u64>,
) {
    let accepted = "the dispatcher runs until the bench subject is dropped";
    if let ([to], true) = (targets, V::BATCH > 1) {
        let mut start = seqs.start;
        while start < seqs.end {
            let end = (start + V::BATCH).min(seqs.end);
            let mut events = (start..end).map(V::event);
            if dispatcher.dispatch_batch(*to, &mut events).is_err() {
                panic!("{accepted}");
            }
            start = end;
        }
    } else if let [to] = targets {
        for seq in seqs {
            dispatcher.dispatch(*to, V::event(seq)).expect(accepted);
        }
    } else {
        let mut next = 0;
        for seq in seqs {
            dispatcher
                .dispatch(targets[next], V::event(seq))
                .expect(accepted);
            next += 1;
            if next == targets.len() {
                next = 0;
            }
        }
    }
}

/// A running dispatcher with one processor (queue capacity [`CAPACITY`]) per client type it
/// was started with, a [`Counting`] client on each, and `producers - 1` persistent
/// [`Helpers`](crate::peers::Helpers) besides the caller. Every producer sends its share
/// round-robin to the clients. Dropping it stops the helpers, then shuts the dispatcher
/// down.
pub struct Ours<V: Variant> {
    /// The other producers; dropped (joined) before the dispatcher.
    helpers: Helpers,
    /// The clients, one per processor, in the order of the client types given.
    targets: Arc<[ClientHandle]>,
    /// Each client's progress, in the order of `targets`.
    progress: Vec<Progress>,
    /// The sequence number of the next confirm to send.
    next_seq: AtomicU64,
    /// The capacity of each processor's queue.
    capacity: usize,
    /// The dispatcher; dropped (shut down) after the helpers are joined.
    dispatcher: Dispatcher<V::Message>,
}

impl<V: Variant> Ours<V> {
    /// Starts a dispatcher with one processor of each of `types`, all waiting by `wait`,
    /// registers a [`Counting`] client on each, and starts `producers - 1` helpers.
    ///
    /// # Panics
    ///
    /// If `types` is empty or `producers` is zero.
    #[must_use]
    pub fn new(types: &[ClientType], wait: WaitStrategy, producers: usize) -> Self {
        Self::with_capacity(types, wait, producers, CAPACITY)
    }

    /// [`new`](Self::new) with queues of `capacity` events.
    ///
    /// # Panics
    ///
    /// As `new`, and if `capacity` is not a valid queue capacity.
    #[must_use]
    pub fn with_capacity(
        types: &[ClientType],
        wait: WaitStrategy,
        producers: usize,
        capacity: usize,
    ) -> Self {
        let builder = types
            .iter()
            .fold(Dispatcher::<V::Message>::builder(), |builder, &t| {
                let pool = PoolConfig::new(1).capacity(capacity).wait(wait);
                let pool = if crate::peers::PINNED.load(Ordering::Relaxed) {
                    pool.pin_to([crate::peers::CONSUMER_CORE])
                } else {
                    pool
                };
                builder.pool(t, pool)
            });
        let dispatcher = builder.build().expect("a valid bench configuration");
        let (targets, progress): (Vec<_>, Vec<_>) = types
            .iter()
            .map(|&t| {
                let progress: Progress = Arc::new(CachePadded::new(AtomicU64::new(0)));
                let client = Counting {
                    progress: progress.clone(),
                    handled: 0,
                };
                let handle = dispatcher
                    .register(t, client, Placement::LeastLoaded)
                    .expect("a running dispatcher with a processor of this type");
                (handle.erase(), progress)
            })
            .unzip();
        let targets: Arc<[ClientHandle]> = targets.into();
        let helpers = {
            let (dispatcher, targets) = (dispatcher.handle(), targets.clone());
            Helpers::start(producers, move |seqs| {
                send::<V>(&dispatcher, &targets, seqs)
            })
        };
        Self {
            helpers,
            targets,
            progress,
            next_seq: AtomicU64::new(0),
            capacity,
            dispatcher,
        }
    }

    /// One producer (the caller) into one processor with one client, the processor waiting
    /// by the default `SpinThenPark`.
    #[must_use]
    pub fn one_to_one(producers: usize) -> Self {
        Self::new(&[ClientType::Queue], WaitStrategy::default(), producers)
    }

    /// Events the clients have handled so far, all together.
    fn handled(&self) -> u64 {
        self.progress
            .iter()
            .map(|p| p.load(Ordering::Acquire))
            .sum()
    }

    /// Sends `count` events, split evenly among the producers (the caller takes the
    /// remainder), each producer round-robin over the clients; waits until the clients
    /// have handled all of them, and returns the time from handing out the first share to
    /// the last event handled.
    ///
    /// Runs must not overlap: the target is read at the start of the run.
    ///
    /// # Panics
    ///
    /// If a helper thread exits during the run.
    pub fn run(&self, count: u64) -> Duration {
        let first = self.next_seq.fetch_add(count, Ordering::Relaxed);
        let target = self.handled() + count;
        let start = Instant::now();
        let mine = self.helpers.hand_out(first..first + count);
        send::<V>(&self.dispatcher.handle(), &self.targets, mine);
        let backoff = Backoff::new();
        while self.handled() < target {
            assert!(
                !self.helpers.any_finished(),
                "a helper thread exited during a run"
            );
            backoff.snooze();
        }
        start.elapsed()
    }

    /// The processor's own drain rate: the time it takes to handle `count` events from a
    /// queue that is never empty. In rounds of up to `capacity - 1` events: a callback
    /// holds the processor while the caller fills its queue with `try_dispatch`, then is
    /// released; a round is timed from the release to its last event handled. Only the
    /// drains are timed, with no producer touching the queue meanwhile.
    ///
    /// # Panics
    ///
    /// If the dispatcher refuses an event: nothing else fills the queue.
    pub fn drain(&self, count: u64) -> Duration {
        let to = self.targets[0];
        let dispatcher = self.dispatcher.handle();
        let chunk = (self.capacity as u64).saturating_sub(1).max(1);
        let mut total = Duration::ZERO;
        let mut left = count;
        while left > 0 {
            let n = left.min(chunk);
            left -= n;
            let hold = Arc::new((AtomicBool::new(false), AtomicBool::new(true)));
            let held = hold.clone();
            let before = self.handled();
            dispatcher
                .dispatch(
                    to,
                    Event::Callback(Callback::new(move || {
                        held.0.store(true, Ordering::Release);
                        while held.1.load(Ordering::Acquire) {
                            spin_loop();
                        }
                    })),
                )
                .expect("the dispatcher runs until the bench subject is dropped");
            while !hold.0.load(Ordering::Acquire) {
                spin_loop();
            }
            let first = self.next_seq.fetch_add(n, Ordering::Relaxed);
            for seq in first..first + n {
                assert!(
                    dispatcher.try_dispatch(to, V::event(seq)).is_ok(),
                    "the queue holds capacity - 1 events behind the holding callback"
                );
            }
            let target = before + 1 + n;
            let start = Instant::now();
            hold.1.store(false, Ordering::Release);
            // Looks at the progress about every 5 us, not in a tight loop: each look pulls
            // the line the client writes at every event away from the processor's core
            // (looking every microsecond measured the drain 10-25% slower); and yields
            // between looks, so that on a busy machine the waiter does not take the
            // processor's share of a core.
            while self.handled() < target {
                for _ in 0..256 {
                    spin_loop();
                }
                std::thread::yield_now();
            }
            total += start.elapsed();
        }
        total
    }

    /// Makes `count` round trips from the caller to the first client and back: dispatches
    /// one event, spins until the client has handled it, and only then sends the next.
    /// Returns the time of the round trips alone.
    ///
    /// With a zero `gap` the round trips follow each other at once and are timed together.
    /// Otherwise the caller spins for `gap` before each one, untimed, so that a processor
    /// that parks when idle is asleep when the event comes: each round trip is then timed
    /// on its own and includes the processor's wake-up.
    ///
    /// # Panics
    ///
    /// If the dispatcher hands the event back.
    pub fn round_trips(&self, count: u64, gap: Duration) -> Duration {
        let to = self.targets[0];
        let progress = &self.progress[0];
        let first = self.next_seq.fetch_add(count, Ordering::Relaxed);
        let mut handled = progress.load(Ordering::Acquire);
        let mut total = Duration::ZERO;
        let mut batch_start = Instant::now();
        for seq in first..first + count {
            if !gap.is_zero() {
                let idle = Instant::now();
                while idle.elapsed() < gap {
                    spin_loop();
                }
                batch_start = Instant::now();
            }
            self.dispatcher
                .dispatch(to, V::event(seq))
                .expect("the dispatcher runs until the bench subject is dropped");
            handled += 1;
            while progress.load(Ordering::Acquire) < handled {
                spin_loop();
            }
            if !gap.is_zero() {
                total += batch_start.elapsed();
            }
        }
        if gap.is_zero() {
            batch_start.elapsed()
        } else {
            total
        }
    }
}

impl<V: Variant> Drop for Ours<V> {
    fn drop(&mut self) {
        print_stats(|| self.dispatcher.stats());
        // The fields drop next, in order: the helpers end (dropping their dispatcher
        // handles), then the dispatcher shuts down, draining and joining its processors.
    }
}

/// Prints each processor's statistics (taken by `stats`, a dispatcher's or a broker's) to
/// stderr when [`STATS_VAR`] is set: what to look at when retuning the wait strategy.
pub fn print_stats(stats: impl FnOnce() -> Vec<zerodispatch::ProcessorSnapshot>) {
    if std::env::var_os(STATS_VAR).is_none() {
        return;
    }
    for s in stats() {
        eprintln!(
            "{}: processed {} parks {} flushes {} batch p50 {} mean {:.1} max depth {}",
            s.processor,
            s.processed,
            s.parks,
            s.flushes,
            s.batch_size.p50,
            s.batch_size.mean,
            s.max_depth
        );
    }
}
