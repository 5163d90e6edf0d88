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
use std::time::Duration;

use crate::error::ShutdownTimedOut;
use crate::handle::{DispatcherHandle, Shared};
use crate::ids::ProcessorId;
use crate::monitor;

/// A message type for dispatchers that carry callbacks only.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NoMessage {}

/// The owner of a running dispatcher: its processor threads and its monitor.
///
/// It is its [`DispatcherHandle`] and the ownership of the threads: it derefs to the
/// handle, so every call of the handle (`dispatch`, `register`, `call`, ...) is a call of
/// the owner, documented once, on the handle. Give other threads and clients a
/// [`handle`](Dispatcher::handle) (cloneable); `dispatcher.clone()` is the handle's clone,
/// since the owner itself cannot be cloned:
///
/// ```
/// # use zerodispatch_core::*;
/// let d = Dispatcher::<u64>::builder().pool(ClientType::Queue, PoolConfig::new(1)).build()?;
/// let handle: &DispatcherHandle<u64> = &d; // the owner derefs to its handle
/// let for_another_thread: DispatcherHandle<u64> = d.handle();
/// assert_eq!(handle.processors(ClientType::Queue), for_another_thread.processors(ClientType::Queue));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// Dropping the dispatcher shuts it down (see the module documentation of the shutdown
/// order). Keep it bound for as long as its handles are used: in
/// `let h = builder.build()?.handle();` the dispatcher is a temporary, dropped (and shut
/// down) at the end of the statement, which no `#[must_use]` can see; write
/// `let d = builder.build()?; let h = d.handle();`.
#[must_use = "dropping the Dispatcher shuts it down: keep it for as long as its handles are used"]
pub struct Dispatcher<M: Send + 'static> {
    pub(crate) handle: DispatcherHandle<M>,
    pub(crate) threads: Vec<(ProcessorId, JoinHandle<()>)>,
    pub(crate) monitor: Option<monitor::Monitor>,
}

impl<M: Send + 'static> Dispatcher<M> {
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
    /// a thread of its own, as `shutdown` does, and returns `Ok`. After a first shutdown
    /// it does nothing and returns `Ok`.
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
        if shared.shutting_down.swap(true, Ordering::AcqRel) {
            return Ok(());
        }
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
    ///
    /// Only the first call shuts down; a later one (a `shutdown` and then the drop) does
    /// nothing. On a tokio runtime's worker thread it waits there like any other thread,
    /// stalling the worker's other tasks while the processors drain (a drop cannot be
    /// async, and returning before the drain could let the process exit with accepted
    /// events unhandled): shut down in `tokio::task::spawn_blocking` to keep the worker
    /// free.
    pub fn shutdown(&mut self) {
        let shared = self.handle.shared.clone();
        if shared.shutting_down.swap(true, Ordering::AcqRel) {
            // Under way or done: a second ordered shutdown, with no threads left to join,
            // would close every pool at once, before the first had drained the earlier.
            return;
        }
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

/// Every call of the handle is a call of the owner, written and documented once, on
/// [`DispatcherHandle`].
impl<M: Send + 'static> std::ops::Deref for Dispatcher<M> {
    type Target = DispatcherHandle<M>;

    #[inline]
    fn deref(&self) -> &DispatcherHandle<M> {
        &self.handle
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
