//! How an application thread waits for room in a full queue: the blocking dispatches
//! (`dispatch`, `dispatch_batch`, `execute`, `register`, `call`), with or without a
//! deadline (`dispatch_timeout`, `dispatch_deadline`). A processor thread never waits
//! here: its blocking dispatches go through its outbox (`outbox.rs`).
//!
//! The wait is for room for a burst, not for one slot: it retries the push once the
//! processor has drained a quarter of the queue ([`RoomWait::pause`]'s `room`). A producer
//! that retried as soon as one slot freed would write the slot the processor has just
//! read, so that every event moves its cache line (and the queue's head and tail lines)
//! between the two cores, and a full queue would drain at the speed of that contention;
//! waiting for a quarter lets the processor run through a stretch of slots undisturbed and
//! the producer refill it in one burst. (Measured on the hop bench: retrying at every
//! free slot doubled the cost per event of a producer that keeps its queue full.)
//!
//! How it waits, in three steps:
//!
//! 1. **Spin** for at most [`SPIN_FOR`], reading the queue's length once per backoff
//!    step (spin-loop hints only, no yield: a yield on a busy machine hands the core to
//!    another process for a time slice, during which the processor drains the queue and
//!    starves). This covers a processor that frees a quarter of a small or medium queue
//!    within microseconds.
//! 2. **Register** the thread's waker (one per thread, made at its first call that may
//!    wait, `prepare_thread`) with the processor's [`Waiters`], the registry of the async
//!    door (`waiters.rs`), and retry
//!    the push, which passes the gate: the retry after the registration is what orders it
//!    before the processor's look, exactly as for a future.
//! 3. **Park** until the processor wakes it: the processor looks at its waiters every few
//!    dozen pops within a run, at every flush point and after every drained run, and
//!    wakes them all as soon as a quarter of the queue is free. So a blocked producer
//!    resumes while the processor still has three quarters of a queue to drain, however
//!    long that takes, instead of sleeping a fixed time that either starves the processor
//!    (a park longer than the rest of the drain) or wakes it for nothing. The park is
//!    timed to the deadline, and otherwise to [`PARK_BACKSTOP`]; then the wait goes back
//!    to step 2.
//!
//! The previous wait (spin and yield for 100 us, then timed parks of 20 us doubling to
//! 1 ms) collapsed the throughput of a producer that outruns its processor: pinned, 100
//! ns per event against the processor's own 43 ns drain (`docs/benchmarks.md`,
//! `dispatch_outrun`).
//!
//! A wait without waiters (an event pushed under an entry already held, `push_waiting`:
//! its retries pass no gate, so a registration would not be ordered) keeps the timed
//! parks of [`ROOM_SLEEP_MIN`] doubling to [`ROOM_SLEEP_MAX`] after its spin.

use std::sync::Arc;
use std::task::{Wake, Waker};
use std::time::{Duration, Instant};

use crossbeam_utils::Backoff;

use crate::sync::{self, AtomicBool, Ordering, thread};
use crate::waiters::{Registration, Waiters};

/// How long a wait spins before it registers and parks: long enough that a processor
/// freeing a quarter of a small queue (256 events, a few microseconds) is caught without
/// a park, short enough that a producer blocked on a large or stalled queue stops
/// burning its core quickly, and no longer than a wake-up costs (tens of microseconds on
/// a VM), beyond which parking is as fast. Retune with `cargo bench --bench hop --
/// dispatch_outrun` (every capacity) against `tests/dispatch.rs`'s CPU bound for a
/// blocked producer.
#[cfg(not(loom))]
pub(crate) const SPIN_FOR: Duration = Duration::from_micros(20);
/// Under loom no spin: a loop on real time would make the model's executions differ from
/// run to run; the registration and the park are what the model checks.
#[cfg(loom)]
pub(crate) const SPIN_FOR: Duration = Duration::ZERO;

/// The longest park of a registered wait: the processor's wake is what ends a park, this
/// only bounds the cost of one that never comes (the wake protocol is model-checked not
/// to lose one: under loom the park is untimed).
pub(crate) const PARK_BACKSTOP: Duration = Duration::from_millis(10);

/// The first timed park of a wait without waiters, once spinning found no room.
pub(crate) const ROOM_SLEEP_MIN: Duration = Duration::from_micros(20);

/// The longest timed park of a wait without waiters: a producer whose processor was
/// stalled resumes within this of room appearing.
pub(crate) const ROOM_SLEEP_MAX: Duration = Duration::from_millis(1);

/// Wakes the thread it was made on: the waker a blocked producer registers. The flag says
/// a wake came, whatever became of the unpark's token: a wake that finds the thread
/// between two steps of its wait (under loom, blocked on a mutex, which an unpark ends
/// without leaving a token) is not lost, because the thread looks at the flag before
/// it parks.
struct ThreadWake {
    thread: thread::Thread,
    woken: AtomicBool,
}

impl Wake for ThreadWake {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        // Release: pairs with the Acquire swap of the waiting thread.
        self.woken.store(true, Ordering::Release);
        self.thread.unpark();
    }
}

/// The current thread's [`ThreadWake`] and its waker.
struct ThreadWaker {
    wake: Arc<ThreadWake>,
    waker: Waker,
}

impl ThreadWaker {
    fn new() -> Self {
        let wake = Arc::new(ThreadWake {
            thread: thread::current(),
            woken: AtomicBool::new(false),
        });
        Self {
            waker: Waker::from(wake.clone()),
            wake,
        }
    }
}

#[cfg(not(loom))]
std::thread_local! {
    /// The current thread's waker for room waits: made once per thread, at its first call
    /// that may wait ([`prepare_thread`]), then cloned into the registry (a reference
    /// count, no allocation).
    static THREAD_WAKER: ThreadWaker = ThreadWaker::new();
}

#[cfg(loom)]
loom::thread_local! {
    static THREAD_WAKER: ThreadWaker = ThreadWaker::new();
}

/// Makes the current thread's waker for room waits if it has none: called by every call
/// that may wait, on application threads, so that the thread's one allocation for waiting
/// comes at its first such call, whether or not that call waits. A thread-local look
/// after the first.
#[inline]
pub(crate) fn prepare_thread() {
    THREAD_WAKER.with(|_| ());
}

/// How long a dispatch from an application thread waits for room in a full queue.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Wait {
    /// Not at all: a full queue hands the event back (`Full`).
    No,
    /// Until this instant, then the event is handed back (`Timeout`).
    Until(Instant),
    /// As long as it takes (until shutdown, which hands the event back).
    Forever,
}

impl Wait {
    /// Waiting until `now + timeout`; forever if that instant cannot be represented.
    pub(crate) fn timeout(timeout: Duration) -> Self {
        Instant::now()
            .checked_add(timeout)
            .map_or(Wait::Forever, Wait::Until)
    }
}

/// One wait for room: call [`pause`](RoomWait::pause) after each push that found the queue
/// full, and retry the push if it returns `true`. Dropping it withdraws its registration.
#[derive(Debug)]
pub(crate) struct RoomWait<'a> {
    backoff: Backoff,
    /// When the spinning ends; set at the first pause.
    spin_until: Option<Instant>,
    deadline: Option<Instant>,
    /// The processor's registry, for a wait whose retries pass the gate.
    waiters: Option<&'a Waiters>,
    /// Where this thread's waker sits in `waiters`, if it registered.
    registration: Option<Registration>,
    /// Registered, and the retry that orders the registration not yet failed: the next
    /// pause parks.
    armed: bool,
    /// The next timed park of a wait without waiters.
    sleep: Duration,
}

impl<'a> RoomWait<'a> {
    /// A wait that gives up at `deadline`, or never, registering with `waiters` once its
    /// spin is over (every retry of the caller must pass the processor's gate), or parking
    /// for timed, growing whiles without.
    pub(crate) fn new(deadline: Option<Instant>, waiters: Option<&'a Waiters>) -> Self {
        Self {
            backoff: Backoff::new(),
            spin_until: None,
            deadline,
            waiters,
            registration: None,
            armed: false,
            sleep: ROOM_SLEEP_MIN,
        }
    }

    /// Waits until `room()` says there is room for a burst (or the gate closed: a push
    /// then hands the event back at once), or until it is time for the retry that follows
    /// a registration, and returns `true`: retry the push. Returns `false`, without
    /// waiting further, once the deadline has passed (give up). No park runs past the
    /// deadline.
    pub(crate) fn pause(&mut self, room: impl Fn() -> bool) -> bool {
        let spin_until = *self
            .spin_until
            .get_or_insert_with(|| Instant::now() + SPIN_FOR);
        loop {
            if !self.armed && room() {
                return true;
            }
            let now = Instant::now();
            let left = match self.deadline {
                None => None,
                Some(deadline) => match deadline.checked_duration_since(now) {
                    Some(left) if !left.is_zero() => Some(left),
                    _ => return false,
                },
            };
            if now < spin_until {
                sync::spin(&self.backoff);
                continue;
            }
            let Some(waiters) = self.waiters else {
                let sleep = left.map_or(self.sleep, |left| left.min(self.sleep));
                // A stray unpark (a call's late answer) only shortens one park.
                sync::park_timeout(sleep);
                self.sleep = (self.sleep * 2).min(ROOM_SLEEP_MAX);
                continue;
            };
            if !self.armed {
                // Step 2: register, then the caller's retry passes the gate.
                THREAD_WAKER.with(|t| waiters.register(&t.waker, &mut self.registration));
                self.armed = true;
                return true;
            }
            // Step 3: registered and still full after the retry: wait for the processor's
            // wake (or a stray unpark, which only costs a retry and a registration).
            self.armed = false;
            // Acquire: pairs with the wake's Release. A wake already come (its flag set)
            // needs no park; a stale flag of an earlier wait costs one retry.
            if !THREAD_WAKER.with(|t| t.wake.woken.swap(false, Ordering::Acquire)) {
                match left {
                    Some(left) => sync::park_timeout(left.min(PARK_BACKSTOP)),
                    None => sync::park_backstop(PARK_BACKSTOP),
                }
            }
            return true;
        }
    }
}

impl Drop for RoomWait<'_> {
    fn drop(&mut self) {
        if let Some(waiters) = self.waiters {
            waiters.withdraw(&mut self.registration);
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    /// A wait with a deadline gives up at it, not long after, and one without keeps
    /// going; the parks grow to the maximum and no further.
    #[test]
    fn a_wait_gives_up_at_its_deadline_and_its_parks_are_bounded() {
        let start = Instant::now();
        let mut wait = RoomWait::new(Some(start + Duration::from_millis(20)), None);
        let looks = std::cell::Cell::new(0);
        let no_room = || {
            looks.set(looks.get() + 1);
            false
        };
        assert!(!wait.pause(no_room), "no room before the deadline: give up");
        let took = start.elapsed();
        assert!(took >= Duration::from_millis(20), "{took:?}");
        assert!(took < Duration::from_millis(500), "{took:?}");
        assert!(looks.get() > 10, "spins, then parks: {} looks", looks.get());
        assert!(wait.sleep <= ROOM_SLEEP_MAX);

        // Without a deadline it waits until there is room, then says retry.
        let mut forever = RoomWait::new(None, None);
        let until = Instant::now() + Duration::from_millis(30);
        assert!(forever.pause(|| Instant::now() >= until));
        assert!(Instant::now() >= until);
        assert!(forever.sleep > ROOM_SLEEP_MIN, "parked after the spin");
        assert!(!RoomWait::new(Some(Instant::now()), None).pause(|| false));
        assert!(
            RoomWait::new(Some(Instant::now()), None).pause(|| true),
            "room: retry"
        );
    }
}
