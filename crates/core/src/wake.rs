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
//! The sleeping flag is the `SLEEPING` bit of the processor's [`Gate`] word, whose count of
//! entries every producer already raises with one read-modify-write **before** its push.
//!
//! Processor ([`Gate::sleep_unless`]), having popped `popped` events in all:
//!
//! 1. `fetch_or(SLEEPING)` on the gate word, which returns the count of entries;
//! 2. re-check for work (its queue is not empty, or a stop it must obey);
//! 3. if there is none and the count equals `popped` (every entry made so far was popped),
//!    park; if the count is ahead (a producer between its entry and its push, or an event
//!    kept in another processor's outbox), park only briefly, then look again;
//! 4. `fetch_and(!SLEEPING)`.
//!
//! Producer: enter (`fetch_add`, [`Gate::enter`]); push; if the value the entry replaced had
//! `SLEEPING`, unpark the processor. A batch that adds its other entries after its pushes
//! ([`Gate::add`]) does the same with the value that addition replaced.
//!
//! # Why no wake-up is lost
//!
//! Both sides' operations on the flag and the count are read-modify-writes of one word, so
//! they are totally ordered and each reads the value left by the one before it.
//!
//! * If a producer's entry comes after the processor's `fetch_or`, it reads `SLEEPING` and
//!   unparks after its push. If the processor has not parked yet, the unpark leaves the
//!   thread's token, and the park returns at once.
//! * If it comes before, the count the processor reads includes it: either the processor
//!   has popped its event already (nothing is left to see), or the count is ahead of
//!   `popped` and the processor does not park for good. It parks briefly and looks again,
//!   and the event, whose push follows the entry by a few instructions, is there.
//!
//! A batch that enters once and adds the rest after its pushes is the one case where the
//! count can match `popped` while events of the batch are still to come (the processor
//! popped exactly the one entered event). Those events' entries are added after the pushes,
//! by a read-modify-write that reads `SLEEPING`, and the producer unparks.
//!
//! A spurious unpark (the producer read `SLEEPING` after the processor already woke) costs
//! one syscall and leaves a token that makes the next park return at once; the processor
//! loops and re-checks, so it is harmless.
//!
//! Model-checked with `loom` on the real code (`loom/wake.rs`): a producer pushing while
//! the processor goes to sleep never leaves an event unprocessed.
//!
//! The gate's methods of this protocol are a second `impl Gate` here, beside the argument
//! above, rather than in `gate.rs` with the word and the shutdown protocol: each file
//! holds one protocol and the code it proves.

use crate::gate::{Gate, SLEEPING, entries, modulo_entries};
use crate::sync::Ordering;

impl Gate {
    /// Processor side: announces sleep, re-checks `has_work`, and parks with `park` unless
    /// there is work, or with `park_briefly` while entries are ahead of `popped` (see the
    /// module docs). Returns `true` if it parked (a wake-up may also be spurious).
    pub(crate) fn sleep_unless(
        &self,
        popped: usize,
        has_work: impl FnOnce() -> bool,
        park: impl FnOnce(),
        park_briefly: impl FnOnce(),
    ) -> bool {
        // AcqRel: Acquire makes every push whose entry precedes this in the word's order, and
        // whose event was popped, consistent with the count read; Release makes the flag's
        // meaning (the check follows) visible to a producer that reads it.
        let before = self.word.fetch_or(SLEEPING, Ordering::AcqRel);
        debug_assert_eq!(
            before & SLEEPING,
            0,
            "processor announced sleep twice; word = {before:#x}"
        );
        let parked = if has_work() {
            false
        } else if entries(before) != modulo_entries(popped) {
            park_briefly();
            true
        } else {
            park();
            true
        };
        self.word.fetch_and(!SLEEPING, Ordering::AcqRel);
        parked
    }

    /// Whether the processor has announced sleep (for the monitor, and for an outboxed
    /// push, which holds no entry to read the flag from).
    pub(crate) fn is_sleeping(&self) -> bool {
        self.word.load(Ordering::Relaxed) & SLEEPING != 0
    }
}
