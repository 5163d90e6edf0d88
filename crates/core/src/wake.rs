//! The wake protocol: how a processor goes to sleep on an empty queue without a producer's
//! event ever being left unseen.
//!
//! A processor that finds its queue empty spins for a while (see
//! [`WaitStrategy`](crate::WaitStrategy)), then parks its thread. A producer that pushes
//! an event must unpark it, but an unpark on every push would cost a syscall-sized
//! operation per event, so the producer unparks only when the processor has said it is
//! going to sleep. The race to close is the classic lost wake-up: the processor checks
//! the queue (empty), a producer pushes and sees no sleeper, the processor parks, and the
//! event waits forever.
//!
//! # Protocol
//!
//! Processor (in [`Sleeper::sleep_unless`]):
//!
//! 1. `sleeping.store(true, SeqCst)`
//! 2. re-check for work (`has_work()`: the queue is not empty, or a stop was requested);
//!    its loads are `SeqCst` (crossbeam's `ArrayQueue::is_empty` loads head and tail with
//!    `SeqCst`)
//! 3. if there is none, park; in any case `sleeping.store(false, Relaxed)` afterwards.
//!
//! Producer (in [`Sleeper::notify`], after its push):
//!
//! 1. the push (its tail compare-and-swap is `SeqCst`), then a `SeqCst` operation: the
//!    [`Gate`](crate::gate::Gate) exit, a `SeqCst` read-modify-write
//! 2. `sleeping.load(SeqCst)`; if `true`, unpark the processor.
//!
//! # Why no wake-up is lost
//!
//! All the operations named `SeqCst` above belong to one total order S. Either the
//! processor's store of `sleeping = true` comes before the producer's load of `sleeping`
//! in S, and the producer sees `true` and unparks (an unpark before the park makes the park
//! return at once: the thread's park token), or the producer's load comes first, in which
//! case the producer's push, which precedes its load in program order and is `SeqCst`,
//! also precedes the processor's re-check, which then sees the queue non-empty and does not
//! park. The two stores to and loads of `sleeping` are a Dekker pair; the `SeqCst` on both
//! sides is what forbids each side reading the other's old value (with only
//! `Release`/`Acquire`, both loads may read stale values and both sides miss each other).
//!
//! A spurious unpark (the producer saw `sleeping` after the processor already woke) costs
//! one syscall and leaves a token that makes the next park return at once; the processor
//! loops and re-checks, so it is harmless.
//!
//! The protocol is model-checked with `loom` in this module's tests (`--cfg loom`).

use crate::sync::{AtomicBool, Ordering};

/// The processor's half of the wake protocol: the flag a producer reads to decide whether
/// to unpark.
#[derive(Debug, Default)]
pub(crate) struct Sleeper {
    /// `true` from just before the processor's final re-check until it is awake again. A
    /// producer that pushed and then reads `true` must unpark the processor.
    sleeping: AtomicBool,
}

impl Sleeper {
    /// Processor side: parks with `park` unless `has_work` reports work after the
    /// processor has announced that it is going to sleep.
    ///
    /// Returns `true` if it parked (it may also have been woken spuriously).
    pub(crate) fn sleep_unless(&self, has_work: impl FnOnce() -> bool, park: impl FnOnce()) -> bool {
        // SeqCst: one half of the Dekker pair with `notify` (module docs).
        self.sleeping.store(true, Ordering::SeqCst);
        let parked = !has_work();
        if parked {
            park();
        }
        // Relaxed: the flag is only a hint for producers from here on; being awake, the
        // processor re-checks its queue before sleeping again.
        self.sleeping.store(false, Ordering::Relaxed);
        parked
    }

    /// Producer side: after a push (and a `SeqCst` operation, see the module docs), wakes
    /// the processor with `unpark` if it is going to sleep or asleep.
    #[inline]
    pub(crate) fn notify(&self, unpark: impl FnOnce()) {
        // SeqCst: the other half of the Dekker pair with `sleep_unless`.
        if self.sleeping.load(Ordering::SeqCst) {
            unpark();
        }
    }

    /// Whether the processor has announced sleep (for stats and the monitor).
    pub(crate) fn is_sleeping(&self) -> bool {
        self.sleeping.load(Ordering::Relaxed)
    }
}
