//! A reliable producer's messages without an outcome, payloads included, kept for resending
//! on a new connection: a ring of slots in publish id order over a ring of bytes, both
//! allocated when the producer opens.

use std::collections::{TryReserveError, VecDeque};
use std::time::Instant;

/// One message of the ring: publish id `first_id + index`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Slot {
    pub(crate) taken_at: Instant,
    offset: usize,
    len: usize,
    /// Whether the message has had its outcome (a slot leaves only from the front).
    pub(crate) settled: bool,
    /// Whether the message was handed to a connection (to tell `Closed` from `NotSent`).
    pub(crate) written: bool,
    /// Whether the payload is the first at the start of the bytes after a wrap.
    wraps: bool,
}

/// Messages from the oldest without an outcome to the newest, with their payloads.
///
/// Slots leave from the front only (once settled), so the span from the oldest message
/// without an outcome to the newest is what counts against the cap, and the payloads are
/// freed in the order they were written: the bytes are a ring too. A payload that does not
/// fit at the end of the bytes goes at their start, if that is free.
pub(crate) struct ResendRing {
    slots: VecDeque<Slot>,
    slot_cap: usize,
    first_id: u64,
    bytes: Vec<u8>,
    /// The front slot's payload offset (where the used bytes start).
    head: usize,
    /// Where the next payload goes.
    tail: usize,
    /// Whether the used bytes wrap around: `head..` then `..tail`.
    wrapped: bool,
}

impl ResendRing {
    /// A ring for `slots` messages and `bytes` bytes of payload.
    pub(crate) fn new(slots: usize, bytes: usize) -> Result<Self, TryReserveError> {
        let mut slot_ring = VecDeque::new();
        slot_ring.try_reserve_exact(slots)?;
        let mut buffer = Vec::new();
        buffer.try_reserve_exact(bytes)?;
        buffer.resize(bytes, 0);
        Ok(Self {
            slots: slot_ring,
            slot_cap: slots,
            first_id: 0,
            bytes: buffer,
            head: 0,
            tail: 0,
            wrapped: false,
        })
    }

    /// The publish id of the front slot (the next id, when empty).
    pub(crate) fn first_id(&self) -> u64 {
        self.first_id
    }

    /// Numbers the messages from `id` on; the ring must be empty.
    pub(crate) fn start_at(&mut self, id: u64) {
        debug_assert!(self.slots.is_empty());
        if self.slots.is_empty() {
            self.first_id = id;
        }
    }

    /// The publish id the next message gets.
    pub(crate) fn next_id(&self) -> u64 {
        self.first_id + self.slots.len() as u64
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    /// Where a payload of `len` bytes would go, if it fits now.
    fn place(&self, len: usize) -> Option<usize> {
        if self.slots.is_empty() {
            return (len <= self.bytes.len()).then_some(0);
        }
        if self.wrapped {
            return (self.tail + len <= self.head).then_some(self.tail);
        }
        if self.tail + len <= self.bytes.len() || len == 0 {
            Some(self.tail)
        } else if len <= self.head {
            Some(0)
        } else {
            None
        }
    }

    /// Takes a message; returns its publish id, or `None` if the slots or the bytes are
    /// full (nothing taken).
    pub(crate) fn push(&mut self, payload: &[u8], now: Instant) -> Option<u64> {
        if self.slots.len() >= self.slot_cap {
            return None;
        }
        let offset = self.place(payload.len())?;
        let wraps = !self.slots.is_empty() && !self.wrapped && offset < self.tail;
        if self.slots.is_empty() {
            self.head = offset;
            self.wrapped = false;
        } else if wraps {
            self.wrapped = true;
        }
        self.bytes[offset..offset + payload.len()].copy_from_slice(payload);
        self.tail = offset + payload.len();
        let id = self.next_id();
        self.slots.push_back(Slot {
            taken_at: now,
            offset,
            len: payload.len(),
            settled: false,
            written: false,
            wraps,
        });
        Some(id)
    }

    /// The slot of message `id`, if it is in the ring.
    pub(crate) fn get_mut(&mut self, id: u64) -> Option<&mut Slot> {
        let index = usize::try_from(id.checked_sub(self.first_id)?).ok()?;
        self.slots.get_mut(index)
    }

    /// The payload of a slot.
    pub(crate) fn payload(&self, slot: &Slot) -> &[u8] {
        &self.bytes[slot.offset..slot.offset + slot.len]
    }

    /// Message `id`'s slot and payload, if it is in the ring.
    pub(crate) fn get(&self, id: u64) -> Option<(&Slot, &[u8])> {
        let index = usize::try_from(id.checked_sub(self.first_id)?).ok()?;
        let slot = self.slots.get(index)?;
        Some((slot, self.payload(slot)))
    }

    /// Drops the settled slots at the front, freeing their bytes; returns how many.
    pub(crate) fn pop_settled(&mut self) -> usize {
        let mut popped = 0;
        while self.slots.front().is_some_and(|s| s.settled) {
            if self.slots.pop_front().is_some_and(|s| s.wraps) {
                self.wrapped = false;
            }
            self.first_id += 1;
            popped += 1;
        }
        match self.slots.front_mut() {
            None => {
                self.head = 0;
                self.tail = 0;
                self.wrapped = false;
            }
            Some(front) => {
                if front.wraps {
                    // The bytes before the start are all free now.
                    front.wraps = false;
                    self.wrapped = false;
                }
                self.head = front.offset;
            }
        }
        popped
    }

    /// The ids of the messages in the ring, oldest first.
    pub(crate) fn ids(&self) -> std::ops::Range<u64> {
        self.first_id..self.next_id()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn payloads_wrap_and_are_freed_in_order() {
        let now = Instant::now();
        let mut ring = ResendRing::new(4, 10).unwrap();
        assert_eq!(ring.push(b"aaaa", now), Some(0));
        assert_eq!(ring.push(b"bbbb", now), Some(1));
        assert_eq!(
            ring.push(b"ccc", now),
            None,
            "3 bytes left at the end, none at the start"
        );
        ring.get_mut(0).unwrap().settled = true;
        assert_eq!(ring.pop_settled(), 1);
        assert_eq!(ring.push(b"ccc", now), Some(2), "wraps to the start");
        assert_eq!(ring.push(b"d", now), Some(3));
        assert_eq!(ring.push(b"x", now), None, "no byte free");
        assert_eq!(ring.get(1).unwrap().1, b"bbbb");
        assert_eq!(ring.get(2).unwrap().1, b"ccc");
        assert_eq!(ring.get(3).unwrap().1, b"d");
        ring.get_mut(2).unwrap().settled = true;
        assert_eq!(ring.pop_settled(), 0, "only from the front");
        ring.get_mut(1).unwrap().settled = true;
        assert_eq!(ring.pop_settled(), 2);
        assert_eq!(ring.ids(), 3..4);
        assert_eq!(ring.push(b"eeeee", now), Some(4));
        assert_eq!(ring.get(3).unwrap().1, b"d");
        assert_eq!(ring.get(4).unwrap().1, b"eeeee");
        assert_eq!(
            ring.push(b"ff", now),
            Some(5),
            "wraps into the 3 free bytes at the start"
        );
        assert_eq!(ring.push(b"gg", now), None, "1 byte free between them");
        assert_eq!(ring.push(b"g", now), Some(6));
        assert_eq!(ring.push(b"", now), None, "4 slots");
        assert_eq!(ring.get(5).unwrap().1, b"ff");
    }

    #[test]
    fn an_emptied_ring_starts_its_bytes_over() {
        let now = Instant::now();
        let mut ring = ResendRing::new(2, 8).unwrap();
        assert_eq!(ring.push(b"12345678", now), Some(0));
        ring.get_mut(0).unwrap().settled = true;
        ring.pop_settled();
        assert!(ring.is_empty());
        assert_eq!(ring.push(b"abcdefgh", now), Some(1));
        assert_eq!(ring.get(1).unwrap().1, b"abcdefgh");
        assert!(ring.get(0).is_none());
    }
}
