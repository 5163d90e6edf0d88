//! The ring: slots stamped with the position they may hold next, a tail the producers
//! claim from, a head only the consumer moves.

use std::fmt;
use std::mem::MaybeUninit;

use crossbeam_utils::{Backoff, CachePadded};

use crate::positions::Positions;
use crate::run::Run;
use crate::sync::{AtomicBool, AtomicUsize, Cell, Ordering, snooze, spin};

/// One slot: its event, and the stamp that says whose turn it is.
///
/// The stamp of the slot at index `i` on lap `L` is `L + i` while the slot is free for
/// the producer of that position, and `L + i + 1` once that producer has written its event
/// (for the consumer). The consumer, having moved the event out, stamps it free for the
/// next lap: `L + one_lap + i`.
struct Slot<T> {
    stamp: AtomicUsize,
    value: Cell<MaybeUninit<T>>,
}

/// A run did not fit: fewer free slots than it holds. The run keeps its events.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Full;

impl fmt::Display for Full {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("the ring has fewer free slots than the run holds")
    }
}

impl std::error::Error for Full {}

/// A bounded queue of many producers and one consumer.
///
/// # Contract
///
/// - **Bounded.** At most [`capacity`](Ring::capacity) events; a push to a full ring hands
///   its event back ([`push`](Ring::push)) or leaves its run as it was
///   ([`push_run`](Ring::push_run)), at once: nothing here waits for room.
/// - **Order.** The consumer takes events in the order their pushes claimed their
///   positions; a run's events are consecutive, in the run's order, with no other
///   producer's event between them.
/// - **One claim a run.** A run of `n` events costs its producer one compare-and-swap of
///   the tail, whatever `n`; the consumer moves the head with a plain store, never a
///   read-modify-write.
/// - **One consumer.** Events are taken through a [`Consumer`], of which at most one exists
///   at a time ([`consumer`](Ring::consumer)).
/// - **Nothing lost or dropped twice.** Every event pushed is popped once or dropped with
///   the ring.
/// - **No allocation** after [`new`](Ring::new).
///
/// A producer between its claim and its write holds the consumer at that position (the
/// consumer waits for it, as crossbeam's `ArrayQueue` does for a producer between its
/// compare-and-swap and its stamp): the write is a move, a few instructions.
pub struct Ring<T> {
    /// The next position the consumer takes. Stored by the consumer only (Release, after
    /// the slot's stamp); read by [`len`](Ring::len).
    head: CachePadded<AtomicUsize>,
    /// The next position a producer claims.
    tail: CachePadded<AtomicUsize>,
    /// Whether a [`Consumer`] is out.
    consuming: CachePadded<AtomicBool>,
    slots: Box<[Slot<T>]>,
    positions: Positions,
}

// SAFETY: events cross threads (`T: Send`); a slot's value is touched by one thread at a
// time, handed from its producer to the consumer and back by its stamp (Release/Acquire).
unsafe impl<T: Send> Sync for Ring<T> {}
// SAFETY: as above; the ring owns its events.
unsafe impl<T: Send> Send for Ring<T> {}

impl<T> Ring<T> {
    /// A ring of `capacity` slots, all made now.
    ///
    /// # Panics
    ///
    /// If `capacity` is 0.
    #[must_use]
    pub fn new(capacity: usize) -> Self {
        assert!(capacity > 0, "a ring holds at least one event");
        let positions = Positions::new(capacity);
        // Slot `i` is free for position `i` of lap 0.
        let slots = (0..capacity)
            .map(|i| Slot {
                stamp: AtomicUsize::new(i),
                value: Cell::new(MaybeUninit::uninit()),
            })
            .collect();
        Self {
            head: CachePadded::new(AtomicUsize::new(0)),
            tail: CachePadded::new(AtomicUsize::new(0)),
            consuming: CachePadded::new(AtomicBool::new(false)),
            slots,
            positions,
        }
    }

    /// Slots in the ring.
    #[must_use]
    pub fn capacity(&self) -> usize {
        self.positions.capacity
    }

    /// Pushes `value` at the tail, or hands it back if the ring is full. Any thread.
    ///
    /// # Errors
    ///
    /// `Err(value)` when the ring is full.
    pub fn push(&self, value: T) -> Result<(), T> {
        match self.claim(1) {
            Some(position) => {
                self.write(position, value);
                Ok(())
            }
            None => Err(value),
        }
    }

    /// Pushes every event of `run`, consecutively, with one claim; leaves `run` empty. Any
    /// thread.
    ///
    /// # Errors
    ///
    /// [`Full`] when fewer slots are free than `run` holds (always, for a run longer than
    /// the capacity); `run` keeps its events.
    pub fn push_run<const N: usize>(&self, run: &mut Run<T, N>) -> Result<(), Full> {
        if run.is_empty() {
            return Ok(());
        }
        let first = self.claim(run.len()).ok_or(Full)?;
        run.drain_into(|i, value| self.write(self.positions.advance(first, i), value));
        Ok(())
    }

    /// Claims `n` consecutive positions and returns the first, or `None` when fewer than
    /// `n` slots are free. Precondition: `n >= 1`.
    fn claim(&self, n: usize) -> Option<usize> {
        if n > self.capacity() {
            return None;
        }
        let backoff = Backoff::new();
        let mut tail = self.tail.load(Ordering::Relaxed);
        loop {
            // The run is free if its last slot is: the consumer frees slots in order.
            let last = self.positions.advance(tail, n - 1);
            let slot = &self.slots[self.positions.index(last)];
            // Acquire: the consumer's moves out of this slot and of every slot before it
            // happen before the writes that follow the claim.
            let stamp = slot.stamp.load(Ordering::Acquire);
            if stamp == last {
                // Free on this lap: claim `tail..=last` if no producer moved the tail.
                match self.tail.compare_exchange_weak(
                    tail,
                    self.positions.advance(tail, n),
                    Ordering::SeqCst,
                    Ordering::Relaxed,
                ) {
                    Ok(_) => return Some(tail),
                    Err(moved) => {
                        tail = moved;
                        spin(&backoff);
                    }
                }
            } else if stamp.wrapping_add(self.positions.one_lap) == last.wrapping_add(1) {
                // The slot still holds the event of the lap before: full for this run.
                return None;
            } else {
                // Another producer claimed past `tail` meanwhile. A read-modify-write reads
                // the latest tail, where a load may see this one again (a rare path).
                spin(&backoff);
                tail = self.tail.fetch_add(0, Ordering::Relaxed);
            }
        }
    }

    /// Writes `value` at a position this thread claimed, and hands it to the consumer.
    #[inline]
    fn write(&self, position: usize, value: T) {
        let slot = &self.slots[self.positions.index(position)];
        // SAFETY: this thread claimed `position` (the tail's compare-and-swap gives each
        // position to one producer) and the slot was free for it (its stamp, read by the
        // claim with Acquire): no other thread touches the value until the stamp below.
        slot.value
            .with_mut(|value_of| unsafe { value_of.write(MaybeUninit::new(value)) });
        // Release: the write above happens before the consumer's Acquire of this stamp.
        slot.stamp
            .store(position.wrapping_add(1), Ordering::Release);
    }

    /// The consumer, unless one is out already.
    #[must_use]
    pub fn consumer(&self) -> Option<Consumer<'_, T>> {
        // Acquire: the last consumer's moves (its head) happen before this one's.
        if self.consuming.swap(true, Ordering::Acquire) {
            return None;
        }
        Some(Consumer {
            ring: self,
            head: self.head.load(Ordering::Relaxed),
        })
    }

    /// Events in the ring, claimed ones being written included. A snapshot: producers and
    /// the consumer move on.
    #[must_use]
    pub fn len(&self) -> usize {
        loop {
            let tail = self.tail.load(Ordering::SeqCst);
            let head = self.head.load(Ordering::SeqCst);
            // The two were read at one moment if the tail did not move meanwhile.
            if self.tail.load(Ordering::SeqCst) == tail {
                return self.positions.distance(head, tail);
            }
        }
    }

    /// Whether the ring holds no event (a snapshot).
    #[must_use]
    pub fn is_empty(&self) -> bool {
        let head = self.head.load(Ordering::SeqCst);
        self.tail.load(Ordering::SeqCst) == head
    }

    /// Whether the ring holds [`capacity`](Ring::capacity) events (a snapshot).
    #[must_use]
    pub fn is_full(&self) -> bool {
        self.len() == self.capacity()
    }
}

impl<T> Drop for Ring<T> {
    fn drop(&mut self) {
        // No producer or consumer is left (`&mut self`), and every claim was written.
        let mut position = self.head.load(Ordering::Relaxed);
        let tail = self.tail.load(Ordering::Relaxed);
        while position != tail {
            let slot = &self.slots[self.positions.index(position)];
            // SAFETY: positions `head..tail` were claimed and written (a claim is always
            // followed by its write) and not moved out by the consumer.
            slot.value
                .with_mut(|value| unsafe { (*value).assume_init_drop() });
            position = self.positions.advance(position, 1);
        }
    }
}

impl<T> fmt::Debug for Ring<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Ring")
            .field("len", &self.len())
            .field("capacity", &self.capacity())
            .finish()
    }
}

/// The one consumer of a [`Ring`], while it is out: takes events from the head.
///
/// Dropping it lets another be taken, which goes on where it stopped.
pub struct Consumer<'a, T> {
    ring: &'a Ring<T>,
    /// The ring's head, kept here: only this consumer moves it.
    head: usize,
}

impl<T> Consumer<'_, T> {
    /// The event at the head, or `None` if the ring is empty. Waits, spinning, only for a
    /// producer that claimed the head's slot and is writing it.
    pub fn pop(&mut self) -> Option<T> {
        let ring = self.ring;
        let head = self.head;
        let slot = &ring.slots[ring.positions.index(head)];
        let backoff = Backoff::new();
        // Acquire: the producer's write of the value happens before the read below.
        let mut stamp = slot.stamp.load(Ordering::Acquire);
        loop {
            if stamp == head.wrapping_add(1) {
                // SAFETY: the stamp says the producer of `head` wrote the slot, and no
                // other thread touches it until the stamp below frees it.
                let value = slot
                    .value
                    .with_mut(|value| unsafe { value.read().assume_init() });
                // Release: the read above happens before the next lap's producer writes.
                let free = head.wrapping_add(ring.positions.one_lap);
                slot.stamp.store(free, Ordering::Release);
                self.head = ring.positions.advance(head, 1);
                ring.head.store(self.head, Ordering::Release);
                return Some(value);
            }
            // Not written: the ring is empty, or a producer is between its claim and its write.
            if ring.tail.load(Ordering::SeqCst) == head {
                return None;
            }
            snooze(&backoff);
            // A read-modify-write reads the producer's stamp as soon as it is stored, where a
            // load may see the old one again (only while a producer is mid-write).
            stamp = slot.stamp.fetch_add(0, Ordering::Acquire);
        }
    }
}

impl<T> Drop for Consumer<'_, T> {
    fn drop(&mut self) {
        // Release: this consumer's moves happen before the next one's (its Acquire swap).
        self.ring.consuming.store(false, Ordering::Release);
    }
}

impl<T> fmt::Debug for Consumer<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Consumer")
            .field("head", &self.head)
            .finish()
    }
}
