//! `dispatch_hop`: the cost of one hop between two threads, measured the way an outsider
//! measures it. Every subject moves confirm-sized work from the bench thread (the only
//! producer) to one consumer thread through a 4096-slot queue or ring, in one run, each
//! unpinned and then pinned (producer on core 0, consumer on core 1):
//!
//! * `raw_array_queue`: a bare `crossbeam_queue::ArrayQueue` of 40-byte plain data, the
//!   producer retrying on full: the floor under our design.
//! * `dispatch_typed`, `dispatch_inline`: our blocking `dispatch` of a typed `Confirm`
//!   message, and of an inline `Callback`, to a client on a processor.
//! * `dispatch_batch16`: `dispatch_batch` of 16 inline callbacks at a time;
//!   `dispatch_typed_batch16`: of 16 typed `Confirm` messages (no indirect call an event).
//! * `crossbeam_channel_boxed`: `Box<dyn FnOnce>` over `crossbeam_channel::bounded`.
//! * `disruptor_publish1`, `disruptor_batch16`: the `disruptor` crate (busy-spin consumer),
//!   plain `Confirm` data published one at a time and 16 at a time.
//!
//! And the experiments that take our hop apart, one cost at a time, on the same queue:
//!
//! * `disruptor_batch16_in_place_calls`: the disruptor's ring carrying 56-byte callbacks
//!   (a confirm's captures and a pointer to their code), each called through its pointer
//!   where it lies: what a ring filled and called in place would cost with callbacks;
//! * `raw_packs16_plain`, `raw_packs16_callback`: our pack design alone (`peers::RawPacks`):
//!   packs of 16 from a pool over a bare `ArrayQueue`, each item moved out and handled by a
//!   spinning consumer, carrying `Confirm` data (what the disruptor carries) or our inline
//!   `Callback`s (what `dispatch_batch16` carries): the floor under `dispatch_batch16`;
//! * `raw_ring16_callback`, `raw_ring16_plain`, `raw_ring1_callback`: the ring the
//!   processors are to sit on (`zerodispatch_ring`, `peers::RawRing`) alone: runs of 16
//!   claimed with one compare-and-swap (or one item a push), each item moved out and
//!   handled by a spinning consumer: what a batch would cost without the packs' two queues;
//! * `raw_item_queue`: the bare queue carrying 56-byte items (our queued item's size: a
//!   64-byte slot, which straddles two cache lines unless the buffer starts on one);
//! * `raw_item_queue_gate1`: the same with the one read-modify-write of our gate before
//!   each push (it counts entries: `gate.rs`);
//! * `raw_item_queue_gate`: the same with the two of the gate before that, around each
//!   push.
//!
//! `dispatch_outrun`: a producer faster than its processor, which keeps the queue full
//! most of the time. Every consumer runs `handle_confirm_slowly` (the confirm work plus
//! about 30 ns), so that it is slower per event than a producer that only dispatches:
//!
//! * `raw_array_queue`: the bare `ArrayQueue` (4096 slots, 40-byte items), the producer
//!   retrying a full push at once;
//! * `drain_typed`, `drain_inline`: the processor's own drain rate, events handled per
//!   second from a queue that is never empty (filled while a callback holds the processor,
//!   timed from its release);
//! * `outrun_typed`, `outrun_inline`, `outrun_batch16`: our blocking `dispatch` (and
//!   `dispatch_batch` of 16) into a queue of 4096 events that the producer keeps full.
//!
//! `dispatch_outrun_capacity` (unpinned): `drain_typed` and `outrun_typed` for capacities
//! 256, 4096 and 65536.
//!
//! Each criterion sample streams hundreds of thousands to millions of events (10 samples
//! of a 3 s measurement). `python3 scripts/hop_table.py` prints the median and min-max of
//! the per-sample figures from `target/criterion`. Run: `cargo bench --bench hop`.

mod ours;
mod peers;

use std::sync::atomic::Ordering;
use std::sync::{Mutex, OnceLock, mpsc};
use std::time::Duration;

use criterion::measurement::WallTime;
use criterion::{BenchmarkGroup, Criterion, criterion_group, criterion_main};

use ours::{
    Inline, InlineBatch16, Ours, SlowInline, SlowInlineBatch16, SlowTyped, Typed, TypedBatch16,
    bench_runs, throughput_group,
};
use peers::{
    CrossbeamBoxed, DisruptorInPlaceBatch, DisruptorTyped, DisruptorTypedBatch, PINNED,
    PRODUCER_CORE, Plain40, Plain56, RawArrayQueue, RawPacks, RawRing, Slow40,
};
use zerodispatch_bench_support::workload::Confirm;

/// A thread started before the bench thread pins itself, which therefore keeps the
/// process's full affinity mask (a thread inherits its creator's): our dispatchers are
/// built there, since the builder validates pinning against the calling thread's mask
/// (`core_affinity::get_core_ids`) and a pinned bench thread may run on one core only.
type Job = Box<dyn FnOnce() + Send>;
static UNPINNED_BUILDER: OnceLock<Mutex<mpsc::Sender<Job>>> = OnceLock::new();

fn start_unpinned_builder() {
    UNPINNED_BUILDER.get_or_init(|| {
        let (jobs, queue) = mpsc::channel::<Job>();
        std::thread::spawn(move || queue.into_iter().for_each(|job| job()));
        Mutex::new(jobs)
    });
}

/// Starts a subject on the unpinned builder thread: our dispatcher and the disruptor crate
/// both check a core id against the calling thread's mask before pinning to it.
fn unpinned_start<T: Send + 'static>(start: fn() -> T) -> impl FnOnce() -> T {
    move || {
        let (tx, rx) = mpsc::channel();
        let job: Job = Box::new(move || {
            let _ = tx.send(start());
        });
        UNPINNED_BUILDER
            .get()
            .expect("started by the first function")
            .lock()
            .unwrap()
            .send(job)
            .expect("the builder thread runs until the process ends");
        rx.recv().expect("the subject started")
    }
}

fn ours<V: ours::Variant>() -> Ours<V> {
    Ours::<V>::one_to_one(1)
}

/// A group's subjects, each named `prefix/subject` (or `subject` with no prefix), built
/// on the unpinned builder thread and measured by its own run function.
struct Subjects<'a> {
    group: BenchmarkGroup<'a, WallTime>,
    prefix: &'a str,
}

impl<'a> Subjects<'a> {
    fn new(c: &'a mut Criterion, group: &str, prefix: &'a str) -> Self {
        Self {
            group: throughput_group(c, group),
            prefix,
        }
    }

    /// Benches `subject`: what `start` builds, measured by `run`.
    fn bench<P: Send + 'static>(
        &mut self,
        subject: &str,
        start: fn() -> P,
        run: impl Fn(&P, u64) -> Duration,
    ) {
        let name = match self.prefix {
            "" => subject.to_owned(),
            prefix => format!("{prefix}/{subject}"),
        };
        bench_runs(&mut self.group, &name, unpinned_start(start), run);
    }

    fn finish(self) {
        self.group.finish();
    }
}

/// Every subject, under `prefix/`.
fn subjects(c: &mut Criterion, prefix: &str) {
    let mut s = Subjects::new(c, "dispatch_hop", prefix);
    s.bench(
        "raw_array_queue",
        RawArrayQueue::<Plain40, 0>::new,
        RawArrayQueue::run,
    );
    s.bench("dispatch_typed", ours::<Typed>, Ours::run);
    s.bench("dispatch_inline", ours::<Inline>, Ours::run);
    s.bench("dispatch_batch16", ours::<InlineBatch16>, Ours::run);
    s.bench("dispatch_typed_batch16", ours::<TypedBatch16>, Ours::run);
    s.bench(
        "crossbeam_channel_boxed",
        || CrossbeamBoxed::new(1),
        CrossbeamBoxed::run,
    );
    s.bench(
        "disruptor_publish1",
        DisruptorTyped::new,
        DisruptorTyped::run,
    );
    s.bench(
        "disruptor_batch16",
        DisruptorTypedBatch::new,
        DisruptorTypedBatch::run,
    );
    s.bench(
        "disruptor_batch16_in_place_calls",
        DisruptorInPlaceBatch::new,
        DisruptorInPlaceBatch::run,
    );
    s.bench("raw_packs16_plain", RawPacks::<Confirm>::new, RawPacks::run);
    s.bench(
        "raw_packs16_callback",
        RawPacks::<zerodispatch::Callback>::new,
        RawPacks::run,
    );
    s.bench(
        "raw_ring16_callback",
        RawRing::<zerodispatch::Callback, 16>::new,
        RawRing::run,
    );
    s.bench(
        "raw_ring16_plain",
        RawRing::<Confirm, 16>::new,
        RawRing::run,
    );
    s.bench(
        "raw_ring1_callback",
        RawRing::<zerodispatch::Callback, 1>::new,
        RawRing::run,
    );
    s.bench(
        "raw_item_queue",
        RawArrayQueue::<Plain56, 0>::new,
        RawArrayQueue::run,
    );
    s.bench(
        "raw_item_queue_gate1",
        RawArrayQueue::<Plain56, 1>::new,
        RawArrayQueue::run,
    );
    s.bench(
        "raw_item_queue_gate",
        RawArrayQueue::<Plain56, 2>::new,
        RawArrayQueue::run,
    );
    s.finish();
}

/// One processor (default wait) with queues of `CAPACITY` events, one producer.
fn ours_cap<V: ours::Variant, const CAPACITY: usize>() -> Ours<V> {
    Ours::<V>::with_capacity(
        &[zerodispatch::ClientType::Queue],
        zerodispatch::WaitStrategy::default(),
        1,
        CAPACITY,
    )
}

/// The `dispatch_outrun` subjects, under `prefix/`.
fn outrun_subjects(c: &mut Criterion, prefix: &str) {
    let mut s = Subjects::new(c, "dispatch_outrun", prefix);
    s.bench(
        "raw_array_queue",
        RawArrayQueue::<Slow40, 0>::new,
        RawArrayQueue::run,
    );
    s.bench("drain_typed", ours::<SlowTyped>, Ours::drain);
    s.bench("drain_inline", ours::<SlowInline>, Ours::drain);
    s.bench("outrun_typed", ours::<SlowTyped>, Ours::run);
    s.bench("outrun_inline", ours::<SlowInline>, Ours::run);
    s.bench("outrun_batch16", ours::<SlowInlineBatch16>, Ours::run);
    s.finish();
}

/// `drain_typed` and `outrun_typed` for capacities 256, 4096 and 65536 (unpinned).
fn outrun_capacities(c: &mut Criterion) {
    let mut s = Subjects::new(c, "dispatch_outrun_capacity", "");
    macro_rules! capacity {
        ($capacity:literal) => {
            let start = ours_cap::<SlowTyped, $capacity>;
            s.bench(concat!("drain_typed_", $capacity), start, Ours::drain);
            s.bench(concat!("outrun_typed_", $capacity), start, Ours::run);
        };
    }
    capacity!(256);
    capacity!(4096);
    capacity!(65536);
    s.finish();
}

fn unpinned(c: &mut Criterion) {
    start_unpinned_builder();
    subjects(c, "unpinned");
    outrun_subjects(c, "unpinned");
    outrun_capacities(c);
}

/// Pins the bench thread (the producer) for the rest of the process, and every consumer
/// started from now on: so it runs last.
fn pinned(c: &mut Criterion) {
    let pinned = core_affinity::set_for_current(core_affinity::CoreId { id: PRODUCER_CORE });
    PINNED.store(true, Ordering::Relaxed);
    let prefix = if pinned { "pinned" } else { "pin_refused" };
    subjects(c, prefix);
    outrun_subjects(c, prefix);
}

criterion_group!(benches, unpinned, pinned);
criterion_main!(benches);
