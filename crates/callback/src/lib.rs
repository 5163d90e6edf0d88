//! Callbacks that never allocate: a type-erased `FnOnce() + Send + 'static` stored in a
//! fixed inline buffer.
//!
//! A message broker moves every unit of work between its threads as an event carrying a
//! callback. Boxing that callback costs an allocation on one thread and a free on another
//! for every event. [`Callback`] keeps the closure in a fixed space inside the event
//! instead, and refuses at compile time a closure that would not fit, so "inline" is a
//! guarantee rather than a hope. [`BoxedCallback`] is the boxed baseline with the same
//! API, for side-by-side measurement.
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

mod boxed;
mod callback;
pub mod space;
mod value;

pub use boxed::BoxedCallback;
pub use callback::{Callback, InlineCallback, InlineCallbackWith};
pub use space::{Align8, Align16, DefaultSpace};
pub use value::InlineValue;
