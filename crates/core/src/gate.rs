//! The gate: one word per processor that every push passes with **one** read-modify-write.
//! It carries two protocols: shutdown (this module) and waking a sleeping processor
//! ([`wake`](crate::wake)). `impl Gate` is split between the two files on purpose: each
//! protocol's methods sit beside the narrative that argues their correctness (here
//! entering, counting, closing and settling; in `wake.rs` announcing sleep).
//!
//! # Counting entries
//!
//! Above its two flags (`CLOSED`, `SLEEPING`) the word counts **entries**: an entry is an
//! event on its way into the processor's queue.
//!
//! * A producer enters with `fetch_add(ENTRY)` before it pushes ([`Gate::enter`]). If
//!   `CLOSED` was set it undoes the entry ([`Gate::undo`]) and hands the event back
//!   (`ShutDown`).
//! * A push that succeeds turns the entry into a queued event: nothing more to do, no second
//!   read-modify-write. A push refused because the queue is full undoes the entry.
//! * A batch enters once and, having pushed `k` events, adds the `k - 1` others
//!   ([`Gate::add`]), or undoes the entry if it pushed none.
//! * An event kept in an outbox (`outbox.rs`) keeps its entry until it is pushed.
//!
//! The processor counts the events it pops. The word's count minus that count is the
//! number of events entered and not yet popped: queued, being pushed by a producer between
//! its entry and its push, or kept in an outbox. [`Gate::settled`] says when it is zero.
//!
//! # Shutdown
//!
//! Shutdown [`close`](Gate::close)s the gate (`fetch_or(CLOSED)`), so that every later
//! entry is undone, then tells the processor to stop. The processor exits only once it is
//! told to stop, its queue is empty and the gate is settled: every entry made before the
//! close has become an event, and that event has been popped. An entry made after the
//! close is refused; while it is counted (between its `fetch_add` and its undo) the gate is
//! not settled, and the processor waits.
//!
//! Why nothing accepted is lost: all changes of the word are read-modify-writes, so they are
//! totally ordered (its modification order) and each reads the latest value. An entry either
//! comes before the close (it is accepted, and counted in every value of the word after the
//! close) or after (it reads `CLOSED`, and is refused). The processor reads the word after
//! it has seen the stop, which shutdown stores after the close, so it reads a value that
//! includes every accepted entry: it cannot settle before it has popped each of them.
//!
//! The price is one uncontended read-modify-write per dispatch (one per batch), made before
//! the push, when the previous event's slot write may still sit in the store buffer: half
//! of what the earlier enter-and-leave gate paid (`docs/benchmarks.md`, `dispatch_hop`).
//! Modelled with `loom` on the real code (`loom/shutdown.rs`, `loom/wake.rs`).

use crate::sync::{AtomicUsize, Ordering};

/// Bit 0: shutdown has closed the gate.
pub(crate) const CLOSED: usize = 1;
/// Bit 1: the processor is going to sleep or asleep (see [`wake`](crate::wake)).
pub(crate) const SLEEPING: usize = 2;
/// What one entry adds to the word (bits 2 and up count entries, modulo 2^62).
const ENTRY: usize = 4;

/// The count of entries a word holds, modulo 2^62.
pub(crate) const fn entries(word: usize) -> usize {
    word / ENTRY
}

/// A count of popped events, modulo 2^62, to compare with [`entries`].
pub(crate) const fn modulo_entries(popped: usize) -> usize {
    popped & (usize::MAX / ENTRY)
}

/// A processor's gate.
#[derive(Debug, Default)]
pub(crate) struct Gate {
    /// `CLOSED` | `SLEEPING` | `ENTRY` times the entries made (wrapping). Every change is a
    /// read-modify-write, so that all are totally ordered and each reads the latest value.
    pub(crate) word: AtomicUsize,
}

impl Gate {
    /// Enters the gate for one event. `None` (and nothing to undo) if shutdown closed it;
    /// otherwise whether the processor had announced sleep: then the caller must wake it
    /// once its push is done (the wake protocol).
    #[inline]
    pub(crate) fn enter(&self) -> Option<bool> {
        // AcqRel: Acquire pairs with the processor's `fetch_or(SLEEPING)` (reading the flag
        // means the processor's check comes after this entry); Release orders what the
        // producer did before against the processor's reads of the count.
        let before = self.word.fetch_add(ENTRY, Ordering::AcqRel);
        if before & CLOSED != 0 {
            self.undo();
            return None;
        }
        Some(before & SLEEPING != 0)
    }

    /// Adds `n` entries for events already pushed (a batch's others). Returns whether the
    /// processor had announced sleep: the caller must then wake it.
    #[inline]
    pub(crate) fn add(&self, n: usize) -> bool {
        // AcqRel: as `enter`; a processor that parked while this batch was half pushed
        // reads its `SLEEPING` here, and is woken.
        self.word.fetch_add(n.wrapping_mul(ENTRY), Ordering::AcqRel) & SLEEPING != 0
    }

    /// Undoes one entry whose event was not pushed (refused: the gate closed, or the queue
    /// was full).
    #[inline]
    pub(crate) fn undo(&self) {
        // Release: the undo is the last thing the producer does with this event; the
        // processor's Acquire read of the count sees it.
        self.word.fetch_sub(ENTRY, Ordering::Release);
    }

    /// Closes the gate: every later [`enter`](Gate::enter) fails. Returns `false` if it was
    /// already closed.
    pub(crate) fn close(&self) -> bool {
        self.word.fetch_or(CLOSED, Ordering::AcqRel) & CLOSED == 0
    }

    /// Whether every entry made so far has become an event that the processor popped,
    /// `popped` being how many it has popped in all.
    pub(crate) fn settled(&self, popped: usize) -> bool {
        // Acquire: pairs with the Release of every entry, addition and undo.
        entries(self.word.load(Ordering::Acquire)) == modulo_entries(popped)
    }

    /// Events entered and not yet popped (queued, being pushed, or kept in an outbox),
    /// `popped` being how many the processor has popped in all: what the processor's room
    /// for waiters is counted against (`ProcessorShared::wake_waiters`). A snapshot: an
    /// entry about to be undone is still counted.
    pub(crate) fn unpopped(&self, popped: usize) -> usize {
        // Relaxed: a heuristic of when to wake waiters, not a protocol step; the waiter
        // protocol's ordering is the retry's entry against the processor's announcement.
        entries(self.word.load(Ordering::Relaxed)).wrapping_sub(modulo_entries(popped))
            & (usize::MAX / ENTRY)
    }

    /// Whether the gate is closed.
    pub(crate) fn is_closed(&self) -> bool {
        self.word.load(Ordering::Relaxed) & CLOSED != 0
    }
}
