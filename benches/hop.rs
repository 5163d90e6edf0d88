//! `dispatch_hop`: the cost of one hop between two threads, measured the way an outsider
//! measures it. Every subject moves confirm-sized work from the bench thread (the only
//! producer) to one consumer thread through a 4096-slot queue or ring, in one run, each
//! unpinned and then pinned (producer on core 0, consumer on core 1):
//!
//! * `raw_array_queue`: a bare `crossbeam_queue::ArrayQueue` of 40-byte plain data, the
//!   producer retrying on full: the floor under our design.
//! * `dispatch_typed`, `dispatch_inline`: our blocking `dispatch` of a typed `Confirm`
//!   message, and of an inline `Callback`, to a client on a processor.
//! * `dispatch_batch16`: `dispatch_batch` of 16 inline callbacks at a time.
//! * `crossbeam_channel_boxed`: `Box<dyn FnOnce>` over `crossbeam_channel::bounded`.
//! * `disruptor_publish1`, `disruptor_batch16`: the `disruptor` crate (busy-spin consumer),
//!   plain `Confirm` data published one at a time and 16 at a time.
//!
//! And the experiments that take our hop apart, one cost at a time, on the same queue:
//!
//! * `raw_item_queue`: the bare queue carrying 56-byte items (our queued item's size: a
//!   64-byte slot, which straddles two cache lines unless the buffer starts on one);
//! * `raw_item_queue_gate1`: the same with the one read-modify-write of our gate before
//!   each push (it counts entries: `gate.rs`);
//! * `raw_item_queue_gate`: the same with the two of the gate before that, around each
//!   push.
//!
//! Each criterion sample streams hundreds of thousands to millions of events (10 samples
//! of a 3 s measurement). `python3 scripts/hop_table.py` prints the median and min-max of
//! the per-sample figures from `target/criterion`. Run: `cargo bench --bench hop`.

mod ours;
mod peers;

use std::sync::atomic::Ordering;
use std::sync::{Mutex, OnceLock, mpsc};

use criterion::{Criterion, criterion_group, criterion_main};

use ours::{Inline, InlineBatch16, Ours, Typed, bench_runs, throughput_group};
use peers::{
    CrossbeamBoxed, DisruptorTyped, DisruptorTypedBatch, PINNED, PRODUCER_CORE, Plain40, Plain56,
    RawArrayQueue,
};

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

/// Every subject, under `prefix/`.
fn subjects(c: &mut Criterion, prefix: &str) {
    let mut group = throughput_group(c, "dispatch_hop");
    let name = |subject: &str| format!("{prefix}/{subject}");
    bench_runs(
        &mut group,
        &name("raw_array_queue"),
        unpinned_start(RawArrayQueue::<Plain40, 0>::new),
        RawArrayQueue::run,
    );
    bench_runs(
        &mut group,
        &name("dispatch_typed"),
        unpinned_start(ours::<Typed>),
        Ours::run,
    );
    bench_runs(
        &mut group,
        &name("dispatch_inline"),
        unpinned_start(ours::<Inline>),
        Ours::run,
    );
    bench_runs(
        &mut group,
        &name("dispatch_batch16"),
        unpinned_start(ours::<InlineBatch16>),
        Ours::run,
    );
    bench_runs(
        &mut group,
        &name("crossbeam_channel_boxed"),
        unpinned_start(|| CrossbeamBoxed::new(1)),
        CrossbeamBoxed::run,
    );
    bench_runs(
        &mut group,
        &name("disruptor_publish1"),
        unpinned_start(DisruptorTyped::new),
        DisruptorTyped::run,
    );
    bench_runs(
        &mut group,
        &name("disruptor_batch16"),
        unpinned_start(DisruptorTypedBatch::new),
        DisruptorTypedBatch::run,
    );
    bench_runs(
        &mut group,
        &name("raw_item_queue"),
        unpinned_start(RawArrayQueue::<Plain56, 0>::new),
        RawArrayQueue::run,
    );
    bench_runs(
        &mut group,
        &name("raw_item_queue_gate1"),
        unpinned_start(RawArrayQueue::<Plain56, 1>::new),
        RawArrayQueue::run,
    );
    bench_runs(
        &mut group,
        &name("raw_item_queue_gate"),
        unpinned_start(RawArrayQueue::<Plain56, 2>::new),
        RawArrayQueue::run,
    );
    group.finish();
}

fn unpinned(c: &mut Criterion) {
    start_unpinned_builder();
    subjects(c, "unpinned");
}

/// Pins the bench thread (the producer) for the rest of the process, and every consumer
/// started from now on: so it runs last.
fn pinned(c: &mut Criterion) {
    let pinned = core_affinity::set_for_current(core_affinity::CoreId { id: PRODUCER_CORE });
    PINNED.store(true, Ordering::Relaxed);
    subjects(c, if pinned { "pinned" } else { "pin_refused" });
}

criterion_group!(benches, unpinned, pinned);
criterion_main!(benches);
