//! What the callbacks count, by queue: each queue's publishers' sends and outcomes, and
//! its consumers' deliveries ([`QueueCounters`]); the result has each queue's figures
//! beside the totals.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use zerodispatch_broker::AckStatus;

use crate::latency::{Shared, lock};
use crate::scenario::Scenario;

/// Outcomes of published messages, by status.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct Outcomes {
    /// ACKed: stored by the queue.
    pub acked: u64,
    /// The queue was full.
    pub rejected_queue_full: u64,
    /// The producer's table was full.
    pub rejected_producer_full: u64,
    /// No such queue.
    pub rejected_unknown_queue: u64,
    /// Reported when the producer closed.
    pub closed: u64,
    /// No outcome within the confirm timeout.
    pub timed_out: u64,
    /// Not sent before the producer closed.
    pub not_sent: u64,
    /// Refused for another reason: a payload too large for the server, its payload store
    /// full, a publish id older than the deduplication window.
    pub other_refusals: u64,
}

impl Outcomes {
    /// Every outcome, whatever its status.
    #[must_use]
    pub fn total(&self) -> u64 {
        self.acked
            + self.rejected_queue_full
            + self.rejected_producer_full
            + self.rejected_unknown_queue
            + self.closed
            + self.timed_out
            + self.not_sent
            + self.other_refusals
    }

    /// These outcomes and `other`'s, added.
    #[must_use]
    pub fn plus(&self, other: &Self) -> Self {
        Self {
            acked: self.acked + other.acked,
            rejected_queue_full: self.rejected_queue_full + other.rejected_queue_full,
            rejected_producer_full: self.rejected_producer_full + other.rejected_producer_full,
            rejected_unknown_queue: self.rejected_unknown_queue + other.rejected_unknown_queue,
            closed: self.closed + other.closed,
            timed_out: self.timed_out + other.timed_out,
            not_sent: self.not_sent + other.not_sent,
            other_refusals: self.other_refusals + other.other_refusals,
        }
    }
}

/// One queue's counters: what its publishers sent, their outcomes (written by the
/// producers' `on_ack`, on session processors), and its consumers' deliveries.
#[derive(Debug, Default)]
pub(crate) struct QueueCounters {
    /// Messages its publishers' `send` accepted.
    pub(crate) published: AtomicU64,
    /// Its publishers' outcomes.
    pub(crate) outcomes: OutcomeCounters,
    /// Deliveries to its consumers (every app's).
    pub(crate) consumed: AtomicU64,
}

impl QueueCounters {
    /// One set of counters per queue of `scenario`.
    pub(crate) fn for_queues(scenario: &Scenario) -> Vec<Arc<Self>> {
        (0..scenario.queues.max(1))
            .map(|_| Arc::new(Self::default()))
            .collect()
    }
}

/// Every queue's outcomes together.
pub(crate) fn total_outcomes(queues: &[Arc<QueueCounters>]) -> Outcomes {
    queues.iter().fold(Outcomes::default(), |sum, q| {
        sum.plus(&q.outcomes.snapshot())
    })
}

/// Every queue's count together: `count` reads one queue's counter.
pub(crate) fn total(queues: &[Arc<QueueCounters>], count: impl Fn(&QueueCounters) -> u64) -> u64 {
    queues.iter().map(|q| count(q)).sum()
}

/// Outcome counters, written by the producers' `on_ack` (on session processors).
#[derive(Debug, Default)]
pub(crate) struct OutcomeCounters(pub(crate) [AtomicU64; 8]);

impl OutcomeCounters {
    pub(crate) fn index(status: AckStatus) -> usize {
        match status {
            AckStatus::Stored => 0,
            AckStatus::RejectedQueueFull => 1,
            AckStatus::RejectedProducerFull => 2,
            AckStatus::RejectedUnknownQueue => 3,
            AckStatus::Closed => 4,
            AckStatus::TimedOut => 5,
            AckStatus::NotSent => 6,
            AckStatus::RejectedOutOfWindow => Self::OTHER_REFUSALS,
        }
    }

    /// Where the refusals without a counter of their own go (out of window, too large,
    /// store full).
    pub(crate) const OTHER_REFUSALS: usize = 7;

    /// Counts `n` outcomes at counter `index`.
    pub(crate) fn add_at(&self, index: usize, n: u64) {
        self.0[index].fetch_add(n, Ordering::Relaxed);
    }

    pub(crate) fn add(&self, status: AckStatus, n: u64) {
        if n > 0 {
            self.add_at(Self::index(status), n);
        }
    }

    /// Counts a batch of one producer's outcomes, taken at `now_ns`: `sent_at` gives a
    /// stored message's send time (ns on the same clock), whose latency `recorder` records
    /// in microseconds, and any other outcome's counter index, counted there.
    pub(crate) fn record_batch<T>(
        &self,
        batch: &[T],
        now_ns: u64,
        recorder: &Shared,
        sent_at: impl Fn(&T) -> Result<u64, usize>,
    ) {
        let mut stored = 0;
        let mut r = lock(recorder);
        for outcome in batch {
            match sent_at(outcome) {
                Ok(sent_ns) => {
                    stored += 1;
                    r.record(now_ns.saturating_sub(sent_ns) / 1_000);
                }
                Err(index) => self.add_at(index, 1),
            }
        }
        drop(r);
        self.add(AckStatus::Stored, stored);
    }

    pub(crate) fn snapshot(&self) -> Outcomes {
        let get = |i: usize| self.0[i].load(Ordering::Relaxed);
        Outcomes {
            acked: get(0),
            rejected_queue_full: get(1),
            rejected_producer_full: get(2),
            rejected_unknown_queue: get(3),
            closed: get(4),
            timed_out: get(5),
            not_sent: get(6),
            other_refusals: get(7),
        }
    }
}
