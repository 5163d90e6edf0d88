//! Timers on processors: a callback run on a processor's thread at a deadline, as a
//! dispatcher callback (after the processor has flushed its clients), in deadline order,
//! cancellable from any thread, with nothing allocated per timer.
//!
//! # Shape
//!
//! Each processor owns `PoolConfig::timers` timer slots, allocated when the dispatcher is
//! built. A slot is shared state (a state word and a deadline, [`TimerSlots`]) that any
//! thread reads, and processor-local state (the callback and its place in a binary heap
//! ordered by deadline, [`TimerQueue`]) that only the processor's thread touches. A free
//! list of slot indices (a bounded lock-free queue, as large as the slots) hands a slot to
//! a scheduler.
//!
//! A heap rather than a hashed wheel: the slots are few enough (thousands) that `log n` is a
//! handful of comparisons, it keeps exact deadline order (a wheel keeps it only to its tick),
//! and it never needs a tick to advance while nothing is due, so an idle processor with
//! timers parks until the next deadline instead of waking every tick.
//!
//! # The protocol
//!
//! A slot's state word is `generation << 2 | phase`, the phase `FREE`, `PENDING` or
//! `CANCELLED`:
//!
//! 1. `schedule` pops a free slot (none: `TimersFull`, the callback handed back), writes the
//!    deadline, and moves the state to `(generation + 1, PENDING)`; the token it returns
//!    carries that generation. Then it enters the processor's gate (closed: `ShutDown`,
//!    the slot freed and the callback handed back) and pushes `(slot, callback)` on the
//!    processor's *arrivals*, a bounded queue as large as the slots, which a taken slot
//!    guarantees has room: it never waits and never fails, on any thread, a processor's
//!    included (no outbox: a timer cannot be held up behind full queues). The gate entry
//!    counts like an event's, so the wake protocol of `wake.rs` wakes a sleeping processor
//!    and a shutdown waits for the arrival to be taken: the same loom-checked protocol.
//! 2. `cancel(token)` moves `(generation, PENDING)` to `(generation, CANCELLED)` with one
//!    compare-and-swap: it succeeds only while the callback has not started (and never
//!    for a token of an earlier use of the slot, whose generation is gone). Then it tells
//!    the processor, through a second bounded queue of `(slot, generation)` pushed under
//!    its gate like an arrival (so the wake protocol wakes it), so that the callback is
//!    dropped and the slot freed at its next turn, not at the deadline (a full queue of
//!    cancellations, or a closed gate, only delays the reclaim to the deadline or exit).
//! 3. The processor takes the arrivals into its heap (a cancelled one is dropped at once),
//!    drops the callbacks of the cancellations it is told of and frees their slots, and at
//!    a deadline moves `(generation, PENDING)` to `(generation, FREE)` with a
//!    compare-and-swap: if it won, it runs the callback; if a cancel won, it drops it
//!    unrun. Either way the slot goes back on the free list before the callback runs, so
//!    that a timer that schedules its next turn finds a slot.
//!
//! So a `cancel` that returns `true` means the callback will never run, and one that
//! returns `false` means it has run, is running, or was cancelled before. Heap entries
//! carry their generation: an entry whose timer was cancelled and reclaimed is skipped when
//! it comes up, and the heap (room for twice the slots) is compacted in place when stale
//! entries fill it, so it never grows. The generation has 62 bits: at one schedule per
//! nanosecond on one slot it would wrap after 146 years.
//!
//! At shutdown the timers not yet due are dropped unrun, on the processor's thread, once
//! its queue and arrivals are drained.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::fmt;

use zerodispatch_callback::Callback;

use crate::ids::ProcessorId;
use crate::sync::{AtomicU64, BoundedQueue, Ordering};

const FREE: u64 = 0;
const PENDING: u64 = 1;
const CANCELLED: u64 = 2;
const PHASE: u64 = 3;

/// A scheduled timer, to [`cancel`](crate::DispatcherHandle::cancel) it: returned by
/// [`schedule`](crate::DispatcherHandle::schedule). A small `Copy` value; a token of a
/// timer that has run (or of another dispatcher) cancels nothing.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct TimerToken {
    pub(crate) dispatcher: u64,
    pub(crate) processor: ProcessorId,
    pub(crate) slot: u32,
    pub(crate) generation: u64,
}

impl TimerToken {
    /// The processor the timer runs on.
    #[must_use]
    pub fn processor(&self) -> ProcessorId {
        self.processor
    }
}

impl fmt::Display for TimerToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}/timer-{}.{}",
            self.processor, self.slot, self.generation
        )
    }
}

/// The shared half of a processor's timer slots: what schedulers and cancellers touch.
pub(crate) struct TimerSlots {
    /// Slots in all (`PoolConfig::timers`).
    capacity: usize,
    /// Indices of the free slots.
    free: BoundedQueue<u32>,
    /// Timers scheduled and not yet taken by the processor: at most one per slot in use.
    pub(crate) arrivals: BoundedQueue<(u32, Callback)>,
    /// Timers cancelled, `(slot, generation)`, for the processor to reclaim.
    cancelled: BoundedQueue<(u32, u64)>,
    /// Per slot, `generation << 2 | phase`.
    states: Box<[AtomicU64]>,
    /// Per slot, the deadline in nanoseconds on the dispatcher's clock; written by the
    /// scheduler before it sends the timer, read by the processor after it pops it (the
    /// queue's push and pop order the two).
    deadlines: Box<[AtomicU64]>,
}

impl TimerSlots {
    pub(crate) fn new(capacity: usize) -> Self {
        // A queue of capacity 0 cannot be built: a pool without timers keeps one slot that
        // is never freed for use.
        let free = BoundedQueue::new(capacity.max(1));
        for slot in 0..capacity {
            let slot = u32::try_from(slot).expect("timer capacity is at most MAX_CAPACITY");
            assert!(free.push(slot).is_ok(), "the free list holds every slot");
        }
        let words = |_| AtomicU64::new(0);
        Self {
            capacity,
            free,
            arrivals: BoundedQueue::new(capacity.max(1)),
            cancelled: BoundedQueue::new(2 * capacity.max(1)),
            states: (0..capacity.max(1)).map(words).collect(),
            deadlines: (0..capacity.max(1)).map(words).collect(),
        }
    }

    /// Takes a free slot for a timer due at `deadline` (nanoseconds on the dispatcher's
    /// clock): step 1 of the protocol. `None` if every slot is in use.
    pub(crate) fn take(&self, deadline: u64) -> Option<(u32, u64)> {
        let slot = self.free.pop()?;
        let index = slot as usize;
        // The slot is ours alone until the timer is sent: plain stores.
        let generation = (self.states[index].load(Ordering::Relaxed) >> 2) + 1;
        self.deadlines[index].store(deadline, Ordering::Relaxed);
        self.states[index].store(generation << 2 | PENDING, Ordering::Release);
        Some((slot, generation))
    }

    /// Slots in use: timers scheduled and not yet run or dropped.
    pub(crate) fn in_use(&self) -> usize {
        self.capacity - self.free.len()
    }

    /// The deadline of the timer in `slot`.
    pub(crate) fn deadline(&self, slot: u32) -> u64 {
        self.deadlines[slot as usize].load(Ordering::Relaxed)
    }

    /// Cancels the timer of `slot` and `generation` if it has not started: step 2 (the
    /// reclaim is queued by the caller, under the processor's gate).
    pub(crate) fn cancel(&self, slot: u32, generation: u64) -> bool {
        let Some(state) = self.states.get(slot as usize) else {
            return false;
        };
        state
            .compare_exchange(
                generation << 2 | PENDING,
                generation << 2 | CANCELLED,
                Ordering::AcqRel,
                Ordering::Relaxed,
            )
            .is_ok()
    }

    /// Queues the reclaim of a cancelled timer for the processor; `false` if the queue of
    /// cancellations is full (the reclaim then waits for the deadline).
    pub(crate) fn queue_reclaim(&self, slot: u32, generation: u64) -> bool {
        self.cancelled.push((slot, generation)).is_ok()
    }

    /// Whether cancellations wait to be reclaimed.
    pub(crate) fn has_reclaims(&self) -> bool {
        !self.cancelled.is_empty()
    }

    /// A cancellation to reclaim, if any (the processor's side of step 2).
    pub(crate) fn next_cancelled(&self) -> Option<(u32, u64)> {
        self.cancelled.pop()
    }

    /// The generation of the timer in `slot` and whether it is cancelled: read by the
    /// processor when it takes the timer's arrival.
    pub(crate) fn current(&self, slot: u32) -> (u64, bool) {
        let state = self.states[slot as usize].load(Ordering::Acquire);
        (state >> 2, state & PHASE == CANCELLED)
    }

    /// The processor's side at the deadline (step 3): frees the slot's state and returns
    /// whether the callback is to run (`false`: it was cancelled). The slot goes back on
    /// the free list with [`release`](Self::release), before the callback runs.
    pub(crate) fn fire(&self, slot: u32) -> bool {
        let state = &self.states[slot as usize];
        let current = state.load(Ordering::Acquire);
        let generation = current >> 2;
        match current & PHASE {
            PENDING => state
                .compare_exchange(
                    current,
                    generation << 2 | FREE,
                    Ordering::AcqRel,
                    Ordering::Acquire,
                )
                .map_or_else(
                    |_cancelled| {
                        state.store(generation << 2 | FREE, Ordering::Release);
                        false
                    },
                    |_| true,
                ),
            _ => {
                state.store(generation << 2 | FREE, Ordering::Release);
                false
            }
        }
    }

    /// Frees a slot whose timer was refused before it reached the processor (step 1's
    /// refusal), or has been fired: back on the free list.
    pub(crate) fn release(&self, slot: u32) {
        let state = &self.states[slot as usize];
        let generation = state.load(Ordering::Relaxed) >> 2;
        state.store(generation << 2 | FREE, Ordering::Release);
        // Never full: the list holds every slot, and this one is not in it.
        let _ = self.free.push(slot);
    }
}

/// The processor's half of its timers: the callbacks of the timers it has taken in, by
/// slot, with their generation, and a heap of `(deadline, arrival, slot, generation)`, the
/// earliest on top (ties in arrival order). The heap has room for twice the slots: a
/// cancelled timer reclaimed early leaves its entry behind, skipped when it comes up, and
/// such entries are compacted away in place when they fill the room. Nothing grows on the
/// event path.
pub(crate) struct TimerQueue {
    heap: BinaryHeap<Reverse<(u64, u64, u32, u64)>>,
    callbacks: Box<[Option<(u64, Callback)>]>,
    arrivals: u64,
}

impl TimerQueue {
    pub(crate) fn new(capacity: usize) -> Self {
        Self {
            heap: BinaryHeap::with_capacity(2 * capacity),
            callbacks: (0..capacity.max(1)).map(|_| None).collect(),
            arrivals: 0,
        }
    }

    /// A timer taken in from the arrivals.
    pub(crate) fn arrive(&mut self, slot: u32, generation: u64, deadline: u64, callback: Callback) {
        debug_assert!(
            self.callbacks[slot as usize].is_none(),
            "timer slot {slot} twice"
        );
        self.callbacks[slot as usize] = Some((generation, callback));
        self.arrivals += 1;
        if self.heap.len() == self.heap.capacity() {
            // Full of stale entries (at most one live entry per slot): compacted in place.
            let callbacks = &self.callbacks;
            self.heap.retain(|Reverse((_, _, slot, generation))| {
                callbacks[*slot as usize]
                    .as_ref()
                    .is_some_and(|(g, _)| g == generation)
            });
        }
        debug_assert!(
            self.heap.len() < self.heap.capacity().max(1),
            "the heap never grows"
        );
        self.heap
            .push(Reverse((deadline, self.arrivals, slot, generation)));
    }

    /// The callback of the timer of `slot` and `generation`, taken out if it is here (a
    /// cancelled timer, reclaimed before its deadline).
    pub(crate) fn take(&mut self, slot: u32, generation: u64) -> Option<Callback> {
        let entry = &mut self.callbacks[slot as usize];
        if entry.as_ref().is_some_and(|(g, _)| *g == generation) {
            entry.take().map(|(_, callback)| callback)
        } else {
            None
        }
    }

    /// The deadline at the heap's top, perhaps a stale entry's (an early one, then).
    pub(crate) fn peek_deadline(&self) -> Option<u64> {
        self.heap.peek().map(|Reverse((deadline, ..))| *deadline)
    }

    /// Drops the heap's stale entries at its top, and returns the earliest deadline, if any
    /// timer is waiting.
    pub(crate) fn next_deadline(&mut self) -> Option<u64> {
        while let Some(Reverse((deadline, _, slot, generation))) = self.heap.peek() {
            let live = self.callbacks[*slot as usize]
                .as_ref()
                .is_some_and(|(g, _)| g == generation);
            if live {
                return Some(*deadline);
            }
            self.heap.pop();
        }
        None
    }

    /// The earliest timer if it is due at `now`.
    pub(crate) fn pop_due(&mut self, now: u64) -> Option<(u32, Callback)> {
        if self.next_deadline()? > now {
            return None;
        }
        let Reverse((_, _, slot, _)) = self.heap.pop()?;
        let (_, callback) = self.callbacks[slot as usize]
            .take()
            .expect("a live heap entry has its callback");
        Some((slot, callback))
    }

    /// Every timer still waiting, taken out (at the processor's exit).
    pub(crate) fn take_all(&mut self) -> impl Iterator<Item = (u32, Callback)> + '_ {
        self.heap.clear();
        self.callbacks
            .iter_mut()
            .enumerate()
            .filter_map(|(slot, entry)| {
                let (_, callback) = entry.take()?;
                Some((u32::try_from(slot).expect("slots fit a u32"), callback))
            })
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn a_cancel_wins_only_before_the_fire_and_a_stale_token_cancels_nothing() {
        let slots = TimerSlots::new(2);
        let (slot, generation) = slots.take(10).unwrap();
        assert!(slots.cancel(slot, generation));
        assert!(!slots.cancel(slot, generation), "cancelled once");
        assert!(!slots.fire(slot), "a cancelled timer does not run");
        slots.release(slot);
        // The slot's next use: the old token is stale.
        let (_, _) = slots.take(20).unwrap();
        let (again, next) = slots.take(30).unwrap();
        let reused = if again == slot { next } else { generation + 1 };
        assert!(!slots.cancel(slot, generation), "a stale token");
        assert!(slots.fire(again), "a pending timer runs");
        assert!(!slots.cancel(again, reused), "too late: it ran");
    }

    #[test]
    fn the_slots_run_out_and_come_back() {
        let slots = TimerSlots::new(2);
        let a = slots.take(1).unwrap();
        let _b = slots.take(1).unwrap();
        assert!(slots.take(1).is_none(), "two slots");
        assert!(slots.fire(a.0));
        slots.release(a.0);
        assert!(slots.take(1).is_some());
        assert!(TimerSlots::new(0).take(1).is_none(), "no timers configured");
    }

    #[test]
    fn timers_come_due_in_deadline_order_ties_in_arrival_order() {
        let mut queue = TimerQueue::new(4);
        let (tx, rx) = std::sync::mpsc::channel();
        for (slot, deadline) in [(0, 30), (1, 10), (2, 20), (3, 10)] {
            let tx = tx.clone();
            queue.arrive(
                slot,
                1,
                deadline,
                Callback::new(move || tx.send(slot).unwrap()),
            );
        }
        assert_eq!(queue.next_deadline(), Some(10));
        assert!(queue.pop_due(9).is_none());
        while let Some((_, callback)) = queue.pop_due(25) {
            callback.call();
        }
        assert_eq!(rx.try_iter().collect::<Vec<_>>(), [1, 3, 2]);
        assert_eq!(queue.take_all().count(), 1);
    }

    #[test]
    fn a_reclaimed_timer_leaves_a_stale_entry_that_is_skipped_and_compacted_never_grown() {
        let mut queue = TimerQueue::new(2);
        let capacity = 4;
        // Slot 0 cancelled and reclaimed over and over, slot 1 live throughout.
        queue.arrive(1, 1, 100, Callback::new(|| ()));
        for generation in 1..=20 {
            queue.arrive(0, generation, 50, Callback::new(|| ()));
            assert!(queue.take(0, generation).is_some());
            assert!(queue.take(0, generation).is_none(), "taken once");
        }
        assert!(queue.heap.capacity() >= capacity);
        assert!(queue.heap.len() <= capacity, "compacted, never grown");
        assert_eq!(queue.next_deadline(), Some(100), "stale entries skipped");
        assert!(queue.pop_due(99).is_none());
        assert_eq!(queue.pop_due(100).map(|(slot, _)| slot), Some(1));
        assert_eq!(queue.next_deadline(), None);
    }
}
