//! A processor's client table as other threads reach it: the slots that keys are taken
//! from, and the hand-off by which `register` gives a client to its processor.
//!
//! # Why a hand-off and not a queued registration
//!
//! A registration that travelled through the processor's queue, like an event, could be
//! overtaken by the client's first event. On a processor thread a dispatch never waits: a
//! registration that finds the target's queue full waits in the caller's
//! [outbox](crate::outbox) while `register` returns the handle, and another thread that
//! dispatches with that handle as soon as there is room gets in first. The processor
//! then finds no client under the key and drops the event as stale: `register`'s promise
//! ("events dispatched with the returned handle after this returns reach the client")
//! broken. Holding such events until the registration arrives would need a buffer per
//! pending client, and refusing such registrations would make a handler's `register`
//! fail whenever its processor's outbox is in use. Instead the registration does not
//! travel at all: the client is handed over under the processor's slot lock before
//! `register` returns, so whatever event names its key finds it.
//!
//! # Protocol
//!
//! `register` (any thread, [`ProcessorShared::hand_in`](crate::processor)):
//!
//! 1. enters the processor's [gate](crate::gate) (refused: shutdown has begun, the client
//!    is dropped and `register` fails with `ShutDown`);
//! 2. under the slot lock, takes a key and puts the client among the **arrivals** under
//!    that key;
//! 3. leaves the gate (undoes the entry: no event was pushed), and returns the handle.
//!
//! The processor, on an event (or unregistration) whose key finds no client in its own
//! table, looks among the arrivals under the slot lock before it calls the event stale:
//! a client found there under that key is **adopted** (moved to the table) and the event
//! delivered to it. At exit, once its clients are dropped, it takes every arrival left
//! (clients that never got an event) and drops them on its own thread too.
//!
//! # Why no event misses its client, and no client is lost
//!
//! * An event that names the new key was dispatched after `register` returned, so after
//!   step 2; its pop by the processor happens after its push, so the processor's look
//!   under the lock, which follows the pop, sees the arrival. The client is found
//!   whatever route the event took (straight, or through an outbox) and whichever thread
//!   sent it.
//! * Only the processor's thread moves a client from the arrivals to its table, and it
//!   frees a slot (a new generation) only at the client's unregistration, after adopting
//!   it: an arrival's key is always its slot's live key, and a stale event for an older
//!   generation of the slot never adopts it.
//! * Shutdown: a registration that entered the gate before the close holds an entry until
//!   step 3, and the processor exits only once its gate is settled (every entry popped or
//!   undone). Its undo (a release) follows step 2, and the processor's read of the settled
//!   gate (an acquire) precedes its last take of the arrivals: the client is taken and
//!   dropped on the processor's thread. A registration after the close is refused at
//!   step 1. So every client handed in is dropped exactly once, on its processor's thread
//!   (or, refused, on the caller's).
//!
//! The lock is taken by `register` and `stats` (the count of clients), and by the
//! processor only on a miss of its table (a client's first event, or a stale event) and
//! at unregistration: never on the event path of a registered client. Modelled with
//! `loom` on the real code (`loom/register.rs`: a handle registered then dispatched to from
//! another thread, racing a shutdown).

use crate::client::{Client, Registered};
use crate::ids::ClientKey;

/// A processor's client slots and its arrivals: what `register` and the processor share,
/// under the processor's slot lock.
pub(crate) struct ClientSlots<M> {
    /// The keys.
    pub(crate) keys: SlotAllocator,
    /// Clients handed in and not yet adopted, by slot. Invariant: an arrival at slot `s`
    /// carries the live generation of `s` (the slot is freed only after its client was
    /// adopted and unregistered).
    arrivals: Vec<Option<Arrival<M>>>,
}

/// A client handed in under the key it was registered with.
struct Arrival<M> {
    generation: u16,
    client: Box<dyn Registered<M>>,
}

impl<M> Default for ClientSlots<M> {
    fn default() -> Self {
        Self {
            keys: SlotAllocator::default(),
            arrivals: Vec::new(),
        }
    }
}

impl<M: Send + 'static> ClientSlots<M> {
    /// Takes a key and puts `client` among the arrivals under it (step 2 of the protocol).
    /// Allocates when a slot is used for the first time (registration is not on the
    /// event path): the client is boxed here once a key is taken. Hands the client back
    /// if the table is full.
    pub(crate) fn hand_in<C: Client<M>>(&mut self, client: C) -> Result<ClientKey, C> {
        let Some(key) = self.keys.take() else {
            return Err(client);
        };
        let client: Box<dyn Registered<M>> = Box::new(client);
        let slot = usize::from(key.slot);
        if self.arrivals.len() <= slot {
            self.arrivals.resize_with(slot + 1, || None);
        }
        debug_assert!(self.arrivals[slot].is_none(), "slot {slot} handed in twice");
        self.arrivals[slot] = Some(Arrival {
            generation: key.generation,
            client,
        });
        Ok(key)
    }

    /// The client handed in under `key`, taken out (adopted by the processor); `None` if
    /// there is none (the key is stale, or its client was adopted already).
    pub(crate) fn adopt(&mut self, key: ClientKey) -> Option<Box<dyn Registered<M>>> {
        let arrival = self.arrivals.get_mut(usize::from(key.slot))?;
        if arrival.as_ref()?.generation != key.generation {
            return None;
        }
        arrival.take().map(|a| a.client)
    }

    /// Every client still among the arrivals (for the processor's exit: clients that never
    /// got an event).
    pub(crate) fn take_arrivals(&mut self) -> impl Iterator<Item = Box<dyn Registered<M>>> + '_ {
        self.arrivals
            .iter_mut()
            .filter_map(|a| a.take().map(|a| a.client))
    }
}

/// Free and used slots of a processor's client table.
#[derive(Debug, Default)]
pub(crate) struct SlotAllocator {
    /// The current generation of each slot ever used.
    generations: Vec<u16>,
    /// Slots free for reuse.
    free: Vec<u16>,
    /// Clients registered now.
    pub(crate) live: usize,
    /// Slots retired because their generation was spent.
    retired: usize,
}

impl SlotAllocator {
    /// Takes a slot, or `None` if the table is full (`u16::MAX` slots).
    pub(crate) fn take(&mut self) -> Option<ClientKey> {
        let slot = match self.free.pop() {
            Some(slot) => slot,
            None => {
                let slot = u16::try_from(self.generations.len()).ok()?;
                self.generations.push(0);
                slot
            }
        };
        self.live += 1;
        Some(ClientKey {
            slot,
            generation: self.generations[usize::from(slot)],
        })
    }

    /// Releases a slot; its next client gets the next generation. A slot whose generation
    /// would wrap is retired for good instead: reusing it would hand out a key already
    /// issued 65,536 registrations ago, which a long-stale handle still carries. A slot
    /// lasts 65,535 registrations, so a processor runs out of slots only after about four
    /// billion (then `register` fails with `TableFull`).
    pub(crate) fn release(&mut self, key: ClientKey) {
        let generation = &mut self.generations[usize::from(key.slot)];
        debug_assert_eq!(*generation, key.generation, "releasing a slot twice");
        self.live -= 1;
        match generation.checked_add(1) {
            Some(next) => {
                *generation = next;
                self.free.push(key.slot);
            }
            None => self.retired += 1,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A `(slot, generation)` key is never issued twice: on the code before the fix the
    /// generation wrapped after 65,536 cycles and the first key came back.
    #[test]
    fn a_slot_key_is_never_reissued() {
        let mut slots = SlotAllocator::default();
        let first = slots.take().unwrap();
        slots.release(first);
        let mut seen = std::collections::HashSet::new();
        seen.insert(first);
        for _ in 0..70_000 {
            let key = slots.take().unwrap();
            assert!(seen.insert(key), "key {key:?} issued twice");
            slots.release(key);
        }
        assert_eq!(
            slots.retired, 1,
            "slot 0 is retired once its generation is spent"
        );
        assert_eq!(slots.live, 0);
    }
}
