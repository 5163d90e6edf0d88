//! Clients: where one is registered, its unregistration, and the processors' statistics.

use crate::client::Client;
use crate::error::{DispatchError, RegisterError, RegisterRefusal};
use crate::event::Item;
use crate::ids::{ClientHandle, ClientType, ProcessorId};
use crate::room::Wait;
use crate::stats::ProcessorSnapshot;

use super::DispatcherHandle;

/// Where to register a client.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Placement {
    /// On the processor of its type with the fewest clients (ties: the lowest index).
    #[default]
    LeastLoaded,
    /// On this processor of its type.
    Processor(u16),
}

impl<M: Send + 'static> DispatcherHandle<M> {
    /// Registers `client` on a processor of `client_type`; it is owned by that processor's
    /// thread from now on. Every event dispatched with the returned handle after this
    /// returns, from any thread and by any route (straight to the queue, or through a
    /// processor's outbox), reaches the client.
    ///
    /// The client is handed to the processor before this returns, not queued to it (the
    /// protocol is in `slots.rs`): the processor takes it in at the first event for it, and
    /// drops it on its own thread at shutdown if it never got one. So `register` never
    /// waits for room in a queue and never goes through an outbox: on a processor thread it
    /// keeps the rule that no processor waits for another, and a handler may register a
    /// client and hand its handle to other threads at once. (A registration queued behind
    /// a full queue, as before, could be overtaken by another thread's first event to the
    /// handle, which the processor then dropped as stale.)
    ///
    /// Allocates (the client is boxed, a slot's first use grows the tables): registration
    /// is not on the event path.
    ///
    /// # Errors
    ///
    /// [`RegisterError`] says why ([`RegisterRefusal`]: `NoProcessors`, `NoSuchProcessor`,
    /// `TableFull`, `ShutDown`) and hands the client back, unregistered.
    pub fn register<C: Client<M>>(
        &self,
        client_type: ClientType,
        client: C,
        placement: Placement,
    ) -> Result<ClientHandle<C>, RegisterError<C>> {
        let pool = &self.shared.pools[client_type.index()];
        if pool.is_empty() {
            return Err(RegisterError::new(
                RegisterRefusal::NoProcessors(client_type),
                client,
            ));
        }
        let processor = match placement {
            Placement::Processor(index) => match pool.get(usize::from(index)) {
                Some(processor) => processor,
                None => {
                    let id = ProcessorId { client_type, index };
                    return Err(RegisterError::new(
                        RegisterRefusal::NoSuchProcessor(id),
                        client,
                    ));
                }
            },
            Placement::LeastLoaded => pool
                .iter()
                .min_by_key(|p| p.slots.lock().unwrap_or_else(|e| e.into_inner()).keys.live)
                .expect("the pool is not empty"),
        };
        match processor.hand_in(client) {
            Ok(key) => Ok(ClientHandle::new(self.shared.id, processor.id, key)),
            Err((reason, client)) => Err(RegisterError::new(reason, client)),
        }
    }

    /// Unregisters a client: its processor flushes it if it is on the flush list, then drops
    /// it, in queue order (events dispatched to it before this call reach it first). Later
    /// events with this handle are dropped and counted as `stale`.
    ///
    /// # Errors
    ///
    /// `ShutDown` if shutdown has started (the processor drops its clients itself then),
    /// `NoSuchProcessor` for a handle of another dispatcher.
    #[track_caller]
    pub fn unregister<C>(
        &self,
        handle: ClientHandle<C>,
    ) -> Result<(), DispatchError<ClientHandle<C>>> {
        let Some(target) = self.target(handle) else {
            return Err(DispatchError::NoSuchProcessor(handle));
        };
        let item = Item::Unregister { key: handle.key };
        self.send(target, item, Wait::Forever, ("unregister", ""))
            .map_err(|e| e.map(|_| handle))
    }

    /// Statistics of every processor, read while they run.
    #[must_use]
    pub fn stats(&self) -> Vec<ProcessorSnapshot> {
        self.shared
            .processors()
            .map(|p| {
                let clients = p.slots.lock().unwrap_or_else(|e| e.into_inner()).keys.live;
                p.stats
                    .snapshot(p.id, || p.queue.len(), clients, p.timers.in_use())
            })
            .collect()
    }
}
