//! The cloneable handle every producer and client dispatches through, and the state all
//! handles of a dispatcher share. This file holds the two types and what names a
//! processor; each concern of the handle's calls has a file of its own:
//!
//! * `send.rs`: the send path every dispatch takes (a processor's outbox, or an
//!   application thread's wait for room), and the check of blocking calls;
//! * `dispatch.rs`: the forms of dispatch, one event or a batch, waiting or not;
//! * `door.rs`: their async forms, and `call_async` (futures that never block a thread);
//! * `call.rs`: work run on a processor: `execute`, `call`, `synchronize`,
//!   `execute_on_all`;
//! * `timers.rs`: `schedule`, `cancel`, and the clock they are measured on;
//! * `clients.rs`: `register`, `unregister`, [`Placement`], and `stats`.

pub(crate) mod call;
pub(crate) mod clients;
mod dispatch;
pub(crate) mod door;
pub(crate) mod send;
mod timers;

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::clock::Clock;
use crate::config::GlobalConfig;
use crate::ids::{ClientHandle, ClientType, ProcessorId};
use crate::processor::{ProcessorShared, current_processor};
use crate::testing::steps::Steps;

/// What all handles share.
pub(crate) struct Shared<M> {
    pub(crate) id: u64,
    pub(crate) pools: [Box<[Arc<ProcessorShared<M>>]>; 3],
    pub(crate) global: GlobalConfig,
    pub(crate) shutting_down: AtomicBool,
    /// What timers are measured on.
    pub(crate) clock: Clock,
    /// A stepped dispatcher ([`testing`](crate::testing)): no processor threads; nothing
    /// waits for room (a full queue hands the event back), and `call` steps the processors.
    pub(crate) stepped: bool,
    /// A stepped dispatcher's processors, run by its test's thread; taken at its shutdown
    /// (they hold handles to this state: taking them ends the cycle).
    pub(crate) runners: std::sync::OnceLock<Box<dyn Steps>>,
}

impl<M> Shared<M> {
    pub(crate) fn processors(&self) -> impl Iterator<Item = &Arc<ProcessorShared<M>>> {
        self.pools.iter().flat_map(|p| p.iter())
    }

    pub(crate) fn is_shutting_down(&self) -> bool {
        self.shutting_down.load(Ordering::Acquire)
    }
}

/// A cloneable handle to a running dispatcher: dispatch events, register clients,
/// synchronize, read stats.
///
/// Handles are cheap to clone (one `Arc`) and stay usable after shutdown, when every
/// dispatch hands its event back with [`DispatchError::ShutDown`](crate::DispatchError::ShutDown).
///
/// # Blocking calls and async runtimes
///
/// `dispatch`, `dispatch_batch` and their timed forms, `execute`, `synchronize`, `call`,
/// `unregister` and `execute_on_all` may park the calling thread (for room in a full queue,
/// or for an answer). With the feature `tokio` (on with the facade's `server` and
/// `client`), each of them made on a tokio runtime's worker thread panics, whether or not
/// it would have had to wait, with a message naming its async form (`dispatch_async`,
/// `dispatch_batch_async`, `call_async`), as tokio's `blocking_send` does: on such a thread
/// use those, `try_dispatch`, or `tokio::task::spawn_blocking`. Processor threads and any
/// thread outside the runtime are not affected.
pub struct DispatcherHandle<M> {
    pub(crate) shared: Arc<Shared<M>>,
}

impl<M> Clone for DispatcherHandle<M> {
    fn clone(&self) -> Self {
        Self {
            shared: self.shared.clone(),
        }
    }
}

impl<M> fmt::Debug for DispatcherHandle<M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DispatcherHandle")
            .field("id", &self.shared.id)
            .finish_non_exhaustive()
    }
}

impl<M: Send + 'static> DispatcherHandle<M> {
    pub(crate) fn id(&self) -> u64 {
        self.shared.id
    }

    pub(crate) fn processor(&self, id: ProcessorId) -> Option<&Arc<ProcessorShared<M>>> {
        self.shared.pools[id.client_type.index()].get(usize::from(id.index))
    }

    /// The processor a handle names, if the handle is this dispatcher's.
    #[inline]
    pub(crate) fn target<C>(&self, handle: ClientHandle<C>) -> Option<&Arc<ProcessorShared<M>>> {
        if handle.dispatcher != self.shared.id {
            return None;
        }
        self.processor(handle.processor)
    }

    /// The processor of this dispatcher whose thread is the calling thread, if any.
    #[inline]
    pub(crate) fn current(&self) -> Option<&Arc<ProcessorShared<M>>> {
        match current_processor() {
            Some((dispatcher, id)) if dispatcher == self.shared.id => self.processor(id),
            _ => None,
        }
    }

    /// Which of this dispatcher's processors the calling thread is, if it is one of them.
    /// A thread-local read. On a processor thread nothing waits for a processor: a
    /// blocking dispatch goes through the processor's outbox, `synchronize` is refused.
    ///
    /// ```
    /// # use zerodispatch_core::*;
    /// let d = Dispatcher::<NoMessage>::builder().pool(ClientType::Queue, PoolConfig::new(1)).build()?;
    /// assert_eq!(d.current_processor(), None); // an application thread
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[must_use]
    pub fn current_processor(&self) -> Option<ProcessorId> {
        self.current().map(|p| p.id)
    }

    /// Whether the current thread is the processor thread that owns `handle`'s client.
    /// A thread-local read: no syscall.
    #[must_use]
    pub fn in_dispatcher_thread<C>(&self, handle: ClientHandle<C>) -> bool {
        handle.dispatcher == self.shared.id
            && current_processor() == Some((self.shared.id, handle.processor))
    }

    /// The processors of `client_type`.
    #[must_use]
    pub fn processors(&self, client_type: ClientType) -> Vec<ProcessorId> {
        self.shared.pools[client_type.index()]
            .iter()
            .map(|p| p.id)
            .collect()
    }
}
