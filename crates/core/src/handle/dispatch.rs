//! The forms of dispatch: one event or a batch, to a client, waiting for room or not.
use std::time::{Duration, Instant};

use zerodispatch_callback::IntoCallback;

use crate::error::{BatchError, DispatchError};
use crate::event::{Event, EventFor, Item};
use crate::ids::ClientHandle;
use crate::room::Wait;

use super::DispatcherHandle;
use super::send::{BlockingCall, NEVER_WAITS};

impl<M: Send + 'static> DispatcherHandle<M> {
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

    /// Dispatches `work` to the client `to` as a callback event, as
    /// [`dispatch`](Self::dispatch) does `Event::Callback(work.into_callback())`. `work` is a
    /// closure, stored inline (a compile error if it does not fit the callback's space, [at
    /// `cargo build`, not at `cargo check`](zerodispatch_callback#when-the-size-check-runs)),
    /// or a [`Callback`](crate::Callback) made already, passed on as it is
    /// ([`IntoCallback`], as every call that takes work). Never allocates (but once per
    /// thread, as [`dispatch`](Self::dispatch) says).
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
    pub fn dispatch_callback<C, W: IntoCallback>(
        &self,
        to: ClientHandle<C>,
        work: W,
    ) -> Result<(), DispatchError<Event<M>>> {
        let () = W::CHECK;
        let event = Event::Callback(work.into_callback());
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
}
