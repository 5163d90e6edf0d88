//! The gate: one word per processor that producers pass through on every dispatch. It
//! carries two protocols with one read-modify-write per side: shutdown (this module) and
//! waking a sleeping processor ([`wake`](crate::wake)).
//!
//! # The shutdown gate
//!
//! A dispatch checks that the dispatcher is running and then pushes. Between the check
//! and the push, shutdown may have started, the processor may have drained its queue for
//! the last time and exited: the push then succeeds into a queue nobody will read, and the
//! producer was told its event was accepted. The gate closes that window.
//!
//! * A producer [`enter`](Gate::enter)s with `fetch_add(PRODUCER)`. If `CLOSED` was set,
//!   it [`leave`](Gate::leave)s again and hands its event back (`ShutDown`). Otherwise it
//!   pushes, then leaves with `fetch_sub(PRODUCER)`.
//! * Shutdown [`close`](Gate::close)s with `fetch_or(CLOSED)`, then waits until no
//!   producer is inside ([`is_quiescent`](Gate::is_quiescent)): from then on none can
//!   enter. Only then does it tell the processor to stop, and the processor drains its
//!   queue before exiting. Every push that succeeded happened inside the gate, so before
//!   the stop, so before the processor's final drain.
//!
//! All are read-modify-writes of one word, so they are totally ordered in its modification
//! order and each reads the latest value: a producer's `fetch_add` either comes before the
//! `fetch_or` (the producer is counted, and shutdown waits for it) or after (the producer
//! sees `CLOSED`). `AcqRel` suffices: the producer's push happens before its `fetch_sub`
//! (program order, release), which the shutdown thread's quiescence check reads (acquire),
//! which happens before the stop flag the processor reads.
//!
//! The cost is two uncontended read-modify-writes per dispatch when one producer feeds a
//! processor: the processor writes the word only when it goes to sleep, so while it is busy
//! the word stays in the producers' caches. Modelled with `loom` (`loom_tests.rs`).

use crate::sync::{AtomicUsize, Ordering};

/// Bit 0: shutdown has closed the gate.
pub(crate) const CLOSED: usize = 1;
/// Bit 1: the processor is going to sleep or asleep (see [`wake`](crate::wake)).
pub(crate) const SLEEPING: usize = 2;
/// What one producer inside the gate adds to the word (bits 2 and up count them).
const PRODUCER: usize = 4;

/// A processor's gate.
#[derive(Debug, Default)]
pub(crate) struct Gate {
    /// `CLOSED` | `SLEEPING` | `PRODUCER` times the producers inside.
    pub(crate) word: AtomicUsize,
}

impl Gate {
    /// Enters the gate; `false` (and nothing to leave) if shutdown closed it.
    #[inline]
    pub(crate) fn enter(&self) -> bool {
        // AcqRel: see the module docs; Acquire is not needed for correctness, Release is.
        let before = self.word.fetch_add(PRODUCER, Ordering::AcqRel);
        if before & CLOSED != 0 {
            self.word.fetch_sub(PRODUCER, Ordering::AcqRel);
            return false;
        }
        true
    }

    /// Leaves the gate after a push (successful or not). Returns `true` if the processor had
    /// announced sleep at that moment: the caller must then unpark it.
    #[inline]
    pub(crate) fn leave(&self) -> bool {
        // AcqRel: Release publishes the push to the processor's sleep check and to
        // shutdown's quiescence check; Acquire pairs with the processor's `fetch_or` of
        // SLEEPING, so that reading the flag here means the processor's check comes after.
        let before = self.word.fetch_sub(PRODUCER, Ordering::AcqRel);
        debug_assert!(
            before >= PRODUCER,
            "gate left without entering; word = {before:#x}"
        );
        before & SLEEPING != 0
    }

    /// Closes the gate: every later [`enter`](Gate::enter) fails. Returns `false` if it was
    /// already closed.
    pub(crate) fn close(&self) -> bool {
        self.word.fetch_or(CLOSED, Ordering::AcqRel) & CLOSED == 0
    }

    /// Whether no producer is inside the gate (closed or not).
    pub(crate) fn is_quiescent(&self) -> bool {
        // Acquire: pairs with the Release of each producer's `leave`.
        self.word.load(Ordering::Acquire) < PRODUCER
    }

    /// Whether the gate is closed.
    pub(crate) fn is_closed(&self) -> bool {
        self.word.load(Ordering::Relaxed) & CLOSED != 0
    }
}
