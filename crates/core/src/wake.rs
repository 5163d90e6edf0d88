//! The wake protocol: how a processor goes to sleep on an empty queue without a producer's
//! event ever being left unseen.
//!
//! A processor that finds its queue empty spins for a while (see
//! [`WaitStrategy`](crate::WaitStrategy)), then parks its thread. A producer that pushes an
//! event must unpark it, but an unpark on every push would cost a syscall-sized operation
//! per event, so the producer unparks only when the processor has said it is going to
//! sleep. The race to close is the classic lost wake-up: the processor checks the queue
//! (empty), a producer pushes and sees no sleeper, the processor parks, and the event waits
//! forever.
//!
//! # Protocol
//!
//! The sleeping flag is the `SLEEPING` bit of the processor's [`Gate`] word, which every
//! producer already updates with a read-modify-write when it leaves the gate after its push.
//!
//! Processor ([`Gate::sleep_unless`]):
//!
//! 1. `fetch_or(SLEEPING)` on the gate word;
//! 2. re-check for work: the queue is not empty, or a stop was requested;
//! 3. if there is none, park; then `fetch_and(!SLEEPING)`.
//!
//! Producer (`ProcessorShared::try_push`, and `try_push_batch` for a batch): push; `fetch_sub(PRODUCER)` on the gate word
//! ([`Gate::leave`]); if the value it replaced had `SLEEPING`, unpark the processor.
//!
//! # Why no wake-up is lost
//!
//! Both sides' flag operations are read-modify-writes of one word, so they are totally
//! ordered (its modification order) and each reads the value left by the one before it.
//!
//! * If the producer's `fetch_sub` comes after the processor's `fetch_or`, it reads
//!   `SLEEPING` and unparks. If the processor has not parked yet, the unpark leaves the
//!   thread's token, and the park returns at once.
//! * If it comes before, the processor's `fetch_or` (acquire) reads the value the producer's
//!   `fetch_sub` (release) wrote, or a later one in the word's chain of read-modify-writes,
//!   so the producer's push happens before the processor's re-check, which therefore sees
//!   the queue non-empty and does not park.
//!
//! Putting the flag in its own atomic would make this a Dekker pattern (a store then a load
//! of another location on each side), which needs `SeqCst` fences on both sides; sharing
//! the gate's word turns it into ordinary acquire/release on a chain of read-modify-writes
//! and costs the producer nothing beyond the gate it passes anyway.
//!
//! A spurious unpark (the producer read `SLEEPING` after the processor already woke) costs
//! one syscall and leaves a token that makes the next park return at once; the processor
//! loops and re-checks, so it is harmless.
//!
//! Model-checked with `loom` (`loom_tests.rs`): a producer pushing while the processor goes
//! to sleep never leaves an event unprocessed.

use crate::gate::{Gate, SLEEPING};
use crate::sync::Ordering;

impl Gate {
    /// Processor side: announces sleep, re-checks `has_work`, and parks with `park` unless
    /// there is work. Returns `true` if it parked (a wake-up may also be spurious).
    pub(crate) fn sleep_unless(
        &self,
        has_work: impl FnOnce() -> bool,
        park: impl FnOnce(),
    ) -> bool {
        // AcqRel: Acquire makes every push whose `leave` precedes this in the word's order
        // visible to `has_work`; Release makes the flag's meaning (the check follows) visible
        // to a producer that reads it.
        let before = self.word.fetch_or(SLEEPING, Ordering::AcqRel);
        debug_assert_eq!(
            before & SLEEPING,
            0,
            "processor announced sleep twice; word = {before:#x}"
        );
        let parked = !has_work();
        if parked {
            park();
        }
        self.word.fetch_and(!SLEEPING, Ordering::AcqRel);
        parked
    }

    /// Whether the processor has announced sleep (for the monitor).
    pub(crate) fn is_sleeping(&self) -> bool {
        self.word.load(Ordering::Relaxed) & SLEEPING != 0
    }
}
