//! A consumer's table of what it was delivered and has not confirmed, indexed by the
//! delivery token each `Deliver` entry carries.
//!
//! # Tokens
//!
//! The token of a delivery is the index of its entry here. A confirm names the GUID and
//! the token; [`Unconfirmed::remove`] applies it only if the token is inside the table,
//! its entry is held, and the entry's GUID is the confirm's. So a token never given, one
//! out of range, one of a free entry (its delivery confirmed already), one of another
//! consumer (its own table's index, checked here against this table's GUID), and a stale
//! one (its entry freed and reused for a delivery of another message: the right index,
//! another GUID) confirm nothing. The GUID check is what makes a stale token harmless: an
//! entry is reused only once its delivery is confirmed or the consumer closed, and the
//! broker delivers a message to a consumer once while it holds it.
//!
//! # Memory
//!
//! The entries are allocated for the consumer's window when its slot is first used, and
//! kept across the consumers that use the slot after ([`Unconfirmed::clear`] keeps them):
//! a consumer never holds more than the window (the server hands the broker credit only
//! as far as that leaves room), so the table never grows in steady state, and a delivery
//! or a confirm allocates nothing. Free entries are chained through themselves (a free
//! list in place), so freeing and reusing one costs no other table.

use zerodispatch_broker::Guid;

/// An entry: a delivery held, or a link of the free list.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Entry {
    /// Delivered and not confirmed: the message's GUID and its payload's handle.
    Held { guid: Guid, handle: u64 },
    /// Free: the next free entry's index, or [`NONE`].
    Free { next: u32 },
}

// What `MAX_CONSUMER_WINDOW`'s memory estimate counts an entry as.
const _: () = assert!(std::mem::size_of::<Entry>() == 32);

/// The end of the free list.
const NONE: u32 = u32::MAX;

/// What a consumer was delivered and has not confirmed: token -> (GUID, payload handle).
#[derive(Debug)]
pub(super) struct Unconfirmed {
    /// Entry `i` is the delivery whose token is `i`. Only pushed to (when the free list is
    /// empty), never shortened but by `clear`: a token stays inside it while its delivery
    /// is held.
    entries: Vec<Entry>,
    /// The first free entry, or [`NONE`]: the head of the free list that runs through the
    /// `Free` entries, each free entry on it exactly once.
    free: u32,
    /// The `Held` entries.
    held: usize,
}

impl Default for Unconfirmed {
    fn default() -> Self {
        Self {
            entries: Vec::new(),
            free: NONE,
            held: 0,
        }
    }
}

impl Unconfirmed {
    /// The entries allocated (0 until the slot is first used).
    pub(super) fn capacity(&self) -> usize {
        self.entries.capacity()
    }

    /// Allocates room for `window` deliveries held at once.
    pub(super) fn reserve(&mut self, window: usize) {
        self.entries
            .reserve_exact(window.saturating_sub(self.entries.len()));
    }

    /// The deliveries held.
    pub(super) fn len(&self) -> usize {
        self.held
    }

    /// Holds a delivery of `guid` whose payload is `handle`; returns its token.
    ///
    /// Allocates nothing while fewer than the reserved window are held.
    pub(super) fn insert(&mut self, guid: Guid, handle: u64) -> u32 {
        let held = Entry::Held { guid, handle };
        self.held += 1;
        if self.free != NONE {
            // Take the free list's head: the entry is free, its successor the new head.
            let token = self.free;
            let entry = &mut self.entries[token as usize];
            let Entry::Free { next } = *entry else {
                panic!("the free list's head is held; entry = {entry:?}");
            };
            self.free = next;
            *entry = held;
            return token;
        }
        // No free entry: a new one at the end (within the reserved window, no allocation).
        let token = u32::try_from(self.entries.len())
            .ok()
            .filter(|&t| t != NONE)
            .expect("a consumer holds fewer than u32::MAX deliveries (its window)");
        self.entries.push(held);
        token
    }

    /// Applies a confirm of `guid` by `token`: if the token's entry is held under `guid`,
    /// frees it and returns the payload's handle; otherwise (out of range, free, another
    /// GUID's) changes nothing and returns `None`.
    pub(super) fn remove(&mut self, guid: Guid, token: u32) -> Option<u64> {
        let entry = self.entries.get_mut(token as usize)?;
        match *entry {
            Entry::Held { guid: held, handle } if held == guid => {
                *entry = Entry::Free { next: self.free };
                self.free = token;
                self.held -= 1;
                Some(handle)
            }
            _ => None,
        }
    }

    /// Forgets every delivery (the consumer is gone), keeping the allocation.
    pub(super) fn clear(&mut self) {
        self.entries.clear();
        self.free = NONE;
        self.held = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn guid(n: u8) -> Guid {
        Guid([n; 16])
    }

    #[test]
    fn a_token_confirms_only_its_own_held_delivery() {
        let mut table = Unconfirmed::default();
        table.reserve(4);
        let (a, b) = (table.insert(guid(1), 10), table.insert(guid(2), 20));
        assert_eq!((a, b, table.len()), (0, 1, 2));
        assert_eq!(table.remove(guid(1), 7), None, "out of range");
        assert_eq!(
            table.remove(guid(2), a),
            None,
            "the right slot, another GUID"
        );
        assert_eq!(table.remove(guid(1), a), Some(10));
        assert_eq!(
            table.remove(guid(1), a),
            None,
            "confirmed already: a free entry"
        );
        // The freed entry is reused: the old token is stale, and refused by its GUID.
        let c = table.insert(guid(3), 30);
        assert_eq!(c, a);
        assert_eq!(table.remove(guid(1), a), None, "stale");
        assert_eq!(table.len(), 2);
        assert_eq!(table.remove(guid(3), c), Some(30));
        assert_eq!(table.remove(guid(2), b), Some(20));
        assert_eq!(table.len(), 0);
    }

    #[test]
    fn the_window_is_reused_without_growing() {
        let mut table = Unconfirmed::default();
        table.reserve(3);
        let capacity = table.capacity();
        for round in 0..10_u8 {
            let tokens: Vec<_> = (0..3).map(|i| table.insert(guid(round + i), 0)).collect();
            let mut sorted = tokens.clone();
            sorted.sort_unstable();
            assert_eq!(sorted, [0, 1, 2], "round {round}");
            for (i, token) in tokens.into_iter().enumerate() {
                assert!(table.remove(guid(round + i as u8), token).is_some());
            }
        }
        assert_eq!(table.capacity(), capacity);
        table.insert(guid(1), 0);
        table.clear();
        assert_eq!((table.len(), table.capacity()), (0, capacity));
        assert_eq!(table.remove(guid(1), 0), None, "cleared");
        assert_eq!(table.insert(guid(9), 0), 0);
    }
}
