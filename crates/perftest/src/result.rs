//! What a run measured ([`RunResult`]), by queue ([`QueueResult`]) and, with reliable
//! clients, what the faults did ([`Faults`]); and what the publishing phase did
//! ([`Publishing`]), gathered with the counters into a result.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use zerodispatch_core::Percentiles;

use crate::counters::{Outcomes, QueueCounters, total, total_outcomes};
use crate::latency::{Shared, merge_total};
use crate::scenario::Scenario;

/// What a publisher thread did.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct PublisherEnd {
    /// Messages `send` accepted.
    pub(crate) sent: u64,
    /// Messages scheduled before the end but not sent by then (the publisher was behind).
    pub(crate) behind: u64,
    /// `send` failures (the publisher stops at the first).
    pub(crate) errors: u64,
    /// When it stopped, in ns since the epoch.
    pub(crate) ended_ns: u64,
}

/// What the publishing phase of a run did.
pub(crate) struct Publishing {
    /// Each publisher's end.
    pub(crate) ends: Vec<PublisherEnd>,
    /// When publishing started and was to stop (ns since the run's epoch).
    pub(crate) go_ns: u64,
    pub(crate) end_ns: u64,
    /// Messages the senders accepted.
    pub(crate) published: u64,
}

impl Publishing {
    /// When the last publisher stopped (ns since the run's epoch).
    pub(crate) fn ended_ns(&self) -> u64 {
        self.ends
            .iter()
            .map(|e| e.ended_ns)
            .max()
            .unwrap_or(self.end_ns)
    }

    /// The run's result: what the publishers did, what the callbacks counted (`counters`
    /// by queue) and recorded (the two `recorders`: confirm, consume), and what the
    /// transport says (`broker`), `drain_s` after publishing.
    pub(crate) fn gather(
        &self,
        scenario: &Scenario,
        drain_s: f64,
        counters: &[Arc<QueueCounters>],
        recorders: [&[Shared]; 2],
        broker: BrokerFigures,
    ) -> RunResult {
        let published = self.published;
        let outcomes = total_outcomes(counters);
        let all_outcomes = outcomes.total();
        let [confirm, consume] = recorders;
        RunResult {
            scenario: scenario.clone(),
            // The publishing window: the configured one, or longer if a publisher overran it.
            duration_s: self.ended_ns().max(self.end_ns).saturating_sub(self.go_ns) as f64 / 1e9,
            drain_s,
            published,
            broker_published: broker.published,
            outcomes,
            consumed: total(counters, |q| q.consumed.load(Ordering::Relaxed)),
            lost: published.saturating_sub(all_outcomes),
            extra_outcomes: all_outcomes.saturating_sub(published),
            behind: self.ends.iter().map(|e| e.behind).sum(),
            send_errors: self.ends.iter().map(|e| e.errors).sum(),
            confirm_latency: Percentiles::of(&merge_total(confirm)),
            consume_latency: Percentiles::of(&merge_total(consume)),
            put_frames: broker.put_frames,
            put_messages: broker.put_messages,
            redelivered: broker.redelivered,
            drained: broker.drained,
            faults: broker.faults,
            queues: per_queue(scenario, counters, recorders),
        }
    }
}

/// What a run's transport says of it, beside what the publishers and callbacks counted.
pub(crate) struct BrokerFigures {
    /// Messages published according to the broker's sessions.
    pub(crate) published: u64,
    /// PUT frames the producers sent, and the messages in them.
    pub(crate) put_frames: u64,
    pub(crate) put_messages: u64,
    /// Shares redelivered by the queues.
    pub(crate) redelivered: u64,
    /// Whether every producer had every outcome before closing.
    pub(crate) drained: bool,
    /// With reliable clients: what the faults did.
    pub(crate) faults: Option<Faults>,
}

/// What a run measured.
#[derive(Clone, Debug, PartialEq)]
pub struct RunResult {
    /// What was run.
    pub scenario: Scenario,
    /// Seconds of publishing: the configured duration, or until the last publisher stopped
    /// if later.
    pub duration_s: f64,
    /// Seconds from the end of publishing until every outcome was in (and the producers
    /// closed).
    pub drain_s: f64,
    /// Messages `send` accepted.
    pub published: u64,
    /// Messages published according to the broker's sessions (a cross-check).
    pub broker_published: u64,
    /// Outcomes, by status.
    pub outcomes: Outcomes,
    /// Deliveries to consumers (every app's; redeliveries included).
    pub consumed: u64,
    /// Published messages without an outcome: `published - outcomes` when positive.
    pub lost: u64,
    /// Outcomes beyond the published messages (duplicates): `outcomes - published` when
    /// positive.
    pub extra_outcomes: u64,
    /// Messages scheduled but not sent by the end (the publishers were behind).
    pub behind: u64,
    /// `send` failures.
    pub send_errors: u64,
    /// Publish -> confirm latency of `Stored` outcomes: until the producer's `on_ack` sees
    /// that the queue stored the message.
    pub confirm_latency: Percentiles,
    /// Publish -> consume latency of every delivery: until a consumer's `on_delivery` sees
    /// the message. Not part of the confirm: a message is ACKed whether or not it was
    /// consumed.
    pub consume_latency: Percentiles,
    /// PUT frames the producers sent.
    pub put_frames: u64,
    /// Messages in them.
    pub put_messages: u64,
    /// Shares redelivered by the queue (a consumer closed).
    pub redelivered: u64,
    /// Whether every producer had every outcome before closing.
    pub drained: bool,
    /// Over TCP with reliable clients: what the faults did.
    pub faults: Option<Faults>,
    /// Each queue's figures, in queue-id order (one entry with one queue).
    pub queues: Vec<QueueResult>,
}

/// What one queue of a run measured: its publishers' sends and outcomes, its consumers'
/// deliveries, and the latencies of both.
#[derive(Clone, Debug, PartialEq)]
pub struct QueueResult {
    /// The queue's id.
    pub queue: u32,
    /// Publishers on it.
    pub publishers: u32,
    /// Consumers on it (of each app).
    pub consumers: u32,
    /// Messages its publishers' `send` accepted.
    pub published: u64,
    /// Its publishers' outcomes, by status.
    pub outcomes: Outcomes,
    /// Deliveries to its consumers (every app's).
    pub consumed: u64,
    /// Publish -> confirm latency of its publishers' `Stored` outcomes.
    pub confirm_latency: Percentiles,
    /// Publish -> consume latency of its consumers' deliveries.
    pub consume_latency: Percentiles,
}

/// Each queue's figures: `counters` by queue, `confirm` recorders by publisher, `consume`
/// recorders by app then consumer (the order the runs open them in).
pub(crate) fn per_queue(
    scenario: &Scenario,
    counters: &[Arc<QueueCounters>],
    [confirm, consume]: [&[Shared]; 2],
) -> Vec<QueueResult> {
    let consumers = scenario.consumers.max(1) as usize;
    counters
        .iter()
        .enumerate()
        .map(|(q, c)| {
            let q = q as u32;
            let on_q = |i: usize| scenario.queue_of(i as u32) == q;
            let confirm: Vec<Shared> = (confirm.iter().enumerate())
                .filter(|&(p, _)| on_q(p))
                .map(|(_, r)| r.clone())
                .collect();
            let consume: Vec<Shared> = (consume.iter().enumerate())
                .filter(|&(i, _)| on_q(i % consumers))
                .map(|(_, r)| r.clone())
                .collect();
            QueueResult {
                queue: q,
                publishers: scenario.on_queue(q, scenario.publishers),
                consumers: scenario.on_queue(q, scenario.consumers),
                published: c.published.load(Ordering::Relaxed),
                outcomes: c.outcomes.snapshot(),
                consumed: c.consumed.load(Ordering::Relaxed),
                confirm_latency: Percentiles::of(&merge_total(&confirm)),
                consume_latency: Percentiles::of(&merge_total(&consume)),
            }
        })
        .collect()
}

impl QueueResult {
    /// Messages published to this queue per second of the run's publishing.
    #[must_use]
    pub fn publish_rate(&self, duration_s: f64) -> f64 {
        per_second(self.published, duration_s)
    }

    /// Messages confirmed (`Stored`) by this queue per second of publishing.
    #[must_use]
    pub fn confirm_rate(&self, duration_s: f64) -> f64 {
        per_second(self.outcomes.acked, duration_s)
    }

    /// Deliveries from this queue per second of publishing.
    #[must_use]
    pub fn consume_rate(&self, duration_s: f64) -> f64 {
        per_second(self.consumed, duration_s)
    }
}

/// What connection kills did to a run with reliable clients, and what they must not do.
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize)]
pub struct Faults {
    /// Client connections the proxy killed.
    pub killed: u64,
    /// Times the server was shut down and started again.
    pub server_restarts: u64,
    /// Producers' and consumers' reconnections.
    pub reconnects: u64,
    /// Messages the producers resent on a new connection.
    pub resent: u64,
    /// Messages a re-opened producer learnt were stored already (not resent).
    pub stored_before: u64,
    /// Resent messages the broker had stored already: confirmed again, not stored twice.
    pub deduplicated: u64,
    /// Redelivered messages the consumers filtered (handed to the application before).
    pub filtered: u64,
    /// Distinct messages the application consumed.
    pub consumed_unique: u64,
    /// Messages handed to the application twice (must be 0).
    pub duplicated_to_app: u64,
    /// The producers' recoveries, in microseconds: from a lost connection to the broker's
    /// first confirm after it (`zerodispatch_client::Recovery::time_to_confirm`; at a low
    /// rate, it includes the wait for the next message).
    #[serde(serialize_with = "crate::latency::latency_json")]
    pub recovery_us: Percentiles,
    /// The same recoveries, from the lost connection to the new session
    /// (`Recovery::reconnect_time`).
    #[serde(serialize_with = "crate::latency::latency_json")]
    pub reconnect_us: Percentiles,
}

impl RunResult {
    /// Mean messages per PUT frame.
    #[must_use]
    pub fn mean_batch(&self) -> f64 {
        if self.put_frames == 0 {
            0.0
        } else {
            self.put_messages as f64 / self.put_frames as f64
        }
    }

    /// Messages published per second.
    #[must_use]
    pub fn publish_rate(&self) -> f64 {
        per_second(self.published, self.duration_s)
    }

    /// Messages confirmed (`Stored`) per second of publishing.
    #[must_use]
    pub fn confirm_rate(&self) -> f64 {
        per_second(self.outcomes.acked, self.duration_s)
    }

    /// Deliveries per second of publishing.
    #[must_use]
    pub fn consume_rate(&self) -> f64 {
        per_second(self.consumed, self.duration_s)
    }

    /// No message lost or duplicated, none failed, and every acked message delivered to
    /// every app.
    #[must_use]
    pub fn ok(&self) -> bool {
        let apps = u64::from(self.scenario.apps());
        let delivery = match self.faults {
            // Every message published once, and each stored one consumed by every app.
            None => {
                self.broker_published == self.published
                    && self.consumed >= self.outcomes.acked * apps
            }
            // Resent messages reach the broker again: published there at least once; none
            // reaches an application twice, and every stored one reaches every app.
            Some(f) => {
                self.broker_published >= self.published
                    && f.duplicated_to_app == 0
                    && f.consumed_unique >= self.outcomes.acked * apps
            }
        };
        delivery && self.lost == 0 && self.extra_outcomes == 0 && self.send_errors == 0
    }
}

/// `n` per second of `seconds`; 0 over no time.
pub(crate) fn per_second(n: u64, seconds: f64) -> f64 {
    if seconds > 0.0 {
        n as f64 / seconds
    } else {
        0.0
    }
}
