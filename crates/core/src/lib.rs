//! The dispatcher core of zerodispatch: pinned processor threads that pull inline events
//! from bounded lock-free queues and flush their clients when a queue drains.
//!
//! # Shape
//!
//! * Three [client types](ClientType) (session, queue, cluster), each with its own pool of
//!   processors ([`PoolConfig`]). A processor is one OS thread (`zd-queue-0`, ...),
//!   optionally pinned to a core, draining one `crossbeam_queue::ArrayQueue` of events.
//! * [Clients](Client) are registered once and owned by one processor thread; events name
//!   them by a [`ClientHandle`]. Nothing on the event path allocates.
//! * [Events](Event): a callback through the client, or a typed message `M` of the
//!   broker's own through the client. A dispatcher callback, which flushes first and
//!   bypasses the clients, goes to a processor instead
//!   ([`execute`](DispatcherHandle::execute), [`call`](DispatcherHandle::call)). Callbacks
//!   are [`Callback`]s: inline, never boxed.
//! * The flush contract is written on [`Client`]; the wake protocol in `wake.rs`, the
//!   shutdown gate in `gate.rs`, the outbox (how a processor hands events to another
//!   without ever waiting for it) in `outbox.rs`, the processor loop in `processor/runner.rs`,
//!   shutdown on [`Dispatcher`].
//!
//! # Example
//!
//! ```
//! use std::sync::atomic::{AtomicU64, Ordering};
//! use std::sync::Arc;
//! use zerodispatch_core::*;
//!
//! /// A queue that counts confirms and "sends" on flush.
//! struct Queue { pending: u64, sent: Arc<AtomicU64> }
//!
//! impl Client<u64> for Queue {
//!     fn on_event(&mut self, event: ClientEvent<u64>, _ctx: &mut Context<u64>) {
//!         match event {
//!             ClientEvent::Message(confirms) => self.pending += confirms,
//!             ClientEvent::Callback(cb) => cb.call(),
//!         }
//!     }
//!     fn flush(&mut self, _ctx: &mut Context<u64>) {
//!         self.sent.fetch_add(std::mem::take(&mut self.pending), Ordering::Relaxed);
//!     }
//! }
//!
//! let dispatcher = Dispatcher::<u64>::builder()
//!     .pool(ClientType::Queue, PoolConfig::new(1))
//!     .build()?;
//! let sent = Arc::new(AtomicU64::new(0));
//! let queue = dispatcher.register(
//!     ClientType::Queue,
//!     Queue { pending: 0, sent: sent.clone() },
//!     Placement::LeastLoaded,
//! )?;
//! for _ in 0..10 {
//!     dispatcher.dispatch(queue, Event::Message(1))?;
//! }
//! dispatcher.synchronize(queue)?;
//! assert_eq!(sent.load(Ordering::Relaxed), 10);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

#![forbid(unsafe_code)]

mod blocking;
mod builder;
mod call;
mod client;
mod clock;
mod config;
// Public on purpose: single-writer counters are how a client owned by one processor
// publishes its own figures without a locked instruction per event; the broker's
// statistics are built from them, and a user's clients can be too.
pub mod counter;
mod dispatcher;
mod error;
mod event;
mod executor;
mod gate;
mod handle;
mod ids;
#[cfg(feature = "metrics")]
pub mod metrics;
mod monitor;
mod outbox;
mod pack;
mod percentiles;
mod processor;
mod room;
mod slots;
mod stats;
mod sync;
pub mod testing;
mod timers;
mod waiters;
mod wake;

#[cfg(all(test, loom))]
mod loom;

pub use blocking::{allow_blocking, assert_may_block, may_block};
pub use builder::DispatcherBuilder;
pub use client::{Client, ClientCallback, ClientEvent, Context};
pub use config::{
    ConfigError, MAX_CAPACITY, MAX_CORE_ID, MAX_PROCESSORS, ParseWaitStrategyError, PoolConfig,
    Problem, WaitStrategy,
};
pub use dispatcher::{Dispatcher, NoMessage};
pub use error::{
    BatchError, DispatchError, ExecuteOnAllError, ExecuteOnAllRefusal, RegisterError,
    RegisterRefusal, ShutdownTimedOut, SyncError,
};
pub use event::{Event, EventFor, ToClient};
pub use executor::Executor;
pub use handle::DispatcherHandle;
pub use handle::clients::Placement;
pub use handle::door::{CallFuture, DispatchBatchFuture, DispatchFuture};
/// The histogram crate [`Percentiles::of`] takes, re-exported so that a user summarises
/// their own latencies without naming a dependency of their own (a public dependency: a
/// new major version of it is a breaking change of this crate).
pub use hdrhistogram;
pub use ids::{AnyClient, ClientHandle, ClientType, ProcessorId};
pub use percentiles::Percentiles;
pub use stats::{Pinning, ProcessorSnapshot};
pub use timers::TimerToken;
pub use zerodispatch_callback::{BoxedCallback, Callback, IntoCallback};

#[doc(hidden)]
pub mod __private {
    //! Sizes for tests; not part of the API.
    /// `size_of` of a queued item for message type `M`.
    #[must_use]
    pub const fn item_size<M>() -> usize {
        std::mem::size_of::<crate::event::Item<M>>()
    }

    /// Where a queued callback event's key and callback lie, in bytes from the start of
    /// its item: `(key, callback)`.
    #[must_use]
    pub fn callback_item_offsets() -> (usize, usize) {
        use crate::event::Item;
        let key = crate::ids::ClientKey {
            slot: 0,
            generation: 0,
        };
        let item = Item::<()>::new(key, crate::Event::Callback(crate::Callback::new(|| {})));
        let Item::Callback { key, callback } = &item else {
            unreachable!("`Item::new` keeps a callback event a callback")
        };
        let start = std::ptr::from_ref(&item).addr();
        (
            std::ptr::from_ref(key).addr() - start,
            std::ptr::from_ref(callback).addr() - start,
        )
    }
}
