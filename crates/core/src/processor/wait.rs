//! How the processor waits for work between two turns (the loop's step 5): a short,
//! growing timed park while retries are pending, otherwise polling by its
//! [`WaitStrategy`], then parking by the wake protocol of `wake.rs`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_utils::Backoff;

use super::current::{OUTBOX_LEN, outbox_len};
use super::runner::Runner;
use super::tuning::{RETRY_PARK_MAX, RETRY_PARK_MIN, SPIN_WINDOW};
use crate::config::WaitStrategy;
use crate::sync::{self, thread};

/// How the thread rests once a wait found no work.
pub(super) enum Rest {
    /// A timed park, after which the retries (outbox, flush again) are made; a stop does
    /// not end it.
    Retry(Duration),
    /// A park until an event, a stop, or the next timer (`Some`) comes.
    Park(Option<Duration>),
}

impl<M: Send + 'static> Runner<M> {
    /// Waits for work by the pool's [`WaitStrategy`]: `None` once work came, or how to rest.
    pub(super) fn wait_for_work(&mut self) -> Option<Rest> {
        // Stopping but not settled (an accepted event still on its way in): wait briefly,
        // like a retry, rather than spin on the stop.
        if outbox_len() > 0 || !self.flush_list.is_empty() || self.shared.stop_requested() {
            // A short, growing while (or until an event comes) before the retries.
            let park = self.retry_park;
            let park = self
                .until_next_timer()
                .map_or(park, |until| park.min(until));
            self.retry_park = (park * 2).min(RETRY_PARK_MAX);
            return Some(Rest::Retry(park));
        }
        self.retry_park = RETRY_PARK_MIN;
        if self.spin_for_work() {
            return None;
        }
        // Going to sleep: a requested histogram merge costs the event path nothing now.
        self.publish_histograms(false);
        // With timers waiting, no longer than until the next is due.
        Some(Rest::Park(self.until_next_timer()))
    }

    /// Rests by the wake protocol and returns the state; in a driven pool the state is lent
    /// to drivers meanwhile (`drive.rs`) and taken back.
    pub(super) fn rest(mut self: Box<Self>, rest: Rest) -> Box<Self> {
        let (timeout, stop_wakes) = match rest {
            Rest::Retry(park) => (Some(park), false),
            Rest::Park(until_timer) => (until_timer, true),
        };
        let park = || match timeout {
            Some(timeout) => sync::park_timeout(timeout),
            None => thread::park(),
        };
        if !self.shared.config.driven {
            // No driver comes: the thread keeps its state (no lend, no locks).
            if self.shared.sleep(self.popped, park, stop_wakes) {
                self.shared.stats.counters.parks.add(1);
            }
            return self;
        }
        let shared = Arc::clone(&self.shared);
        let clock = &self.ctx.dispatcher.shared.clock;
        self.parked_until = timeout.map(|t| {
            let t = u64::try_from(t.as_nanos()).unwrap_or(u64::MAX);
            clock.now_ns().saturating_add(t)
        });
        let popped = self.popped;
        shared.lend(self);
        let parked = shared.sleep(popped, park, stop_wakes);
        let runner = shared
            .take_back()
            .downcast::<Self>()
            .expect("a processor takes back its own state");
        // A driver may have changed the outbox: this thread's count follows.
        OUTBOX_LEN.with(|len| len.set(shared.outbox_len_locked()));
        if parked {
            shared.stats.counters.parks.add(1);
        }
        runner
    }

    /// Polls for work by the wait strategy; `true` if work (or a stop) came, `false` if
    /// it is time to park.
    pub(super) fn spin_for_work(&self) -> bool {
        let shared = &*self.shared;
        let popped = self.popped;
        let has_work = || shared.has_work(popped) || self.timer_due();
        let backoff = Backoff::new();
        let spins = match shared.config.wait {
            WaitStrategy::BusySpin => {
                while !has_work() {
                    backoff.spin();
                }
                return true;
            }
            WaitStrategy::SpinThenPark { spins } => spins,
            WaitStrategy::Park => 0,
        };
        // The clock is read once the backoff's short spins are done, before each yield: a
        // vDSO read (tens of ns) beside a syscall. Not under loom, whose models must not
        // depend on time.
        let mut started: Option<Instant> = None;
        for _ in 0..spins {
            if has_work() {
                return true;
            }
            if backoff.is_completed() {
                if !cfg!(loom) {
                    let now = Instant::now();
                    if now.duration_since(*started.get_or_insert(now)) >= SPIN_WINDOW {
                        return false;
                    }
                }
                thread::yield_now();
            } else {
                backoff.snooze();
            }
        }
        false
    }
}
