//! The dispatcher core under the seeded simulator of `zerodispatch::testing`: one scenario
//! (clients on every pool forwarding through their outboxes, tiny queues, timers, panics,
//! goodbyes dispatched from drops, a shutdown in mid-stream) checked against its invariants
//! over many seeds. A failing seed is printed with its last steps and the command that
//! replays it.
//!
//! ```sh
//! cargo run --release --example simulate -- --seeds 20000
//! cargo run --release --example simulate -- --seed 1234
//! ```
//!
//! The scenario, and its invariants, are `crates/core/tests/simulate/scenario.rs`; the
//! way to drive your own clients the same way is `zerodispatch::testing::Simulator`.

use zerodispatch as zd;

#[path = "../crates/core/tests/simulate/scenario.rs"]
mod scenario;

fn main() {
    let mut args = std::env::args().skip(1);
    let mut seeds = 0..2_000_u64;
    while let Some(arg) = args.next() {
        let mut value = || -> u64 {
            args.next()
                .and_then(|v| v.parse().ok())
                .unwrap_or_else(|| panic!("{arg} takes a number"))
        };
        match arg.as_str() {
            "--seeds" => seeds = 0..value(),
            "--seed" => {
                let seed = value();
                seeds = seed..seed + 1;
            }
            "--from" => {
                let from = value();
                seeds = from..from + (seeds.end - seeds.start);
            }
            other => {
                eprintln!("usage: simulate [--seeds N] [--from S] [--seed S] (not {other})");
                std::process::exit(2);
            }
        }
    }
    scenario::quiet_simulated_panics();
    let replay = |seed| format!("cargo run --release --example simulate -- --seed {seed}");
    match zd::testing::explore(seeds, replay, scenario::run) {
        Ok(explored) => println!(
            "{} seeds passed, {} steps, in {:.2} s: {:.0} seeds/s",
            explored.seeds,
            explored.steps,
            explored.elapsed.as_secs_f64(),
            explored.seeds_per_second()
        ),
        Err(failure) => {
            eprintln!("{failure}");
            std::process::exit(1);
        }
    }
}
