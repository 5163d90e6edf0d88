//! The state of a processor that other threads see, and the processor's side of the gate:
//! registration's hand-in, the stop that shutdown asks for, and the sleep of the wake
//! protocol.

use std::sync::atomic::AtomicBool as StdAtomicBool;
use std::sync::{Mutex, OnceLock};
use std::task::Waker;

use crossbeam_utils::CachePadded;
use zerodispatch_callback::Callback;

use super::current::current_processor;
use super::parked::Parked;
use super::tuning::BRIEF_PARK;
use crate::client::Client;
use crate::config::PoolConfig;
use crate::error::RegisterRefusal;
use crate::event::Item;
use crate::gate::Gate;
use crate::ids::{ClientKey, ProcessorId};
use crate::outbox::Outbox;
use crate::pack::PackPool;
use crate::slots::ClientSlots;
use crate::stats::ProcessorStats;
use crate::sync::{self, AtomicBool, BoundedQueue, Ordering, thread};
use crate::timers::TimerSlots;
use crate::waiters::Waiters;

/// The state of a processor that other threads see.
pub(crate) struct ProcessorShared<M> {
    pub(crate) id: ProcessorId,
    pub(crate) config: PoolConfig,
    pub(crate) queue: BoundedQueue<Item<M>>,
    /// Passed by producers on every push; also carries the processor's sleeping flag.
    pub(super) gate: CachePadded<Gate>,
    /// Set by shutdown once the gate is closed and empty.
    pub(super) stop: AtomicBool,
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
    pub(super) outbox: Mutex<Outbox<M>>,
    /// Futures waiting for room in the queue (the async door, `waiters.rs`).
    pub(super) waiters: Waiters,
    /// The shared half of the processor's timers (`timers.rs`).
    pub(crate) timers: TimerSlots,
    /// The packs that blocking batches from application threads fill (`pack.rs`), made
    /// at the first such batch.
    pub(super) packs: OnceLock<PackPool<M>>,
    /// The processor's state while its thread is parked, for a driver (`drive.rs`).
    pub(super) parked: sync::Mutex<Option<Box<dyn Parked>>>,
}

impl<M> ProcessorShared<M> {
    pub(super) fn unpark(&self) {
        if let Some(thread) = self.thread.get() {
            thread.unpark();
        }
    }

    /// Whether a quarter of the queue is free.
    pub(super) fn has_burst_room(&self) -> bool {
        let capacity = self.queue.capacity();
        self.queue.len() <= capacity - (capacity / 4).max(1)
    }
}

impl<M: Send + 'static> ProcessorShared<M> {
    pub(crate) fn new(id: ProcessorId, config: PoolConfig) -> Self {
        Self {
            id,
            queue: BoundedQueue::new(config.capacity),
            timers: TimerSlots::new(config.timers),
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
            packs: OnceLock::new(),
            parked: sync::Mutex::new(None),
        }
    }

    /// Hands `client` to this processor under a new key, by the protocol of `slots.rs`:
    /// every event with that key, from any thread, finds the client. Never waits and
    /// queues nothing; the processor adopts the client at its first event.
    ///
    /// # Errors
    ///
    /// `ShutDown` once the gate is closed; `TableFull` when no key is left. The client comes
    /// back with the reason.
    pub(crate) fn hand_in<C: Client<M>>(
        &self,
        client: C,
    ) -> Result<ClientKey, (RegisterRefusal, C)> {
        // Step 1: the entry keeps a shutdown from settling until the client is among the
        // arrivals, where the processor's exit finds it.
        let Some(inside) = self.enter() else {
            return Err((RegisterRefusal::ShutDown, client));
        };
        // Step 2, under the lock (released at the end of the statement: a refused client
        // is handed back outside it).
        let handed = self
            .slots
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .hand_in(client);
        // Step 3: the entry is undone (no event was pushed), with release: the processor's
        // acquire of a settled gate then sees the arrival.
        drop(inside);
        handed.map_err(|refused| (RegisterRefusal::TableFull(self.id), refused))
    }

    /// Hands a timer's callback to this processor (step 1 of `timers.rs`): through its gate,
    /// onto its arrivals, which the timer's slot guarantees have room. Never waits, on any
    /// thread; wakes the processor if it sleeps. Hands the callback back once shutdown has
    /// closed the gate.
    pub(crate) fn push_timer(&self, slot: u32, callback: Callback) -> Result<(), Callback> {
        let Some(mut inside) = self.enter() else {
            return Err(callback);
        };
        let pushed = self.timers.arrivals.push((slot, callback));
        debug_assert!(
            pushed.is_ok(),
            "a taken timer slot has room among the arrivals"
        );
        inside.pushed = usize::from(pushed.is_ok());
        pushed.map_err(|(_, callback)| callback)
    }

    /// Tells the processor of a cancelled timer (step 2 of `timers.rs`), through its gate
    /// like an arrival, so that it reclaims the timer at its next turn; never waits. A full
    /// queue of cancellations or a closed gate leaves the reclaim to the deadline (or the
    /// processor's exit).
    pub(crate) fn push_reclaim(&self, slot: u32, generation: u64) {
        let Some(mut inside) = self.enter() else {
            return;
        };
        inside.pushed = usize::from(self.timers.queue_reclaim(slot, generation));
    }

    /// Room left in this processor's outbox. On its own thread only, where the room can
    /// only grow until this thread keeps an event.
    pub(crate) fn outbox_room(&self) -> usize {
        debug_assert!(self.on_own_thread(), "outbox_room called off {}", self.id);
        self.outbox.lock().unwrap_or_else(|e| e.into_inner()).room()
    }

    /// Events in this processor's outbox, read under its lock (for a stepped dispatcher,
    /// whose steps run on the caller's thread).
    pub(crate) fn outbox_len_locked(&self) -> usize {
        self.outbox.lock().unwrap_or_else(|e| e.into_inner()).len()
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
    pub(super) fn has_room_beyond_entered(&self, popped: usize) -> bool {
        let capacity = self.queue.capacity();
        self.gate.unpopped(popped) <= capacity - (capacity / 4).max(1) || self.gate.is_closed()
    }

    /// Processor side: returns a handled pack (`pack.rs`) to the pool it came from.
    pub(crate) fn give_back_pack(&self, pack: Vec<crate::client::Delivery<M>>) {
        self.packs
            .get()
            .expect("a pack comes from its processor's pool")
            .give_back(pack);
    }

    /// Whether the current thread is this processor's.
    pub(super) fn on_own_thread(&self) -> bool {
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
    pub(super) fn has_events(&self, popped: usize) -> bool {
        !self.queue.is_empty()
            || !self.timers.arrivals.is_empty()
            || self.timers.has_reclaims()
            || (self.waiters.pending() && self.has_room_beyond_entered(popped))
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
}
