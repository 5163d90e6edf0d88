//! The confirm path under the seeded simulator: a budget of seeds of `simulate/scenario.rs`
//! (`cargo run --release --example simulate_broker -- --seeds N` runs more, `--seed S` one).

#![cfg(not(loom))]

use zerodispatch_broker as zdb;
use zerodispatch_core::testing as zdt;

#[path = "simulate/scenario.rs"]
mod scenario;

/// Seeds a CI run explores (debug build): a few seconds here.
const SEEDS: u64 = if cfg!(miri) { 2 } else { 500 };

#[test]
fn the_broker_keeps_its_invariants_under_every_seed_of_the_budget() {
    let explored = zdt::explore(
        0..SEEDS,
        |seed| format!("cargo run --release --example simulate_broker -- --seed {seed}"),
        scenario::run,
    )
    .unwrap_or_else(|failure| panic!("{failure}"));
    println!(
        "{} seeds, {} steps, {:.0} seeds/s",
        explored.seeds,
        explored.steps,
        explored.seeds_per_second()
    );
}
