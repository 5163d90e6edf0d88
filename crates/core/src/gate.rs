//! The dispatch gate: how shutdown closes a processor's queue without losing an event that
//! a producer is pushing at that very moment.
//!
//! A dispatch checks that the dispatcher is running and then pushes. Between the check
//! and the push, shutdown may have started, the processor may have drained its queue for
//! the last time and exited: the push then succeeds into a queue nobody will read, and the
//! producer was told its event was accepted. The gate closes that window.
//!
//! # Protocol
//!
//! One word per processor: bit 0 is `CLOSED`, the rest counts producers inside the gate
//! (in steps of 2).
//!
//! * A producer [`enter`](Gate::enter)s with `fetch_add(2)`. If `CLOSED` was set, it
//!   leaves again and hands its event back (`ShutDown`). Otherwise it pushes, then leaves
//!   with `fetch_sub(2)` (the [`Pass`] guard's drop).
//! * Shutdown [`close`](Gate::close)s with `fetch_or(CLOSED)`, then waits until the word is
//!   exactly `CLOSED`: no producer is inside, and none can enter. Only then does it tell
//!   the processor to stop, and the processor drains its queue before exiting. Every push
//!   that succeeded happened inside the gate, so before the processor's final drain.
//!
//! All operations are `SeqCst` read-modify-writes on one word, so they are totally
//! ordered: a producer's `fetch_add` either precedes the `fetch_or` (the producer is
//! counted and shutdown waits for it) or follows it (the producer sees `CLOSED`). The
//! exit's `SeqCst` `fetch_sub` also serves as the store-load fence the wake protocol needs
//! between a push and the load of the processor's sleeping flag (see [`wake`](crate::wake)).
//!
//! The cost is two uncontended read-modify-writes per dispatch when one producer feeds a
//! processor: the word is written by producers only, never by the processor, so it stays
//! in the producers' caches. Modelled with `loom` in the crate's loom tests.

use crate::sync::{AtomicUsize, Ordering};

/// Bit 0 of the gate word: shutdown has closed the gate.
const CLOSED: usize = 1;
/// What one producer inside the gate adds to the word.
const ONE_PRODUCER: usize = 2;

/// A processor's dispatch gate.
#[derive(Debug, Default)]
pub(crate) struct Gate {
    /// `CLOSED` in bit 0, `ONE_PRODUCER` times the number of producers inside above it.
    word: AtomicUsize,
}

/// Proof that a producer is inside the gate; leaving the gate when dropped.
#[must_use = "a producer is inside the gate only while the pass lives"]
pub(crate) struct Pass<'a> {
    gate: &'a Gate,
}

impl Gate {
    /// Enters the gate, unless shutdown closed it.
    #[inline]
    pub(crate) fn enter(&self) -> Option<Pass<'_>> {
        // SeqCst: totally ordered with `close` (module docs).
        let before = self.word.fetch_add(ONE_PRODUCER, Ordering::SeqCst);
        if before & CLOSED != 0 {
            self.word.fetch_sub(ONE_PRODUCER, Ordering::SeqCst);
            return None;
        }
        Some(Pass { gate: self })
    }

    /// Closes the gate: every later [`enter`](Gate::enter) fails. Returns `false` if it was
    /// already closed.
    pub(crate) fn close(&self) -> bool {
        self.word.fetch_or(CLOSED, Ordering::SeqCst) & CLOSED == 0
    }

    /// Whether the gate is closed and no producer is inside it: nothing more can be pushed.
    pub(crate) fn is_quiescent(&self) -> bool {
        self.word.load(Ordering::SeqCst) == CLOSED
    }

    /// Whether the gate is closed.
    pub(crate) fn is_closed(&self) -> bool {
        self.word.load(Ordering::Relaxed) & CLOSED != 0
    }
}

impl Drop for Pass<'_> {
    #[inline]
    fn drop(&mut self) {
        // SeqCst: ordered with `close`/`is_quiescent`, and the store-load fence between the
        // push and the wake check (module docs).
        let before = self.gate.word.fetch_sub(ONE_PRODUCER, Ordering::SeqCst);
        debug_assert!(before >= ONE_PRODUCER, "gate exit without entry; word = {before}");
    }
}
