//! A producer session's table of the messages it waits for an outcome of, indexed by slot.
//!
//! Each message sent or to be sent has an entry; the entry's index is the message's slot,
//! which its PUT carries to the queue and the queue's ACK carries back, as a delivery's
//! token does for a confirm (`docs/architecture.md`, "Delivery tokens"). An ACK finds its
//! message by indexing the table: no lookup by GUID, so the messages in flight cost
//! nothing per ACK whatever the cap.
//!
//! A slot is checked, never trusted: [`UnackedTable::take`] gives the message only if the
//! entry is live and holds the ACK's GUID. An ACK for a message reported already (timed
//! out, closed) finds its entry free, or reused by another message, which has another
//! GUID (the session's own numbering never repeats one; a caller's numbering repeats one
//! only once the first is reported, and then its ACK may be taken for the second's, as an
//! ACK by GUID would). Either way the ACK changes nothing, and is counted late.

use std::collections::TryReserveError;

use crate::ids::Guid;
use crate::tables;

use super::Unacked;

/// An entry of the table.
#[derive(Clone, Copy)]
struct Entry {
    guid: Guid,
    unacked: Unacked,
    /// Whether it holds a message without an outcome (set at insert, cleared at take).
    /// A free entry's index is in `free`.
    live: bool,
}

/// The table: at most `cap` entries, allocated once (see `new`). The default is empty and
/// unallocated.
#[derive(Default)]
pub(crate) struct UnackedTable {
    /// The entries, live or free. Grows by one only when `free` is empty, up to `cap`
    /// entries, inside its preallocated capacity: it never reallocates.
    entries: Vec<Entry>,
    /// The free entries' indices, the most recently freed last (reused first, while still
    /// in the cache).
    free: Vec<u32>,
    /// Live entries.
    live: usize,
}

impl UnackedTable {
    /// A table for `cap` messages, its entries' room allocated now (touched only as the
    /// messages in flight first reach each count).
    ///
    /// # Errors
    ///
    /// The allocation failed.
    pub(crate) fn new(cap: usize) -> Result<Self, TryReserveError> {
        debug_assert!(u32::try_from(cap).is_ok(), "a slot is a u32");
        Ok(Self {
            entries: tables::vec(cap)?,
            free: tables::vec(cap)?,
            live: 0,
        })
    }

    /// Messages without an outcome.
    pub(crate) fn len(&self) -> usize {
        self.live
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.live == 0
    }

    /// Whether the table holds its allocation (see [`Self::free_memory`]).
    pub(crate) fn is_allocated(&self) -> bool {
        self.entries.capacity() > 0
    }

    /// Adds a message; returns its slot.
    ///
    /// Precondition: fewer than `cap` messages live (the caller refuses a publish at the
    /// cap), so that a free entry is there or room for one.
    pub(crate) fn insert(&mut self, guid: Guid, unacked: Unacked) -> u32 {
        let entry = Entry {
            guid,
            unacked,
            live: true,
        };
        self.live += 1;
        if let Some(slot) = self.free.pop() {
            debug_assert!(!self.entries[slot as usize].live, "a live entry in `free`");
            self.entries[slot as usize] = entry;
            return slot;
        }
        debug_assert!(
            self.entries.len() < self.entries.capacity(),
            "more messages than the cap: {}",
            self.entries.len()
        );
        let slot = u32::try_from(self.entries.len()).expect("the cap fits a u32");
        self.entries.push(entry);
        slot
    }

    /// Whether `slot` holds message `guid`, still without an outcome.
    pub(crate) fn holds(&self, slot: u32, guid: Guid) -> bool {
        self.entries
            .get(slot as usize)
            .is_some_and(|e| e.live && e.guid == guid)
    }

    /// Takes message `guid` out of `slot`, if the slot holds it; `None` if the slot is out
    /// of the table, free, or holds another message (its entry is left as it is).
    pub(crate) fn take(&mut self, slot: u32, guid: Guid) -> Option<Unacked> {
        if !self.holds(slot, guid) {
            return None;
        }
        let e = &mut self.entries[slot as usize];
        e.live = false;
        self.live -= 1;
        self.free.push(slot);
        Some(e.unacked)
    }

    /// Whether a message of `guid` is in the table: a scan of every entry, for the one
    /// case that has no index (see `ProducerSession::in_flight`).
    pub(crate) fn scan_for(&self, guid: Guid) -> bool {
        self.entries.iter().any(|e| e.live && e.guid == guid)
    }

    /// Takes every message out, calling `f` with each, in slot order; the table keeps its
    /// allocation.
    pub(crate) fn drain(&mut self, mut f: impl FnMut(u32, Guid, Unacked)) {
        for (slot, e) in self.entries.iter().enumerate() {
            if e.live {
                f(slot as u32, e.guid, e.unacked);
            }
        }
        self.entries.clear();
        self.free.clear();
        self.live = 0;
    }

    /// Gives the allocation back (a retired session waiting only for late ACKs); the table
    /// must be empty, and takes no message afterwards.
    pub(crate) fn free_memory(&mut self) {
        debug_assert!(self.is_empty(), "freeing a table with messages in it");
        self.entries = Vec::new();
        self.free = Vec::new();
    }
}
