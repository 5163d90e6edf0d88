//! The cost of the callback mechanism: a confirm functor created, moved through a slot the
//! optimiser cannot see through, and invoked.
//!
//! * `callback/{direct,inline,boxed}`: on one thread. `direct` calls the concrete closure,
//!   so it measures the confirm work alone; `inline - direct` and `boxed - direct` are the
//!   costs of `Callback` and of `BoxedCallback`.
//! * `callback_xthread/{inline,boxed}`: one thread creates, another calls, through a
//!   `crossbeam_queue::ArrayQueue`, so that freeing a box on another thread shows.
//!
//! Run: `cargo bench --bench callback`. Figures: `docs/benchmarks.md`.

use std::hint::black_box;
use std::time::Duration;

use criterion::measurement::WallTime;
use criterion::{BenchmarkGroup, Criterion, Throughput, criterion_group, criterion_main};
use zerodispatch::{BoxedCallback, Callback};
use zerodispatch_bench_support::measure::Relay;
use zerodispatch_bench_support::workload::confirm_functor;

fn same_thread(c: &mut Criterion) {
    let mut group = c.benchmark_group("callback");
    group.throughput(Throughput::Elements(1));
    let mut seq = 0_u64;
    group.bench_function("direct", |b| {
        b.iter(|| {
            seq += 1;
            let f = black_box(confirm_functor(seq));
            f()
        })
    });
    group.bench_function("inline", |b| {
        b.iter(|| {
            seq += 1;
            black_box(Callback::new(confirm_functor(seq))).call()
        })
    });
    group.bench_function("boxed", |b| {
        b.iter(|| {
            seq += 1;
            black_box(BoxedCallback::new(confirm_functor(seq))).call()
        })
    });
    group.finish();
}

/// The relay's queue capacity: a broker processor's queue is larger, but 1024 slots are
/// enough to keep the consumer busy without the benchmark measuring cache misses.
const RELAY_CAPACITY: usize = 1024;

fn cross_thread(c: &mut Criterion) {
    let mut group = c.benchmark_group("callback_xthread");
    group.throughput(Throughput::Elements(1));
    // Few samples of many items each: a sample then measures a steady stream of hops
    // (hundreds of thousands of items) rather than the start and end of a short burst.
    group.sample_size(10);
    let mut seq = 0_u64;
    relayed(&mut group, "inline", Callback::call, &mut seq, |seq| {
        Callback::new(confirm_functor(seq))
    });
    relayed(&mut group, "boxed", BoxedCallback::call, &mut seq, |seq| {
        BoxedCallback::new(confirm_functor(seq))
    });
    group.finish();
}

/// Benches `name`: the round trip of events through a [`Relay`] whose processor hands each
/// to `call`; `make` makes the event of each next sequence number after `seq`.
fn relayed<T: Send + 'static>(
    group: &mut BenchmarkGroup<'_, WallTime>,
    name: &str,
    call: fn(T),
    seq: &mut u64,
    make: impl Fn(u64) -> T,
) {
    let relay = Relay::start(RELAY_CAPACITY, call);
    group.bench_function(name, |b| {
        b.iter_custom(|iters| {
            relay.run(iters, || {
                *seq += 1;
                make(*seq)
            })
        })
    });
    drop(relay);
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3));
    targets = same_thread, cross_thread
}
criterion_main!(benches);
