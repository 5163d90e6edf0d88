//! How an application thread waits for room in a full queue: the blocking dispatches
//! (`dispatch`, `dispatch_batch`, `execute`, `register`, `call`), with or without a
//! deadline (`dispatch_timeout`, `dispatch_deadline`). A processor thread never waits
//! here: its blocking dispatches go through its outbox (`outbox.rs`).
//!
//! The wait retries the push itself, after a pause that grows: first a few spins and
//! yields (a processor that is popping frees a slot within microseconds), then timed parks
//! that double from [`ROOM_SLEEP_MIN`] to [`ROOM_SLEEP_MAX`], so that a producer held up by
//! a slow or stalled processor stops burning its core. It never polls the queue's length
//! between pushes: the length is read from the head and tail that the processor and the
//! other producers write, and polling it in a loop keeps those cache lines moving between
//! cores for nothing; a retried push reads them once per pause, and the pause spaces the
//! retries out so that the processor runs through a stretch of slots undisturbed.

use std::time::{Duration, Instant};

use crossbeam_utils::Backoff;

use crate::sync;

/// The first timed park, once spinning found no room: the time a processor takes to pop a
/// few hundred events, so that the retry after it finds a stretch of room. Retune with
/// `cargo bench --bench dispatch -- dispatch_1p1c` (a full queue, one producer).
pub(crate) const ROOM_SLEEP_MIN: Duration = Duration::from_micros(20);

/// The longest timed park: a producer whose processor was stalled resumes within this of
/// room appearing, and a blocked producer wakes at most a thousand times a second.
pub(crate) const ROOM_SLEEP_MAX: Duration = Duration::from_millis(1);

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
/// full, and retry the push if it returns `true`.
#[derive(Debug)]
pub(crate) struct RoomWait {
    backoff: Backoff,
    /// The next timed park, once the backoff is spent.
    sleep: Duration,
    deadline: Option<Instant>,
}

impl RoomWait {
    /// A wait that gives up at `deadline`, or never.
    pub(crate) fn new(deadline: Option<Instant>) -> Self {
        Self {
            backoff: Backoff::new(),
            sleep: ROOM_SLEEP_MIN,
            deadline,
        }
    }

    /// Pauses before the next retry; `false`, without pausing, once the deadline has
    /// passed (give up). A timed park never runs past the deadline.
    pub(crate) fn pause(&mut self) -> bool {
        let left = match self.deadline {
            None => None,
            Some(deadline) => match deadline.checked_duration_since(Instant::now()) {
                Some(left) if !left.is_zero() => Some(left),
                _ => return false,
            },
        };
        if !self.backoff.is_completed() {
            sync::snooze(&self.backoff);
            return true;
        }
        let sleep = left.map_or(self.sleep, |left| left.min(self.sleep));
        // A stray unpark (a call's late answer) only shortens one park.
        sync::park_timeout(sleep);
        self.sleep = (self.sleep * 2).min(ROOM_SLEEP_MAX);
        true
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
        let mut wait = RoomWait::new(Some(start + Duration::from_millis(20)));
        let mut pauses = 0;
        while wait.pause() {
            pauses += 1;
        }
        let took = start.elapsed();
        assert!(took >= Duration::from_millis(20), "{took:?}");
        assert!(took < Duration::from_millis(500), "{took:?}");
        assert!(pauses > 10, "spins, then parks: {pauses}");
        assert!(wait.sleep <= ROOM_SLEEP_MAX);

        let mut forever = RoomWait::new(None);
        for _ in 0..30 {
            assert!(forever.pause());
        }
        assert_eq!(forever.sleep, ROOM_SLEEP_MAX);
        assert!(!RoomWait::new(Some(Instant::now())).pause());
    }
}
