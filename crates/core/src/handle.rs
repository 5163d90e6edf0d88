//! The cloneable handle every producer and client dispatches through, and the state all
//! handles of a dispatcher share.

use std::fmt;
use std::panic::{AssertUnwindSafe, catch_unwind, resume_unwind};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use zerodispatch_callback::{Callback, InlineValue};

use crate::call::{self, Answer};
use crate::client::{Client, ClientHandle, ClientType, ProcessorId};
use crate::clock::Clock;
use crate::config::GlobalConfig;
use crate::door::{CallFuture, DispatchBatchFuture, DispatchFuture};
use crate::error::{
    BatchError, DispatchError, ExecuteOnAllError, ExecuteOnAllRefusal, RegisterError,
    RegisterRefusal, SyncError,
};
use crate::event::{Event, EventFor, Item};
use crate::executor::Executor;
use crate::processor::{ProcessorShared, current_processor};
use crate::room::Wait;
use crate::stats::ProcessorSnapshot;
use crate::timers::TimerToken;

/// The dispatcher callback of a call: runs `f` and answers `request` with its result, or
/// with its panic (answered first, then resumed for the processor to catch and count).
fn call_task<F, R>(f: F, request: call::Request) -> Callback
where
    F: FnOnce() -> R + Send + 'static,
    R: Send + 'static,
{
    Callback::new(move || match catch_unwind(AssertUnwindSafe(f)) {
        Ok(value) => request.ran(InlineValue::new(value)),
        Err(panic) => {
            request.panicked();
            resume_unwind(panic);
        }
    })
}

/// A call's result from its answer.
pub(crate) fn answered<R: 'static>(answer: Answer, id: ProcessorId) -> Result<R, SyncError> {
    match answer {
        Answer::Ran(value) => Ok(value
            .take::<R>()
            .unwrap_or_else(|_| unreachable!("a call's answer is of its result type"))),
        Answer::Panicked => Err(SyncError::Panicked(id)),
        Answer::Dropped | Answer::Waiting => Err(SyncError::Dropped(id)),
    }
}

/// A blocking call's name and its async form (empty if it has none), for the refusal of
/// `blocking.rs`.
pub(crate) type BlockingCall = (&'static str, &'static str);

/// The name of a call that never waits: never checked.
const NEVER_WAITS: BlockingCall = ("", "");

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
    pub(crate) runners: std::sync::OnceLock<Box<dyn crate::testing::Steps>>,
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

    /// Sends `item` to `target` by the rules of the calling thread: on one of this
    /// dispatcher's processor threads by the outbox protocol (never waiting; see
    /// `outbox.rs`; any `wait` but `Wait::No` may use the outbox); elsewhere straight to
    /// the queue, waiting for room as `wait` says, once the call (`call`, for the message
    /// of `blocking.rs`) is checked. The check is made here, on application threads only,
    /// so that a processor's dispatches (the hot path) pay no thread-local read for it.
    #[inline]
    #[track_caller]
    fn send(
        &self,
        target: &ProcessorShared<M>,
        item: Item<M>,
        wait: Wait,
        call: BlockingCall,
    ) -> Result<(), DispatchError<Item<M>>> {
        match self.current() {
            Some(own) => own.send_from(target, item, wait != Wait::No),
            None => {
                if wait != Wait::No {
                    self.refuse_blocking(call.0, call.1);
                }
                target.push(item, self.no_wait_if_stepped(wait))
            }
        }
    }

    /// The check of `blocking.rs` for a call that may park this thread, made on every
    /// dispatcher but a stepped one (whose calls never wait).
    #[inline]
    #[track_caller]
    pub(crate) fn refuse_blocking(&self, call: &'static str, instead: &'static str) {
        if !self.shared.stepped {
            crate::blocking::refuse_on_runtime(call, instead);
            // The thread's first call that may wait makes the waker it would wait with: a
            // warm-up of the path sees that allocation, not the first full queue.
            crate::room::prepare_thread();
        }
    }

    /// `Wait::No` on a stepped dispatcher ([`testing`](crate::testing)), whose processors
    /// run only when its test steps them: a wait for room there would never end.
    #[inline]
    fn no_wait_if_stepped(&self, wait: Wait) -> Wait {
        if self.shared.stepped { Wait::No } else { wait }
    }

    /// Enqueues the events of `events` for the client `to`, in order, through one pass of
    /// the processor's gate per run that fits, waiting for room as `wait` says. The body of
    /// both batch calls.
    #[track_caller]
    fn enqueue<C>(
        &self,
        to: ClientHandle<C>,
        events: &mut impl Iterator<Item = Event<M>>,
        wait: Wait,
        call: BlockingCall,
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
        let key = to.key;
        let sent = match self.current() {
            Some(own) => {
                let mut items = events.map(|event| Item::new(key, event));
                own.send_batch_from(target, &mut items, &mut pushed, wait != Wait::No)
            }
            None => {
                if wait != Wait::No {
                    self.refuse_blocking(call.0, call.1);
                }
                match self.no_wait_if_stepped(wait) {
                    // Packed (`pack.rs`): one slot, one pop and one call per run of events.
                    Wait::Forever => target.push_packed(key, events, &mut pushed),
                    wait => {
                        let mut items = events.map(|event| Item::new(key, event));
                        target.push_batch(&mut items, &mut pushed, wait)
                    }
                }
            }
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
    pub fn try_dispatch<C>(
        &self,
        to: ClientHandle<C>,
        event: impl EventFor<M, C>,
    ) -> Result<(), DispatchError<Event<M>>> {
        let event = event.into_event();
        let Some(target) = self.target(to) else {
            return Err(DispatchError::NoSuchProcessor(event));
        };
        self.send(target, Item::new(to.key, event), Wait::No, NEVER_WAITS)
            .map_err(|e| e.map(Item::into_event))
    }

    /// Enqueues `event` for the client `to`, waiting with backoff while the queue is full.
    /// Never allocates, but once per application thread: its first call that may wait
    /// (this, or any other blocking call) makes the waker the thread waits with, whether
    /// or not it waits, so that a warm-up sees it.
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
    #[track_caller]
    pub fn dispatch<C>(
        &self,
        to: ClientHandle<C>,
        event: impl EventFor<M, C>,
    ) -> Result<(), DispatchError<Event<M>>> {
        self.dispatch_waiting(
            to,
            event.into_event(),
            Wait::Forever,
            ("dispatch", "dispatch_async"),
        )
    }

    /// Enqueues `event` for the client `to` as [`dispatch`](Self::dispatch) does, but waits
    /// for room in a full queue at most `timeout`, then hands the event back in
    /// [`DispatchError::Timeout`]. The event is tried once even with a zero timeout. On a
    /// processor thread, where nothing waits, it is [`dispatch`](Self::dispatch). Never
    /// allocates.
    ///
    /// A producer that meets a full queue spins briefly, then parks for growing
    /// stretches (20 us to 1 ms), retrying the push after each: it does not burn its core
    /// while it waits. A timeout too large for an `Instant` waits as long as it takes.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use zerodispatch_core::*;
    /// # struct Sink;
    /// # impl Client<u64> for Sink {}
    /// let d = Dispatcher::<u64>::builder().pool(ClientType::Queue, PoolConfig::new(1)).build()?;
    /// let sink = d.register(ClientType::Queue, Sink, Placement::LeastLoaded)?;
    /// match d.dispatch_timeout(sink, Event::Message(1), Duration::from_millis(5)) {
    ///     Ok(()) => {}
    ///     Err(e) if e.is_timeout() => drop(e.into_inner()), // shed the load, or keep it
    ///     Err(e) => return Err(e.into()),
    /// }
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    ///
    /// As [`dispatch`](Self::dispatch), and [`DispatchError::Timeout`] with the event when
    /// the queue stayed full until the deadline.
    #[inline]
    #[track_caller]
    pub fn dispatch_timeout<C>(
        &self,
        to: ClientHandle<C>,
        event: impl EventFor<M, C>,
        timeout: Duration,
    ) -> Result<(), DispatchError<Event<M>>> {
        self.dispatch_waiting(
            to,
            event.into_event(),
            Wait::timeout(timeout),
            ("dispatch_timeout", "dispatch_async"),
        )
    }

    /// [`dispatch_timeout`](Self::dispatch_timeout) with a deadline instead of a timeout:
    /// waits for room until `deadline` at most (tried once even if it has passed).
    ///
    /// # Errors
    ///
    /// As [`dispatch_timeout`](Self::dispatch_timeout).
    #[inline]
    #[track_caller]
    pub fn dispatch_deadline<C>(
        &self,
        to: ClientHandle<C>,
        event: impl EventFor<M, C>,
        deadline: Instant,
    ) -> Result<(), DispatchError<Event<M>>> {
        self.dispatch_waiting(
            to,
            event.into_event(),
            Wait::Until(deadline),
            ("dispatch_deadline", "dispatch_async"),
        )
    }

    /// The body of the dispatches that wait.
    #[inline]
    #[track_caller]
    fn dispatch_waiting<C>(
        &self,
        to: ClientHandle<C>,
        event: Event<M>,
        wait: Wait,
        call: BlockingCall,
    ) -> Result<(), DispatchError<Event<M>>> {
        let Some(target) = self.target(to) else {
            return Err(DispatchError::NoSuchProcessor(event));
        };
        self.send(target, Item::new(to.key, event), wait, call)
            .map_err(|e| e.map(Item::into_event))
    }

    /// Dispatches the closure `f` to the client `to` as a callback event, as
    /// [`dispatch`](Self::dispatch) does `Event::Callback(Callback::new(f))`: stored inline,
    /// and a compile error if it does not fit the callback's space ([at `cargo build`, not
    /// at `cargo check`](zerodispatch_callback#when-the-size-check-runs)). Never allocates
    /// (but once per thread, as [`dispatch`](Self::dispatch) says).
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
    #[track_caller]
    pub fn dispatch_callback<C, F>(
        &self,
        to: ClientHandle<C>,
        f: F,
    ) -> Result<(), DispatchError<Event<M>>>
    where
        F: FnOnce() + Send + 'static,
    {
        let event = Event::Callback(Callback::new(f));
        self.dispatch_waiting(
            to,
            event,
            Wait::Forever,
            ("dispatch_callback", "dispatch_async"),
        )
    }

    /// Enqueues events for the client `to` from `events`, in order, until it runs out or
    /// the queue is full, passing the processor's gate once for the whole batch (two
    /// read-modify-writes for the batch instead of one per event; the queue's own
    /// compare-and-swap per event remains). Returns how many were enqueued. Never blocks, never allocates.
    /// The iterator runs inside the gate: it must not wait for the processor (see
    /// [`dispatch_batch`](Self::dispatch_batch)).
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
    pub fn try_dispatch_batch<C>(
        &self,
        to: ClientHandle<C>,
        events: &mut impl Iterator<Item = impl EventFor<M, C>>,
    ) -> Result<usize, BatchError<Event<M>>> {
        self.enqueue(
            to,
            &mut events.map(EventFor::into_event),
            Wait::No,
            NEVER_WAITS,
        )
    }

    /// Enqueues every event of `events` for the client `to`, in order, waiting for room
    /// like [`dispatch`](Self::dispatch). Returns how many were enqueued. Never allocates
    /// (but once per processor, at its first packed batch: its pool of packs; and once per
    /// thread, as [`dispatch`](Self::dispatch) says).
    ///
    /// From an application thread the events travel in packs: up to 16 in one queue slot,
    /// handed to the client in one call (one lookup, one containment of panics, one
    /// dynamic call for the run), each still counted, contained and flushed as one event
    /// (`ProcessorSnapshot::packs` counts the packs). A pack takes as many events as the
    /// iterator promises (its `size_hint`'s lower bound, up to 16) before it is pushed; one
    /// that promises fewer than two is read one event at a time, each pushed to a slot of
    /// its own as it comes. On a processor thread, one pass through the gate per run of
    /// events that fits, the rest through the outbox.
    ///
    /// The iterator runs inside the processor's gate (all but the call that gives a pack's
    /// first event), and a parked processor is woken for the events when the batch leaves
    /// it (once per pack, or once for a run of events one to a slot; `wake.rs`): so the
    /// iterator must not wait for the handling of events it already gave, or for anything
    /// else that processor does. It could wait for ever: the processor may have handled
    /// the first events and parked, and the events pushed since wait, unannounced, for the
    /// batch to leave the gate. Produce what the batch carries first, then dispatch it.
    ///
    /// # Errors
    ///
    /// As [`try_dispatch_batch`](Self::try_dispatch_batch), except that a full queue is
    /// waited for, or on a processor thread outboxed, as by [`dispatch`](Self::dispatch)
    /// (`Full` only on a processor thread whose outbox is full).
    #[track_caller]
    pub fn dispatch_batch<C>(
        &self,
        to: ClientHandle<C>,
        events: &mut impl Iterator<Item = impl EventFor<M, C>>,
    ) -> Result<usize, BatchError<Event<M>>> {
        self.enqueue(
            to,
            &mut events.map(EventFor::into_event),
            Wait::Forever,
            ("dispatch_batch", "dispatch_batch_async"),
        )
    }

    /// [`dispatch_batch`](Self::dispatch_batch), waiting for room at most `timeout` in
    /// all: the event that found the queue still full at the deadline comes back in
    /// [`DispatchError::Timeout`], the events after it stay in `events`. On a processor
    /// thread it is [`dispatch_batch`](Self::dispatch_batch).
    ///
    /// # Errors
    ///
    /// As [`dispatch_batch`](Self::dispatch_batch), and `Timeout`.
    #[track_caller]
    pub fn dispatch_batch_timeout<C>(
        &self,
        to: ClientHandle<C>,
        events: &mut impl Iterator<Item = impl EventFor<M, C>>,
        timeout: Duration,
    ) -> Result<usize, BatchError<Event<M>>> {
        self.enqueue(
            to,
            &mut events.map(EventFor::into_event),
            Wait::timeout(timeout),
            ("dispatch_batch_timeout", "dispatch_batch_async"),
        )
    }

    /// [`dispatch_batch_timeout`](Self::dispatch_batch_timeout) with a deadline.
    ///
    /// # Errors
    ///
    /// As [`dispatch_batch_timeout`](Self::dispatch_batch_timeout).
    #[track_caller]
    pub fn dispatch_batch_deadline<C>(
        &self,
        to: ClientHandle<C>,
        events: &mut impl Iterator<Item = impl EventFor<M, C>>,
        deadline: Instant,
    ) -> Result<usize, BatchError<Event<M>>> {
        self.enqueue(
            to,
            &mut events.map(EventFor::into_event),
            Wait::Until(deadline),
            ("dispatch_batch_deadline", "dispatch_batch_async"),
        )
    }

    /// Enqueues `event` for the client `to` from async code: the future resolves at once
    /// when the queue has room, and otherwise waits for room with its task's waker (no
    /// spinning, no blocked runtime thread), woken by the processor once a quarter of the
    /// queue is free. Works on any runtime (only `std::task`); allocates nothing per event
    /// (a waker clone, once a registry has grown to the number of futures waiting at once).
    ///
    /// On a processor thread of this dispatcher it never waits, as
    /// [`dispatch`](Self::dispatch) does there: a full queue sends the event through the
    /// processor's outbox, and the future resolves at its first poll.
    ///
    /// Cancel-safe: a future dropped before it resolved enqueues nothing later, and what it
    /// enqueued stays enqueued; the event it still holds is dropped with it, or handed back
    /// by [`DispatchFuture::cancel`]. The protocol is in `waiters.rs`.
    ///
    /// ```
    /// # use zerodispatch_core::*;
    /// # struct Sink;
    /// # impl Client<u64> for Sink {
    /// #     fn on_event(&mut self, _: ClientEvent<u64>, _: &mut Context<u64>) {}
    /// # }
    /// let d = Dispatcher::<u64>::builder().pool(ClientType::Queue, PoolConfig::new(1)).build()?;
    /// let sink = d.register(ClientType::Queue, Sink, Placement::LeastLoaded)?;
    /// let handle = d.handle();
    /// let future = handle.dispatch_async(sink, Event::Message(7));
    /// // Poll it on any runtime: `future.await?` in an async fn.
    /// # drop(future);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    ///
    /// The future's output hands the event back in [`DispatchError::ShutDown`] (shutdown
    /// wakes every waiting future), [`DispatchError::NoSuchProcessor`] for a handle of
    /// another dispatcher, or, on a processor thread whose outbox is full,
    /// [`DispatchError::Full`].
    pub fn dispatch_async<C>(
        &self,
        to: ClientHandle<C>,
        event: impl EventFor<M, C>,
    ) -> DispatchFuture<'_, M> {
        DispatchFuture::new(self, to.erase(), event.into_event())
    }

    /// Enqueues every event of `events` for the client `to`, in order, from async code,
    /// waiting for room like [`dispatch_async`](Self::dispatch_async), with one pass
    /// through the gate per run of events that fits. The future resolves with how many were
    /// enqueued. Allocates nothing per event. The iterator runs inside the gate: it must
    /// not wait for the processor (see [`dispatch_batch`](Self::dispatch_batch)).
    ///
    /// Cancel-safe: dropped before it resolved, it enqueues nothing later; the events it
    /// did not take stay in `events`, and the one it held is dropped with it or handed back
    /// by [`DispatchBatchFuture::cancel`].
    ///
    /// # Errors
    ///
    /// As [`dispatch_async`](Self::dispatch_async), in a [`BatchError`] that counts the
    /// events enqueued before it; the events after the one handed back stay in `events`.
    pub fn dispatch_batch_async<'a, C, I: Iterator<Item = Event<M>>>(
        &'a self,
        to: ClientHandle<C>,
        events: &'a mut I,
    ) -> DispatchBatchFuture<'a, M, I> {
        DispatchBatchFuture::new(self, to.erase(), events)
    }

    /// Runs `callback` on `processor` as a dispatcher callback (after flushing its
    /// clients), waiting while its queue is full, like [`dispatch`](Self::dispatch).
    ///
    /// # Errors
    ///
    /// As [`dispatch`](Self::dispatch), with the callback handed back.
    #[track_caller]
    pub fn execute(
        &self,
        processor: impl Into<ProcessorId>,
        callback: Callback,
    ) -> Result<(), DispatchError<Callback>> {
        self.execute_as(processor.into(), callback, ("execute", "call_async"))
    }

    /// [`execute`](Self::execute), named `call` in a refusal of `blocking.rs`.
    #[track_caller]
    pub(crate) fn execute_as(
        &self,
        processor: ProcessorId,
        callback: Callback,
        call: BlockingCall,
    ) -> Result<(), DispatchError<Callback>> {
        let Some(p) = self.processor(processor) else {
            return Err(DispatchError::NoSuchProcessor(callback));
        };
        self.send(p, Item::DispatcherCallback(callback), Wait::Forever, call)
            .map_err(|e| e.map(Item::into_dispatcher_callback))
    }

    /// Runs `callback` on `processor` at `deadline` (on the dispatcher's clock,
    /// [`now`](Self::now)), as a dispatcher callback: after the processor has flushed its
    /// clients, in deadline order among its timers (ties in the order they reached it). A
    /// deadline already past runs at the processor's next loop turn. Never allocates: the
    /// processor's timers are preallocated (`PoolConfig::timers`); the protocol is in
    /// `timers.rs`.
    ///
    /// Never waits, on any thread (a processor's, an async task's): the callback goes to the
    /// processor beside its queue, on arrivals as large as its timers, which a free timer
    /// guarantees have room. A timer runs once; one that repeats schedules its next turn
    /// from its callback (the processor frees a timer before it runs it, so the next turn
    /// finds one). Timers not due at shutdown are dropped unrun.
    ///
    /// ```
    /// # use zerodispatch_core::*;
    /// # use std::time::Duration;
    /// let d = Dispatcher::<NoMessage>::builder().pool(ClientType::Queue, PoolConfig::new(1)).build()?;
    /// let queue = d.processors(ClientType::Queue)[0];
    /// let (tx, rx) = std::sync::mpsc::channel();
    /// let tick = tx.clone();
    /// d.schedule(queue, d.now() + Duration::from_millis(5), Callback::new(move || tick.send("late").unwrap()))?;
    /// let early = d.schedule(queue, d.now() + Duration::from_millis(1), Callback::new(move || tx.send("early").unwrap()))?;
    /// assert_eq!(rx.recv()?, "early");
    /// assert!(!d.cancel(early), "it has run");
    /// assert_eq!(rx.recv()?, "late");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    ///
    /// The callback comes back in [`DispatchError::TimersFull`] when every timer of the
    /// processor is in use, [`DispatchError::ShutDown`] once shutdown has started, and
    /// [`DispatchError::NoSuchProcessor`] for a processor this dispatcher does not have.
    pub fn schedule(
        &self,
        processor: impl Into<ProcessorId>,
        deadline: Instant,
        callback: Callback,
    ) -> Result<TimerToken, DispatchError<Callback>> {
        let processor = processor.into();
        let Some(p) = self.processor(processor) else {
            return Err(DispatchError::NoSuchProcessor(callback));
        };
        let Some((slot, generation)) = p.timers.take(self.shared.clock.ns_of(deadline)) else {
            return Err(DispatchError::TimersFull(callback));
        };
        match p.push_timer(slot, callback) {
            Ok(()) => Ok(TimerToken {
                dispatcher: self.shared.id,
                processor,
                slot,
                generation,
            }),
            Err(callback) => {
                p.timers.release(slot);
                Err(DispatchError::ShutDown(callback))
            }
        }
    }

    /// [`schedule`](Self::schedule) at `delay` from [`now`](Self::now).
    ///
    /// # Errors
    ///
    /// As [`schedule`](Self::schedule).
    /// A delay too long for the clock (`Duration::MAX`) is a timer that never comes due
    /// while the dispatcher runs.
    pub fn schedule_in(
        &self,
        processor: impl Into<ProcessorId>,
        delay: Duration,
        callback: Callback,
    ) -> Result<TimerToken, DispatchError<Callback>> {
        self.schedule(processor, self.shared.clock.after(delay), callback)
    }

    /// Cancels a timer: `true` if it had not started, and then it never runs (its callback
    /// is dropped, and its slot freed, on its processor at its next turn); `false` if it has
    /// run, is running, was cancelled already, was dropped at shutdown, or the token is
    /// another dispatcher's. From any thread, never waits: a compare-and-swap, then the
    /// processor is told through its gate (`timers.rs`).
    pub fn cancel(&self, token: TimerToken) -> bool {
        if token.dispatcher != self.shared.id {
            return false;
        }
        let Some(p) = self.processor(token.processor) else {
            return false;
        };
        let cancelled = p.timers.cancel(token.slot, token.generation);
        if cancelled {
            p.push_reclaim(token.slot, token.generation);
        }
        cancelled
    }

    /// Now, on the clock timers are measured on: the monotonic clock, or the test's clock
    /// of a [`testing`](crate::testing) dispatcher, which moves only when advanced.
    #[must_use]
    pub fn now(&self) -> Instant {
        self.shared.clock.now()
    }

    /// An executor running closures on `processor`.
    #[must_use]
    pub fn executor(&self, processor: impl Into<ProcessorId>) -> Executor<M> {
        Executor {
            dispatcher: self.clone(),
            processor: processor.into(),
        }
    }

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

    /// Whether the current thread is the processor thread that owns `handle`'s client.
    /// A thread-local read: no syscall.
    #[must_use]
    pub fn in_dispatcher_thread<C>(&self, handle: ClientHandle<C>) -> bool {
        handle.dispatcher == self.shared.id
            && current_processor() == Some((self.shared.id, handle.processor))
    }

    /// Waits until the processor (of a client, or named) has handled everything enqueued to
    /// it before this call: a [`call`](Self::call) of nothing, allocating nothing after the
    /// calling thread's first call. For application threads: a processor thread never
    /// waits for a processor.
    ///
    /// # Errors
    ///
    /// As [`call`](Self::call) (`Panicked` cannot happen: there is nothing to run).
    #[track_caller]
    pub fn synchronize(&self, target: impl Into<ProcessorId>) -> Result<(), SyncError> {
        self.refuse_blocking("synchronize", "call_async");
        self.call(target, || ())
    }

    /// Runs `f` on the processor (of a client, or named) and returns its result to the
    /// calling thread, which waits for it. `f` runs as a dispatcher callback: after
    /// everything enqueued to the processor before this call, and after the processor has
    /// flushed its clients. For application threads: a processor thread never waits for a
    /// processor.
    ///
    /// Allocates nothing after the calling thread's first call (which makes its reusable
    /// answer slot; the protocol is in `call.rs`). `f` travels inline in a [`Callback`],
    /// beside 8 bytes of the call's own, so it may capture at most 24 bytes (an `Arc`, a
    /// handle, a few integers); its result comes back inline, so `R` may be at most 32
    /// bytes, aligned to 8 at most. Both limits are compile errors ([at `cargo build`, not
    /// at `cargo check`](zerodispatch_callback#when-the-size-check-runs)), never allocations:
    /// capture or return an `Arc` or a `Box` for more, and the allocation is yours to see.
    ///
    /// ```
    /// # use zerodispatch_core::*;
    /// let d = Dispatcher::<NoMessage>::builder().pool(ClientType::Queue, PoolConfig::new(1)).build()?;
    /// let queue = d.processors(ClientType::Queue)[0];
    /// let name = d.call(queue, || std::thread::current().name().map(str::len))?;
    /// assert_eq!(name, Some("zd-queue-0".len()));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// A result larger than the slot does not compile:
    ///
    /// ```compile_fail
    /// # use zerodispatch_core::*;
    /// # let d = Dispatcher::<NoMessage>::builder().pool(ClientType::Queue, PoolConfig::new(1)).build().unwrap();
    /// # let queue = d.processors(ClientType::Queue)[0];
    /// let big: [u64; 8] = d.call(queue, || [0_u64; 8]).unwrap();
    /// ```
    ///
    /// # Errors
    ///
    /// [`SyncError::OnProcessorThread`] if called on any processor thread of this
    /// dispatcher (waiting there could deadlock: for itself, or two processors for each
    /// other), `ShutDown` if shutdown has started (`f` is dropped unrun), `NoSuchProcessor`
    /// for a bad id, `Panicked` if `f` panicked (the processor caught and counted the panic,
    /// and goes on), `Dropped` if the processor's thread died before it got there.
    #[track_caller]
    pub fn call<F, R>(&self, target: impl Into<ProcessorId>, f: F) -> Result<R, SyncError>
    where
        F: FnOnce() -> R + Send + 'static,
        R: Send + 'static,
    {
        self.refuse_blocking("call", "call_async");
        let id = target.into();
        let processor = self.processor(id).ok_or(SyncError::NoSuchProcessor(id))?;
        if let Some(own) = self.current() {
            return Err(SyncError::OnProcessorThread(own.id));
        }
        let (slot, request) = call::request();
        let task = Item::DispatcherCallback(call_task(f, request));
        let pushed = if self.shared.stepped {
            self.push_stepped(processor, task)
        } else {
            processor.push(task, Wait::Forever)
        };
        if let Err(refused) = pushed {
            // Shut down (a waiting push is refused only by a closed gate). The task comes
            // back in the error, and goes with it: its request answers `Dropped`, which
            // leaves the slot ready for the next call once taken.
            drop(refused);
            let _ = slot.wait();
            return Err(SyncError::ShutDown);
        }
        if self.shared.stepped {
            self.run_stepped();
        }
        answered(slot.wait(), id)
    }

    /// As [`call`](Self::call), for a task on an async runtime: the future sends `f` to
    /// the processor (waiting for room, if its queue is full, as
    /// [`dispatch_async`](Self::dispatch_async) does) and resolves with `f`'s result, never
    /// blocking its thread. Same limits on `f` and `R`; allocates nothing once the thread
    /// polling it has a free answer slot in its pool (one per call it has had under way at
    /// once: the protocol is in `call.rs`).
    ///
    /// Cancel-safe: dropped before `f` was enqueued, `f` is dropped unrun; dropped after,
    /// `f` runs and its result is dropped.
    ///
    /// # Errors
    ///
    /// As [`call`](Self::call).
    pub fn call_async<F, R>(&self, target: impl Into<ProcessorId>, f: F) -> CallFuture<'_, M, R>
    where
        F: FnOnce() -> R + Send + 'static,
        R: Send + 'static,
    {
        let id = target.into();
        if self.processor(id).is_none() {
            return CallFuture::refused(self, id, SyncError::NoSuchProcessor(id));
        }
        if let Some(own) = self.current() {
            return CallFuture::refused(self, id, SyncError::OnProcessorThread(own.id));
        }
        let (slot, request) = call::task_request();
        CallFuture::new(
            self,
            id,
            Item::DispatcherCallback(call_task(f, request)),
            slot,
        )
    }

    /// Runs `f` once on every processor of `client_type` (as a dispatcher callback), then
    /// `done` once, on the processor that finished last, after every `f`, even one that
    /// panicked (the panic is counted by its processor).
    ///
    /// All or nothing: it reaches every processor of the type, or none, and then says so
    /// and hands `f` and `done` back. It first enters every processor's gate (refused if
    /// shutdown closed one) and only then enqueues: an event entered before a close is run
    /// even across the shutdown (`gate.rs`), so once every gate is entered nothing can
    /// stop one `f` and not the others. From an application thread it waits for room in a
    /// full queue, as [`execute`](Self::execute) does. On a processor thread, where nothing
    /// waits, an `f` whose queue is full goes through the calling processor's outbox:
    /// it is refused unless that outbox has room for one event per processor of the type,
    /// checked before anything is sent (only the calling thread adds to its outbox).
    ///
    /// Allocates one shared record: this is a management operation.
    ///
    /// # Errors
    ///
    /// [`ExecuteOnAllError`], with `f` and `done` handed back unrun and every processor of
    /// the type named as not reached: [`ExecuteOnAllRefusal::NoProcessors`] if the type
    /// has none, `ShutDown` once shutdown has closed one of them, `OutboxFull` on a
    /// processor thread whose outbox has room for fewer events than the type has
    /// processors.
    #[track_caller]
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
        self.refuse_blocking("execute_on_all", "");
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
        let refused = |reason, f, done| {
            Err(ExecuteOnAllError::new(
                reason,
                pool.iter().map(|p| p.id).collect(),
                f,
                done,
            ))
        };
        if pool.is_empty() {
            return refused(ExecuteOnAllRefusal::NoProcessors(client_type), f, done);
        }
        let own = self.current();
        if let Some(own) = own {
            let room = own.outbox_room();
            if room < pool.len() {
                let reason = ExecuteOnAllRefusal::OutboxFull {
                    processor: own.id,
                    room,
                    needed: pool.len(),
                };
                return refused(reason, f, done);
            }
        }
        // A stepped dispatcher's processors run only when its test steps them: a full queue
        // would be waited for without end below.
        if self.shared.stepped
            && let Some(full) = pool.iter().find(|p| p.queue.is_full())
        {
            return refused(ExecuteOnAllRefusal::Full(full.id), f, done);
        }
        // Every gate, or none: from here on nothing is refused.
        let Some(entries) = ProcessorShared::enter_all(pool.iter().map(|p| &**p)) else {
            return refused(ExecuteOnAllRefusal::ShutDown, f, done);
        };
        // One extra count held by this call, released after every processor was sent its
        // task, so that `done` cannot run before all `f`s were enqueued.
        let all = Arc::new(All {
            f,
            remaining: std::sync::atomic::AtomicUsize::new(pool.len() + 1),
            done: Mutex::new(Some(Box::new(done))),
        });
        for (processor, entry) in pool.iter().zip(entries) {
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
            let item = Item::DispatcherCallback(task);
            match own {
                Some(own) => own.send_entered(processor, entry, item),
                None => entry.push_waiting(item),
            }
        }
        drop(Share(all));
        Ok(())
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

    /// The processors of `client_type`.
    #[must_use]
    pub fn processors(&self, client_type: ClientType) -> Vec<ProcessorId> {
        self.shared.pools[client_type.index()]
            .iter()
            .map(|p| p.id)
            .collect()
    }
}
