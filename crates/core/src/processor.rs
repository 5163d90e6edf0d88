//! A processor: one OS thread draining one bounded queue of events for the clients it
//! owns.
//!
//! # The loop
//!
//! 1. Retry the [outbox](crate::outbox): hand on the events this processor's clients
//!    dispatched to queues that were full.
//! 2. Pop events until the queue is empty, handling each (see below); after each run,
//!    [linger](LINGER) a microsecond and look once more. Every `max_batch` events, flush
//!    the flush list (the flush contract on [`Client`]) and retry the outbox.
//! 3. The queue is drained: flush the flush list, retry the outbox.
//! 4. If shutdown asked this processor to stop (only after its [gate](crate::gate) is
//!    closed and empty, so nothing more can arrive), the queue and the outbox are empty
//!    and no client asked to be flushed again, drop the clients and exit.
//! 5. Wait for work by the pool's [`WaitStrategy`], then go to 1. Parking follows the wake
//!    protocol of [`wake`](crate::wake). While the outbox holds events or a client asked
//!    to be flushed again, the park is a short timed one, so that the retries happen.
//!
//! The loop never waits for another processor: that is what makes cycles of processors
//! that dispatch to each other through bounded queues unable to deadlock (see
//! [`outbox`](crate::outbox)).
//!
//! Handling an event: a callback or message for a client looks the client up by its key
//! (a stale key is counted and the event dropped), hands it the event, and puts it on the
//! flush list once; a dispatcher callback flushes the list, then runs. Every call into
//! user code (handlers, flushes, callbacks, and the drops of clients and of stale events)
//! is wrapped in `catch_unwind`: a panic is counted and logged, and the loop goes on.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::AtomicBool as StdAtomicBool;
use std::sync::{Arc, Mutex, OnceLock};
use std::task::Waker;
use std::time::{Duration, Instant};

use crossbeam_utils::{Backoff, CachePadded};

use crate::client::{
    ClientCallback, ClientEvent, ClientFlags, ClientHandle, ClientKey, Context, ProcessorId,
    Registered,
};
use crate::config::{PoolConfig, WaitStrategy};
use crate::error::{DispatchError, RegisterError};
use crate::event::Item;
use crate::gate::Gate;
use crate::handle::DispatcherHandle;
use crate::outbox::Outbox;
use crate::room::{RoomWait, Wait};
use crate::slots::ClientSlots;
use crate::stats::{Histograms, Pinning, ProcessorStats};
use crate::sync::{self, AtomicBool, BoundedQueue, Ordering, thread};
use crate::waiters::{Registration, Waiters};

/// How long a processor parks when its queue is empty but entries are ahead of what it
/// popped (a producer between its entry and its push, or an event kept in an outbox): a
/// push follows its entry within nanoseconds, an outboxed event within the sender's next
/// retry. Short enough to cost no visible latency, long enough not to spin.
const BRIEF_PARK: Duration = Duration::from_micros(20);

/// Check the queue depth (watermarks, max depth) and look at the waiters (producers and
/// futures blocked on a full queue, woken at room for a burst) every this many events
/// within a drain, starting after its first event (which may have been a long one, during
/// which the queue filled): often enough to see a queue filling up under sustained load
/// and to wake a blocked producer while a 256-event queue or larger still holds three
/// quarters of its work, rarely enough that the loads of head and tail (cache lines the
/// producers write) cost nothing measurable. (A countdown of its own for the waiters,
/// an eighth of the capacity, cost the drain 8 ns an event on the hop bench, 51.6 against
/// 42.8 ns: folded into this check it costs nothing measurable.) Below 256 events a
/// waiter is woken at a flush point or when the run ends.
const DEPTH_CHECK_INTERVAL: u64 = 64;

/// The state of a processor that other threads see.
pub(crate) struct ProcessorShared<M> {
    pub(crate) id: ProcessorId,
    pub(crate) config: PoolConfig,
    pub(crate) queue: BoundedQueue<Item<M>>,
    /// Passed by producers on every push; also carries the processor's sleeping flag.
    gate: CachePadded<Gate>,
    /// Set by shutdown once the gate is closed and empty.
    stop: AtomicBool,
    /// The processor's thread, for unparking; set right after it is spawned, before any
    /// handle to the dispatcher exists.
    pub(crate) thread: OnceLock<thread::Thread>,
    pub(crate) stats: ProcessorStats,
    /// Set by the monitor when it enqueues a probe, cleared when the probe is handled: at
    /// most one probe in the queue.
    pub(crate) probe_pending: StdAtomicBool,
    /// Set by the processor thread as its last act, once its clients are dropped: what
    /// `shutdown_timeout` watches, since a join cannot time out.
    pub(crate) exited: StdAtomicBool,
    /// Client table slots, taken at registration and released at unregistration, and the
    /// clients handed in and not yet adopted (the register hand-off of `slots.rs`).
    pub(crate) slots: sync::Mutex<ClientSlots<M>>,
    /// Events this processor's thread could not hand on yet (see [`outbox`](crate::outbox)).
    /// Locked only by this processor's own thread, so never contended.
    outbox: Mutex<Outbox<M>>,
    /// Futures waiting for room in the queue (the async door, `waiters.rs`).
    waiters: Waiters,
}

/// What one poll of the async door came to: done (pushed, or refused for good), or to
/// wait for a wake with the item kept.
#[derive(Debug)]
pub(crate) enum Door<T> {
    /// Pushed, or refused with the item handed back (`ShutDown`).
    Done(Result<(), DispatchError<T>>),
    /// Still full with the waker registered: poll again when woken.
    Wait(T),
}

/// A producer's entry in a processor's gate (see `gate.rs`), for the events it pushes
/// while holding it. Dropping it settles the count on every path, a panic included: no
/// event pushed, the entry is undone; `k` events pushed, the `k - 1` others are added. Then
/// it wakes the processor if the gate said it was going to sleep (the wake protocol).
#[must_use = "dropping it undoes the entry at once"]
pub(crate) struct Inside<'a, M> {
    target: &'a ProcessorShared<M>,
    /// Events pushed under this entry.
    pushed: usize,
    /// The processor had announced sleep when a read-modify-write of this entry ran.
    wake: bool,
}

impl<M> Inside<'_, M> {
    /// Pushes `item` under this entry from an application thread, waiting for room as long
    /// as it takes. An entry made before the close keeps its event accepted through a
    /// shutdown, whose processor drains until its gate is settled: the room comes.
    pub(crate) fn push_waiting(mut self, item: Item<M>) {
        // Its retries pass no gate (the entry is held): timed parks, no registration.
        let mut room = RoomWait::new(None, None);
        let mut item = item;
        loop {
            match self.target.queue.push(item) {
                Ok(()) => {
                    self.pushed = 1;
                    return;
                }
                Err(back) => {
                    // The target's thread is gone (it died: a normal exit waits for this
                    // entry to settle): nothing will pop again, so the event is dropped
                    // rather than waited for without end.
                    if self.target.exited.load(Ordering::Acquire) {
                        drop(back);
                        return;
                    }
                    item = back;
                    // Without a deadline the pause never gives up but at the thread's end.
                    let _ = room.pause(|| {
                        self.target.has_burst_room() || self.target.exited.load(Ordering::Acquire)
                    });
                }
            }
        }
    }

    /// Hands the entry to an event kept in an outbox: it stays counted until the outbox
    /// pushes the event ([`ProcessorShared::push_held`]).
    fn hand_to_outbox(self) {
        if self.wake {
            self.target.unpark();
        }
        std::mem::forget(self);
    }
}

impl<M> Drop for Inside<'_, M> {
    #[inline]
    fn drop(&mut self) {
        match self.pushed {
            0 => self.target.gate.undo(),
            1 => {}
            k => self.wake |= self.target.gate.add(k - 1),
        }
        if self.wake {
            self.target.unpark();
        }
    }
}

impl<M> ProcessorShared<M> {
    fn unpark(&self) {
        if let Some(thread) = self.thread.get() {
            thread.unpark();
        }
    }

    /// Whether a quarter of the queue is free.
    fn has_burst_room(&self) -> bool {
        let capacity = self.queue.capacity();
        self.queue.len() <= capacity - (capacity / 4).max(1)
    }
}

impl<M: Send + 'static> ProcessorShared<M> {
    pub(crate) fn new(id: ProcessorId, config: PoolConfig) -> Self {
        Self {
            id,
            queue: BoundedQueue::new(config.capacity),
            outbox: Mutex::new(Outbox::new(config.outbox_capacity)),
            config,
            gate: CachePadded::new(Gate::default()),
            stop: AtomicBool::new(false),
            thread: OnceLock::new(),
            stats: ProcessorStats::new(),
            probe_pending: StdAtomicBool::new(false),
            exited: StdAtomicBool::new(false),
            slots: sync::Mutex::new(ClientSlots::default()),
            waiters: Waiters::new(),
        }
    }

    /// Hands `client` to this processor under a new key, by the protocol of `slots.rs`:
    /// every event with that key, from any thread, finds the client. Never waits and
    /// queues nothing; the processor adopts the client at its first event. The client is
    /// dropped here, on the caller's thread, if it is refused.
    ///
    /// # Errors
    ///
    /// `ShutDown` once the gate is closed; `TableFull` when no key is left.
    pub(crate) fn hand_in(
        &self,
        client: Box<dyn Registered<M>>,
    ) -> Result<ClientKey, RegisterError> {
        // Step 1: the entry keeps a shutdown from settling until the client is among the
        // arrivals, where the processor's exit finds it.
        let Some(inside) = self.enter() else {
            return Err(RegisterError::ShutDown);
        };
        // Step 2, under the lock (released at the end of the statement: a refused client
        // is dropped outside it).
        let handed = self
            .slots
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .hand_in(client);
        // Step 3: the entry is undone (no event was pushed), with release: the processor's
        // acquire of a settled gate then sees the arrival.
        drop(inside);
        handed.map_err(|_refused| RegisterError::TableFull(self.id))
    }

    /// Enters the gate; `None` once shutdown has closed it.
    #[inline]
    fn enter(&self) -> Option<Inside<'_, M>> {
        let wake = self.gate.enter()?;
        Some(Inside {
            target: self,
            pushed: 0,
            wake,
        })
    }

    /// Enqueues items from `items` until it runs out or the queue is full, passing the gate
    /// once for all of them (one read-modify-write on the gate word for the first item, one
    /// for the others together), and wakes the processor if it is going to sleep. The item that did not fit
    /// (or, after shutdown, the first item) comes back in the error; the rest stay in
    /// `items`. Adds the items pushed to `pushed`.
    ///
    /// The iterator runs inside the gate (between two pushes): a slow one delays
    /// shutdown by as long as it takes; a panicking one leaves the gate on the way out.
    pub(crate) fn try_push_batch(
        &self,
        items: &mut impl Iterator<Item = Item<M>>,
        pushed: &mut usize,
    ) -> Result<(), DispatchError<Item<M>>> {
        let Some(mut inside) = self.enter() else {
            return match items.next() {
                Some(item) => Err(DispatchError::ShutDown(item)),
                None => Ok(()),
            };
        };
        for item in items.by_ref() {
            if let Err(back) = self.queue.push(item) {
                return Err(DispatchError::Full(back));
            }
            inside.pushed += 1;
            *pushed += 1;
        }
        Ok(())
    }

    /// Enqueues the items of `items` in order from an application thread, waiting for room
    /// in a full queue as `wait` says (see `room.rs`). On an error the item that failed
    /// comes back (`Full` with `Wait::No`, `Timeout` at the deadline, `ShutDown`) and the
    /// rest stay in `items`. Never called on a processor thread of this dispatcher (those go
    /// through [`send_batch_from`](Self::send_batch_from)).
    pub(crate) fn push_batch(
        &self,
        items: &mut impl Iterator<Item = Item<M>>,
        pushed: &mut usize,
        wait: Wait,
    ) -> Result<(), DispatchError<Item<M>>> {
        let deadline = match wait {
            Wait::No => return self.try_push_batch(items, pushed),
            Wait::Until(deadline) => Some(deadline),
            Wait::Forever => None,
        };
        // Every retry passes the gate (`try_push_batch`): the waiter protocol holds.
        let mut room = RoomWait::new(deadline, Some(&self.waiters));
        let mut retry: Option<Item<M>> = None;
        loop {
            let mut next = retry.take().into_iter().chain(items.by_ref());
            match self.try_push_batch(&mut next, pushed) {
                Err(DispatchError::Full(back)) if room.pause(|| self.has_room_for_burst()) => {
                    retry = Some(back);
                }
                Err(DispatchError::Full(back)) => return Err(DispatchError::Timeout(back)),
                other => return other,
            }
        }
    }

    /// Producer side, waiting for room: whether a quarter of the queue is free (room for a
    /// burst, see `room.rs`), or the gate closed (a push now hands its event back).
    fn has_room_for_burst(&self) -> bool {
        self.has_burst_room() || self.gate.is_closed()
    }

    /// Enters the gate of every processor of `pool`, or of none: `None` (every entry made
    /// undone) if shutdown has closed one. An event pushed under each entry is accepted,
    /// even across a shutdown (see `gate.rs`): what makes `execute_on_all` reach every
    /// processor or none.
    pub(crate) fn enter_all<'a>(
        pool: impl IntoIterator<Item = &'a Self>,
    ) -> Option<Vec<Inside<'a, M>>> {
        pool.into_iter().map(Self::enter).collect()
    }

    /// Room left in this processor's outbox. On its own thread only, where the room can
    /// only grow until this thread keeps an event.
    pub(crate) fn outbox_room(&self) -> usize {
        debug_assert!(self.on_own_thread(), "outbox_room called off {}", self.id);
        self.outbox.lock().unwrap_or_else(|e| e.into_inner()).room()
    }

    /// [`send_from`](Self::send_from) of `item` under an entry already made in `target`'s
    /// gate, with room in this processor's outbox checked by the caller
    /// ([`outbox_room`](Self::outbox_room)): it cannot fail.
    pub(crate) fn send_entered(
        &self,
        target: &ProcessorShared<M>,
        mut inside: Inside<'_, M>,
        item: Item<M>,
    ) {
        debug_assert!(self.on_own_thread(), "send_entered called off {}", self.id);
        let item = if outbox_len() == 0 {
            match target.queue.push(item) {
                Ok(()) => {
                    inside.pushed = 1;
                    return;
                }
                Err(item) => item,
            }
        } else {
            item
        };
        self.keep(target, item, inside)
            .expect("the caller checked the outbox's room");
    }

    /// Enqueues `item` unless the queue is full or shutdown closed the gate: the protocol of
    /// [`try_push_batch`](Self::try_push_batch) for one item, written out because it is the
    /// hottest path (going through the batch's iterator measured 2-3x slower per event).
    #[inline]
    pub(crate) fn try_push(&self, item: Item<M>) -> Result<(), DispatchError<Item<M>>> {
        let Some(mut inside) = self.enter() else {
            return Err(DispatchError::ShutDown(item));
        };
        let pushed = self.queue.push(item);
        inside.pushed = usize::from(pushed.is_ok());
        pushed.map_err(DispatchError::Full)
    }

    /// Enqueues `item` from an application thread, waiting for room in a full queue as
    /// `wait` says (see `room.rs`): `Full` with `Wait::No`, `Timeout` at the deadline.
    #[inline]
    pub(crate) fn push(&self, item: Item<M>, wait: Wait) -> Result<(), DispatchError<Item<M>>> {
        let deadline = match wait {
            Wait::No => return self.try_push(item),
            Wait::Until(deadline) => Some(deadline),
            Wait::Forever => None,
        };
        // Every retry passes the gate (`try_push`): the waiter protocol holds.
        let mut room = RoomWait::new(deadline, Some(&self.waiters));
        let mut item = item;
        loop {
            match self.try_push(item) {
                Err(DispatchError::Full(back)) if room.pause(|| self.has_room_for_burst()) => {
                    item = back;
                }
                Err(DispatchError::Full(back)) => return Err(DispatchError::Timeout(back)),
                other => return other,
            }
        }
    }

    /// The async door's producer side (the protocol of `waiters.rs`): `attempt` pushes
    /// `item` (one event, or the first of a batch); on a full queue, registers `waker`
    /// (refreshing `registration`) and attempts once more, which closes the race with a
    /// processor that drained in between. `Wait` with the item if the queue is still
    /// full; otherwise done, with a registration of this round withdrawn.
    ///
    /// `attempt` must pass the gate (`try_push`, `try_push_batch`): its entry is what
    /// orders the registration before the processor's look at its waiters.
    pub(crate) fn poll_push<T>(
        &self,
        item: T,
        waker: &Waker,
        registration: &mut Option<Registration>,
        mut attempt: impl FnMut(T) -> Result<(), DispatchError<T>>,
    ) -> Door<T> {
        let done = match attempt(item) {
            Err(DispatchError::Full(back)) => {
                self.waiters.register(waker, registration);
                match attempt(back) {
                    Err(DispatchError::Full(back)) => return Door::Wait(back),
                    other => other,
                }
            }
            other => other,
        };
        self.waiters.withdraw(registration);
        Door::Done(done)
    }

    /// Withdraws a future's registration (a future dropped while it waited).
    pub(crate) fn withdraw(&self, registration: &mut Option<Registration>) {
        self.waiters.withdraw(registration);
    }

    /// Processor side of the waiter protocol (`waiters.rs`: futures of the async door and
    /// threads blocked in a dispatch, `room.rs`), having popped `popped` events in all: if
    /// one waits and there is room for a burst beyond what is already on its way in, takes
    /// every registered waker into `waking` (empty on entry and on return) and wakes them.
    /// One relaxed load while nobody waits; call it every few dozen pops, at flush points
    /// and after each drained run.
    ///
    /// The room counted is the capacity less every event entered and not yet popped
    /// (`Gate::unpopped`): queued, between a producer's entry and its push, or kept in
    /// another processor's outbox. So the events of the outboxes, whose processors must
    /// never wait, go in before the application threads that may: woken at the queue's
    /// room alone, a blocked producer refilled the queue ahead of them and the outboxes
    /// grew (a relay's outbox overflowed in `tests/zero_alloc.rs`). While a waiter is
    /// pending the processor does not park (`has_events`), so a wake held back for the
    /// outboxed events comes at a later look, once they are in and popped.
    #[inline]
    pub(crate) fn wake_waiters(&self, popped: usize, waking: &mut Vec<Option<Waker>>) {
        if self.waiters.pending() && self.has_room_beyond_entered(popped) {
            self.waiters.take(waking);
            waking.drain(..).flatten().for_each(Waker::wake);
        }
    }

    /// Processor side: whether a quarter of the queue is free beyond every event entered
    /// and not yet popped, or the gate is closed (waiters then get their events back).
    fn has_room_beyond_entered(&self, popped: usize) -> bool {
        let capacity = self.queue.capacity();
        self.gate.unpopped(popped) <= capacity - (capacity / 4).max(1) || self.gate.is_closed()
    }

    /// Sends `item` to `target` from this processor's own thread, by the
    /// [outbox protocol](crate::outbox): never waits. With `wait` (a blocking dispatch), a
    /// full target queue puts the event in the outbox, and `Full` comes back only when
    /// the outbox is full too; without (`try_dispatch`), a full queue, or events waiting in
    /// the outbox that it must not overtake, hand it back at once.
    pub(crate) fn send_from(
        &self,
        target: &ProcessorShared<M>,
        item: Item<M>,
        wait: bool,
    ) -> Result<(), DispatchError<Item<M>>> {
        debug_assert!(self.on_own_thread(), "send_from called off {}", self.id);
        let Some(mut inside) = target.enter() else {
            return Err(DispatchError::ShutDown(item));
        };
        let item = if outbox_len() == 0 {
            match target.queue.push(item) {
                Ok(()) => {
                    inside.pushed = 1;
                    return Ok(());
                }
                Err(item) => item,
            }
        } else {
            item
        };
        if !wait {
            return Err(DispatchError::Full(item));
        }
        self.keep(target, item, inside)
    }

    /// [`send_from`](Self::send_from) for a run of items to one target: one pass through
    /// the target's gate while the queue has room, then one gate entry per item kept in
    /// the outbox.
    pub(crate) fn send_batch_from(
        &self,
        target: &ProcessorShared<M>,
        items: &mut impl Iterator<Item = Item<M>>,
        pushed: &mut usize,
        wait: bool,
    ) -> Result<(), DispatchError<Item<M>>> {
        debug_assert!(
            self.on_own_thread(),
            "send_batch_from called off {}",
            self.id
        );
        let mut first = None;
        if outbox_len() == 0 {
            match target.try_push_batch(items, pushed) {
                Err(DispatchError::Full(item)) => first = Some(item),
                other => return other,
            }
        }
        for item in first.into_iter().chain(items.by_ref()) {
            let Some(inside) = target.enter() else {
                return Err(DispatchError::ShutDown(item));
            };
            if !wait {
                return Err(DispatchError::Full(item));
            }
            self.keep(target, item, inside)?;
            *pushed += 1;
        }
        Ok(())
    }

    /// Keeps `item` for `target` in this processor's outbox, holding `inside`; hands it
    /// back (leaving the gate) if the outbox is full.
    fn keep(
        &self,
        target: &ProcessorShared<M>,
        item: Item<M>,
        inside: Inside<'_, M>,
    ) -> Result<(), DispatchError<Item<M>>> {
        let mut outbox = self.outbox.lock().unwrap_or_else(|e| e.into_inner());
        match outbox.keep(target.id, item) {
            Ok(()) => {
                inside.hand_to_outbox();
                OUTBOX_LEN.with(|len| len.set(outbox.len()));
                self.stats.counters.outboxed.add(1);
                Ok(())
            }
            Err(item) => Err(DispatchError::Full(item)),
        }
    }

    /// Whether the current thread is this processor's.
    fn on_own_thread(&self) -> bool {
        current_processor().is_some_and(|(_, id)| id == self.id)
    }

    /// Whether the processor has announced that it is going to sleep.
    pub(crate) fn is_sleeping(&self) -> bool {
        self.gate.is_sleeping()
    }

    /// Closes the gate: later pushes are refused. Wakes every future waiting for room, so
    /// that each is handed its event back instead of waiting forever.
    pub(crate) fn close(&self) {
        self.gate.close();
        // Allocates nothing: the registry's list is swapped for this empty one.
        let mut waking = Vec::new();
        self.waiters.take(&mut waking);
        waking.into_iter().flatten().for_each(Waker::wake);
    }

    /// Tells the processor to stop once its gate is settled (every event accepted before
    /// the close popped, events kept in other processors' outboxes included) and its own
    /// outbox is empty. Called after [`close`](Self::close).
    pub(crate) fn request_stop(&self) {
        // The stop needs no ordering with the sleeping flag: the unconditional unpark below
        // leaves a token if the processor is not parked yet, and it re-checks `stop` after.
        self.stop.store(true, Ordering::SeqCst);
        self.unpark();
    }

    /// Whether shutdown has told the processor to stop.
    pub(crate) fn stop_requested(&self) -> bool {
        // SeqCst: pairs with `request_stop`.
        self.stop.load(Ordering::SeqCst)
    }

    /// Processor side, having popped `popped` events in all: whether there is an event to
    /// pop, a waiter to wake (see [`has_events`](Self::has_events)), or a stop to obey.
    pub(crate) fn has_work(&self, popped: usize) -> bool {
        // SeqCst: pairs with `request_stop`.
        self.has_events(popped) || self.stop.load(Ordering::SeqCst)
    }

    /// Processor side: whether there is an event to pop, or a waiter (a future or a blocked
    /// thread, `waiters.rs`) that the next look will wake: room beyond what is entered
    /// (`wake_waiters`). A waiter held back by entries ahead of `popped` is no work: the
    /// processor parks only briefly then (the count is ahead, `wake.rs`), and looks again,
    /// rather than spin until the entered events arrive.
    fn has_events(&self, popped: usize) -> bool {
        !self.queue.is_empty() || (self.waiters.pending() && self.has_room_beyond_entered(popped))
    }

    /// Processor side: whether it may exit, as far as the stop, the queue and the gate say,
    /// having popped `popped` events in all (the caller adds its outbox and its
    /// flush-again requests). The gate must be settled: every event accepted popped.
    pub(crate) fn may_exit(&self, popped: usize) -> bool {
        // SeqCst: pairs with `request_stop`, which follows the close: the count read next
        // includes every entry accepted before the close.
        self.stop.load(Ordering::SeqCst) && self.queue.is_empty() && self.gate.settled(popped)
    }

    /// Processor side, having popped `popped` events in all: announces sleep and parks with
    /// `park` unless there is work, or only briefly while entries are ahead of `popped` (the
    /// wake protocol of `wake.rs`). With `stop_wakes` false, a stop does not count as work
    /// (a processor with retries pending must make them first). Returns whether it parked.
    pub(crate) fn sleep(&self, popped: usize, park: impl FnOnce(), stop_wakes: bool) -> bool {
        let has_work = || {
            if stop_wakes {
                self.has_work(popped)
            } else {
                self.has_events(popped)
            }
        };
        self.gate
            .sleep_unless(popped, has_work, park, || sync::park_timeout(BRIEF_PARK))
    }

    /// Pushes an event whose gate entry is already held (an outboxed one): the entry
    /// becomes the event. Hands it back if the queue is still full. An outboxed push has
    /// no read-modify-write of its own to read the sleeping flag from: it reads the flag,
    /// and a processor it misses is one that parks only briefly (the entry was counted).
    pub(crate) fn push_held(&self, item: Item<M>) -> Result<(), Item<M>> {
        let pushed = self.queue.push(item);
        if pushed.is_ok() && self.gate.is_sleeping() {
            self.unpark();
        }
        pushed
    }

    /// Processor side: hands on what this processor's outbox holds, as far as the targets
    /// (found by `target`) have room; returns how many went. Runs on this processor's
    /// thread only.
    pub(crate) fn retry_outbox<'t>(
        &self,
        target: impl Fn(ProcessorId) -> Option<&'t ProcessorShared<M>>,
    ) -> usize
    where
        M: 't,
    {
        let mut outbox = self.outbox.lock().unwrap_or_else(|e| e.into_inner());
        let sent = outbox.retry(|id, item| {
            // The gate was entered when the event was kept, and is still held: shutdown
            // waits for this push.
            target(id)
                .expect("an outboxed event names a processor of this dispatcher")
                .push_held(item)
        });
        OUTBOX_LEN.with(|len| len.set(outbox.len()));
        sent
    }
}

#[cfg(not(loom))]
std::thread_local! {
    /// Which processor, of which dispatcher, the current thread is.
    static CURRENT: std::cell::Cell<Option<(u64, ProcessorId)>> = const { std::cell::Cell::new(None) };
    /// Events in the current processor thread's outbox: read on every dispatch a processor
    /// makes (a thread-local read, no lock) to know whether it may push directly.
    static OUTBOX_LEN: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

// Under loom the model's threads share OS threads: its own thread-locals keep them apart.
#[cfg(loom)]
loom::thread_local! {
    static CURRENT: std::cell::Cell<Option<(u64, ProcessorId)>> = std::cell::Cell::new(None);
    static OUTBOX_LEN: std::cell::Cell<usize> = std::cell::Cell::new(0);
}

/// Makes the current thread processor `id` of dispatcher `dispatcher`: what a processor
/// thread does first (and a loom model for the threads it plays).
pub(crate) fn set_current(dispatcher: u64, id: ProcessorId) {
    CURRENT.with(|c| c.set(Some((dispatcher, id))));
}

/// Events in the current processor thread's outbox.
#[cfg(all(loom, test))]
pub(crate) fn current_outbox_len() -> usize {
    outbox_len()
}

/// The dispatcher id and processor of the current thread, if it is a processor thread.
pub(crate) fn current_processor() -> Option<(u64, ProcessorId)> {
    CURRENT.with(std::cell::Cell::get)
}

fn outbox_len() -> usize {
    OUTBOX_LEN.with(std::cell::Cell::get)
}

/// A registered client in its processor's table.
struct Entry<M> {
    client: Box<dyn Registered<M>>,
    generation: u16,
    /// On the flush list now (the dedup flag).
    on_flush_list: bool,
    /// The flush gate and the flush-again request ([`Context`]).
    flags: ClientFlags,
}

/// How long a processor that has just emptied its queue after a run of events waits
/// before it looks again, reading nothing a producer writes meanwhile.
///
/// A processor faster than its producers empties its queue every few events; each look
/// at an empty queue reads the queue's tail, the line every producer's push writes with a
/// compare-and-swap, and each such read makes the next push wait for that line to come
/// back from the processor's core. Waiting a moment first lets a producer in mid-stream
/// push a run of events undisturbed, which the processor then pops in one go: fewer looks
/// per event, longer flush batches. Measured on the hop bench (one producer, a typed
/// confirm): 37 ns per event without, 25 ns with a 0.7 us linger, 23.5 ns with 1.4 us, no
/// gain beyond. The price is the linger itself, paid once per drained run before the
/// flush that ends it: a microsecond against the tens of microseconds of a confirm's
/// round trip at low rates.
const LINGER: Duration = Duration::from_micros(1);

/// Spin-loop hints in a [`LINGER`] on this machine: a `pause` costs from a few to over a
/// hundred cycles depending on the processor, so the count is measured once per processor
/// thread (a few microseconds at its start).
fn linger_spins() -> u32 {
    const PROBE: u32 = 256;
    let start = Instant::now();
    for _ in 0..PROBE {
        std::hint::spin_loop();
    }
    let per_spin = start.elapsed() / PROBE;
    let spins = LINGER.as_nanos() / per_spin.as_nanos().max(1);
    u32::try_from(spins).unwrap_or(u32::MAX).clamp(8, 4096)
}

/// Waits `spins` spin-loop hints ([`LINGER`]), touching no shared memory.
#[inline]
fn linger(spins: u32) {
    for _ in 0..spins {
        std::hint::spin_loop();
    }
}

/// The shortest and longest timed park of a processor that has events in its outbox or
/// clients asking to be flushed again: it retries that often with nothing else to do,
/// doubling the wait after each fruitless turn. The minimum keeps a retry within a few
/// wake-ups of the target draining; the maximum bounds how long a kept event can sit
/// after room appeared while its sender is idle. Retune with the tests that bounce events
/// between processors on queues of 8 (`tests/soak.rs`, `tests/audit.rs`) under load.
const RETRY_PARK_MIN: Duration = Duration::from_micros(20);
const RETRY_PARK_MAX: Duration = Duration::from_millis(1);

/// How long a `SpinThenPark` processor polls for work at most before it parks, whatever its
/// `spins`: 50 us. The polls after the first few are `yield_now`s, which on this project's
/// 2-core VM cost about 1.3 us each, so the default 1,024 polls took about 1.3 ms of CPU
/// every time a processor ran dry (measured: `zd-server` used 1.3-1.5 CPU-seconds per 10 s
/// at 50 msg/s, all of it in these spins). 50 us still covers the hops within one
/// message's path (a PUT, its ACK, a push and its confirm follow each other within a few
/// microseconds while the next processor spins), which is what the spin is for; an event
/// that comes later than that pays a wake-up. Retune with `perftest --rate 50 --duration
/// 10s --json` (its `cpu.broker_threads_s` against `confirm_latency_us.p50`), and with
/// `benches/dispatch.rs`' `wake_latency`.
const SPIN_WINDOW: Duration = Duration::from_micros(50);

/// The processor thread's own state.
pub(crate) struct Runner<M: Send + 'static> {
    /// The context lent to every call into a client, set to name the client before each;
    /// it holds the processor's handle to its dispatcher.
    ctx: Context<M>,
    shared: Arc<ProcessorShared<M>>,
    clients: Vec<Option<Entry<M>>>,
    /// Slots of the clients to flush, in the order they received their first event since
    /// the last flush (or asked to be flushed again).
    flush_list: Vec<u16>,
    /// Clients that asked, during the flush under way, to be flushed again.
    again: Vec<u16>,
    /// Events since the last flush point.
    since_flush: u64,
    /// Events popped in all (wrapping): what the gate's count of entries is compared with.
    popped: usize,
    /// The next timed park while retries are pending (see [`RETRY_PARK_MIN`]).
    retry_park: Duration,
    /// Spin-loop hints in a [`LINGER`], measured when the thread starts.
    linger_spins: u32,
    histograms: Histograms,
    high_alarm: bool,
    /// The wakers of futures being woken (`waiters.rs`): empty between wakes, kept for its
    /// capacity.
    waking: Vec<Option<Waker>>,
}

/// Runs `f`, containing a panic: counted in `stats` and logged with `what`. Every call
/// into user code on a processor thread (handlers, flushes, callbacks, and the drops of
/// clients, captures and messages) goes through here, so that none can end the thread.
fn contain(stats: &ProcessorStats, id: ProcessorId, what: &'static str, f: impl FnOnce()) {
    if let Err(payload) = catch_unwind(AssertUnwindSafe(f)) {
        stats.counters.panics.add(1);
        let message = payload
            .downcast_ref::<&str>()
            .copied()
            .or_else(|| payload.downcast_ref::<String>().map(String::as_str))
            .unwrap_or("(not a string)");
        tracing::error!(processor = %id, what, message, "panic caught; the processor goes on");
        // The payload's own drop is user code too.
        let _ = catch_unwind(AssertUnwindSafe(move || drop(payload)));
    }
}

/// Armed for the whole life of a processor thread; if the thread unwinds anyway (a
/// defect of the dispatcher's own code: user code is contained), it makes every waiter
/// fail instead of hang: the gate closes (blocking dispatches and `synchronize` get
/// `ShutDown`), the events kept in the outbox leave the gates they hold, and the events
/// still queued are dropped, so that a `synchronize` marker among them wakes its waiter
/// with an error.
struct DeathWatch<M: Send + 'static> {
    shared: Arc<ProcessorShared<M>>,
    dispatcher: DispatcherHandle<M>,
}

impl<M: Send + 'static> Drop for DeathWatch<M> {
    fn drop(&mut self) {
        if !thread::panicking() {
            return;
        }
        let shared = &*self.shared;
        tracing::error!(processor = %shared.id, "processor thread died; its queue is refused and dropped");
        shared.close();
        shared.stop.store(true, Ordering::SeqCst);
        let mut outbox = shared.outbox.lock().unwrap_or_else(|e| e.into_inner());
        for (target, item) in outbox.take_all() {
            if let Some(target) = self.dispatcher.processor(target) {
                target.gate.undo();
            }
            contain(&shared.stats, shared.id, "drop of a kept event", || {
                drop(item)
            });
        }
        while let Some(item) = shared.queue.pop() {
            contain(&shared.stats, shared.id, "drop of a queued event", || {
                drop(item)
            });
        }
        // Release: a push that waits under a held entry (`push_waiting`) sees the thread
        // gone and drops its event instead of waiting for a pop that never comes.
        shared.exited.store(true, Ordering::Release);
    }
}

/// What [`Runner::deliver`] hands a client: an event through [`Client::on_event`], or a
/// callback that takes the client itself.
enum Delivery<M> {
    Event(ClientEvent<M>),
    Call(ClientCallback<M>),
}

impl<M> Delivery<M> {
    /// What the call into user code is, for the panic log.
    fn what(&self) -> &'static str {
        match self {
            Delivery::Event(ClientEvent::Callback(_)) => "client callback",
            Delivery::Event(ClientEvent::Message(_)) => "client message",
            Delivery::Call(_) => "callback on the client",
        }
    }
}

impl<M> From<ClientEvent<M>> for Delivery<M> {
    fn from(event: ClientEvent<M>) -> Self {
        Delivery::Event(event)
    }
}

impl<M: Send + 'static> Runner<M> {
    pub(crate) fn new(dispatcher: DispatcherHandle<M>, shared: Arc<ProcessorShared<M>>) -> Self {
        let ctx = Context {
            me: ClientHandle {
                dispatcher: dispatcher.id(),
                processor: shared.id,
                key: ClientKey {
                    slot: 0,
                    generation: 0,
                },
            },
            flags: ClientFlags::default(),
            wrong_type: false,
            dispatcher,
        };
        Self {
            ctx,
            shared,
            clients: Vec::new(),
            flush_list: Vec::new(),
            again: Vec::new(),
            since_flush: 0,
            popped: 0,
            retry_park: RETRY_PARK_MIN,
            linger_spins: 8,
            histograms: Histograms::new(),
            high_alarm: false,
            waking: Vec::with_capacity(crate::waiters::PLACES),
        }
    }

    /// The thread's body: pins, runs the loop until stopped, drops the clients.
    pub(crate) fn run(mut self, core: Option<usize>) {
        let id = self.shared.id;
        // Every log line of this thread, its clients' included, names its processor.
        let _span = tracing::info_span!("processor", processor = %id).entered();
        set_current(self.ctx.dispatcher.id(), id);
        let pinning = match core {
            None => Pinning::NotRequested,
            Some(core) => {
                if core_affinity::set_for_current(core_affinity::CoreId { id: core }) {
                    Pinning::Pinned(core)
                } else {
                    tracing::warn!(processor = %id, core, "the OS refused to pin the processor; it runs unpinned");
                    Pinning::Refused(core)
                }
            }
        };
        let _ = self.shared.stats.pinning.set(pinning);
        // Measured pinned, on the core it will run on.
        self.linger_spins = linger_spins();
        tracing::debug!(processor = %id, ?pinning, "processor started");

        self.run_loop();
        self.publish_histograms(true);
        let mut clients = 0;
        for entry in self.clients.drain(..).flatten() {
            clients += 1;
            // The client's own drop runs here, on its thread, contained like every call
            // into user code.
            contain(&self.shared.stats, id, "drop of a client", || drop(entry));
        }
        // Clients handed in that never got an event: the gate is settled, so no
        // registration is between its hand-in and its exit from the gate (`slots.rs`).
        // Taken out under the lock, dropped outside it.
        let arrivals: Vec<_> = self
            .shared
            .slots
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take_arrivals()
            .collect();
        for client in arrivals {
            clients += 1;
            contain(&self.shared.stats, id, "drop of a client", || drop(client));
        }
        tracing::debug!(processor = %id, clients, "processor stopped");
        // Release: whoever sees the flag sees the clients dropped.
        self.shared.exited.store(true, Ordering::Release);
    }

    /// The loop of the module docs, until stopped with nothing left to do.
    fn run_loop(&mut self) {
        let _watch = DeathWatch {
            shared: self.shared.clone(),
            dispatcher: self.ctx.dispatcher.clone(),
        };
        loop {
            self.retry_outbox();
            self.drain();
            self.flush_all();
            self.retry_outbox();
            if self.shared.may_exit(self.popped) && outbox_len() == 0 && self.flush_list.is_empty()
            {
                return;
            }
            self.wait_for_work();
        }
    }

    /// Hands on what the outbox holds, as far as the targets have room (the
    /// [outbox protocol](crate::outbox)).
    fn retry_outbox(&mut self) {
        if outbox_len() == 0 {
            return;
        }
        let dispatcher = &self.ctx.dispatcher;
        let sent = self
            .shared
            .retry_outbox(|id| dispatcher.processor(id).map(|p| &**p));
        if sent > 0 {
            self.retry_park = RETRY_PARK_MIN;
        }
    }

    /// Pops and handles events until the queue is empty. After each run of events it
    /// [lingers](LINGER) and looks once more: it stops at the first look that finds
    /// the queue empty.
    fn drain(&mut self) {
        let max_batch = self.shared.config.max_batch as u64;
        let mut popped = 0_u64;
        loop {
            let start = popped;
            while let Some(item) = self.shared.queue.pop() {
                self.popped = self.popped.wrapping_add(1);
                let counted = self.handle(item);
                popped += 1;
                self.shared.stats.counters.processed.add_release(counted);
                self.since_flush += 1;
                if self.since_flush >= max_batch {
                    self.flush_all();
                    self.retry_outbox();
                    self.shared.wake_waiters(self.popped, &mut self.waking);
                }
                if popped % DEPTH_CHECK_INTERVAL == 1 {
                    self.check_depth();
                    // Producers blocked on the full queue resume as soon as there is room
                    // for a burst, while the rest of the queue keeps this thread busy.
                    self.shared.wake_waiters(self.popped, &mut self.waking);
                }
            }
            // The end of a run: room for the futures waiting, if they are (`waiters.rs`).
            self.shared.wake_waiters(self.popped, &mut self.waking);
            if popped == start {
                break;
            }
            linger(self.linger_spins);
        }
        if self.high_alarm {
            // Drained: the alarm can clear.
            self.check_depth();
        }
    }

    fn wait_for_work(&mut self) {
        // Stopping but not settled (an accepted event still on its way in): wait briefly,
        // like a retry, rather than spin on the stop.
        if outbox_len() > 0 || !self.flush_list.is_empty() || self.shared.stop_requested() {
            self.wait_to_retry();
            return;
        }
        self.retry_park = RETRY_PARK_MIN;
        if self.spin_for_work() {
            return;
        }
        // Going to sleep: a requested histogram merge costs the event path nothing now.
        self.publish_histograms(false);
        if self.shared.sleep(self.popped, thread::park, true) {
            self.shared.stats.counters.parks.add(1);
        }
    }

    /// Waits a short, growing while (or until an event comes) before retrying the outbox
    /// and the clients that asked to be flushed again.
    fn wait_to_retry(&mut self) {
        let park = self.retry_park;
        // Not woken by a stop: at a stop the retries still have to be made.
        if self
            .shared
            .sleep(self.popped, || sync::park_timeout(park), false)
        {
            self.shared.stats.counters.parks.add(1);
        }
        self.retry_park = (park * 2).min(RETRY_PARK_MAX);
    }

    /// Polls for work by the wait strategy; `true` if work (or a stop) came, `false` if
    /// it is time to park.
    fn spin_for_work(&self) -> bool {
        let shared = &*self.shared;
        let popped = self.popped;
        let has_work = || shared.has_work(popped);
        let backoff = Backoff::new();
        let spins = match shared.config.wait {
            WaitStrategy::BusySpin => {
                while !has_work() {
                    backoff.spin();
                }
                return true;
            }
            WaitStrategy::SpinThenPark { spins } => spins,
            WaitStrategy::Park => 0,
        };
        // The clock is read once the backoff's short spins are done, before each yield: a
        // vDSO read (tens of ns) beside a syscall. Not under loom, whose models must not
        // depend on time.
        let mut started: Option<Instant> = None;
        for _ in 0..spins {
            if has_work() {
                return true;
            }
            if backoff.is_completed() {
                if !cfg!(loom) {
                    let now = Instant::now();
                    if now.duration_since(*started.get_or_insert(now)) >= SPIN_WINDOW {
                        return false;
                    }
                }
                thread::yield_now();
            } else {
                backoff.snooze();
            }
        }
        false
    }

    /// Samples the queue depth: max depth and the watermark alarm (edge-triggered, cleared
    /// at the low mark).
    fn check_depth(&mut self) {
        let depth = self.shared.queue.len();
        let config = &self.shared.config;
        self.shared.stats.counters.max_depth.max(depth as u64);
        if !self.high_alarm && depth >= config.high_watermark {
            self.high_alarm = true;
            self.shared.stats.counters.high_watermark_alarms.add(1);
            tracing::warn!(
                processor = %self.shared.id, depth, high_watermark = config.high_watermark,
                capacity = config.capacity, "queue above its high watermark"
            );
        } else if self.high_alarm && depth <= config.low_watermark {
            self.high_alarm = false;
            tracing::info!(
                processor = %self.shared.id, depth, low_watermark = config.low_watermark,
                "queue back at its low watermark; alarm cleared"
            );
        }
    }

    /// Handles one popped item; returns what it adds to `processed`: 1, or 0 for the
    /// monitor's probe (counted in `probes`: no caller enqueued it).
    #[inline]
    fn handle(&mut self, item: Item<M>) -> u64 {
        match item {
            Item::Callback { key, callback } => {
                if !callback.is_inline() {
                    self.shared.stats.counters.spilled.add(1);
                }
                self.deliver(key, ClientEvent::Callback(callback).into());
            }
            Item::Message { key, message } => {
                self.deliver(key, ClientEvent::Message(message).into())
            }
            Item::ClientCallback { key, callback } => {
                self.deliver(key, Delivery::Call(callback));
            }
            Item::DispatcherCallback(callback) => {
                if !callback.is_inline() {
                    self.shared.stats.counters.spilled.add(1);
                }
                self.flush_all();
                contain(
                    &self.shared.stats,
                    self.shared.id,
                    "dispatcher callback",
                    || callback.call(),
                );
            }
            Item::Probe(enqueued) => {
                self.histograms.record_time_in_queue(enqueued.elapsed());
                // Release: a snapshot that reads it with acquire sees the probe popped.
                self.shared.stats.counters.probes.add_release(1);
                self.shared.probe_pending.store(false, Ordering::Relaxed);
                return 0;
            }
            Item::Unregister { key } => self.unregister(key),
        }
        1
    }

    #[inline]
    fn deliver(&mut self, key: ClientKey, delivery: Delivery<M>) {
        let slot = usize::from(key.slot);
        let found = self
            .clients
            .get_mut(slot)
            .and_then(Option::as_mut)
            .filter(|e| e.generation == key.generation);
        let entry = match found {
            Some(entry) => entry,
            // Not in the table: the first event of a client handed in (adopted now), or a
            // stale key.
            None => {
                if !self.adopt(key) {
                    self.drop_stale(key, delivery);
                    return;
                }
                self.clients[slot]
                    .as_mut()
                    .expect("a client adopted just now is in the table")
            }
        };
        let what = delivery.what();
        let ctx = &mut self.ctx;
        ctx.me.key = key;
        ctx.flags = entry.flags;
        let client = &mut *entry.client;
        contain(
            &self.shared.stats,
            self.shared.id,
            what,
            || match delivery {
                Delivery::Event(event) => client.on_event(event, ctx),
                Delivery::Call(callback) => callback.call(client, ctx),
            },
        );
        // A request to be flushed again made while handling an event is met by the flush
        // the event itself brings.
        entry.flags = ClientFlags {
            flush_again: false,
            ..ctx.flags
        };
        if std::mem::take(&mut ctx.wrong_type) {
            self.shared.stats.counters.wrong_client_type.add(1);
            tracing::warn!(processor = %self.shared.id, client = %ctx.me, "client callback for another client type dropped unrun");
        }
        if entry.flags.flush_enabled && !entry.on_flush_list {
            entry.on_flush_list = true;
            self.flush_list.push(key.slot);
        }
    }

    /// Flushes every client on the flush list, in order, and empties it: a flush point.
    /// Clients that ask to be flushed again go back on the list for the next one.
    fn flush_all(&mut self) {
        if self.since_flush > 0 {
            self.histograms.record_batch(self.since_flush);
            self.since_flush = 0;
        }
        for i in 0..self.flush_list.len() {
            let slot = self.flush_list[i];
            self.flush_one(slot);
        }
        self.flush_list.clear();
        for &slot in &self.again {
            if let Some(entry) = self.clients[usize::from(slot)].as_mut() {
                entry.on_flush_list = true;
                self.flush_list.push(slot);
            }
        }
        self.again.clear();
        self.publish_histograms(false);
    }

    fn flush_one(&mut self, slot: u16) {
        let Some(entry) = self
            .clients
            .get_mut(usize::from(slot))
            .and_then(Option::as_mut)
        else {
            return;
        };
        entry.on_flush_list = false;
        let ctx = &mut self.ctx;
        ctx.me.key = ClientKey {
            slot,
            generation: entry.generation,
        };
        ctx.flags = entry.flags;
        let client = &mut entry.client;
        self.shared.stats.counters.flushes.add(1);
        contain(&self.shared.stats, self.shared.id, "flush", || {
            client.flush(ctx);
        });
        entry.flags = ClientFlags {
            flush_again: false,
            ..ctx.flags
        };
        if ctx.flags.flush_again {
            self.again.push(slot);
        }
    }

    /// Merges the private histograms into the shared ones: at exit (waiting for a reader
    /// that holds them), otherwise only when the monitor or a reader asked and no reader
    /// holds them. A merge walks every bucket (thousands), far too much for every flush
    /// point; on request it happens about once per `monitor_interval`.
    fn publish_histograms(&mut self, at_exit: bool) {
        let requested = &self.shared.stats.publish_requested;
        if !at_exit && !requested.load(Ordering::Relaxed) {
            return;
        }
        let shared = &self.shared.stats.histograms;
        let guard = if at_exit {
            Some(shared.lock().unwrap_or_else(|p| p.into_inner()))
        } else {
            shared.try_lock().ok()
        };
        if let Some(mut shared) = guard {
            requested.store(false, Ordering::Relaxed);
            self.histograms.drain_into(&mut shared);
        }
    }

    /// Counts and drops an event whose key names no client (unregistered).
    #[cold]
    fn drop_stale(&self, key: ClientKey, delivery: Delivery<M>) {
        self.shared.stats.counters.stale.add(1);
        tracing::debug!(processor = %self.shared.id, slot = key.slot, generation = key.generation, "event for an unregistered client dropped");
        // The event's drop (its captures, or the message) is user code.
        contain(
            &self.shared.stats,
            self.shared.id,
            "drop of a stale event",
            || drop(delivery),
        );
    }

    /// Takes in the client handed in under `key`, if it is among the arrivals (the
    /// processor's side of the protocol of `slots.rs`): on a miss of the table only, never
    /// on the event path of a client already in it.
    #[cold]
    fn adopt(&mut self, key: ClientKey) -> bool {
        let adopted = self
            .shared
            .slots
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .adopt(key);
        match adopted {
            Some(client) => {
                self.install(key, client);
                true
            }
            None => false,
        }
    }

    /// Puts an adopted client in the table.
    fn install(&mut self, key: ClientKey, client: Box<dyn Registered<M>>) {
        let slot = usize::from(key.slot);
        if self.clients.len() <= slot {
            self.clients.resize_with(slot + 1, || None);
            // Room for every client on the flush list and the flush-again list, so that
            // pushing to them never allocates on the event path.
            let room = self.clients.len();
            self.flush_list
                .reserve(room.saturating_sub(self.flush_list.len()));
            self.again.reserve(room.saturating_sub(self.again.len()));
        }
        debug_assert!(self.clients[slot].is_none(), "slot {slot} adopted twice");
        self.clients[slot] = Some(Entry {
            client,
            generation: key.generation,
            on_flush_list: false,
            flags: ClientFlags::default(),
        });
    }

    fn unregister(&mut self, key: ClientKey) {
        let slot = usize::from(key.slot);
        let registered = self
            .clients
            .get(slot)
            .and_then(Option::as_ref)
            .is_some_and(|e| e.generation == key.generation);
        // A client handed in that got no event before its unregistration is adopted for it.
        if !registered && !self.adopt(key) {
            self.shared.stats.counters.stale.add(1);
            return;
        }
        // Flush it before it goes (flush contract, point 4), and take it off the lists.
        if self.clients[slot].as_ref().is_some_and(|e| e.on_flush_list) {
            self.flush_one(key.slot);
            self.flush_list.retain(|&s| s != key.slot);
            self.again.retain(|&s| s != key.slot);
        }
        let entry = self.clients[slot].take();
        // The client's own drop runs here, on its thread.
        contain(
            &self.shared.stats,
            self.shared.id,
            "drop of a client",
            || drop(entry),
        );
        self.shared
            .slots
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .keys
            .release(key);
    }
}
