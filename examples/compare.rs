//! The side-by-side comparison a newcomer runs first:
//!
//! ```text
//! cargo run --release --example compare
//! ```
//!
//! It measures, in this run and on this machine:
//!
//! 1. the cost per callback of a confirm functor carried three ways: called directly (the
//!    work alone), as an inline `Callback`, and as a `BoxedCallback` (`Box<dyn FnOnce>`), on
//!    one thread and across two threads;
//! 2. one producer thread into one processor, the subjects of the `dispatch_hop` bench
//!    (unpinned): a bare `ArrayQueue` (the floor), our dispatcher carrying typed confirms,
//!    inline callbacks, batches of 16 and boxed callbacks, crossbeam-channel and std
//!    `sync_channel` carrying boxed closures, and the `disruptor` crate carrying plain data,
//!    one at a time and 16 at a time: median and min-max of 5 rounds of 1,000,000.
//!
//! Each case runs several rounds and the table shows the median. Criterion versions of the
//! same measurements: `cargo bench --bench callback` and `cargo bench --bench dispatch`.

use std::hint::black_box;
use std::time::{Duration, Instant};

#[path = "../benches/ours.rs"]
mod ours;
#[path = "../benches/peers.rs"]
mod peers;

use zerodispatch::{BoxedCallback, Callback};
use zerodispatch_bench_support::measure::Relay;
use zerodispatch_bench_support::workload::confirm_functor;

const ROUNDS: usize = 7;
const SAME_THREAD_CALLS: u64 = 20_000_000;
const CROSS_THREAD_CALLS: u64 = 2_000_000;
/// The same queue capacity as `benches/callback.rs`.
const RELAY_CAPACITY: usize = 1024;

fn time_per_call(calls: u64, f: impl FnOnce(u64) -> Duration) -> f64 {
    f(calls).as_nanos() as f64 / calls as f64
}

fn median(mut samples: Vec<f64>) -> f64 {
    samples.sort_by(f64::total_cmp);
    samples[samples.len() / 2]
}

fn same_thread<C>(calls: u64, make: impl Fn(u64) -> C, call: impl Fn(C)) -> Duration {
    let start = Instant::now();
    for seq in 0..calls {
        call(black_box(make(seq)));
    }
    start.elapsed()
}

/// Events per round of the dispatch comparison.
const DISPATCH_EVENTS: u64 = 1_000_000;
/// Rounds per subject of the dispatch comparison (after one warm-up round): as many as
/// the `dispatch_hop` bench's minimum, so that the spread means something.
const DISPATCH_ROUNDS: usize = 5;

/// Median, min and max ns per event of `run` over the rounds, after one warm-up round.
fn dispatch_ns<P>(subject: P, run: impl Fn(&P, u64) -> Duration) -> (f64, f64, f64) {
    run(&subject, DISPATCH_EVENTS / 4);
    let samples: Vec<f64> = (0..DISPATCH_ROUNDS)
        .map(|_| time_per_call(DISPATCH_EVENTS, |n| run(&subject, n)))
        .collect();
    let min = samples.iter().copied().fold(f64::INFINITY, f64::min);
    let max = samples.iter().copied().fold(0.0, f64::max);
    (median(samples), min, max)
}

/// The subjects of the `dispatch_hop` bench (unpinned; the bench adds the pinned run),
/// with std's `sync_channel` besides.
fn compare_dispatch() {
    println!();
    println!(
        "one producer thread -> one processor or consumer thread, {DISPATCH_EVENTS} confirms a round, median (min-max) of {DISPATCH_ROUNDS} rounds"
    );
    println!();
    // One subject at a time: a spinning consumer left running would take a core.
    let rows: Vec<(&str, (f64, f64, f64))> = vec![
        (
            "raw_array_queue (bare ArrayQueue, 40 B)",
            dispatch_ns(
                peers::RawArrayQueue::<peers::Plain40, 0>::new(),
                peers::RawArrayQueue::run,
            ),
        ),
        (
            "dispatch_typed",
            dispatch_ns(ours::Ours::<ours::Typed>::one_to_one(1), ours::Ours::run),
        ),
        (
            "dispatch_inline",
            dispatch_ns(ours::Ours::<ours::Inline>::one_to_one(1), ours::Ours::run),
        ),
        (
            "dispatch_batch16",
            dispatch_ns(
                ours::Ours::<ours::InlineBatch16>::one_to_one(1),
                ours::Ours::run,
            ),
        ),
        (
            "zerodispatch, BoxedCallback",
            dispatch_ns(ours::Ours::<ours::Boxed>::one_to_one(1), ours::Ours::run),
        ),
        (
            "crossbeam_channel_boxed",
            dispatch_ns(peers::CrossbeamBoxed::new(1), peers::CrossbeamBoxed::run),
        ),
        (
            "std sync_channel, Box<dyn FnOnce>",
            dispatch_ns(peers::StdMpscBoxed::new(1), peers::StdMpscBoxed::run),
        ),
        (
            "disruptor_publish1",
            dispatch_ns(peers::DisruptorTyped::new(), peers::DisruptorTyped::run),
        ),
        (
            "disruptor_batch16",
            dispatch_ns(
                peers::DisruptorTypedBatch::new(),
                peers::DisruptorTypedBatch::run,
            ),
        ),
    ];
    let raw = rows[0].1.0;
    println!(
        "| case                                    | ns/event (min-max)    | x raw_array_queue |"
    );
    println!(
        "| --------------------------------------- | --------------------- | ----------------- |"
    );
    for (name, (ns, min, max)) in &rows {
        let spread = format!("{ns:.1} ({min:.1}-{max:.1})");
        println!("| {name:<39} | {spread:<21} | {:>16.2}x |", ns / raw);
    }
}

fn main() {
    let mut direct = Vec::new();
    let mut inline = Vec::new();
    let mut boxed = Vec::new();
    let mut x_inline = Vec::new();
    let mut x_boxed = Vec::new();
    let mut seq = 0_u64;

    println!("measuring {ROUNDS} interleaved rounds (about 10-20 s)...");
    for _ in 0..ROUNDS {
        direct.push(time_per_call(SAME_THREAD_CALLS, |n| {
            same_thread(n, confirm_functor, |f| f())
        }));
        inline.push(time_per_call(SAME_THREAD_CALLS, |n| {
            same_thread(n, |s| Callback::new(confirm_functor(s)), Callback::call)
        }));
        boxed.push(time_per_call(SAME_THREAD_CALLS, |n| {
            same_thread(
                n,
                |s| BoxedCallback::new(confirm_functor(s)),
                BoxedCallback::call,
            )
        }));
        // One consumer thread at a time, so that an idle one does not share the cores.
        let relay = Relay::start(RELAY_CAPACITY, Callback::call);
        x_inline.push(time_per_call(CROSS_THREAD_CALLS, |n| {
            relay.run(n, || {
                seq += 1;
                Callback::new(confirm_functor(seq))
            })
        }));
        drop(relay);
        let relay = Relay::start(RELAY_CAPACITY, BoxedCallback::call);
        x_boxed.push(time_per_call(CROSS_THREAD_CALLS, |n| {
            relay.run(n, || {
                seq += 1;
                BoxedCallback::new(confirm_functor(seq))
            })
        }));
    }

    let (direct, inline, boxed) = (median(direct), median(inline), median(boxed));
    let (x_inline, x_boxed) = (median(x_inline), median(x_boxed));
    println!();
    println!("confirm functor (24 bytes of captures), median of {ROUNDS} rounds, ns per callback");
    println!();
    println!("| case                          | ns/callback | vs inline |");
    println!("| ----------------------------- | ----------- | --------- |");
    println!(
        "| same thread: direct (work)    | {direct:>11.2} | {:>8.2}x |",
        direct / inline
    );
    println!(
        "| same thread: inline Callback  | {inline:>11.2} | {:>8.2}x |",
        1.0
    );
    println!(
        "| same thread: BoxedCallback    | {boxed:>11.2} | {:>8.2}x |",
        boxed / inline
    );
    println!(
        "| cross thread: inline Callback | {x_inline:>11.2} | {:>8.2}x |",
        1.0
    );
    println!(
        "| cross thread: BoxedCallback   | {x_boxed:>11.2} | {:>8.2}x |",
        x_boxed / x_inline
    );
    println!();
    let (inline_cost, boxed_cost) = (inline - direct, boxed - direct);
    println!(
        "mechanism cost over the work: inline {inline_cost:.2} ns, boxed {boxed_cost:.2} ns ({:.1}x)",
        boxed_cost / inline_cost.max(0.01)
    );
    println!(
        "cross thread: inline is {:.1}x faster than boxed (a box is freed on another thread \
         than the one that allocated it)",
        x_boxed / x_inline
    );
    compare_dispatch();
}
