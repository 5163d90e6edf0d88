//! The dispatcher: its builder, the owner that shuts it down, and the cloneable handle
//! every producer and client dispatches through.
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
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use zerodispatch_callback::Callback;

use crate::client::{Client, ClientHandle, ClientType, ProcessorId};
use crate::config::{ConfigError, GlobalConfig, PoolConfig, Problem};
use crate::event::{BatchError, DispatchError, Event, Item};
use crate::monitor;
use crate::processor::{ProcessorShared, Runner, current_processor};
use crate::stats::ProcessorSnapshot;

/// Each dispatcher's identity, so that `in_dispatcher_thread` tells dispatchers apart.
static NEXT_DISPATCHER_ID: AtomicU64 = AtomicU64::new(1);

/// A message type for dispatchers that carry callbacks only.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NoMessage {}

/// What all handles share.
pub(crate) struct Shared<M> {
    id: u64,
    pools: [Box<[Arc<ProcessorShared<M>>]>; 3],
    pub(crate) global: GlobalConfig,
    shutting_down: AtomicBool,
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
/// dispatch hands its event back with [`DispatchError::ShutDown`].
pub struct DispatcherHandle<M> {
    shared: Arc<Shared<M>>,
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

/// Where to register a client.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Placement {
    /// On the processor of its type with the fewest clients (ties: the lowest index).
    #[default]
    LeastLoaded,
    /// On this processor of its type.
    Processor(u16),
}

/// Why a client could not be registered.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RegisterError {
    /// No processor of this type was configured.
    NoProcessors(ClientType),
    /// `Placement::Processor(index)` names no processor of this type.
    NoSuchProcessor(ProcessorId),
    /// The processor's client table is full (65,535 clients).
    TableFull(ProcessorId),
    /// Registering from the processor's own thread while its queue is full (waiting
    /// could never end); the client was dropped.
    QueueFull(ProcessorId),
    /// Shutdown has started; the client was dropped.
    ShutDown,
}

impl fmt::Display for RegisterError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RegisterError::NoProcessors(t) => write!(f, "no {t} processors are configured"),
            RegisterError::NoSuchProcessor(p) => write!(f, "there is no processor {p}"),
            RegisterError::TableFull(p) => write!(f, "processor {p} has no free client slot"),
            RegisterError::QueueFull(p) => {
                write!(
                    f,
                    "registering on {p} from its own thread while its queue is full"
                )
            }
            RegisterError::ShutDown => write!(f, "the dispatcher is shutting down"),
        }
    }
}

impl std::error::Error for RegisterError {}

/// Why [`DispatcherHandle::synchronize`] could not wait.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
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

/// The one-shot a [`DispatcherHandle::synchronize`] call waits on.
#[derive(Debug, Default)]
struct SyncSignal {
    state: Mutex<u8>,
    changed: Condvar,
}

impl SyncSignal {
    const WAITING: u8 = 0;
    const RAN: u8 = 1;
    const DROPPED: u8 = 2;

    /// Moves from `WAITING` to `state` (the first setter wins) and wakes the waiter.
    fn set(&self, state: u8) {
        let mut now = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if *now == Self::WAITING {
            *now = state;
            self.changed.notify_all();
        }
    }

    /// Waits until set; returns the state.
    fn wait(&self) -> u8 {
        let mut now = self.state.lock().unwrap_or_else(|e| e.into_inner());
        while *now == Self::WAITING {
            now = self.changed.wait(now).unwrap_or_else(|e| e.into_inner());
        }
        *now
    }
}

/// Travels in a `synchronize` marker: sets its signal `RAN` when run, and `DROPPED` if the
/// marker is dropped unrun (its processor died), so that the waiter never hangs.
struct SyncMarker {
    signal: Arc<SyncSignal>,
}

impl SyncMarker {
    fn ran(self) {
        self.signal.set(SyncSignal::RAN);
    }
}

impl Drop for SyncMarker {
    fn drop(&mut self) {
        self.signal.set(SyncSignal::DROPPED);
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
    fn target(&self, handle: ClientHandle) -> Option<&Arc<ProcessorShared<M>>> {
        if handle.dispatcher != self.shared.id {
            return None;
        }
        self.processor(handle.processor)
    }

    /// The processor of this dispatcher whose thread is the calling thread, if any.
    #[inline]
    fn current(&self) -> Option<&Arc<ProcessorShared<M>>> {
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

    /// Sends `item` to `target` by the rules of the calling thread: on one of this
    /// dispatcher's processor threads by the outbox protocol (never waiting; see
    /// `outbox.rs`); elsewhere straight to the queue, waiting while it is full if `wait`.
    #[inline]
    fn send(
        &self,
        target: &ProcessorShared<M>,
        item: Item<M>,
        wait: bool,
    ) -> Result<(), DispatchError<Item<M>>> {
        match self.current() {
            Some(own) => own.send_from(target, item, wait),
            None if wait => target.push(item),
            None => target.try_push(item),
        }
    }

    /// Enqueues the events of `events` for the client `to`, in order, through one pass of
    /// the processor's gate per run that fits; with `wait`, waiting for room. The body of
    /// both batch calls.
    fn enqueue(
        &self,
        to: ClientHandle,
        events: &mut impl Iterator<Item = Event<M>>,
        wait: bool,
    ) -> Result<usize, BatchError<Event<M>>> {
        let Some(target) = self.target(to) else {
            return match events.next() {
                Some(event) => Err(BatchError {
                    enqueued: 0,
                    error: DispatchError::NoSuchProcessor(event),
                }),
                None => Ok(0),
            };
        };
        let mut pushed = 0;
        let mut items = events.map(|event| Item::new(to.key, event));
        let sent = match self.current() {
            Some(own) => own.send_batch_from(target, &mut items, &mut pushed, wait),
            None => target.push_batch(&mut items, &mut pushed, wait),
        };
        match sent {
            Ok(()) => Ok(pushed),
            Err(e) => Err(BatchError {
                enqueued: pushed,
                error: e.map(Item::into_event),
            }),
        }
    }

    /// Enqueues `event` for the client `to`, or hands it back at once if the processor's
    /// queue is full or shutdown has started. Never blocks, never allocates.
    ///
    /// # Errors
    ///
    /// The event comes back in [`DispatchError::Full`], [`DispatchError::ShutDown`], or
    /// [`DispatchError::NoSuchProcessor`] for a handle of another dispatcher. On a
    /// processor thread, also `Full` while earlier events of that processor wait in its
    /// outbox (they must not be overtaken).
    #[inline]
    pub fn try_dispatch(
        &self,
        to: ClientHandle,
        event: Event<M>,
    ) -> Result<(), DispatchError<Event<M>>> {
        let Some(target) = self.target(to) else {
            return Err(DispatchError::NoSuchProcessor(event));
        };
        self.send(target, Item::new(to.key, event), false)
            .map_err(|e| e.map(Item::into_event))
    }

    /// Enqueues `event` for the client `to`, waiting with backoff while the queue is full.
    /// Never allocates.
    ///
    /// On a processor thread of this dispatcher it never waits: a processor never waits for
    /// a processor (two that dispatch to each other would deadlock). An event whose queue is
    /// full waits in the calling processor's outbox instead, is handed on by that processor
    /// as soon as there is room, in order, and counts as accepted: it is run, even across a
    /// shutdown (the protocol is in `outbox.rs`).
    ///
    /// # Errors
    ///
    /// As [`try_dispatch`](Self::try_dispatch), except that a full queue is waited for (or,
    /// on a processor thread, outboxed); `Full` comes back only on a processor thread whose
    /// outbox is full too (`PoolConfig::outbox_capacity`): keep the event and retry at the
    /// next flush ([`Context::flush_again`](crate::Context::flush_again)).
    #[inline]
    pub fn dispatch(
        &self,
        to: ClientHandle,
        event: Event<M>,
    ) -> Result<(), DispatchError<Event<M>>> {
        let Some(target) = self.target(to) else {
            return Err(DispatchError::NoSuchProcessor(event));
        };
        self.send(target, Item::new(to.key, event), true)
            .map_err(|e| e.map(Item::into_event))
    }

    /// Dispatches the closure `f` to the client `to` as a callback event, as
    /// [`dispatch`](Self::dispatch) does `Event::Callback(Callback::new(f))`: stored inline,
    /// and a compile error if it does not fit the callback's space. Never allocates.
    ///
    /// ```compile_fail
    /// # use zerodispatch_core::*;
    /// # struct Sink;
    /// # impl Client<u64> for Sink {}
    /// # let d = Dispatcher::<u64>::builder().pool(ClientType::Queue, PoolConfig::new(1)).build().unwrap();
    /// # let sink = d.register(ClientType::Queue, Sink, Placement::LeastLoaded).unwrap();
    /// let too_large = [0_u8; 64]; // more than the 32 bytes a `Callback` holds
    /// d.dispatch_callback(sink, move || drop(too_large)).unwrap();
    /// ```
    ///
    /// # Errors
    ///
    /// As [`dispatch`](Self::dispatch); the callback comes back inside the event.
    #[inline]
    pub fn dispatch_callback<F>(
        &self,
        to: ClientHandle,
        f: F,
    ) -> Result<(), DispatchError<Event<M>>>
    where
        F: FnOnce() + Send + 'static,
    {
        self.dispatch(to, Event::Callback(Callback::new(f)))
    }

    /// Enqueues events for the client `to` from `events`, in order, until it runs out or
    /// the queue is full, passing the processor's gate once for the whole batch (two
    /// read-modify-writes for the batch instead of one per event; the queue's own
    /// compare-and-swap per event remains). Returns how many were enqueued. Never blocks, never allocates.
    ///
    /// # Errors
    ///
    /// [`BatchError`]: how many were enqueued, and the event that did not fit (`Full`), or
    /// the first one after shutdown (`ShutDown`), handed back in it; the events after it
    /// stay in `events`, so that nothing is lost.
    ///
    /// ```
    /// # use zerodispatch_core::*;
    /// # struct Sink;
    /// # impl Client<u64> for Sink {
    /// #     fn on_event(&mut self, _: ClientEvent<u64>, _: &mut Context<u64>) {}
    /// #     fn flush(&mut self, _: &mut Context<u64>) {}
    /// # }
    /// let d = Dispatcher::<u64>::builder().pool(ClientType::Queue, PoolConfig::new(1)).build()?;
    /// let sink = d.register(ClientType::Queue, Sink, Placement::LeastLoaded)?;
    /// let mut events = (0..16).map(Event::Message);
    /// assert!(matches!(d.try_dispatch_batch(sink, &mut events), Ok(16)));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn try_dispatch_batch(
        &self,
        to: ClientHandle,
        events: &mut impl Iterator<Item = Event<M>>,
    ) -> Result<usize, BatchError<Event<M>>> {
        self.enqueue(to, events, false)
    }

    /// Enqueues every event of `events` for the client `to`, in order, waiting for room
    /// like [`dispatch`](Self::dispatch), with one pass through the gate per run of events
    /// that fits. Returns how many were enqueued. Never allocates.
    ///
    /// # Errors
    ///
    /// As [`try_dispatch_batch`](Self::try_dispatch_batch), except that a full queue is
    /// waited for, or on a processor thread outboxed, as by [`dispatch`](Self::dispatch)
    /// (`Full` only on a processor thread whose outbox is full).
    pub fn dispatch_batch(
        &self,
        to: ClientHandle,
        events: &mut impl Iterator<Item = Event<M>>,
    ) -> Result<usize, BatchError<Event<M>>> {
        self.enqueue(to, events, true)
    }

    /// Runs `callback` on `processor` as a dispatcher callback (after flushing its
    /// clients), waiting while its queue is full, like [`dispatch`](Self::dispatch).
    ///
    /// # Errors
    ///
    /// As [`dispatch`](Self::dispatch), with the callback handed back.
    pub fn execute(
        &self,
        processor: ProcessorId,
        callback: Callback,
    ) -> Result<(), DispatchError<Callback>> {
        let Some(p) = self.processor(processor) else {
            return Err(DispatchError::NoSuchProcessor(callback));
        };
        self.send(p, Item::DispatcherCallback(callback), true)
            .map_err(|e| {
                e.map(|item| match item.into_event() {
                    Event::DispatcherCallback(cb) => cb,
                    _ => unreachable!("a dispatcher callback comes back as one"),
                })
            })
    }

    /// An executor running closures on `processor`.
    #[must_use]
    pub fn executor(&self, processor: ProcessorId) -> Executor<M> {
        Executor {
            dispatcher: self.clone(),
            processor,
        }
    }

    /// Registers `client` on a processor of `client_type`; it is owned by that processor's
    /// thread from now on. Events dispatched with the returned handle after this returns
    /// reach the client (the registration is queued before them).
    ///
    /// Allocates (the client is boxed): registration is not on the event path.
    ///
    /// # Errors
    ///
    /// [`RegisterError`] says why; the client is then dropped.
    pub fn register(
        &self,
        client_type: ClientType,
        client: impl Client<M>,
        placement: Placement,
    ) -> Result<ClientHandle, RegisterError> {
        let pool = &self.shared.pools[client_type.index()];
        if pool.is_empty() {
            return Err(RegisterError::NoProcessors(client_type));
        }
        let processor = match placement {
            Placement::Processor(index) => {
                pool.get(usize::from(index))
                    .ok_or(RegisterError::NoSuchProcessor(ProcessorId {
                        client_type,
                        index,
                    }))?
            }
            Placement::LeastLoaded => pool
                .iter()
                .min_by_key(|p| p.slots.lock().unwrap_or_else(|e| e.into_inner()).live)
                .expect("the pool is not empty"),
        };
        if processor.is_closed() {
            return Err(RegisterError::ShutDown);
        }
        let key = processor
            .slots
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
            .ok_or(RegisterError::TableFull(processor.id))?;
        let register = Item::Register {
            key,
            client: Box::new(client),
        };
        match self.send(processor, register, true) {
            Ok(()) => Ok(ClientHandle {
                dispatcher: self.shared.id,
                processor: processor.id,
                key,
            }),
            Err(e) => {
                processor
                    .slots
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .release(key);
                Err(match e {
                    DispatchError::Full(_) => RegisterError::QueueFull(processor.id),
                    _ => RegisterError::ShutDown,
                })
            }
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
    pub fn unregister(&self, handle: ClientHandle) -> Result<(), DispatchError<ClientHandle>> {
        let Some(target) = self.target(handle) else {
            return Err(DispatchError::NoSuchProcessor(handle));
        };
        self.send(target, Item::Unregister { key: handle.key }, true)
            .map_err(|e| e.map(|_| handle))
    }

    /// Whether the current thread is the processor thread that owns `handle`'s client.
    /// A thread-local read: no syscall.
    #[must_use]
    pub fn in_dispatcher_thread(&self, handle: ClientHandle) -> bool {
        handle.dispatcher == self.shared.id
            && current_processor() == Some((self.shared.id, handle.processor))
    }

    /// Waits until the processor (of a client, or named) has handled everything enqueued to
    /// it before this call. For application threads: a processor thread never waits for a
    /// processor.
    ///
    /// # Errors
    ///
    /// [`SyncError::OnProcessorThread`] if called on any processor thread of this
    /// dispatcher (waiting there could deadlock: for itself, or two processors for each
    /// other), `ShutDown` if shutdown has started, `NoSuchProcessor` for a bad id,
    /// `Dropped` if the processor's thread died before it got there.
    pub fn synchronize(&self, target: impl Into<ProcessorId>) -> Result<(), SyncError> {
        let id = target.into();
        let processor = self.processor(id).ok_or(SyncError::NoSuchProcessor(id))?;
        if let Some(own) = self.current() {
            return Err(SyncError::OnProcessorThread(own.id));
        }
        let signal = Arc::new(SyncSignal::default());
        let marker = SyncMarker {
            signal: signal.clone(),
        };
        processor
            .push(Item::DispatcherCallback(Callback::new(move || {
                marker.ran()
            })))
            .map_err(|_| SyncError::ShutDown)?;
        match signal.wait() {
            SyncSignal::RAN => Ok(()),
            _ => Err(SyncError::Dropped(id)),
        }
    }

    /// Runs `f` once on every processor of `client_type` (as a dispatcher callback), then
    /// `done` once, on the processor that finished last. Returns how many processors `f`
    /// was enqueued to: all of them, unless shutdown started part way, or (on a processor
    /// thread) an outbox was full. `done` runs once in every case, after every `f` that was
    /// enqueued, even one that panicked (the panic is counted by its processor).
    ///
    /// Allocates one shared record: this is a management operation.
    ///
    /// # Errors
    ///
    /// `ShutDown` with `done` handed back if shutdown had started before any `f` was
    /// enqueued.
    pub fn execute_on_all<F, D>(
        &self,
        client_type: ClientType,
        f: F,
        done: D,
    ) -> Result<usize, DispatchError<D>>
    where
        F: Fn() + Send + Sync + 'static,
        D: FnOnce() + Send + 'static,
    {
        struct All<F> {
            f: F,
            remaining: std::sync::atomic::AtomicUsize,
            done: Mutex<Option<Box<dyn FnOnce() + Send>>>,
        }
        /// One count of `remaining`, given back when dropped: after `f` ran (or panicked),
        /// or with a task that never ran.
        struct Share<F>(Arc<All<F>>);
        impl<F> Drop for Share<F> {
            fn drop(&mut self) {
                if self.0.remaining.fetch_sub(1, Ordering::AcqRel) == 1 {
                    let done = self.0.done.lock().unwrap_or_else(|e| e.into_inner()).take();
                    if let Some(done) = done {
                        done();
                    }
                }
            }
        }
        let pool = &self.shared.pools[client_type.index()];
        if self.shared.is_shutting_down() {
            return Err(DispatchError::ShutDown(done));
        }
        // One extra count held by this call, released after every processor was tried, so
        // that `done` cannot run before all `f`s were enqueued.
        let all = Arc::new(All {
            f,
            remaining: std::sync::atomic::AtomicUsize::new(pool.len() + 1),
            done: Mutex::new(Some(Box::new(done))),
        });
        let mut reached = 0;
        for processor in pool.iter() {
            let share = Share(all.clone());
            let task = Callback::new(move || {
                // Run `f`, give the count back (perhaps running `done`) outside any unwind,
                // then let a panic of `f` reach the processor, which counts it.
                let ran = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| (share.0.f)()));
                drop(share);
                if let Err(panic) = ran {
                    std::panic::resume_unwind(panic);
                }
            });
            if self
                .send(processor, Item::DispatcherCallback(task), true)
                .is_ok()
            {
                reached += 1;
            }
        }
        drop(Share(all));
        Ok(reached)
    }

    /// Statistics of every processor, read while they run.
    #[must_use]
    pub fn stats(&self) -> Vec<ProcessorSnapshot> {
        self.shared
            .processors()
            .map(|p| {
                let clients = p.slots.lock().unwrap_or_else(|e| e.into_inner()).live;
                p.stats.snapshot(p.id, || p.queue.len(), clients)
            })
            .collect()
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

/// Runs closures on one processor: BlazingMQ's executor.
#[derive(Clone, Debug)]
pub struct Executor<M> {
    dispatcher: DispatcherHandle<M>,
    processor: ProcessorId,
}

impl<M: Send + 'static> Executor<M> {
    /// Always enqueues `f`, to run as a dispatcher callback (after the processor's flush).
    ///
    /// # Errors
    ///
    /// As [`DispatcherHandle::execute`].
    pub fn post(&self, f: Callback) -> Result<(), DispatchError<Callback>> {
        self.dispatcher.execute(self.processor, f)
    }

    /// Runs `f` at once if called on the processor's own thread; enqueues it otherwise.
    ///
    /// # Errors
    ///
    /// As [`post`](Self::post).
    pub fn dispatch(&self, f: Callback) -> Result<(), DispatchError<Callback>> {
        if current_processor() == Some((self.dispatcher.id(), self.processor)) {
            f.call();
            Ok(())
        } else {
            self.post(f)
        }
    }

    /// The processor this executor runs on.
    #[must_use]
    pub fn processor(&self) -> ProcessorId {
        self.processor
    }
}

/// Builds a [`Dispatcher`]: one pool of processors per client type that has one.
///
/// ```
/// use zerodispatch_core::{ClientType, Dispatcher, NoMessage, PoolConfig};
///
/// let dispatcher = Dispatcher::<NoMessage>::builder()
///     .pool(ClientType::Session, PoolConfig::new(2))
///     .pool(ClientType::Queue, PoolConfig::new(4).capacity(1 << 14))
///     .pool(ClientType::Cluster, PoolConfig::new(1))
///     .build()
///     .expect("a valid configuration");
/// assert_eq!(dispatcher.handle().processors(ClientType::Queue).len(), 4);
///
/// // Invalid settings are errors with a message, not panics.
/// let err = Dispatcher::<NoMessage>::builder()
///     .pool(ClientType::Queue, PoolConfig::new(1).watermarks(10, 5))
///     .build()
///     .unwrap_err();
/// assert_eq!(err.to_string(), "queue pool: low watermark 10 must be below the high watermark 5");
/// ```
#[derive(Debug)]
pub struct DispatcherBuilder<M> {
    pools: [Option<PoolConfig>; 3],
    global: GlobalConfig,
    _message: std::marker::PhantomData<fn(M)>,
}

impl<M: Send + 'static> DispatcherBuilder<M> {
    /// Configures the pool of `client_type` (replacing an earlier configuration of it).
    #[must_use]
    pub fn pool(mut self, client_type: ClientType, config: PoolConfig) -> Self {
        self.pools[client_type.index()] = Some(config);
        self
    }

    /// How long one event may run before the monitor reports its processor as stuck.
    /// Default 1 s.
    #[must_use]
    pub fn stuck_warning(mut self, after: Duration) -> Self {
        self.global.stuck_warning = after;
        self
    }

    /// How often the monitor thread probes processors (time in queue, stuck detection).
    /// Default 10 ms.
    #[must_use]
    pub fn monitor_interval(mut self, every: Duration) -> Self {
        self.global.monitor_interval = every;
        self
    }

    /// The order in which client types are shut down. Default: queue, session, cluster.
    #[must_use]
    pub fn shutdown_order(mut self, order: [ClientType; 3]) -> Self {
        self.global.shutdown_order = order;
        self
    }

    /// Validates the configuration and starts every processor and the monitor thread.
    ///
    /// # Errors
    ///
    /// A [`ConfigError`] naming the pool and the problem: no pool at all, 0 processors, a
    /// capacity of 0, watermarks out of order, a `max_batch` of 0, a core id of 1024 or more
    /// or one outside this process's affinity mask, a zero duration.
    pub fn build(self) -> Result<Dispatcher<M>, ConfigError> {
        self.global.validate()?;
        if self.pools.iter().all(Option::is_none) {
            return Err(ConfigError {
                client_type: None,
                problem: Problem::NoPools,
            });
        }
        // Read the usable cores once, before any thread is pinned: `get_core_ids` reports
        // the calling thread's affinity mask.
        let wants_pinning = self.pools.iter().flatten().any(|p| !p.cores.is_empty());
        let usable: Vec<usize> = if wants_pinning {
            core_affinity::get_core_ids()
                .unwrap_or_default()
                .into_iter()
                .map(|c| c.id)
                .collect()
        } else {
            Vec::new()
        };
        for (client_type, pool) in ClientType::ALL.iter().zip(&self.pools) {
            if let Some(pool) = pool {
                pool.validate(*client_type, &usable)?;
            }
        }

        let pools = ClientType::ALL.map(|client_type| {
            let Some(config) = &self.pools[client_type.index()] else {
                return Vec::new().into_boxed_slice();
            };
            (0..config.processors)
                .map(|i| {
                    let index =
                        u16::try_from(i).expect("processors validated against MAX_PROCESSORS");
                    Arc::new(ProcessorShared::new(
                        ProcessorId { client_type, index },
                        config.clone(),
                    ))
                })
                .collect()
        });
        let shared = Arc::new(Shared {
            id: NEXT_DISPATCHER_ID.fetch_add(1, Ordering::Relaxed),
            pools,
            global: self.global,
            shutting_down: AtomicBool::new(false),
        });
        let handle = DispatcherHandle { shared };

        let mut threads = Vec::new();
        for processor in handle.shared.processors() {
            let cores = &processor.config.cores;
            let core =
                (!cores.is_empty()).then(|| cores[usize::from(processor.id.index) % cores.len()]);
            let runner = Runner::new(handle.clone(), processor.clone());
            let spawned = thread::Builder::new()
                .name(processor.id.to_string())
                .spawn(move || runner.run(core));
            let thread = match spawned {
                Ok(thread) => thread,
                Err(e) => panic!("cannot spawn processor thread {}: {e}", processor.id),
            };
            let _ = processor.thread.set(thread.thread().clone());
            threads.push((processor.id, thread));
        }
        let monitor = monitor::Monitor::start(handle.shared.clone());
        Ok(Dispatcher {
            handle,
            threads,
            monitor: Some(monitor),
        })
    }
}

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
pub struct Dispatcher<M: Send + 'static> {
    handle: DispatcherHandle<M>,
    threads: Vec<(ProcessorId, JoinHandle<()>)>,
    monitor: Option<monitor::Monitor>,
}

impl<M: Send + 'static> Dispatcher<M> {
    /// A builder with no pools configured.
    #[must_use]
    pub fn builder() -> DispatcherBuilder<M> {
        DispatcherBuilder {
            pools: [None, None, None],
            global: GlobalConfig::default(),
            _message: std::marker::PhantomData,
        }
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

/// Processors that had not exited when [`Dispatcher::shutdown_timeout`] gave up: each was
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
    ) -> Result<usize, DispatchError<D>>
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

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    /// A `synchronize` marker that a dying processor drops unrun wakes its waiter with
    /// `Dropped` rather than leaving it waiting forever; one that runs answers `RAN`, and
    /// its drop after running changes nothing.
    #[test]
    fn a_sync_marker_answers_whether_it_ran() {
        let dropped = Arc::new(SyncSignal::default());
        let marker = SyncMarker {
            signal: dropped.clone(),
        };
        let waiter = {
            let signal = dropped.clone();
            thread::spawn(move || signal.wait())
        };
        drop(Callback::new(move || marker.ran())); // dropped unrun
        assert_eq!(waiter.join().unwrap(), SyncSignal::DROPPED);

        let ran = Arc::new(SyncSignal::default());
        let marker = SyncMarker {
            signal: ran.clone(),
        };
        Callback::new(move || marker.ran()).call();
        assert_eq!(ran.wait(), SyncSignal::RAN);
    }
}
