//! The dispatcher's clock, which timers are measured on: the monotonic clock, read as
//! nanoseconds since the dispatcher was built, or a clock that moves only when a test
//! advances it (the deterministic dispatcher of [`testing`](crate::testing)).

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Nanoseconds since the dispatcher's epoch; `u64` lasts 584 years.
pub(crate) struct Clock {
    epoch: Instant,
    /// `Some` for a manual clock: its reading, moved by [`advance`](Self::advance) only.
    manual: Option<AtomicU64>,
}

impl Clock {
    /// The monotonic clock.
    pub(crate) fn real() -> Self {
        Self {
            epoch: Instant::now(),
            manual: None,
        }
    }

    /// A clock that reads the time it was made at until advanced.
    pub(crate) fn manual() -> Self {
        Self {
            epoch: Instant::now(),
            manual: Some(AtomicU64::new(0)),
        }
    }

    /// Now, in nanoseconds since the epoch.
    #[inline]
    pub(crate) fn now_ns(&self) -> u64 {
        match &self.manual {
            None => self.ns_of(Instant::now()),
            Some(now) => now.load(Ordering::Acquire),
        }
    }

    /// Now, as an `Instant`.
    pub(crate) fn now(&self) -> Instant {
        self.instant(self.now_ns())
    }

    /// `at`, in nanoseconds since the epoch (0 for an instant before it).
    pub(crate) fn ns_of(&self, at: Instant) -> u64 {
        u64::try_from(at.saturating_duration_since(self.epoch).as_nanos()).unwrap_or(u64::MAX)
    }

    /// The instant `ns` nanoseconds after the epoch.
    pub(crate) fn instant(&self, ns: u64) -> Instant {
        self.epoch + Duration::from_nanos(ns)
    }

    /// The instant `delay` from now, or the latest this clock can name (584 years on) for a
    /// delay beyond it: never due while a process runs.
    pub(crate) fn after(&self, delay: Duration) -> Instant {
        let now = self.now();
        now.checked_add(delay)
            .or_else(|| self.epoch.checked_add(Duration::from_nanos(u64::MAX)))
            // A platform whose `Instant` cannot reach that far: 34 years on.
            .unwrap_or_else(|| now + Duration::from_secs(1 << 30))
    }

    /// How long from now until `deadline_ns` (zero if it has passed).
    pub(crate) fn until(&self, deadline_ns: u64) -> Duration {
        Duration::from_nanos(deadline_ns.saturating_sub(self.now_ns()))
    }

    /// Moves a manual clock on to `ns` nanoseconds since the epoch, if it reads less (a
    /// clock never goes back); `false` for the real clock, which cannot be moved.
    pub(crate) fn advance_to(&self, ns: u64) -> bool {
        let Some(now) = &self.manual else {
            return false;
        };
        now.fetch_max(ns, Ordering::AcqRel);
        true
    }

    /// Whether this clock moves only when advanced.
    pub(crate) fn is_manual(&self) -> bool {
        self.manual.is_some()
    }
}
