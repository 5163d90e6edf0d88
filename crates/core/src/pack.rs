//! Packs: up to [`PACK`] events of one batch, for one client, in one queue slot.
//!
//! A blocking [`dispatch_batch`](crate::DispatcherHandle::dispatch_batch) from an
//! application thread sends its events to one client, in order. One event per slot costs
//! per event what the bare queue costs: a compare-and-swap on the tail and a slot line on
//! the producer, a compare-and-swap on the head and a slot line on the processor, whose
//! locked instruction also keeps it from reading the next slot ahead. A pack moves up to
//! [`PACK`] of them in one slot instead (one push, one pop), in a buffer the processor reads
//! straight through, and the processor hands the whole run to its client in one call: one
//! lookup of the client, one containment of panics, one dynamic call (the loop over the
//! events is compiled for the client's own type), one look at the flush list.
//!
//! # Contract
//!
//! - **Order.** A pack's events are handled in the order the batch gave them, and the
//!   pack keeps its place among the other items of the queue: the client sees the batch in
//!   order, after whatever the same thread dispatched to it before.
//! - **Each event is still one event.** A panic in one is contained and counted, and the
//!   events after it in the pack are still delivered; `processed`, `spilled`,
//!   `wrong_client_type` and `stale` count events; `max_batch` still bounds the events
//!   between two flush points (a pack is split at a flush point).
//! - **No allocation per event.** A processor's packs are made together the first time a
//!   batch is packed for it (`capacity / PACK` packs of [`PACK`] events: as much memory as
//!   the queue's own slots), and each comes back to this pool once the processor has
//!   handled its events. A batch waits for a free pack as it waits for room, never for
//!   long: the packs in use are in the queue, in a producer's hands on their way in, or
//!   being handled.
//! - **The capacity counts slots.** A pack is one item, so a queue of capacity `N` holds at
//!   most `N` items, at most `N / PACK` of them packs: at most `N + N / PACK * (PACK - 1)`
//!   events, under `2N`. The depth that the stats, the watermarks and the room for a burst
//!   see counts items.
//! - **Nothing handed back is lost.** A pack is filled only under an entry in the
//!   processor's gate (`gate.rs`), made before its first event is taken from the batch,
//!   and pushed under that entry, waiting for room as long as it takes: an entry made
//!   before a shutdown's close is accepted, and the processor does not stop before it has
//!   popped it. So a pack is never refused, and a batch's events come back only as they do
//!   without packs (`ShutDown` for the first event not taken; the rest stay in the
//!   caller's iterator).
//!
//! - **The iterator is read ahead only as far as it promises.** A pack takes as many
//!   events as the batch's iterator says it has at least (the lower bound of its
//!   `size_hint`, up to [`PACK`]) before it is pushed; an iterator that cannot promise two
//!   more gets the rest one to a slot, each pushed as soon as it is yielded. So an
//!   iterator over events in hand is packed, and one that waits as it yields (for a
//!   channel) is not read ahead of what it gave. No iterator may wait for the handling
//!   of events it gave: those in its pack are not pushed yet, and those pushed one to a
//!   slot are announced to a parked processor only when the batch leaves the gate (the
//!   docs of `dispatch_batch`). One that panics while a pack fills has the events it
//!   yielded pushed before its panic goes on.
//!
//! Only blocking batches from application threads are packed: a processor's batches go
//! through its outbox, which never waits, and `try_dispatch_batch`, the timed batches and
//! the async door hand back the one event that did not fit, which a pack of several in
//! hand could not do.

use crate::client::Delivery;
use crate::sync::BoundedQueue;

/// Events in one pack, at most.
pub(crate) const PACK: usize = 16;

/// The free packs of one processor.
pub(crate) struct PackPool<M> {
    free: BoundedQueue<Vec<Delivery<M>>>,
    /// Packs made (all of them at once).
    made: usize,
}

impl<M> PackPool<M> {
    /// Whether a queue of `capacity` slots gets packs: only if it holds at least two.
    pub(crate) fn enabled(capacity: usize) -> bool {
        capacity / PACK >= 2
    }

    /// The pool of a queue of `capacity` slots: `capacity / PACK` packs, made now.
    pub(crate) fn new(capacity: usize) -> Self {
        let made = capacity / PACK;
        let free = BoundedQueue::new(made.max(1));
        for _ in 0..made {
            let pushed = free.push(Vec::with_capacity(PACK));
            debug_assert!(pushed.is_ok(), "the pool has room for every pack");
        }
        Self { free, made }
    }

    /// A free pack, empty, with room for [`PACK`] events; `None` if all are in use. It
    /// comes back to the pool when dropped, unless it is sent ([`Lent::send`]): a batch
    /// whose iterator panics while it fills one loses no pack.
    #[inline]
    pub(crate) fn take(&self) -> Option<Lent<'_, M>> {
        self.free.pop().map(|pack| Lent {
            pool: self,
            pack: Some(pack),
        })
    }

    /// Whether a quarter of the packs are free: what a batch waiting for one waits for.
    /// Waiting for a single pack would take each one as the processor hands it back,
    /// moving the pool's lines between the two cores per pack (the lesson of the wait for
    /// room, `room.rs`).
    #[inline]
    pub(crate) fn has_free(&self) -> bool {
        self.free.len() >= (self.made / 4).max(1)
    }

    /// Returns a handled pack to the pool, emptied (its events were moved out; only this
    /// crate touches a pack, so it keeps its room).
    #[inline]
    pub(crate) fn give_back(&self, mut pack: Vec<Delivery<M>>) {
        pack.clear();
        debug_assert!(pack.capacity() >= PACK, "a pack keeps its room");
        let kept = self.free.push(pack);
        debug_assert!(kept.is_ok(), "the pool holds every pack made");
    }
}

/// A pack lent to a producer: back to its pool on drop, unless sent.
pub(crate) struct Lent<'a, M> {
    pool: &'a PackPool<M>,
    pack: Option<Vec<Delivery<M>>>,
}

impl<M> Lent<'_, M> {
    /// The pack's events so far.
    #[inline]
    pub(crate) fn events(&mut self) -> &mut Vec<Delivery<M>> {
        self.pack.as_mut().expect("a lent pack is held until sent")
    }

    /// The pack, to travel in the queue; the processor gives it back.
    #[inline]
    pub(crate) fn send(mut self) -> Vec<Delivery<M>> {
        self.pack.take().expect("a lent pack is sent once")
    }
}

impl<M> Drop for Lent<'_, M> {
    fn drop(&mut self) {
        if let Some(pack) = self.pack.take() {
            self.pool.give_back(pack);
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn a_pool_holds_a_sixteenth_of_the_capacity_and_takes_back_what_it_lent() {
        assert!(!PackPool::<u64>::enabled(16));
        assert!(PackPool::<u64>::enabled(32));
        let pool = PackPool::<u64>::new(64);
        let mut lent: Vec<_> = std::iter::from_fn(|| pool.take()).collect();
        assert_eq!(lent.len(), 4);
        assert!(!pool.has_free());
        // One dropped unsent (a batch whose iterator panicked) comes back at once.
        let mut dropped = lent.pop().unwrap();
        dropped
            .events()
            .push(Delivery::from(crate::event::Event::Message(1)));
        drop(dropped);
        assert!(pool.has_free());
        let sent: Vec<_> = lent.into_iter().map(Lent::send).collect();
        assert!(sent.iter().all(|p| p.is_empty() && p.capacity() >= PACK));
        for mut pack in sent {
            pack.push(Delivery::from(crate::event::Event::Message(7)));
            pool.give_back(pack);
        }
        let mut all: Vec<_> = std::iter::from_fn(|| pool.take()).collect();
        assert_eq!(all.len(), 4, "every pack back");
        assert!(all.iter_mut().all(|p| p.events().is_empty()));
    }
}
