//! The processor's side of its timers (`timers.rs` at the crate's root has the protocol):
//! taking in what was scheduled, reclaiming what was cancelled, running what is due.

use std::time::Duration;

use super::contain::contain;
use super::runner::Runner;
use super::shared::ProcessorShared;

/// Frees the slot of a cancelled timer and drops its callback (user code: contained).
fn drop_cancelled<M>(
    shared: &ProcessorShared<M>,
    slot: u32,
    callback: zerodispatch_callback::Callback,
) {
    shared.timers.release(slot);
    contain(
        &shared.stats,
        shared.id,
        "drop of a cancelled timer",
        || drop(callback),
    );
}

impl<M: Send + 'static> Runner<M> {
    /// Runs every timer whose deadline has come, in deadline order, as dispatcher callbacks:
    /// the flush list is flushed first (the flush contract, point 2). A cancelled one is
    /// dropped unrun. Its slot is freed before the callback runs.
    pub(super) fn fire_due_timers(&mut self) {
        self.take_timers();
        let Some(next) = self.timers.next_deadline() else {
            return;
        };
        let clock = &self.ctx.dispatcher.shared.clock;
        let now = clock.now_ns();
        if next > now {
            return;
        }
        self.flush_all();
        while let Some((slot, callback)) = self.timers.pop_due(now) {
            let shared = &*self.shared;
            let run = shared.timers.fire(slot);
            // Freed before the callback: a timer that schedules its next turn (a ticker)
            // finds the slot it leaves.
            shared.timers.release(slot);
            if run {
                // Counted as run, as a dispatcher callback is: a cancelled timer is not.
                shared.stats.counters.timers_fired.add(1);
                if !callback.is_inline() {
                    shared.stats.counters.spilled.add(1);
                }
                contain(&shared.stats, shared.id, "timer callback", || {
                    callback.call()
                });
                shared.stats.counters.processed.add_release(1);
            } else {
                contain(
                    &shared.stats,
                    shared.id,
                    "drop of a cancelled timer",
                    || drop(callback),
                );
            }
        }
    }

    /// Takes in the timers scheduled since the last look and reclaims those cancelled
    /// (steps 1 and 2 of `timers.rs`, the processor's side). Each arrival counts as a pop:
    /// its scheduler's gate entry made it an event of the wake and shutdown protocols. Not
    /// yet in the statistics: a timer counts in `processed` (and `spilled`) when it runs.
    fn take_timers(&mut self) {
        let shared = &*self.shared;
        while let Some((slot, callback)) = shared.timers.arrivals.pop() {
            self.popped = self.popped.wrapping_add(1);
            let (generation, cancelled) = shared.timers.current(slot);
            if cancelled {
                drop_cancelled(shared, slot, callback);
            } else {
                let deadline = shared.timers.deadline(slot);
                self.timers.arrive(slot, generation, deadline, callback);
            }
        }
        while let Some((slot, generation)) = shared.timers.next_cancelled() {
            // Pushed under the gate, as an arrival: it counts as a pop.
            self.popped = self.popped.wrapping_add(1);
            if let Some(callback) = self.timers.take(slot, generation) {
                drop_cancelled(shared, slot, callback);
            }
        }
    }

    /// The deadline of the next timer taken in, if one waits (early, at worst, for a timer
    /// reclaimed since).
    pub(crate) fn next_deadline(&self) -> Option<u64> {
        self.timers.peek_deadline()
    }

    /// How long until the next timer is due, if one waits (early, at worst, for a timer
    /// reclaimed since: the turn it wakes for skips it).
    pub(super) fn until_next_timer(&self) -> Option<Duration> {
        let next = self.timers.peek_deadline()?;
        Some(self.ctx.dispatcher.shared.clock.until(next))
    }

    /// Whether a timer is due now (one clock read, only while timers wait).
    pub(super) fn timer_due(&self) -> bool {
        self.timers
            .peek_deadline()
            .is_some_and(|next| next <= self.ctx.dispatcher.shared.clock.now_ns())
    }
}
