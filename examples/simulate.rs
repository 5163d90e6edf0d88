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
    scenario::quiet_simulated_panics();
    zd::testing::explore_main(
        "cargo run --release --example simulate --",
        2_000,
        scenario::run,
    );
}
