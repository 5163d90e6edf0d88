//! zerodispatch: the dispatcher core a message broker links into its own code to move work
//! between its threads without a heap allocation per event.
//!
//! This facade re-exports the member crates. By default, the two a broker's hot path needs:
//!
//! * [`callback`] (`zerodispatch-callback`): [`Callback`], a type-erased
//!   `FnOnce() + Send + 'static` stored in a fixed inline buffer, its spaces ([`Align8`],
//!   [`Align16`], [`DefaultSpace`]) and forms ([`InlineCallback`], [`InlineCallbackWith`],
//!   [`InlineValue`]), [`IntoCallback`] (what every call that takes work accepts: a
//!   closure, or a callback made already), and [`BoxedCallback`], the boxed baseline.
//! * [`core`] (`zerodispatch-core`): the [`Dispatcher`], its processors, clients, events,
//!   flush contract, wake protocol, shutdown and stats. Every item the core re-exports at
//!   its own root (each `pub use` of `zerodispatch_core`'s `lib.rs`: the dispatcher and its
//!   builder, clients, events, futures, errors, ids, configuration and stats) is also at the
//!   root of this crate; the core's two public modules are reached by path: [`counter`] at
//!   the root, `metrics` (feature `metrics`) as `zerodispatch::core::metrics`.
//!
//! And, each behind the feature of its name:
//!
//! | feature | adds | pulls in |
//! | --- | --- | --- |
//! | `broker` | `zerodispatch::broker` (`zerodispatch-broker`): a broker's confirm path on the dispatcher (queues, producer and consumer sessions, cluster routing of confirms) | humantime (its `timer:` intervals) |
//! | `server` | `zerodispatch::server` (`zerodispatch-server`, the broker over TCP) and `zerodispatch::wire` (the protocol's codec); implies `broker` | tokio, clap (for `zd-server`) |
//! | `client` | `zerodispatch::client` (`zerodispatch-client`, a client of the wire protocol) and `zerodispatch::wire` | tokio |
//! | `metrics` | `zerodispatch::core::metrics` and, with `broker`, `zerodispatch::broker::metrics`: statistics exported through the `metrics` crate | metrics |
//! | `tokio` | a blocking call of the core made on a tokio runtime's worker thread panics, naming its async form (on with `server` and `client`) | tokio (`rt` only) |
//! | `testing` | `zerodispatch::testing`'s counting allocator and `assert_no_alloc` (`zerodispatch-testkit`), beside the stepped dispatcher that is always there | nothing |
//!
//! The benches' workload and harnesses are not part of the library: they live in the
//! unpublished `zerodispatch-bench-support` crate beside it.
//!
//! Every error, id, future and space type of the API is named from here:
//!
//! ```
//! use zerodispatch::{
//!     Align8, Align16, BatchError, CallFuture, ConfigError, DefaultSpace, DispatchError,
//!     ExecuteOnAllError, ExecuteOnAllRefusal, Executor, InlineCallback, InlineValue,
//!     ProcessorId, Problem, RegisterError, RegisterRefusal, SyncError,
//! };
//! // And the rest of the core's root, so that none goes missing from the facade:
//! #[allow(unused_imports)]
//! use zerodispatch::{
//!     BoxedCallback, Callback, Client, ClientCallback, ClientEvent, ClientHandle, ClientType,
//!     Context, DispatchBatchFuture, DispatchFuture, Dispatcher, DispatcherBuilder,
//!     DispatcherHandle, Event, InlineCallbackWith, IntoCallback, MAX_CAPACITY, MAX_CORE_ID, MAX_PROCESSORS,
//!     NoMessage, ParseWaitStrategyError, Percentiles, Pinning, Placement, PoolConfig,
//!     ProcessorSnapshot, ShutdownTimedOut, WaitStrategy, counter, AnyClient, EventFor, ToClient,
//!     TimerToken, testing::TestDispatcher, allow_blocking, assert_may_block, may_block,
//! };
//! fn handles_them_all(
//!     _: Option<(BatchError<u8>, ConfigError, DispatchError<u8>, Executor<u8>)>,
//!     _: Option<(ProcessorId, Problem, RegisterError<u8>, RegisterRefusal, SyncError)>,
//!     _: Option<(ExecuteOnAllError<fn(), fn()>, ExecuteOnAllRefusal, CallFuture<'_, u8, u8>)>,
//!     _: Option<(InlineCallback<Align8<64>>, InlineCallback<Align16<32>>, InlineValue<DefaultSpace>)>,
//! ) {
//! }
//! handles_them_all(None, None, None, None);
//! ```
//!
//! Its errors compose: each is `Send + Sync + 'static` and a [`std::error::Error`], so `?`
//! carries it into `anyhow::Error` or `Box<dyn Error + Send + Sync>`:
//!
//! ```
//! use zerodispatch::{ClientType, Dispatcher, NoMessage, PoolConfig};
//!
//! fn start() -> Result<Dispatcher<NoMessage>, Box<dyn std::error::Error + Send + Sync>> {
//!     let dispatcher = Dispatcher::builder()
//!         .pool(ClientType::Queue, PoolConfig::new(1))
//!         .build()?;
//!     let queue = dispatcher.processors(ClientType::Queue)[0];
//!     assert_eq!(dispatcher.call(queue, || 6 * 7)?, 42);
//!     Ok(dispatcher)
//! }
//! start().unwrap().shutdown();
//! ```

#![forbid(unsafe_code)]

pub use zerodispatch_callback as callback;
pub use zerodispatch_callback::{
    Align8, Align16, BoxedCallback, Callback, DefaultSpace, InlineCallback, InlineCallbackWith,
    InlineValue, IntoCallback,
};
pub use zerodispatch_core as core;
// Every item the core re-exports at its root (its `lib.rs`'s `pub use` list, less the
// callback crate's three, exported above): the dispatcher and its builder, clients, events,
// futures, every error and id type, configuration and stats. Written out rather than
// globbed, so that what the facade promises is read here; keep it in step with the core's
// list (the crate docs' first doctest names each through the facade).
pub use zerodispatch_core::{
    AnyClient, BatchError, CallFuture, Client, ClientCallback, ClientEvent, ClientHandle,
    ClientType, ConfigError, Context, DispatchBatchFuture, DispatchError, DispatchFuture,
    Dispatcher, DispatcherBuilder, DispatcherHandle, Event, EventFor, ExecuteOnAllError,
    ExecuteOnAllRefusal, Executor, MAX_CAPACITY, MAX_CORE_ID, MAX_PROCESSORS, NoMessage,
    ParseWaitStrategyError, Percentiles, Pinning, Placement, PoolConfig, Problem, ProcessorId,
    ProcessorSnapshot, RegisterError, RegisterRefusal, ShutdownTimedOut, SyncError, TimerToken,
    ToClient, WaitStrategy, allow_blocking, assert_may_block, may_block,
};
// The histogram crate `Percentiles::of` takes, so that a user needs no dependency of their
// own to summarise latencies the same way.
pub use zerodispatch_core::hdrhistogram;
// Single-writer counters for a client's own figures (see the module): public on purpose,
// the broker's statistics are built from them and so can a user's client's.
pub use zerodispatch_core::counter;

/// Unit tests of a [`Client`] without threads: the stepped dispatcher
/// ([`TestDispatcher`](testing::TestDispatcher), from
/// [`DispatcherBuilder::build_stepped`]) and, with the feature `testing`, the counting
/// allocator that proves a client allocates nothing (`CountingAllocator`,
/// `assert_no_alloc`, `allocations_during`, `proof_main`).
pub mod testing {
    pub use zerodispatch_core::testing::*;
    #[cfg(feature = "testing")]
    pub use zerodispatch_testkit::{
        CountingAllocator, allocations_during, assert_no_alloc, proof_main,
    };
}

#[cfg(feature = "broker")]
pub use zerodispatch_broker as broker;
#[cfg(feature = "client")]
pub use zerodispatch_client as client;
#[cfg(feature = "server")]
pub use zerodispatch_server as server;
#[cfg(any(feature = "server", feature = "client"))]
pub use zerodispatch_wire as wire;

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
