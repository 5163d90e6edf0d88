//! The errors of the dispatcher's calls. Every error of a call that was given something
//! (an event, a callback, a handle) hands it back, so that nothing is lost.

use std::fmt;

use crate::ids::{ClientType, ProcessorId};

/// Why a dispatch did not enqueue its event; the event comes back in the error, so
/// nothing is lost. Non-exhaustive: match the cases you handle and take the rest with
/// [`into_inner`](DispatchError::into_inner).
#[derive(PartialEq, Eq)]
#[non_exhaustive]
pub enum DispatchError<T> {
    /// The processor's queue is full (from `try_dispatch`; `dispatch` waits instead, except
    /// on any processor thread, which never waits: there it comes back when that thread's
    /// outbox is full too).
    Full(T),
    /// Shutdown has started: the processor accepts no more events.
    ShutDown(T),
    /// The handle or processor id names no processor of this dispatcher (it came from
    /// another dispatcher, or was made up).
    NoSuchProcessor(T),
    /// The queue stayed full until the deadline of a
    /// [`dispatch_timeout`](crate::DispatcherHandle::dispatch_timeout) or
    /// [`dispatch_deadline`](crate::DispatcherHandle::dispatch_deadline) (or their batch
    /// forms): retry later, or shed the load.
    Timeout(T),
    /// Every timer of the processor is in use (`PoolConfig::timers`), from
    /// [`schedule`](crate::DispatcherHandle::schedule): retry after one is due, or raise the
    /// pool's timers.
    TimersFull(T),
}

impl<T> DispatchError<T> {
    /// Whether the queue (and, on a processor thread, the outbox) was full: retry later.
    ///
    /// ```
    /// use zerodispatch_core::DispatchError;
    /// let e = DispatchError::Full(7_u64);
    /// assert!(e.is_full() && !e.is_shut_down());
    /// assert_eq!(e.into_inner(), 7);
    /// ```
    #[must_use]
    pub fn is_full(&self) -> bool {
        matches!(self, DispatchError::Full(_))
    }

    /// Whether the dispatcher is shutting down: retrying will not help.
    #[must_use]
    pub fn is_shut_down(&self) -> bool {
        matches!(self, DispatchError::ShutDown(_))
    }

    /// Whether the target names no processor of this dispatcher.
    #[must_use]
    pub fn is_no_such_processor(&self) -> bool {
        matches!(self, DispatchError::NoSuchProcessor(_))
    }

    /// Whether a dispatch with a deadline found the queue full until the deadline.
    ///
    /// ```
    /// use zerodispatch_core::DispatchError;
    /// let e = DispatchError::Timeout(7_u64);
    /// assert!(e.is_timeout() && !e.is_full());
    /// assert_eq!(e.into_inner(), 7);
    /// ```
    #[must_use]
    pub fn is_timeout(&self) -> bool {
        matches!(self, DispatchError::Timeout(_))
    }

    /// What is handed back, by reference: for a match guard or a log line that looks at it
    /// and leaves it in the error.
    ///
    /// ```
    /// use zerodispatch_core::DispatchError;
    /// let e = DispatchError::Full(7_u64);
    /// match e {
    ///     ref e if *e.inner() > 5 => assert!(e.is_full()),
    ///     _ => unreachable!(),
    /// }
    /// ```
    #[must_use]
    pub fn inner(&self) -> &T {
        match self {
            DispatchError::Full(t)
            | DispatchError::ShutDown(t)
            | DispatchError::NoSuchProcessor(t)
            | DispatchError::Timeout(t)
            | DispatchError::TimersFull(t) => t,
        }
    }

    /// What is handed back, by mutable reference.
    pub fn inner_mut(&mut self) -> &mut T {
        match self {
            DispatchError::Full(t)
            | DispatchError::ShutDown(t)
            | DispatchError::NoSuchProcessor(t)
            | DispatchError::Timeout(t)
            | DispatchError::TimersFull(t) => t,
        }
    }

    /// What was handed back: the event, callback or handle the call was given.
    pub fn into_inner(self) -> T {
        match self {
            DispatchError::Full(t)
            | DispatchError::ShutDown(t)
            | DispatchError::NoSuchProcessor(t)
            | DispatchError::Timeout(t)
            | DispatchError::TimersFull(t) => t,
        }
    }

    /// The same error around `f` of what was handed back: to turn a refused callback back
    /// into an event, or to drop what came back and keep the reason.
    ///
    /// ```
    /// use zerodispatch_core::DispatchError;
    /// let e = DispatchError::Full(7_u64).map(|n| n * 2);
    /// assert_eq!(e, DispatchError::Full(14));
    /// ```
    pub fn map<U>(self, f: impl FnOnce(T) -> U) -> DispatchError<U> {
        match self {
            DispatchError::Full(t) => DispatchError::Full(f(t)),
            DispatchError::ShutDown(t) => DispatchError::ShutDown(f(t)),
            DispatchError::NoSuchProcessor(t) => DispatchError::NoSuchProcessor(f(t)),
            DispatchError::Timeout(t) => DispatchError::Timeout(f(t)),
            DispatchError::TimersFull(t) => DispatchError::TimersFull(f(t)),
        }
    }
}

impl<T> fmt::Debug for DispatchError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DispatchError::Full(_) => f.write_str("Full(..)"),
            DispatchError::ShutDown(_) => f.write_str("ShutDown(..)"),
            DispatchError::NoSuchProcessor(_) => f.write_str("NoSuchProcessor(..)"),
            DispatchError::Timeout(_) => f.write_str("Timeout(..)"),
            DispatchError::TimersFull(_) => f.write_str("TimersFull(..)"),
        }
    }
}

impl<T> fmt::Display for DispatchError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DispatchError::Full(_) => f.write_str(
                "the processor's queue is full (on a processor thread, its outbox too); what was sent is handed back",
            ),
            DispatchError::ShutDown(_) => {
                f.write_str("the dispatcher is shutting down; what was sent is handed back")
            }
            DispatchError::NoSuchProcessor(_) => f.write_str(
                "no processor of this dispatcher has that id (a handle of another dispatcher?); what was sent is handed back",
            ),
            DispatchError::Timeout(_) => f.write_str(
                "the processor's queue stayed full until the deadline; what was sent is handed back",
            ),
            DispatchError::TimersFull(_) => f.write_str(
                "every timer of the processor is in use (PoolConfig::timers); the callback is handed back",
            ),
        }
    }
}

impl<T> std::error::Error for DispatchError<T> {}

/// Why a batch call ([`try_dispatch_batch`](crate::DispatcherHandle::try_dispatch_batch),
/// [`dispatch_batch`](crate::DispatcherHandle::dispatch_batch)) stopped before its last
/// event: how many it enqueued, and the error of the next one, which comes back in it; the
/// events after that one are still in the caller's iterator. It is an error type of its
/// own, so that `?` carries it into `Box<dyn Error>`.
///
/// ```
/// use zerodispatch_core::{BatchError, DispatchError};
/// let e = BatchError { enqueued: 3, error: DispatchError::Full(4_u64) };
/// assert_eq!(e.to_string(), format!("3 enqueued, then: {}", e.error));
/// let boxed: Box<dyn std::error::Error> = Box::new(e);
/// assert!(boxed.source().is_some());
/// ```
pub struct BatchError<T> {
    /// Events enqueued before the one that was refused.
    pub enqueued: usize,
    /// Why the next was refused; it carries that event back.
    pub error: DispatchError<T>,
}

impl<T> BatchError<T> {
    /// The refused event, by reference ([`DispatchError::inner`]).
    #[must_use]
    pub fn inner(&self) -> &T {
        self.error.inner()
    }

    /// The refused event handed back.
    pub fn into_inner(self) -> T {
        self.error.into_inner()
    }
}

impl<T> fmt::Debug for BatchError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BatchError")
            .field("enqueued", &self.enqueued)
            .field("error", &self.error)
            .finish()
    }
}

impl<T> fmt::Display for BatchError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} enqueued, then: {}", self.enqueued, self.error)
    }
}

impl<T: 'static> std::error::Error for BatchError<T> {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.error)
    }
}

/// Why a client could not be registered. Non-exhaustive: a later version may add a reason.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum RegisterRefusal {
    /// No processor of this type was configured.
    NoProcessors(ClientType),
    /// `Placement::Processor(index)` names no processor of this type.
    NoSuchProcessor(ProcessorId),
    /// The processor's client table is full (65,535 clients).
    TableFull(ProcessorId),
    /// Shutdown has started.
    ShutDown,
}

impl fmt::Display for RegisterRefusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RegisterRefusal::NoProcessors(t) => write!(f, "no {t} processors are configured"),
            RegisterRefusal::NoSuchProcessor(p) => write!(f, "there is no processor {p}"),
            RegisterRefusal::TableFull(p) => write!(f, "processor {p} has no free client slot"),
            RegisterRefusal::ShutDown => write!(f, "the dispatcher is shutting down"),
        }
    }
}

impl std::error::Error for RegisterRefusal {}

/// A refused [`register`](crate::DispatcherHandle::register): why, and the client, handed
/// back unregistered, so that nothing is lost.
///
/// ```
/// # use zerodispatch_core::*;
/// struct Queue { name: &'static str }
/// impl Client<NoMessage> for Queue {}
/// let d = Dispatcher::<NoMessage>::builder().pool(ClientType::Queue, PoolConfig::new(1)).build()?;
/// let refused = d
///     .register(ClientType::Session, Queue { name: "orders" }, Placement::LeastLoaded)
///     .unwrap_err();
/// assert_eq!(refused.reason, RegisterRefusal::NoProcessors(ClientType::Session));
/// let queue = refused.into_inner(); // register it elsewhere, or drop it here
/// assert_eq!(queue.name, "orders");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// It is `Send + Sync` for every client (a client need only be `Send`), so `?` carries it
/// into `anyhow::Error` or `Box<dyn Error + Send + Sync>`.
pub struct RegisterError<C> {
    /// Why.
    pub reason: RegisterRefusal,
    /// The client, handed back. In a `Mutex` that is never locked while the error lives:
    /// it makes the error `Sync` for a client that is only `Send` (nothing reaches the
    /// client through `&self`), without `unsafe`, which this crate forbids.
    client: std::sync::Mutex<C>,
}

impl<C> RegisterError<C> {
    pub(crate) fn new(reason: RegisterRefusal, client: C) -> Self {
        Self {
            reason,
            client: std::sync::Mutex::new(client),
        }
    }

    /// The client, by mutable reference (the error holds it behind a lock, so that the
    /// error is `Sync` whatever the client: a shared view would need the lock).
    pub fn client_mut(&mut self) -> &mut C {
        self.client
            .get_mut()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The client, handed back unregistered.
    pub fn into_inner(self) -> C {
        self.client
            .into_inner()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

impl<C> fmt::Debug for RegisterError<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RegisterError")
            .field("reason", &self.reason)
            .finish_non_exhaustive()
    }
}

impl<C> fmt::Display for RegisterError<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}; the client is handed back", self.reason)
    }
}

impl<C> std::error::Error for RegisterError<C> {}

/// Why [`execute_on_all`](crate::DispatcherHandle::execute_on_all) reached no processor:
/// it runs `f` on every processor of the type or on none, so a refusal hands `f` and
/// `done` back, neither run, and names the processors not reached (all of the type).
///
/// ```
/// # use zerodispatch_core::*;
/// let mut d = Dispatcher::<NoMessage>::builder().pool(ClientType::Queue, PoolConfig::new(2)).build()?;
/// let handle = d.handle();
/// d.shutdown();
/// let refused = handle.execute_on_all(ClientType::Queue, || (), || ()).unwrap_err();
/// assert_eq!(refused.reason, ExecuteOnAllRefusal::ShutDown);
/// assert_eq!(refused.not_reached.len(), 2);
/// let (f, _done) = refused.into_inner(); // nothing lost: run or keep them
/// f();
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// It is `Send + Sync` for any `f` and `done` the call accepts (`done` need not be
/// `Sync`), so `?` carries it into `anyhow::Error` or `Box<dyn Error + Send + Sync>`.
pub struct ExecuteOnAllError<F, D> {
    /// Why.
    pub reason: ExecuteOnAllRefusal,
    /// The processors `f` did not reach: every processor of the type (none if the type
    /// has none).
    pub not_reached: Vec<ProcessorId>,
    /// The closure, handed back unrun ([`into_inner`](Self::into_inner)).
    f: F,
    /// The completion, handed back unrun. In a `Mutex` that is never locked while the
    /// error lives: it is what makes the error `Sync` for a `done` that is only `Send`
    /// (nothing reaches `done` through `&self`), without `unsafe`, which this crate
    /// forbids. Taken out by value in [`into_inner`](Self::into_inner).
    done: std::sync::Mutex<D>,
}

impl<F, D> ExecuteOnAllError<F, D> {
    /// The refusal of `f` and `done`, handed back, for the processors in `not_reached`.
    pub(crate) fn new(
        reason: ExecuteOnAllRefusal,
        not_reached: Vec<ProcessorId>,
        f: F,
        done: D,
    ) -> Self {
        Self {
            reason,
            not_reached,
            f,
            done: std::sync::Mutex::new(done),
        }
    }

    /// The closure and the completion, handed back.
    pub fn into_inner(self) -> (F, D) {
        // Never poisoned: nothing locks it (see the field).
        let done = self
            .done
            .into_inner()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        (self.f, done)
    }
}

/// Why [`execute_on_all`](crate::DispatcherHandle::execute_on_all) was refused.
/// Non-exhaustive: a later version may add a reason.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ExecuteOnAllRefusal {
    /// No processor of this type is configured.
    NoProcessors(ClientType),
    /// Shutdown had closed a processor of the type: `f` would not run there.
    ShutDown,
    /// The queue of this processor of a stepped dispatcher ([`testing`](crate::testing))
    /// is full: nothing waits there, since only the test runs the processors. Run it until
    /// idle and retry.
    Full(ProcessorId),
    /// Called on this processor's thread, whose outbox has room for `room` events and
    /// might need `needed` (one per processor of the type, should their queues be full):
    /// a processor never waits for room. Keep `f` and `done`, and retry at a later flush
    /// ([`Context::flush_again`](crate::Context::flush_again)).
    OutboxFull {
        /// The calling processor.
        processor: ProcessorId,
        /// Events its outbox can still take.
        room: usize,
        /// Events it might have to keep: the processors of the type.
        needed: usize,
    },
}

impl fmt::Display for ExecuteOnAllRefusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ExecuteOnAllRefusal::NoProcessors(t) => write!(f, "no {t} processors are configured"),
            ExecuteOnAllRefusal::ShutDown => f.write_str("the dispatcher is shutting down"),
            ExecuteOnAllRefusal::Full(p) => write!(
                f,
                "the queue of {p} of a stepped dispatcher is full; run it until idle and retry"
            ),
            ExecuteOnAllRefusal::OutboxFull {
                processor,
                room,
                needed,
            } => write!(
                f,
                "called on {processor}, whose outbox has room for {room} events of the {needed} it might have to keep"
            ),
        }
    }
}

impl<F, D> fmt::Debug for ExecuteOnAllError<F, D> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ExecuteOnAllError")
            .field("reason", &self.reason)
            .field("not_reached", &self.not_reached)
            .finish_non_exhaustive()
    }
}

impl<F, D> fmt::Display for ExecuteOnAllError<F, D> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "execute_on_all reached none of the {} processors (",
            self.not_reached.len()
        )?;
        for (i, p) in self.not_reached.iter().enumerate() {
            if i > 0 {
                f.write_str(" ")?;
            }
            write!(f, "{p}")?;
        }
        write!(f, "): {}; f and done are handed back unrun", self.reason)
    }
}

impl<F, D> std::error::Error for ExecuteOnAllError<F, D> {}

/// Why [`call`](crate::DispatcherHandle::call) or
/// [`synchronize`](crate::DispatcherHandle::synchronize) could not answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum SyncError {
    /// Called on a processor thread of this dispatcher (the one named): a processor never
    /// waits for a processor, its own or another (waiting for itself could never end, and
    /// two processors waiting for each other would deadlock).
    OnProcessorThread(ProcessorId),
    /// Shutdown has started.
    ShutDown,
    /// No such processor.
    NoSuchProcessor(ProcessorId),
    /// The processor dropped the request without running it: its thread died.
    Dropped(ProcessorId),
    /// The closure given to [`call`](crate::DispatcherHandle::call) panicked on the
    /// processor, which caught and counted the panic and goes on.
    Panicked(ProcessorId),
}

impl fmt::Display for SyncError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SyncError::OnProcessorThread(p) => write!(
                f,
                "called on processor thread {p}, which must never wait for a processor"
            ),
            SyncError::ShutDown => write!(f, "the dispatcher is shutting down"),
            SyncError::NoSuchProcessor(p) => write!(f, "there is no processor {p}"),
            SyncError::Panicked(p) => write!(f, "the closure panicked on processor {p}"),
            SyncError::Dropped(p) => {
                write!(
                    f,
                    "processor {p} dropped the request unrun: its thread died"
                )
            }
        }
    }
}

impl std::error::Error for SyncError {}

/// Processors that had not exited when [`Dispatcher::shutdown_timeout`](crate::Dispatcher::shutdown_timeout) gave up: each was
/// still in a handler (or draining), has been told to stop, and exits on its own when the
/// handler returns, after draining its queue and dropping its clients.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ShutdownTimedOut {
    /// The processors still running, in shutdown order.
    pub unfinished: Vec<ProcessorId>,
}

impl fmt::Display for ShutdownTimedOut {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "shutdown timed out; still running:")?;
        for p in &self.unfinished {
            write!(f, " {p}")?;
        }
        Ok(())
    }
}

impl std::error::Error for ShutdownTimedOut {}
