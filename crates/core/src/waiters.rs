//! The waiter protocol of the async door ([`dispatch_async`] and its batch form): how a
//! future that found its processor's queue full waits for room with a [`Waker`], without
//! spinning, without blocking its runtime's thread, and without a wake-up ever being lost.
//! A thread blocked in `dispatch` (`room.rs`) waits by the same protocol once its short
//! spin is over, with a waker that unparks it: it registers, retries through the gate,
//! and parks; "future" below stands for either.
//!
//! # The registry
//!
//! Each processor has one [`Waiters`]: a flag, `pending`, and behind a mutex a list of
//! wakers with a round number. A future's [`Registration`] says where its waker sits: the
//! round it registered in and its index in the list. The list is only ever replaced whole
//! (the processor takes it, and the round moves on), so a registration of the current
//! round is exact, and one of an older round means the waker was taken (and woken).
//!
//! # Protocol
//!
//! Future (producer), in `poll` ([`ProcessorShared::poll_push`]):
//!
//! 1. try to push; done unless the queue is full;
//! 2. register its waker ([`Waiters::register`]: refreshed in place if still registered
//!    in this round, else added) and set `pending`, under the lock;
//! 3. try to push **again**; done unless still full, else return `Pending`.
//!
//! A future that completes withdraws a registration of the current round
//! ([`Waiters::withdraw`]: its place is emptied), and so does one that is
//! dropped while pending: nothing of it stays behind but an empty place, which the next
//! registration of the round takes (so the list does not grow with futures that come and
//! go within one round: a flaky allocation in the zero-allocation proof before).
//!
//! Processor, after each drained run, at each flush point and every few dozen pops within
//! a run (`DEPTH_CHECK_INTERVAL` in `processor/runner.rs`): if `pending` is set (one relaxed load, the whole
//! cost while nobody waits) and the queue has room for a burst beyond every event entered
//! and not yet popped (a quarter of it, as a blocking dispatch waits for, see `room.rs`;
//! events kept in outboxes count as entered, so they go first), take the whole list ([`Waiters::take`]: swapped with an empty one of the
//! processor's, so nothing allocates once both have grown; the round moves on, `pending`
//! is cleared) and wake every waker, outside the lock. The processor also counts `pending`
//! as work ([`ProcessorShared::has_work`]) while that room is there: it does not park
//! while a waiter it would wake is registered; a waiter held back by entries ahead of what
//! it popped makes it park only briefly (`wake.rs`) and look again.
//!
//! Shutdown: closing the gate takes and wakes every waker; a future that polls then is
//! handed its event back (`ShutDown`), and so is one that registers after the close (its
//! retry's entry reads `CLOSED`).
//!
//! # Why no wake-up is lost
//!
//! The danger is the future's second try finding the queue full while the processor's
//! look at `pending` misses the registration: the future would wait for a wake that never
//! comes. The second try passes the processor's gate (`gate.rs`): a read-modify-write of
//! the gate word (Acquire and Release) that comes after the registration in the future's
//! order. The processor, before it parks, announces sleep with a read-modify-write of the
//! same word (`wake.rs`), then looks at its work, `pending` included. The two are ordered
//! in the word's modification order:
//!
//! * the future's entry first: the processor's Acquire reads a value of the release
//!   sequence that the entry heads (every later change of the word is a read-modify-write),
//!   so the registration happens before the processor's look, which sees `pending` and
//!   does not park; its next drained run finds room and wakes the future;
//! * the processor's announcement first: the entry's Acquire makes every pop before the
//!   announcement visible to the second try. The queue was empty at the announcement, so
//!   the try finds it full only if other producers filled it since; their entries read
//!   `SLEEPING` and wake the processor, which drains and, before it parks again, announces
//!   sleep once more, now after the future's entry: the first case.
//!
//! A processor that never parks (busy) looks at `pending` after every drained run and at
//! every flush point, and a relaxed load sees the store within the time the hardware takes
//! to make a store visible. Modelled with `loom` on the real code (`loom/room.rs`): a
//! future polled while the processor drains is always woken, or its retry succeeds.
//!
//! A wake-up may be spurious (a future that already completed, or whose queue filled again
//! before it polled): the future then simply registers again. Wakers are woken in no
//! particular order and the door promises no fairness between futures: each retries, and
//! the first to push gets the room.
//!
//! [`dispatch_async`]: crate::DispatcherHandle::dispatch_async
//! [`ProcessorShared::poll_push`]: crate::processor::ProcessorShared::poll_push
//! [`ProcessorShared::has_work`]: crate::processor::ProcessorShared::has_work

use std::task::Waker;

use crate::sync::{AtomicBool, Mutex, Ordering};

/// A processor's registry of futures waiting for room in its queue.
#[derive(Debug)]
pub(crate) struct Waiters {
    /// Set (under the lock) by every registration, cleared (under the lock) by every take:
    /// while it is clear, no waker of the current round waits. The processor reads it
    /// without the lock, once per drained run or flush point.
    pending: AtomicBool,
    registry: Mutex<Registry>,
}

#[derive(Debug)]
struct Registry {
    /// The places of this round's registrations, in registration order. A withdrawn one
    /// is emptied (`None`), never removed, so that indices stay valid for the round, and
    /// the next registration takes it.
    wakers: Vec<Option<Waker>>,
    /// Moves on (wrapping) each time the list is taken.
    round: u64,
}

/// Places reserved in a processor's registry and in the list its processor takes it into
/// (the two are swapped at each take): up to this many futures can wait on one processor
/// at once before either list grows (then each grows once, to what it has to hold).
pub(crate) const PLACES: usize = 16;

/// Where a future's waker sits in its processor's [`Waiters`]: valid while `round` is the
/// registry's round; a registration of an older round was taken and woken.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Registration {
    round: u64,
    index: usize,
}

impl Waiters {
    pub(crate) fn new() -> Self {
        Self {
            pending: AtomicBool::new(false),
            registry: Mutex::new(Registry {
                wakers: Vec::with_capacity(PLACES),
                round: 0,
            }),
        }
    }

    /// Registers `waker`, or refreshes it in place if `at` is still registered in this
    /// round (a future polled again before it was woken takes one place, not one per poll).
    /// A new registration takes a withdrawn place if there is one. Sets `pending`.
    /// Allocates only when more futures wait at once than ever before.
    pub(crate) fn register(&self, waker: &Waker, at: &mut Option<Registration>) {
        let mut registry = self.registry.lock().unwrap_or_else(|e| e.into_inner());
        match *at {
            Some(r) if r.round == registry.round => {
                let place = &mut registry.wakers[r.index];
                if !place.as_ref().is_some_and(|w| w.will_wake(waker)) {
                    *place = Some(waker.clone());
                }
            }
            _ => {
                // A withdrawn place (a no-op waker) is taken again before the list grows:
                // the list holds at most as many places as futures wait at once in a round,
                // however many come and go in it, so it stops growing once warm.
                let free = registry.wakers.iter().position(Option::is_none);
                let index = match free {
                    Some(index) => {
                        registry.wakers[index] = Some(waker.clone());
                        index
                    }
                    None => {
                        registry.wakers.push(Some(waker.clone()));
                        registry.wakers.len() - 1
                    }
                };
                *at = Some(Registration {
                    round: registry.round,
                    index,
                });
            }
        }
        // Relaxed: under the lock, which orders it with every take; what orders it with
        // the processor's look outside the lock is the gate entry of the retry that
        // follows (see the module docs).
        self.pending.store(true, Ordering::Relaxed);
    }

    /// Withdraws a registration of the current round (its waker is dropped, a no-op one
    /// takes its place); nothing to do for none, or for one of an older round.
    pub(crate) fn withdraw(&self, at: &mut Option<Registration>) {
        let Some(r) = at.take() else {
            return;
        };
        let mut registry = self.registry.lock().unwrap_or_else(|e| e.into_inner());
        if r.round == registry.round {
            registry.wakers[r.index] = None;
        }
    }

    /// Whether a waker may be registered: the processor's look, one relaxed load.
    #[inline]
    pub(crate) fn pending(&self) -> bool {
        // Relaxed: see the module docs (ordered through the gate word where it matters).
        self.pending.load(Ordering::Relaxed)
    }

    /// Takes every registered waker into `into`, which must be empty (its capacity becomes
    /// the registry's, so that neither side allocates once both have grown), and starts a
    /// new round. The caller wakes them, outside the lock.
    pub(crate) fn take(&self, into: &mut Vec<Option<Waker>>) {
        debug_assert!(into.is_empty(), "taking wakers into a list not yet woken");
        let mut registry = self.registry.lock().unwrap_or_else(|e| e.into_inner());
        std::mem::swap(&mut registry.wakers, into);
        registry.round = registry.round.wrapping_add(1);
        self.pending.store(false, Ordering::Relaxed);
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::AtomicUsize;
    use std::task::Wake;

    use super::*;

    struct Count(AtomicUsize);

    impl Wake for Count {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        }
    }

    /// A future polled twice takes one place; a withdrawn one is not woken; a take wakes
    /// the rest once and starts a new round, in which an old registration is not touched.
    #[test]
    fn a_registration_is_refreshed_withdrawn_and_taken_once() {
        let waiters = Waiters::new();
        let (a, b) = (
            Arc::new(Count(AtomicUsize::new(0))),
            Arc::new(Count(AtomicUsize::new(0))),
        );
        let (wa, wb) = (Waker::from(a.clone()), Waker::from(b.clone()));
        let (mut ra, mut rb) = (None, None);
        assert!(!waiters.pending());
        waiters.register(&wa, &mut ra);
        waiters.register(&wa, &mut ra);
        waiters.register(&wb, &mut rb);
        assert!(waiters.pending());
        waiters.withdraw(&mut rb);
        assert_eq!(rb, None);
        let mut taken = Vec::new();
        waiters.take(&mut taken);
        assert!(!waiters.pending());
        assert_eq!(taken.len(), 2, "one place per future");
        assert!(taken[1].is_none(), "the withdrawn place is empty");
        taken.drain(..).flatten().for_each(Waker::wake);
        assert_eq!(a.0.load(std::sync::atomic::Ordering::SeqCst), 1);
        assert_eq!(b.0.load(std::sync::atomic::Ordering::SeqCst), 0);
        // `ra` is of the old round: withdrawing it touches nothing of the new one.
        waiters.register(&wb, &mut rb);
        waiters.withdraw(&mut ra);
        waiters.take(&mut taken);
        taken.drain(..).flatten().for_each(Waker::wake);
        assert_eq!(b.0.load(std::sync::atomic::Ordering::SeqCst), 1);
    }

    /// Futures that register and complete one after another within one round reuse one
    /// place: on the code before, each added a place, so a round longer than any seen in
    /// warm-up grew the list (an allocation in the zero-allocation proof, now and then).
    #[test]
    fn futures_that_come_and_go_within_a_round_reuse_their_places() {
        let waiters = Waiters::new();
        let a = Arc::new(Count(AtomicUsize::new(0)));
        let (wa, wb) = (Waker::from(a.clone()), Waker::from(a));
        let mut held = None;
        waiters.register(&wb, &mut held);
        for _ in 0..1000 {
            let mut at = None;
            waiters.register(&wa, &mut at);
            waiters.withdraw(&mut at);
        }
        let places = waiters.registry.lock().unwrap().wakers.len();
        assert_eq!(places, 2, "one place held, one reused 1000 times");
    }
}
