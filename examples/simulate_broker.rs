//! The broker's confirm path under the seeded simulator of `zerodispatch::testing`: one
//! scenario (producers anonymous, named and timed; consumers with credit and explicit
//! confirms; fanout; replication with a quorum; reconnections of named producers; more
//! names than the broker's table holds; tiny queues; a shutdown in mid-stream) checked against its invariants over many seeds, each a
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
    zdt::explore_main(
        "cargo run --release --features broker --example simulate_broker --",
        2_000,
        scenario::run,
    );
}
