//! A bounded queue of many producers and one consumer whose producers claim a run of
//! consecutive slots with one compare-and-swap: the ring under a dispatcher's processor.
//!
//! Producers on any thread [`push`](Ring::push) one event, or [`push_run`](Ring::push_run)
//! a [`Run`] of events gathered on their stack; the one [`Consumer`] pops them in order.
//! It is crossbeam's `ArrayQueue` (slots stamped with the position they may hold next, a
//! lap and an index in one word) with two changes, each for a cost that queue pays per
//! event:
//!
//! - a producer claims `n` slots with one compare-and-swap of the tail, where `ArrayQueue`
//!   takes one per event, so a batch of 16 pays one locked instruction and one transfer of
//!   the tail's line instead of 16;
//! - the one consumer moves the head with a plain store, where `ArrayQueue`'s consumers
//!   race for it with a compare-and-swap.
//!
//! ```
//! use zerodispatch_ring::Ring;
//!
//! let ring = Ring::new(2);
//! assert_eq!(ring.push("a"), Ok(()));
//! assert_eq!(ring.push("b"), Ok(()));
//! assert_eq!(ring.push("c"), Err("c"), "full: handed back at once");
//! let mut consumer = ring.consumer().expect("the one consumer");
//! assert!(ring.consumer().is_none(), "one at a time");
//! assert_eq!(consumer.pop(), Some("a"));
//! assert_eq!(ring.push("c"), Ok(()));
//! assert_eq!((consumer.pop(), consumer.pop(), consumer.pop()), (Some("b"), Some("c"), None));
//! ```
//!
//! Model-checked with `loom` (`src/loom.rs`: producers of runs and of single events racing
//! a consumer across the ring's end), and its `unsafe` run under Miri (`src/tests.rs`):
//!
//! ```text
//! RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS=3 cargo test -p zerodispatch-ring --release loom
//! cargo +nightly miri test -p zerodispatch-ring
//! ```

mod positions;
mod ring;
mod run;
mod sync;

#[cfg(all(test, loom))]
mod loom;
#[cfg(all(test, not(loom)))]
mod tests;

pub use ring::{Consumer, Full, Ring};
pub use run::Run;
