//! Positions: where in the ring, and on which lap.
//!
//! A position is a lap and an index in one word, as crossbeam's `ArrayQueue` encodes them:
//! `lap + index`, with `index < capacity` and `lap` a multiple of `one_lap`, the power of
//! two above the capacity. Positions only ever move forward and compare for equality, so
//! the word's wrapping after 2^64 (2^32 on a 32-bit target) laps' worth of events confuses
//! nothing: a stamp is compared with the one position it may hold, never ordered.

/// The shape of a ring's positions.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Positions {
    /// Slots in the ring.
    pub(crate) capacity: usize,
    /// The power of two above `capacity`: one lap's step.
    pub(crate) one_lap: usize,
}

impl Positions {
    /// Precondition: `capacity >= 1`.
    pub(crate) fn new(capacity: usize) -> Self {
        debug_assert!(capacity >= 1);
        let one_lap = (capacity + 1).next_power_of_two();
        Self { capacity, one_lap }
    }

    /// The slot a position names.
    #[inline]
    pub(crate) fn index(self, position: usize) -> usize {
        position & (self.one_lap - 1)
    }

    /// The position `steps` after `position`. Precondition: `steps <= capacity`.
    #[inline]
    pub(crate) fn advance(self, position: usize, steps: usize) -> usize {
        let index = self.index(position) + steps;
        let lap = position & !(self.one_lap - 1);
        if index < self.capacity {
            lap + index
        } else {
            lap.wrapping_add(self.one_lap) + (index - self.capacity)
        }
    }

    /// Events between the consumer's `head` and the producers' `tail`, read together.
    #[inline]
    pub(crate) fn distance(self, head: usize, tail: usize) -> usize {
        let (h, t) = (self.index(head), self.index(tail));
        if h < t {
            t - h
        } else if h > t {
            self.capacity - h + t
        } else if tail == head {
            0
        } else {
            self.capacity
        }
    }
}
