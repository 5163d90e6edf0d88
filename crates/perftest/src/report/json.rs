//! The report as JSON (serde): the summary of a run, and `--compare`'s two summaries with
//! the ratios of their latencies. Non-finite numbers are written `null`.

use std::fmt;

use serde::{Serialize, Serializer};
use zerodispatch_broker::{ConfirmMode, FlushStrategy, WaitStrategy};

use super::text::ratio;
use crate::counters::Outcomes;
use crate::cpu::CpuTime;
use crate::latency::LatencyJson;
use crate::result::{Faults, QueueResult, RunResult};
use crate::scenario::Transport;

/// The JSON summary of a run: one object, its keys in this order. Non-finite numbers are
/// written `null`.
#[derive(Clone, Debug, Serialize)]
pub struct SummaryJson<'a> {
    /// CPU time of the run (`cpu.rs`), where it was measured (a single run on Linux).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpu: Option<CpuTime>,
    /// Messages `send` accepted.
    pub published: u64,
    /// Messages acked.
    pub confirmed: u64,
    /// Deliveries, all apps.
    pub consumed: u64,
    /// Published messages without an outcome.
    pub lost: u64,
    /// [`RunResult::ok`].
    pub ok: bool,
    /// Seconds of publishing.
    pub duration_s: f64,
    /// Seconds of draining after it.
    pub drain_s: f64,
    /// Messages published per second.
    pub publish_rate: f64,
    /// Messages acked (stored) per second.
    pub confirm_rate: f64,
    /// Deliveries per second.
    pub consume_rate: f64,
    /// Publish -> confirm: until the producer's `on_ack` sees the ACK (`Stored`: the
    /// message is stored, and replicated to the quorum if one is configured).
    pub confirm_latency_us: LatencyJson,
    /// Publish -> consume: until a consumer's `on_delivery` sees the message (every app's
    /// delivery).
    pub consume_latency_us: LatencyJson,
    /// Mean messages per PUT frame.
    pub mean_batch: f64,
    /// PUT frames sent.
    pub put_frames: u64,
    /// Messages in them.
    pub put_messages: u64,
    /// The flush strategy, as `--flush` writes it.
    #[serde(serialize_with = "as_text")]
    pub flush: FlushStrategy,
    /// `in-process`, `tcp` (a server started by the perftest) or `tcp:<address>`.
    #[serde(serialize_with = "as_text")]
    pub transport: &'a Transport,
    /// `--rate`.
    pub rate: f64,
    /// `--publishers`.
    pub publishers: u32,
    /// `--consumers`.
    pub consumers: u32,
    /// `--fanout`.
    pub fanout: u16,
    /// `--size`.
    pub size: u32,
    /// `--batch-size`.
    pub batch_size: u32,
    /// `--max-unconfirmed`.
    pub max_unconfirmed: u32,
    /// The confirm mode, as `--callbacks` writes it.
    #[serde(serialize_with = "as_text")]
    pub callbacks: ConfirmMode,
    /// The wait strategy, as `--wait` writes it.
    #[serde(serialize_with = "as_text")]
    pub wait: WaitStrategy,
    /// The cores pinned to, or `null`.
    pub pin: Option<&'a [usize]>,
    /// `--session-processors`.
    pub session_processors: u32,
    /// `--queue-processors`.
    pub queue_processors: u32,
    /// Outcomes, by status.
    pub outcomes: &'a Outcomes,
    /// Outcomes beyond the published messages.
    pub duplicated: u64,
    /// Messages due and not sent by the end.
    pub behind: u64,
    /// `send` failures.
    pub send_errors: u64,
    /// Published, as the broker's sessions counted.
    pub broker_published: u64,
    /// Shares redelivered.
    pub redelivered: u64,
    /// Whether every producer had every outcome before closing.
    pub drained: bool,
    /// Over TCP with reliable clients: kills, reconnects, resends, duplicates.
    pub faults: Option<&'a Faults>,
    /// `--queues`, written only when it is 2 or more.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub queues: Option<u32>,
    /// Each queue's figures, in queue-id order, written only with `--queues` 2 or more:
    /// their counts add up to the totals above.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub per_queue: Option<Vec<QueueJson<'a>>>,
}

/// One queue's figures in the JSON summary (`per_queue`).
#[derive(Clone, Debug, Serialize)]
pub struct QueueJson<'a> {
    /// The queue's id.
    pub queue: u32,
    /// Publishers on it (publisher `i` on queue `i % queues`).
    pub publishers: u32,
    /// Consumers on it, of each app (consumer `i` on queue `i % queues`).
    pub consumers: u32,
    /// Messages its publishers' `send` accepted.
    pub published: u64,
    /// Its messages acked.
    pub confirmed: u64,
    /// Deliveries from it, all apps.
    pub consumed: u64,
    /// Messages published to it per second of the run's publishing.
    pub publish_rate: f64,
    /// Its messages acked per second.
    pub confirm_rate: f64,
    /// Its deliveries per second.
    pub consume_rate: f64,
    /// Publish -> confirm latency of its publishers' messages.
    pub confirm_latency_us: LatencyJson,
    /// Publish -> consume latency of its consumers' deliveries.
    pub consume_latency_us: LatencyJson,
    /// Its publishers' outcomes, by status.
    pub outcomes: &'a Outcomes,
}

impl<'a> QueueJson<'a> {
    fn of(q: &'a QueueResult, duration_s: f64) -> Self {
        Self {
            queue: q.queue,
            publishers: q.publishers,
            consumers: q.consumers,
            published: q.published,
            confirmed: q.outcomes.acked,
            consumed: q.consumed,
            publish_rate: q.publish_rate(duration_s),
            confirm_rate: q.confirm_rate(duration_s),
            consume_rate: q.consume_rate(duration_s),
            confirm_latency_us: (&q.confirm_latency).into(),
            consume_latency_us: (&q.consume_latency).into(),
            outcomes: &q.outcomes,
        }
    }
}

/// Serializes a value as the string its `Display` writes.
fn as_text<T: fmt::Display, S: Serializer>(value: &T, serializer: S) -> Result<S::Ok, S::Error> {
    serializer.collect_str(value)
}

/// The JSON summary of a run.
#[must_use]
pub fn summary_json(r: &RunResult) -> SummaryJson<'_> {
    let s = &r.scenario;
    SummaryJson {
        cpu: None,
        published: r.published,
        confirmed: r.outcomes.acked,
        consumed: r.consumed,
        lost: r.lost,
        ok: r.ok(),
        duration_s: r.duration_s,
        drain_s: r.drain_s,
        publish_rate: r.publish_rate(),
        confirm_rate: r.confirm_rate(),
        consume_rate: r.consume_rate(),
        confirm_latency_us: (&r.confirm_latency).into(),
        consume_latency_us: (&r.consume_latency).into(),
        mean_batch: r.mean_batch(),
        put_frames: r.put_frames,
        put_messages: r.put_messages,
        flush: s.flush,
        transport: &s.transport,
        rate: s.rate,
        publishers: s.publishers,
        consumers: s.consumers,
        fanout: s.fanout,
        size: s.size,
        batch_size: s.batch_size,
        max_unconfirmed: s.max_unconfirmed,
        callbacks: s.callbacks,
        wait: s.wait,
        pin: s.pin.as_deref(),
        session_processors: s.session_processors,
        queue_processors: s.queue_processors,
        outcomes: &r.outcomes,
        duplicated: r.extra_outcomes,
        behind: r.behind,
        send_errors: r.send_errors,
        broker_published: r.broker_published,
        redelivered: r.redelivered,
        drained: r.drained,
        faults: r.faults.as_ref(),
        queues: (s.queues > 1).then_some(s.queues),
        per_queue: (s.queues > 1).then(|| {
            r.queues
                .iter()
                .map(|q| QueueJson::of(q, r.duration_s))
                .collect()
        }),
    }
}

/// One line of JSON (JSON Lines friendly).
fn to_line(value: &impl Serialize) -> String {
    // These types hold numbers, strings, booleans, options, sequences and structs, never a
    // map with non-string keys: serde_json cannot fail on them.
    serde_json::to_string(value).expect("a report serializes to JSON")
}

/// The JSON summary of a run, on one line.
#[must_use]
pub fn json(r: &RunResult) -> String {
    to_line(&summary_json(r))
}

/// [`json`] with the run's CPU time (`"cpu": {"process_s", "broker_threads_s", "wall_s"}`).
#[must_use]
pub fn json_with_cpu(r: &RunResult, cpu: Option<CpuTime>) -> String {
    to_line(&SummaryJson {
        cpu,
        ..summary_json(r)
    })
}

#[derive(Clone, Copy, Debug, Serialize)]
pub struct RatiosJson {
    /// Publish -> confirm median.
    pub confirm_p50: f64,
    /// Publish -> confirm 99th percentile.
    pub confirm_p99: f64,
    /// Publish -> consume median.
    pub consume_p50: f64,
    /// Publish -> consume 99th percentile.
    pub consume_p99: f64,
}

/// The JSON of `--compare`: both runs' summaries and the latency ratios.
#[derive(Clone, Debug, Serialize)]
pub struct CompareJson<'a> {
    /// The dynamic-flush run.
    pub dynamic: SummaryJson<'a>,
    /// The timer run.
    pub timer: SummaryJson<'a>,
    /// Timer / dynamic.
    pub ratio_timer_over_dynamic: RatiosJson,
}

/// The JSON of `--compare`, on one line: both runs' summaries and the latency ratios
/// (timer / dynamic).
#[must_use]
pub fn compare_json(dynamic: &RunResult, timer: &RunResult) -> String {
    let (d, t) = (&dynamic.confirm_latency, &timer.confirm_latency);
    let (dc, tc) = (&dynamic.consume_latency, &timer.consume_latency);
    to_line(&CompareJson {
        dynamic: summary_json(dynamic),
        timer: summary_json(timer),
        ratio_timer_over_dynamic: RatiosJson {
            confirm_p50: ratio(t.p50, d.p50),
            confirm_p99: ratio(t.p99, d.p99),
            consume_p50: ratio(tc.p50, dc.p50),
            consume_p99: ratio(tc.p99, dc.p99),
        },
    })
}
