//! The outbox: how a processor hands events to another processor without ever waiting
//! for it.
//!
//! # Why
//!
//! Queues are bounded. If a processor that dispatches to a full queue waited for room,
//! two processors that dispatch to each other (a session sends PUTs to a queue, the queue
//! sends PUSHes and ACKs back) could each wait for the other's full queue forever, and so
//! could any longer cycle. So the rule is: **a processor never waits for another
//! processor.** It keeps draining its own queue whatever happens to its dispatches, and
//! the events it cannot hand on at once wait in its outbox, a bounded queue preallocated
//! with the processor and owned by its thread. Back-pressure goes to the application
//! threads, which may wait; a processor's client sees it only as a `Full` from a full
//! outbox, and keeps what it could not send for its next flush
//! ([`Context::flush_again`](crate::Context::flush_again)).
//!
//! # Protocol
//!
//! A dispatch made on processor `X`'s thread to processor `T` (`T` may be `X` itself):
//!
//! 1. enters `T`'s [gate](crate::gate) (a refused entry means `T` is shutting down: the
//!    event is handed back, `ShutDown`);
//! 2. if `X`'s outbox is empty, pushes to `T`'s queue; if that succeeds, the entry has
//!    become the event (waking `T` if it announced sleep) and the call returns;
//! 3. otherwise (the queue is full, or earlier events wait in the outbox and must not be
//!    overtaken) appends the event to `X`'s outbox **still holding its entry in `T`'s
//!    gate**, or, if the outbox is full, undoes the entry and hands the event back (`Full`).
//!
//! `X`'s loop retries its outbox at every turn (before draining, and at every flush point),
//! front to back, stopping at the first event whose queue is still full: each event that
//! goes through turns the entry it held into a queued event. While the outbox is not empty `X` never
//! parks for longer than a short, growing timeout, so it retries even when nothing else
//! wakes it.
//!
//! # Why nothing deadlocks, and nothing is lost
//!
//! * No processor waits for anything but its own empty queue, so every queue is drained,
//!   so every outbox eventually empties: a cycle of full queues cannot stall.
//! * An event in an outbox holds an entry in its target's gate, so the target, which
//!   after shutdown's close exits only once every entry has become an event it popped
//!   (the gate is settled), waits for that event to be pushed; it keeps draining until
//!   then, so the push happens. An accepted event is therefore always run, as for an
//!   application thread's dispatch.
//! * `X` itself exits only once its outbox is empty.
//! * Order is kept per sender: once an event waits in the outbox, every later dispatch
//!   from `X` goes behind it, so two events from one processor to one target arrive in
//!   the order they were dispatched. The price is head-of-line blocking: an event for a
//!   full target delays `X`'s events to every other target until it goes through.
//!
//! The gate's part is model-checked with `loom` (`loom/outbox.rs`: an outboxed event holds
//! its gate through a racing shutdown).

use std::collections::VecDeque;

use crate::event::Item;
use crate::ids::ProcessorId;

/// Events a processor could not hand on yet, oldest first, each holding one entry in its
/// target's gate. Touched only by the processor's own thread (its `Mutex` is never
/// contended).
pub(crate) struct Outbox<M> {
    /// Allocated once with room for `capacity` entries; never grows (checked before every
    /// push), so the outbox allocates nothing after start-up.
    entries: VecDeque<(ProcessorId, Item<M>)>,
    capacity: usize,
}

impl<M> Outbox<M> {
    pub(crate) fn new(capacity: usize) -> Self {
        Self {
            entries: VecDeque::with_capacity(capacity),
            capacity,
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }

    /// Entries it can still take.
    pub(crate) fn room(&self) -> usize {
        self.capacity - self.entries.len()
    }

    /// Appends an event for `target`, whose gate the caller has entered on the event's
    /// behalf; hands it back if the outbox is full (the caller then undoes the entry).
    pub(crate) fn keep(&mut self, target: ProcessorId, item: Item<M>) -> Result<(), Item<M>> {
        if self.entries.len() >= self.capacity {
            return Err(item);
        }
        debug_assert!(self.entries.len() < self.entries.capacity());
        self.entries.push_back((target, item));
        Ok(())
    }

    /// Hands on events front to back with `push`, until one comes back (its queue is
    /// still full; it goes back to the front) or none is left. Each event `push` accepts
    /// turns its held entry into a queued event. Returns how many went through.
    pub(crate) fn retry(
        &mut self,
        mut push: impl FnMut(ProcessorId, Item<M>) -> Result<(), Item<M>>,
    ) -> usize {
        let mut sent = 0;
        while let Some((target, item)) = self.entries.pop_front() {
            if let Err(item) = push(target, item) {
                self.entries.push_front((target, item));
                break;
            }
            sent += 1;
        }
        sent
    }

    /// Takes every entry out (for a processor that is dying: each still holds its gate).
    pub(crate) fn take_all(&mut self) -> impl Iterator<Item = (ProcessorId, Item<M>)> + '_ {
        self.entries.drain(..)
    }
}
