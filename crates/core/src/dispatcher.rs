//! The dispatcher: the owner of a running dispatcher's threads, which shuts it down. Its
//! builder is in `builder.rs`, the handle producers dispatch through in `handle.rs`.
//!
//! # Shutdown
//!
//! [`Dispatcher::shutdown`] (also run when the `Dispatcher` is dropped):
//!
//! 1. marks the dispatcher as shutting down and stops the monitor thread;
//! 2. for each client type in the shutdown order (queue, session, cluster unless
//!    configured otherwise): closes the dispatch gate of each of its processors, so that
//!    every later dispatch to them hands its event back (`ShutDown`); tells the processors
//!    to stop; each drains its queue until its gate is settled (every event accepted
//!    before the close popped, those still kept in other processors' outboxes included),
//!    flushes its clients, drops them and exits; and joins them.
//!
//! Nothing accepted is lost: an event is either handed back to its producer or run, and
//! the clients are flushed after their last event. Processors of a type still running can
//! dispatch to one already stopped and get their event back.

use crate::sync::thread::{self, JoinHandle};
use std::fmt;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use zerodispatch_callback::Callback;

use crate::builder::DispatcherBuilder;
use crate::client::{Client, ClientHandle, ClientType, ProcessorId};
use crate::door::{CallFuture, DispatchBatchFuture, DispatchFuture};
use crate::error::{
    BatchError, DispatchError, ExecuteOnAllError, RegisterError, ShutdownTimedOut, SyncError,
};
use crate::event::Event;
use crate::executor::Executor;
use crate::handle::{DispatcherHandle, Placement, Shared};
use crate::monitor;
use crate::stats::ProcessorSnapshot;

/// A message type for dispatchers that carry callbacks only.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NoMessage {}

/// The owner of a running dispatcher: its processor threads and its monitor.
///
/// Dispatch through it, or through a [`handle`](Dispatcher::handle) (cloneable, for
/// other threads and for clients); both offer the same calls. It is not a smart pointer to
/// its handle (no `Deref`):
///
/// ```compile_fail
/// # use zerodispatch_core::*;
/// let d = Dispatcher::<u64>::builder().pool(ClientType::Queue, PoolConfig::new(1)).build().unwrap();
/// let handle: &DispatcherHandle<u64> = &d; // no deref coercion: use `d.handle()`
/// ```
///
/// Dropping the dispatcher
/// shuts it down (see the module documentation of the shutdown order).
#[must_use = "dropping the Dispatcher shuts it down: keep it for as long as its handles are used"]
pub struct Dispatcher<M: Send + 'static> {
    pub(crate) handle: DispatcherHandle<M>,
    pub(crate) threads: Vec<(ProcessorId, JoinHandle<()>)>,
    pub(crate) monitor: Option<monitor::Monitor>,
}

impl<M: Send + 'static> Dispatcher<M> {
    /// A builder with no pools configured.
    pub fn builder() -> DispatcherBuilder<M> {
        DispatcherBuilder::new()
    }

    /// A handle to dispatch through; clone it for each producer.
    #[must_use]
    pub fn handle(&self) -> DispatcherHandle<M> {
        self.handle.clone()
    }

    /// Shuts down as [`shutdown`](Self::shutdown) does, but waits at most `timeout` for the
    /// processors to exit: one stuck in user code does not hold the caller. Every gate is
    /// closed and every processor told to stop either way; those still running at the
    /// deadline are named in the error and finish on their own (draining, flushing and
    /// dropping their clients when their handler returns). Idempotent, like `shutdown`.
    /// On one of its own processor threads it cannot wait at all: it starts the shutdown on
    /// a thread of its own, as `shutdown` does, and returns `Ok`.
    ///
    /// # Errors
    ///
    /// [`ShutdownTimedOut`] with the processors still running at the deadline.
    pub fn shutdown_timeout(&mut self, timeout: Duration) -> Result<(), ShutdownTimedOut> {
        if self.handle.current().is_some() {
            self.shutdown();
            return Ok(());
        }
        let deadline = std::time::Instant::now() + timeout;
        let shared = self.handle.shared.clone();
        shared.shutting_down.store(true, Ordering::Release);
        let threads = std::mem::take(&mut self.threads);
        let unfinished = shut_down(&shared, threads, self.monitor.take(), Some(deadline));
        if unfinished.is_empty() {
            Ok(())
        } else {
            Err(ShutdownTimedOut { unfinished })
        }
    }

    /// Shuts down in order, draining every queue and flushing every client, and joins every
    /// thread. Idempotent.
    ///
    /// Called on one of this dispatcher's own processor threads (a client that drops the
    /// dispatcher, or the broker that owns it), it cannot join that thread, which is busy
    /// running the caller: the same ordered shutdown then runs on a thread of its own
    /// (`zd-shutdown`), and this call returns at once; every processor, the caller's
    /// included, stops and drops its clients shortly after the caller's handler returns.
    pub fn shutdown(&mut self) {
        let shared = self.handle.shared.clone();
        shared.shutting_down.store(true, Ordering::Release);
        let threads = std::mem::take(&mut self.threads);
        let monitor = self.monitor.take();
        if self.handle.current().is_none() {
            shut_down(&shared, threads, monitor, None);
            return;
        }
        let on_its_own = shared.clone();
        let spawned = thread::Builder::new()
            .name("zd-shutdown".into())
            .spawn(move || drop(shut_down(&on_its_own, threads, monitor, None)));
        if let Err(e) = spawned {
            // No thread to join from: stop everything without joining. The threads (and
            // the monitor, which stops when it sees the shutdown flag) exit on their own.
            tracing::error!(error = %e, "cannot spawn the shutdown thread; processors stop unjoined");
            for processor in shared.processors() {
                processor.close();
            }
            for processor in shared.processors() {
                processor.request_stop();
            }
        }
    }
}

/// The ordered shutdown of the module docs: pool by pool, close every gate, tell every
/// processor to stop (each exits once its gate is settled), join. With a `deadline`, a
/// processor that has not exited by then is left to finish on its own (its thread
/// detached) and named in the result; the pools after it are still closed and stopped.
fn shut_down<M: Send + 'static>(
    shared: &Shared<M>,
    mut threads: Vec<(ProcessorId, JoinHandle<()>)>,
    monitor: Option<monitor::Monitor>,
    deadline: Option<std::time::Instant>,
) -> Vec<ProcessorId> {
    if let Some(monitor) = monitor {
        monitor.stop();
    }
    let mut unfinished = Vec::new();
    for client_type in shared.global.shutdown_order {
        let pool = &shared.pools[client_type.index()];
        for processor in pool.iter() {
            processor.close();
        }
        for processor in pool.iter() {
            processor.request_stop();
        }
        let (now, later): (Vec<_>, Vec<_>) = threads
            .into_iter()
            .partition(|(id, _)| id.client_type == client_type);
        threads = later;
        for (id, thread) in now {
            if let Some(deadline) = deadline {
                let processor = &pool[usize::from(id.index)];
                // Acquire: pairs with the processor's last store.
                while !processor.exited.load(Ordering::Acquire)
                    && std::time::Instant::now() < deadline
                {
                    std::thread::sleep(Duration::from_millis(1));
                }
                if !processor.exited.load(Ordering::Acquire) {
                    tracing::warn!(processor = %id, "processor still running at the shutdown deadline; left to finish on its own");
                    unfinished.push(id);
                    continue; // dropping the handle detaches the thread
                }
            }
            if thread.join().is_err() {
                tracing::error!(processor = %id, "processor thread panicked outside a handler");
            }
        }
    }
    unfinished
}

/// The owner offers every call of the handle (it does not `Deref` to it: a `Dispatcher` is
/// not a smart pointer to its handle). Each is [`DispatcherHandle`]'s, documented there.
impl<M: Send + 'static> Dispatcher<M> {
    /// [`DispatcherHandle::try_dispatch`].
    ///
    /// # Errors
    ///
    /// As [`DispatcherHandle::try_dispatch`].
    #[inline]
    pub fn try_dispatch(
        &self,
        to: ClientHandle,
        event: Event<M>,
    ) -> Result<(), DispatchError<Event<M>>> {
        self.handle.try_dispatch(to, event)
    }

    /// [`DispatcherHandle::dispatch`].
    ///
    /// # Errors
    ///
    /// As [`DispatcherHandle::dispatch`].
    #[inline]
    pub fn dispatch(
        &self,
        to: ClientHandle,
        event: Event<M>,
    ) -> Result<(), DispatchError<Event<M>>> {
        self.handle.dispatch(to, event)
    }

    /// [`DispatcherHandle::dispatch_timeout`].
    ///
    /// # Errors
    ///
    /// As [`DispatcherHandle::dispatch_timeout`].
    #[inline]
    pub fn dispatch_timeout(
        &self,
        to: ClientHandle,
        event: Event<M>,
        timeout: Duration,
    ) -> Result<(), DispatchError<Event<M>>> {
        self.handle.dispatch_timeout(to, event, timeout)
    }

    /// [`DispatcherHandle::dispatch_deadline`].
    ///
    /// # Errors
    ///
    /// As [`DispatcherHandle::dispatch_deadline`].
    #[inline]
    pub fn dispatch_deadline(
        &self,
        to: ClientHandle,
        event: Event<M>,
        deadline: Instant,
    ) -> Result<(), DispatchError<Event<M>>> {
        self.handle.dispatch_deadline(to, event, deadline)
    }

    /// [`DispatcherHandle::dispatch_callback`].
    ///
    /// # Errors
    ///
    /// As [`DispatcherHandle::dispatch_callback`].
    #[inline]
    pub fn dispatch_callback<F>(
        &self,
        to: ClientHandle,
        f: F,
    ) -> Result<(), DispatchError<Event<M>>>
    where
        F: FnOnce() + Send + 'static,
    {
        self.handle.dispatch_callback(to, f)
    }

    /// [`DispatcherHandle::try_dispatch_batch`].
    ///
    /// # Errors
    ///
    /// As [`DispatcherHandle::try_dispatch_batch`].
    pub fn try_dispatch_batch(
        &self,
        to: ClientHandle,
        events: &mut impl Iterator<Item = Event<M>>,
    ) -> Result<usize, BatchError<Event<M>>> {
        self.handle.try_dispatch_batch(to, events)
    }

    /// [`DispatcherHandle::dispatch_batch`].
    ///
    /// # Errors
    ///
    /// As [`DispatcherHandle::dispatch_batch`].
    pub fn dispatch_batch(
        &self,
        to: ClientHandle,
        events: &mut impl Iterator<Item = Event<M>>,
    ) -> Result<usize, BatchError<Event<M>>> {
        self.handle.dispatch_batch(to, events)
    }

    /// [`DispatcherHandle::dispatch_batch_timeout`].
    ///
    /// # Errors
    ///
    /// As [`DispatcherHandle::dispatch_batch_timeout`].
    pub fn dispatch_batch_timeout(
        &self,
        to: ClientHandle,
        events: &mut impl Iterator<Item = Event<M>>,
        timeout: Duration,
    ) -> Result<usize, BatchError<Event<M>>> {
        self.handle.dispatch_batch_timeout(to, events, timeout)
    }

    /// [`DispatcherHandle::dispatch_batch_deadline`].
    ///
    /// # Errors
    ///
    /// As [`DispatcherHandle::dispatch_batch_deadline`].
    pub fn dispatch_batch_deadline(
        &self,
        to: ClientHandle,
        events: &mut impl Iterator<Item = Event<M>>,
        deadline: Instant,
    ) -> Result<usize, BatchError<Event<M>>> {
        self.handle.dispatch_batch_deadline(to, events, deadline)
    }

    /// [`DispatcherHandle::dispatch_async`].
    pub fn dispatch_async(&self, to: ClientHandle, event: Event<M>) -> DispatchFuture<'_, M> {
        self.handle.dispatch_async(to, event)
    }

    /// [`DispatcherHandle::dispatch_batch_async`].
    pub fn dispatch_batch_async<'a, I: Iterator<Item = Event<M>>>(
        &'a self,
        to: ClientHandle,
        events: &'a mut I,
    ) -> DispatchBatchFuture<'a, M, I> {
        self.handle.dispatch_batch_async(to, events)
    }

    /// [`DispatcherHandle::execute`].
    ///
    /// # Errors
    ///
    /// As [`DispatcherHandle::execute`].
    pub fn execute(
        &self,
        processor: ProcessorId,
        callback: Callback,
    ) -> Result<(), DispatchError<Callback>> {
        self.handle.execute(processor, callback)
    }

    /// [`DispatcherHandle::executor`].
    #[must_use]
    pub fn executor(&self, processor: ProcessorId) -> Executor<M> {
        self.handle.executor(processor)
    }

    /// [`DispatcherHandle::register`].
    ///
    /// # Errors
    ///
    /// As [`DispatcherHandle::register`].
    pub fn register(
        &self,
        client_type: ClientType,
        client: impl Client<M>,
        placement: Placement,
    ) -> Result<ClientHandle, RegisterError> {
        self.handle.register(client_type, client, placement)
    }

    /// [`DispatcherHandle::unregister`].
    ///
    /// # Errors
    ///
    /// As [`DispatcherHandle::unregister`].
    pub fn unregister(&self, handle: ClientHandle) -> Result<(), DispatchError<ClientHandle>> {
        self.handle.unregister(handle)
    }

    /// [`DispatcherHandle::in_dispatcher_thread`].
    #[must_use]
    pub fn in_dispatcher_thread(&self, handle: ClientHandle) -> bool {
        self.handle.in_dispatcher_thread(handle)
    }

    /// [`DispatcherHandle::current_processor`].
    #[must_use]
    pub fn current_processor(&self) -> Option<ProcessorId> {
        self.handle.current_processor()
    }

    /// [`DispatcherHandle::synchronize`].
    ///
    /// # Errors
    ///
    /// As [`DispatcherHandle::synchronize`].
    pub fn synchronize(&self, target: impl Into<ProcessorId>) -> Result<(), SyncError> {
        self.handle.synchronize(target)
    }

    /// [`DispatcherHandle::call`].
    ///
    /// # Errors
    ///
    /// As [`DispatcherHandle::call`].
    pub fn call<F, R>(&self, target: impl Into<ProcessorId>, f: F) -> Result<R, SyncError>
    where
        F: FnOnce() -> R + Send + 'static,
        R: Send + 'static,
    {
        self.handle.call(target, f)
    }

    /// [`DispatcherHandle::call_async`].
    pub fn call_async<F, R>(&self, target: impl Into<ProcessorId>, f: F) -> CallFuture<'_, M, R>
    where
        F: FnOnce() -> R + Send + 'static,
        R: Send + 'static,
    {
        self.handle.call_async(target, f)
    }

    /// [`DispatcherHandle::execute_on_all`].
    ///
    /// # Errors
    ///
    /// As [`DispatcherHandle::execute_on_all`].
    pub fn execute_on_all<F, D>(
        &self,
        client_type: ClientType,
        f: F,
        done: D,
    ) -> Result<(), ExecuteOnAllError<F, D>>
    where
        F: Fn() + Send + Sync + 'static,
        D: FnOnce() + Send + 'static,
    {
        self.handle.execute_on_all(client_type, f, done)
    }

    /// [`DispatcherHandle::stats`].
    #[must_use]
    pub fn stats(&self) -> Vec<ProcessorSnapshot> {
        self.handle.stats()
    }

    /// [`DispatcherHandle::processors`].
    #[must_use]
    pub fn processors(&self, client_type: ClientType) -> Vec<ProcessorId> {
        self.handle.processors(client_type)
    }
}

impl<M: Send + 'static> Drop for Dispatcher<M> {
    fn drop(&mut self) {
        self.shutdown();
    }
}

impl<M: Send + 'static> fmt::Debug for Dispatcher<M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Dispatcher")
            .field("handle", &self.handle)
            .field("threads", &self.threads.len())
            .finish()
    }
}
