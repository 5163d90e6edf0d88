//! zerodispatch: the dispatcher core a message broker links into its own code to move work
//! between its threads without a heap allocation per event.
//!
//! This facade re-exports the member crates:
//!
//! * [`callback`] (`zerodispatch-callback`): [`Callback`], a type-erased
//!   `FnOnce() + Send + 'static` stored in a fixed inline buffer, and [`BoxedCallback`],
//!   the boxed baseline.
//! * [`core`] (`zerodispatch-core`): the [`Dispatcher`], its processors, clients, events,
//!   flush contract, wake protocol, shutdown and stats.
//! * [`broker`] (`zerodispatch-broker`): a message broker's confirm path built on the
//!   dispatcher: queues, producer and consumer sessions, cluster routing of confirms, in
//!   the three confirm modes (inline functor, typed message, boxed functor).
//!
//! The benches' workload and harnesses are not part of the library: they live in the
//! unpublished `zerodispatch-bench-support` crate beside it.
//!
//! Every error and id type of the core's API is named from here too:
//!
//! ```
//! use zerodispatch::{
//!     BatchError, ConfigError, DispatchError, Executor, ProcessorId, Problem, RegisterError,
//!     SyncError,
//! };
//! fn handles_them_all(
//!     _: Option<(BatchError<u8>, ConfigError, DispatchError<u8>, Executor<u8>)>,
//!     _: Option<(ProcessorId, Problem, RegisterError, SyncError)>,
//! ) {
//! }
//! handles_them_all(None, None);
//! ```

#![forbid(unsafe_code)]

pub use zerodispatch_broker as broker;
pub use zerodispatch_callback as callback;
pub use zerodispatch_callback::{BoxedCallback, Callback, InlineCallback, InlineCallbackWith};
pub use zerodispatch_core as core;
// Every public item of the core's API that an application names: the dispatcher and its
// builder, clients, events, every error and id type, configuration and stats.
pub use zerodispatch_core::{
    BatchError, Client, ClientCallback, ClientEvent, ClientHandle, ClientType, ConfigError,
    Context, DispatchBatchFuture, DispatchError, DispatchFuture, Dispatcher, DispatcherBuilder,
    DispatcherHandle, Event, Executor, MAX_CAPACITY, MAX_CORE_ID, MAX_PROCESSORS, NoMessage,
    ParseWaitStrategyError, Percentiles, Pinning, Placement, PoolConfig, Problem, ProcessorId,
    ProcessorSnapshot, RegisterError, ShutdownTimedOut, SyncError, WaitStrategy,
};

/// The bench harness is not part of the library: the facade exports neither `workload`
/// nor `measure`.
///
/// ```compile_fail
/// use zerodispatch::workload::handle_confirm;
/// ```
///
/// ```compile_fail
/// use zerodispatch::measure::Relay;
/// ```
#[cfg(doctest)]
pub struct NoBenchHarness;

/// The README's code blocks, compiled and run as doctests so that they stay true.
#[doc = include_str!("../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;
