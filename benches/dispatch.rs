//! The dispatcher against its peers: confirm-sized work handed from producer threads to a
//! processor, per message.
//!
//! * `dispatch_1p1c`: one producer (the bench thread) into one processor (`SpinThenPark`,
//!   capacity 4096) with one client. `inline` carries our `Callback`s, `typed` a `Confirm`
//!   message, `boxed` a `BoxedCallback` as the message of a second dispatcher (`M =
//!   BoxedCallback`); the peers are boxed functors over `crossbeam_channel` and
//!   `std::sync::mpsc`, and `Confirm` events through a busy-spinning `disruptor`, one at a
//!   time and 16 at a time.
//! * `dispatch_2p1c`: the same with two producers (the bench thread and a persistent
//!   helper, each sending half), against the channel peers.
//! * `wake_latency`: one event's round trip, the bench thread waiting for the client to
//!   handle it before sending the next, with a processor that parks as soon as it is idle
//!   (`park`, the gap before each round trip letting it fall asleep) or never sleeps
//!   (`spin`).
//! * `dispatch_oversubscribed`: four producers, each round-robin over three clients on one
//!   session, one queue and one cluster processor: seven busy threads, more than a small
//!   machine has cores. Against the same shape with three crossbeam channels.
//!
//! Every subject is started once per function and dropped before the next starts: on a
//! small machine an idle-spinning one would take a core from the next.
//!
//! Run: `cargo bench --bench dispatch`; with `ZERODISPATCH_BENCH_STATS=1` each of our
//! dispatchers also prints its processors' parks, flushes and batch sizes when its function
//! ends. Figures: `docs/benchmarks.md`.

mod ours;
mod peers;

use std::time::Duration;

use criterion::measurement::WallTime;
use criterion::{BenchmarkGroup, Criterion, criterion_group, criterion_main};
use zerodispatch::{ClientType, WaitStrategy};

use ours::{Inline, Ours, bench_runs, throughput_group};
use peers::{CrossbeamBoxedFanOut, DisruptorTyped, DisruptorTypedBatch, StdMpscBoxed};

/// How long the bench thread waits, untimed, before each `wake_latency/park` round trip: a
/// `Park` processor parks within a few microseconds of its last event, so after this it is
/// asleep and the round trip includes waking it.
const WAKE_GAP: Duration = Duration::from_micros(20);

/// Producers in `dispatch_oversubscribed`.
const OVERSUBSCRIBED_PRODUCERS: usize = 4;

/// Group `name` with `producers` producers into one processor, begun with the
/// dispatcher's three kinds of event and the channel peers.
fn ours_and_channels<'a>(
    c: &'a mut Criterion,
    name: &str,
    producers: usize,
) -> BenchmarkGroup<'a, WallTime> {
    let mut group = throughput_group(c, name);
    ours::bench_ours_then_crossbeam(&mut group, producers);
    let std_mpsc = move || StdMpscBoxed::new(producers);
    bench_runs(&mut group, "std_mpsc_boxed", std_mpsc, StdMpscBoxed::run);
    group
}

/// One producer, one processor: the dispatcher's three kinds of event and the peers.
fn one_producer(c: &mut Criterion) {
    let mut group = ours_and_channels(c, "dispatch_1p1c", 1);
    bench_runs(
        &mut group,
        "disruptor_typed",
        DisruptorTyped::new,
        DisruptorTyped::run,
    );
    bench_runs(
        &mut group,
        "disruptor_typed_batch16",
        DisruptorTypedBatch::new,
        DisruptorTypedBatch::run,
    );
    group.finish();
}

/// Two producers, one processor: the dispatcher's three kinds of event and the channel
/// peers (the disruptor peers have a single producer).
fn two_producers(c: &mut Criterion) {
    ours_and_channels(c, "dispatch_2p1c", 2).finish();
}

/// One event's round trip through a processor that parks when idle and one that spins.
fn wake_latency(c: &mut Criterion) {
    let mut group = throughput_group(c, "wake_latency");
    let start = |wait| move || Ours::<Inline>::new(&[ClientType::Queue], wait, 1);
    bench_runs(&mut group, "park", start(WaitStrategy::Park), |ours, n| {
        ours.round_trips(n, WAKE_GAP)
    });
    bench_runs(
        &mut group,
        "spin",
        start(WaitStrategy::BusySpin),
        |ours, n| ours.round_trips(n, Duration::ZERO),
    );
    group.finish();
}

/// Four producers into one processor of each client type, against three crossbeam channels.
fn oversubscribed(c: &mut Criterion) {
    let mut group = throughput_group(c, "dispatch_oversubscribed");
    let types = [ClientType::Session, ClientType::Queue, ClientType::Cluster];
    bench_runs(
        &mut group,
        "inline",
        || Ours::<Inline>::new(&types, WaitStrategy::default(), OVERSUBSCRIBED_PRODUCERS),
        Ours::run,
    );
    bench_runs(
        &mut group,
        "crossbeam_channel_boxed",
        || CrossbeamBoxedFanOut::new(OVERSUBSCRIBED_PRODUCERS, types.len()),
        CrossbeamBoxedFanOut::run,
    );
    group.finish();
}

criterion_group!(
    benches,
    one_producer,
    two_producers,
    wake_latency,
    oversubscribed
);
criterion_main!(benches);
