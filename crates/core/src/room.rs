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
//! How it waits: spinning with a growing backoff (then yields) for at most [`SPIN_FOR`],
//! reading the queue's length once per step; then timed parks that double from
//! [`ROOM_SLEEP_MIN`] to [`ROOM_SLEEP_MAX`], so that a producer held up by a slow or
//! stalled processor stops burning its core. The spin covers a processor that is popping
//! (a quarter of a 4096-slot queue drains in tens of microseconds); a park is short
//! against what is left in a queue three-quarters full, so it does not starve the
//! processor.

use std::time::{Duration, Instant};

use crossbeam_utils::Backoff;

use crate::sync;

/// How long a wait spins (and yields) before it parks: about the time a busy processor
/// takes to drain a quarter of a 4096-slot queue.
pub(crate) const SPIN_FOR: Duration = Duration::from_micros(100);

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
    /// When the spinning ends and the parks begin; set at the first pause.
    spin_until: Option<Instant>,
    /// The next timed park, once the spin is over.
    sleep: Duration,
    deadline: Option<Instant>,
}

impl RoomWait {
    /// A wait that gives up at `deadline`, or never.
    pub(crate) fn new(deadline: Option<Instant>) -> Self {
        Self {
            backoff: Backoff::new(),
            spin_until: None,
            sleep: ROOM_SLEEP_MIN,
            deadline,
        }
    }

    /// Waits until `room()` says there is room for a burst (or the gate closed: a push
    /// then hands the event back at once), and returns `true`: retry the push. Returns
    /// `false`, without waiting further, once the deadline has passed (give up). A timed
    /// park never runs past the deadline.
    pub(crate) fn pause(&mut self, room: impl Fn() -> bool) -> bool {
        let spin_until = *self
            .spin_until
            .get_or_insert_with(|| Instant::now() + SPIN_FOR);
        loop {
            if room() {
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
                sync::snooze(&self.backoff);
                continue;
            }
            let sleep = left.map_or(self.sleep, |left| left.min(self.sleep));
            // A stray unpark (a call's late answer) only shortens one park.
            sync::park_timeout(sleep);
            self.sleep = (self.sleep * 2).min(ROOM_SLEEP_MAX);
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
        let mut wait = RoomWait::new(Some(start + Duration::from_millis(20)));
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
        let mut forever = RoomWait::new(None);
        let until = Instant::now() + Duration::from_millis(30);
        assert!(forever.pause(|| Instant::now() >= until));
        assert!(Instant::now() >= until);
        assert!(forever.sleep > ROOM_SLEEP_MIN, "parked after the spin");
        assert!(!RoomWait::new(Some(Instant::now())).pause(|| false));
        assert!(
            RoomWait::new(Some(Instant::now())).pause(|| true),
            "room: retry"
        );
    }
}
