//! How the processor waits for work between two turns (the loop's step 5): a short,
//! growing timed park while retries are pending, otherwise polling by its
//! [`WaitStrategy`], then parking by the wake protocol of `wake.rs`.

use std::time::Instant;

use crossbeam_utils::Backoff;

use super::current::outbox_len;
use super::runner::Runner;
use super::tuning::{RETRY_PARK_MAX, RETRY_PARK_MIN, SPIN_WINDOW};
use crate::config::WaitStrategy;
use crate::sync::{self, thread};

impl<M: Send + 'static> Runner<M> {
    pub(super) fn wait_for_work(&mut self) {
        // Stopping but not settled (an accepted event still on its way in): wait briefly,
        // like a retry, rather than spin on the stop.
        if outbox_len() > 0 || !self.flush_list.is_empty() || self.shared.stop_requested() {
            self.wait_to_retry();
            return;
        }
        self.retry_park = RETRY_PARK_MIN;
        if self.spin_for_work() {
            return;
        }
        // Going to sleep: a requested histogram merge costs the event path nothing now.
        self.publish_histograms(false);
        // With timers waiting, no longer than until the next is due.
        let until_timer = self.until_next_timer();
        let park = || match until_timer {
            Some(timeout) => sync::park_timeout(timeout),
            None => thread::park(),
        };
        if self.shared.sleep(self.popped, park, true) {
            self.shared.stats.counters.parks.add(1);
        }
    }

    /// Waits a short, growing while (or until an event comes) before retrying the outbox
    /// and the clients that asked to be flushed again.
    pub(super) fn wait_to_retry(&mut self) {
        let park = self.retry_park;
        let park = self
            .until_next_timer()
            .map_or(park, |until| park.min(until));
        // Not woken by a stop: at a stop the retries still have to be made.
        if self
            .shared
            .sleep(self.popped, || sync::park_timeout(park), false)
        {
            self.shared.stats.counters.parks.add(1);
        }
        self.retry_park = (park * 2).min(RETRY_PARK_MAX);
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
