//! What the zerodispatch benches, examples and perftest share, kept out of the library
//! (this crate is not published, and the `zerodispatch` facade exports none of it):
//!
//! * [`workload`]: the confirm-shaped work every bench variant runs, so that differences
//!   measure the mechanism that carries it;
//! * [`measure`]: the harnesses, so that the criterion figures and the `compare` example's
//!   table come from the same code.
//!
//! ```
//! use zerodispatch_bench_support::measure::Relay;
//! use zerodispatch_bench_support::workload::{Confirm, handle_confirm};
//!
//! let relay = Relay::start(64, handle_confirm);
//! let mut seq = 0;
//! let elapsed = relay.run(100, || {
//!     seq += 1;
//!     Confirm::for_seq(seq)
//! });
//! assert!(elapsed.as_nanos() > 0);
//! ```

#![forbid(unsafe_code)]

pub mod measure;
pub mod workload;
