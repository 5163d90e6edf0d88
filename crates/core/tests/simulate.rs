//! The core under the seeded simulator, a budget of seeds of `simulate/scenario.rs`.

#![cfg(not(loom))]

use zerodispatch_core as zd;

#[path = "simulate/scenario.rs"]
mod scenario;

/// Seeds a CI run explores (debug build): a few seconds here.
const SEEDS: u64 = if cfg!(miri) { 2 } else { 300 };

#[test]
fn the_core_keeps_its_invariants_under_every_seed_of_the_budget() {
    scenario::quiet_simulated_panics();
    let explored = zd::testing::explore(
        0..SEEDS,
        |seed| format!("cargo run --release --example simulate -- --seed {seed}"),
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
