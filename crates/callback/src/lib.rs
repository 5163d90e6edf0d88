//! Callbacks that never allocate: a type-erased `FnOnce() + Send + 'static` stored in a
//! fixed inline buffer.
//!
//! A message broker moves every unit of work between its threads as an event carrying a
//! callback. Boxing that callback costs an allocation on one thread and a free on another
//! for every event. [`Callback`] keeps the closure in a fixed space inside the event
//! instead, and refuses at compile time a closure that would not fit, so "inline" is a
//! guarantee rather than a hope (at `cargo build`, not at `cargo check`: see
//! [below](#when-the-size-check-runs)). [`BoxedCallback`] is the boxed baseline with the
//! same API, for side-by-side measurement. A function that takes work takes
//! [`impl IntoCallback`](IntoCallback): a closure, or a callback prepared earlier, passed on
//! without a second wrapper.
//!
//! ```
//! use zerodispatch_callback::{Align8, Callback, InlineCallback};
//!
//! // The default space (32 bytes) holds a confirm functor...
//! let (queue, guid, sub_queue) = (3_u32, [7_u8; 16], 0_u32);
//! Callback::new(move || assert_eq!((queue, guid[15], sub_queue), (3, 7, 0))).call();
//!
//! // ...a larger one is a type parameter away, and a rare outsized one can spill.
//! let big = [1_u64; 6];
//! InlineCallback::<Align8<48>>::new(move || assert_eq!(big.iter().sum::<u64>(), 6)).call();
//! let huge = [2_u64; 32];
//! let spilled = Callback::spill(move || assert_eq!(huge[31], 2));
//! assert!(!spilled.is_inline());
//! spilled.call();
//! ```
//!
//! # When the size check runs
//!
//! A closure (or an [`InlineValue`]'s value) that is larger or more aligned than its space
//! is a compile error, whose message gives the two sizes (or alignments) and the ways out:
//!
//! ```text
//! error[E0080]: evaluation panicked: zerodispatch: this closure is 40 bytes, more than the
//! 32 bytes of its inline space (Align8<32>). Capture less (an index, a handle or an `Arc`
//! rather than the data), use a larger space: `InlineCallback::<Align8<40>>::new(f)`, or
//! `Callback::spill(f)`, which allocates
//! ...
//! note: the above error was encountered while instantiating `fn InlineCallback::<Align8<32>>::new::<{closure@src/main.rs:6:19: 6:26}>`
//!  --> src/main.rs:6:5
//! ```
//!
//! It is raised only when code is generated: `cargo build`, `cargo test`,
//! `cargo run` and the `compile_fail` doctests reject it, while `cargo check`, `cargo
//! clippy` and an IDE (rust-analyzer runs `cargo check`) accept it without a word.
//!
//! Why, on stable Rust: a bound such as `where [(); size_of::<S>() - size_of::<F>()]:`
//! needs the unstable `generic_const_exprs`, so the check cannot be part of `new`'s
//! signature, where type checking would see it. It is an inline `const { assert!(..) }`
//! block in the body of the generic `new::<F>`, and a constant that depends on a generic
//! parameter can only be evaluated once that parameter is known, that is, when the
//! compiler instantiates `new` for the caller's concrete closure type while generating
//! code (monomorphization). An error found there is a *post-monomorphization* error, and
//! `cargo check` stops before monomorphization. For the same reason, a `new` inside a
//! generic function of yours is checked for each type that function is built with, when it
//! is built. `crates/callback/tests/compile_fail.rs` runs its cases under `cargo build` for
//! this reason.

mod boxed;
mod callback;
mod fit;
mod into;
pub mod space;
mod value;

pub use boxed::BoxedCallback;
pub use callback::{Callback, InlineCallback, InlineCallbackWith};
pub use into::IntoCallback;
pub use space::{Align8, Align16, DefaultSpace};
pub use value::InlineValue;
