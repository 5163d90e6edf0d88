//! The broker's confirm path under the seeded simulator of `zerodispatch::testing`: one
//! scenario (producers anonymous, named and timed; consumers with credit and explicit
//! confirms; fanout; replication with a quorum; reconnections of named producers; tiny
//! queues; a shutdown in mid-stream) checked against its invariants over many seeds, each a
//! broker on a stepped dispatcher (`Broker::start_stepped`). A failing seed is printed with
//! its last steps and the command that replays it.
//!
//! ```sh
//! cargo run --release --example simulate_broker -- --seeds 20000
//! cargo run --release --example simulate_broker -- --seed 1234
//! ```
//!
//! The scenario, and its invariants, are `crates/broker/tests/simulate/scenario.rs`; the
//! way to drive your own broker the same way is `zerodispatch::broker::BrokerSimulator`.

use zerodispatch::broker as zdb;
use zerodispatch::testing as zdt;

#[path = "../crates/broker/tests/simulate/scenario.rs"]
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
                eprintln!("usage: simulate_broker [--seeds N] [--from S] [--seed S] (not {other})");
                std::process::exit(2);
            }
        }
    }
    let replay = |seed| format!("cargo run --release --example simulate_broker -- --seed {seed}");
    match zdt::explore(seeds, replay, scenario::run) {
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
