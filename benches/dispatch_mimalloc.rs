//! `dispatch_1p1c` of the `dispatch` bench with mimalloc as the global allocator: how much of
//! the boxed variants' cost is the system allocator's, and whether inline callbacks still
//! win against a fast one.
//!
//! One producer (the bench thread) into one processor (`SpinThenPark`, capacity 4096) with
//! one client: our `Callback`s (`inline`), `Confirm` messages (`typed`), `BoxedCallback`
//! as the message of a second dispatcher (`boxed`), and boxed functors over
//! `crossbeam_channel` (`crossbeam_channel_boxed`).
//!
//! Run: `cargo bench --bench dispatch_mimalloc`. Figures: `docs/benchmarks.md`.

mod ours;
mod peers;

use criterion::{Criterion, criterion_group, criterion_main};

use ours::throughput_group;

/// Every allocation of this bench binary, the boxes of the boxed variants included, goes
/// through mimalloc.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// One producer, one processor, under mimalloc.
fn one_producer(c: &mut Criterion) {
    let mut group = throughput_group(c, "dispatch_1p1c_mimalloc");
    ours::bench_ours_then_crossbeam(&mut group, 1);
    group.finish();
}

criterion_group!(benches, one_producer);
criterion_main!(benches);
