//! Printing: the per-second line, the human summary, the JSON summary (serde), and the
//! side-by-side table of `--compare`.

use std::fmt::{self, Write as _};

use hdrhistogram::Histogram;
use serde::{Serialize, Serializer};
use zerodispatch_broker::{ConfirmMode, FlushStrategy, WaitStrategy};
use zerodispatch_core::Percentiles;

use crate::cli::format_duration;
use crate::cpu::CpuTime;

use crate::run::{Faults, Outcomes, QueueResult, RunResult, Scenario, Transport};

/// The per-second line, in the stream clients' style: the last second's rates (published,
/// confirmed, consumed) and the last second's latencies, publish -> confirm (the ACK:
/// stored) and publish -> consume (delivered to a consumer), each on its own.
#[must_use]
pub fn progress_line(
    rates: [f64; 3],
    confirm: &Histogram<u64>,
    consume: &Histogram<u64>,
) -> String {
    let mut line = format!(
        "Published {:>10.1} msg/s | Confirmed {:>10.1} msg/s | Consumed {:>10.1} msg/s | latency, last second: ",
        rates[0], rates[1], rates[2]
    );
    for (name, histogram, sep) in [("confirm", confirm, "; "), ("consume", consume, "")] {
        let p = Percentiles::of(histogram);
        if p.count == 0 {
            let _ = write!(line, "{name} -{sep}");
        } else {
            let _ = write!(
                line,
                "{name} p50 {}us p99 {}us p99.9 {}us max {}us{sep}",
                p.p50, p.p99, p.p999, p.max
            );
        }
    }
    line
}

fn plural(n: u64, what: &str) -> String {
    if n == 1 {
        format!("{n} {what}")
    } else {
        format!("{n} {what}s")
    }
}

fn rate_name(rate: f64) -> String {
    if rate > 0.0 {
        format!("{rate} msg/s")
    } else {
        "max rate".into()
    }
}

/// The pinning, as the summaries name it: `off`, or the core ids (`0,1`).
fn pin_name(pin: Option<&[usize]>) -> String {
    match pin {
        None => "off".into(),
        Some(ids) => ids
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join(","),
    }
}

/// One line describing the scenario.
#[must_use]
pub fn describe(s: &Scenario) -> String {
    let queue = if s.queues > 1 {
        let shape = if s.fanout >= 2 {
            format!("fanout queues of {} apps", s.fanout)
        } else {
            "priority queues".into()
        };
        let per = if s.fanout >= 2 { " per app" } else { "" };
        format!(
            "{} {shape}, {}{per} in all (publisher and consumer i on queue i % {})",
            s.queues,
            plural(u64::from(s.consumers), "consumer"),
            s.queues
        )
    } else if s.fanout >= 2 {
        format!(
            "fanout queue of {} apps, {} per app",
            s.fanout,
            plural(u64::from(s.consumers), "consumer")
        )
    } else {
        format!(
            "priority queue, {}",
            plural(u64::from(s.consumers), "consumer")
        )
    };
    format!(
        "{}, {} at {} each, {queue}, flush {}, batch {}, {} B payloads, {} confirms, {}",
        s.transport,
        plural(u64::from(s.publishers), "publisher"),
        rate_name(s.rate),
        s.flush,
        s.batch_size,
        s.size,
        s.callbacks,
        format_duration(s.duration),
    )
}

fn latency_row(name: &str, p: &Percentiles) -> String {
    if p.count == 0 {
        return format!("  {name:<18} (no samples)");
    }
    format!(
        "  {name:<18} {:>9} {:>9} {:>9} {:>9} {:>11.1} {:>11}",
        p.p50, p.p99, p.p999, p.max, p.mean, p.count
    )
}

/// The human summary of a run.
#[must_use]
pub fn summary(r: &RunResult) -> String {
    let o = &r.outcomes;
    let mut out = String::new();
    let _ = writeln!(out);
    let _ = writeln!(out, "Summary: {}", describe(&r.scenario));
    let _ = writeln!(
        out,
        "  published {:>12} in {:.2} s: {:>12.1} msg/s",
        r.published,
        r.duration_s,
        r.publish_rate()
    );
    let _ = writeln!(
        out,
        "  confirmed {:>12}           {:>12.1} msg/s (acked: stored)",
        o.acked,
        r.confirm_rate()
    );
    let _ = writeln!(
        out,
        "  consumed  {:>12}           {:>12.1} msg/s (deliveries, all apps)",
        r.consumed,
        r.consume_rate()
    );
    let _ = writeln!(out);
    let _ = writeln!(
        out,
        "  latency (us)             p50       p99     p99.9       max        mean     samples"
    );
    let _ = writeln!(
        out,
        "{}",
        latency_row("publish -> confirm", &r.confirm_latency)
    );
    let _ = writeln!(
        out,
        "{}",
        latency_row("publish -> consume", &r.consume_latency)
    );
    let _ = writeln!(out);
    if r.scenario.queues > 1 {
        let _ = write!(out, "{}", queue_table(r));
    }
    if r.put_frames == 0 && r.faults.is_some() {
        // A reliable producer's frames are its sessions', which it does not count.
        let _ = writeln!(
            out,
            "  mean messages per PUT frame: not counted (reliable clients)"
        );
    } else {
        let _ = writeln!(
            out,
            "  mean messages per PUT frame: {:.2} ({} messages in {} frames)",
            r.mean_batch(),
            r.put_messages,
            r.put_frames
        );
    }
    let _ = writeln!(
        out,
        "  drain after publishing: {:.3} s; processors wait: {}; pinning: {}",
        r.drain_s,
        r.scenario.wait,
        pin_name(r.scenario.pin.as_deref())
    );
    if let Some(f) = &r.faults {
        let _ = writeln!(
            out,
            "  faults: {} connections killed; {} server restarts; {} reconnects; {} resent ({} found stored before); {} deduplicated by the broker; {} redelivered; {} filtered by the consumers; lost {}; duplicated to the application {}",
            f.killed,
            f.server_restarts,
            f.reconnects,
            f.resent,
            f.stored_before,
            f.deduplicated,
            r.redelivered,
            f.filtered,
            r.lost,
            f.duplicated_to_app,
        );
        let (rec, session) = (&f.recovery_us, &f.reconnect_us);
        if rec.count > 0 {
            let _ = writeln!(
                out,
                "  producer recoveries: {} of them; lost connection -> first confirm after it p50 {} us, p99 {} us, max {} us; -> new session p50 {} us, p99 {} us, max {} us",
                rec.count, rec.p50, rec.p99, rec.max, session.p50, session.p99, session.max
            );
        }
    }
    if r.behind > 0 {
        let _ = writeln!(
            out,
            "  behind schedule: {} messages were due before the end and not sent (the publishers could not keep the rate)",
            r.behind
        );
    }
    let others = o.total() - o.acked;
    let _ = writeln!(
        out,
        "  check: published {} = acked {} + other outcomes {} (queue full {}, producer full {}, unknown queue {}, closed {}, timed out {}, not sent {}, other refusals {}); lost {}, duplicated {}, send errors {}, broker counted {} published",
        r.published,
        o.acked,
        others,
        o.rejected_queue_full,
        o.rejected_producer_full,
        o.rejected_unknown_queue,
        o.closed,
        o.timed_out,
        o.not_sent,
        o.other_refusals,
        r.lost,
        r.extra_outcomes,
        r.send_errors,
        r.broker_published
    );
    let _ = write!(
        out,
        "  {}",
        if r.ok() {
            "OK: no message lost"
        } else {
            "FAILED: messages lost, duplicated or not delivered"
        }
    );
    out
}

/// The per-queue table of the summary (with `--queues` 2 or more): each queue's
/// publishers and consumers, confirmed and consumed messages and rates, and confirm
/// latency percentiles, then the totals; and a blank line.
fn queue_table(r: &RunResult) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "  per queue    pubs  cons      confirmed        msg/s       consumed        msg/s     confirm (us): p50     p99   p99.9     max"
    );
    let row = |name: &str, pubs: u32, cons: u32, acked: u64, consumed: u64, p: &Percentiles| {
        let latency = if p.count == 0 {
            format!("{:>21} {:>7} {:>7} {:>7}", "-", "-", "-", "-")
        } else {
            format!("{:>21} {:>7} {:>7} {:>7}", p.p50, p.p99, p.p999, p.max)
        };
        format!(
            "  {name:<11} {pubs:>5} {cons:>5} {acked:>14} {:>12.1} {consumed:>14} {:>12.1} {latency}",
            per_second(acked, r.duration_s),
            per_second(consumed, r.duration_s),
        )
    };
    for q in &r.queues {
        let _ = writeln!(
            out,
            "{}",
            row(
                &format!("queue {}", q.queue),
                q.publishers,
                q.consumers,
                q.outcomes.acked,
                q.consumed,
                &q.confirm_latency
            )
        );
    }
    let _ = writeln!(
        out,
        "{}",
        row(
            "total",
            r.scenario.publishers,
            r.scenario.consumers,
            r.outcomes.acked,
            r.consumed,
            &r.confirm_latency
        )
    );
    let _ = writeln!(out);
    out
}

fn per_second(n: u64, seconds: f64) -> f64 {
    if seconds > 0.0 {
        n as f64 / seconds
    } else {
        0.0
    }
}

/// A latency distribution in the JSON summary, in microseconds: the percentiles are
/// `null`, not 0, when there are no samples.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct LatencyJson {
    /// Median.
    pub p50: Option<u64>,
    /// 90th percentile.
    pub p90: Option<u64>,
    /// 99th percentile.
    pub p99: Option<u64>,
    /// 99.9th percentile.
    pub p999: Option<u64>,
    /// Largest.
    pub max: Option<u64>,
    /// Mean.
    pub mean: Option<f64>,
    /// Samples.
    pub count: u64,
}

/// Serializes a distribution as a [`LatencyJson`].
pub(crate) fn latency_json<S: serde::Serializer>(
    p: &Percentiles,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    LatencyJson::from(p).serialize(serializer)
}

impl From<&Percentiles> for LatencyJson {
    fn from(p: &Percentiles) -> Self {
        let some = |v| (p.count > 0).then_some(v);
        Self {
            p50: some(p.p50),
            p90: some(p.p90),
            p99: some(p.p99),
            p999: some(p.p999),
            max: some(p.max),
            mean: (p.count > 0).then_some(p.mean),
            count: p.count,
        }
    }
}

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

/// The summary's CPU line: the process's and the broker threads' CPU seconds, and each as
/// a share of one core over the run.
#[must_use]
pub fn cpu_line(cpu: &CpuTime) -> String {
    let share = |s: f64| {
        if cpu.wall_s > 0.0 {
            100.0 * s / cpu.wall_s
        } else {
            0.0
        }
    };
    format!(
        "CPU: process {:.2} s ({:.1}% of a core), broker threads (zd-*) {:.2} s ({:.1}%), over {:.1} s",
        cpu.process_s,
        share(cpu.process_s),
        cpu.broker_threads_s,
        share(cpu.broker_threads_s),
        cpu.wall_s
    )
}

fn ratio(timer: u64, dynamic: u64) -> f64 {
    if dynamic == 0 {
        f64::NAN
    } else {
        timer as f64 / dynamic as f64
    }
}

/// The side-by-side table of `--compare`: dynamic flush against a timer, with the ratio of
/// their latencies (timer / dynamic).
#[must_use]
pub fn compare_table(dynamic: &RunResult, timer: &RunResult) -> String {
    let (d, t) = (&dynamic.confirm_latency, &timer.confirm_latency);
    let (dc, tc) = (&dynamic.consume_latency, &timer.consume_latency);
    let mut out = String::new();
    let _ = writeln!(out);
    let _ = writeln!(
        out,
        "Compare: {} at {} each, {} each run",
        plural(u64::from(dynamic.scenario.publishers), "publisher"),
        rate_name(dynamic.scenario.rate),
        format_duration(dynamic.scenario.duration)
    );
    let _ = writeln!(out);
    let head_d = dynamic.scenario.flush.to_string();
    let head_t = timer.scenario.flush.to_string();
    let _ = writeln!(
        out,
        "  {:<30} {head_d:>12} {head_t:>12} {:>14}",
        "", "timer/dynamic"
    );
    let rows: [(&str, u64, u64, bool); 11] = [
        ("confirm latency p50 (us)", d.p50, t.p50, true),
        ("confirm latency p99 (us)", d.p99, t.p99, true),
        ("confirm latency p99.9 (us)", d.p999, t.p999, false),
        ("confirm latency max (us)", d.max, t.max, false),
        ("consume latency p50 (us)", dc.p50, tc.p50, true),
        ("consume latency p99 (us)", dc.p99, tc.p99, true),
        ("consume latency p99.9 (us)", dc.p999, tc.p999, false),
        ("consume latency max (us)", dc.max, tc.max, false),
        ("published", dynamic.published, timer.published, false),
        (
            "confirmed",
            dynamic.outcomes.acked,
            timer.outcomes.acked,
            false,
        ),
        ("consumed", dynamic.consumed, timer.consumed, false),
    ];
    for (name, a, b, with_ratio) in rows {
        let r = if with_ratio {
            format!("{:.1}x", ratio(b, a))
        } else {
            String::new()
        };
        let row = format!("  {name:<30} {a:>12} {b:>12} {r:>14}");
        let _ = writeln!(out, "{}", row.trim_end());
    }
    let _ = writeln!(
        out,
        "  {:<30} {:>12.2} {:>12.2}",
        "mean messages per PUT frame",
        dynamic.mean_batch(),
        timer.mean_batch()
    );
    let _ = writeln!(
        out,
        "  {:<30} {:>12} {:>12}",
        "lost", dynamic.lost, timer.lost
    );
    let _ = write!(
        out,
        "  {}",
        if dynamic.ok() && timer.ok() {
            "OK: no message lost in either run"
        } else {
            "FAILED: messages lost, duplicated or not delivered"
        }
    );
    out
}

/// The ratios of `--compare`'s JSON: timer / dynamic (`null` when dynamic is 0).
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

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn result(flush: FlushStrategy, p50: u64) -> RunResult {
        RunResult {
            scenario: Scenario {
                publishers: 1,
                consumers: 1,
                queues: 1,
                rate: 50.0,
                size: 8,
                flush,
                batch_size: 256,
                max_unconfirmed: 10_000,
                callbacks: ConfirmMode::Inline,
                fanout: 0,
                session_processors: 1,
                queue_processors: 1,
                wait: WaitStrategy::default(),
                pin: Some(vec![0, 1]),
                duration: Duration::from_secs(3),
                transport: Transport::InProcess,
                io_threads: 1,
                reliable: false,
                kill_every: None,
                restart_every: None,
            },
            duration_s: 3.0,
            drain_s: 0.01,
            published: 150,
            broker_published: 150,
            outcomes: Outcomes {
                acked: 150,
                ..Outcomes::default()
            },
            consumed: 150,
            lost: 0,
            extra_outcomes: 0,
            behind: 0,
            send_errors: 0,
            confirm_latency: Percentiles {
                count: 150,
                p50,
                p90: p50 * 3 / 2,
                p99: 2 * p50,
                p999: 3 * p50,
                max: 4 * p50,
                mean: 1.5 * p50 as f64,
            },
            consume_latency: Percentiles::default(),
            put_frames: 150,
            put_messages: 150,
            redelivered: 0,
            drained: true,
            faults: None,
            queues: Vec::new(),
        }
    }

    #[test]
    fn the_json_summary_has_the_documented_shape() {
        let r = result(FlushStrategy::Timer(Duration::from_millis(100)), 40);
        let text = json(&r);
        let v: serde_json::Value = serde_json::from_str(&text).expect("valid JSON");
        for key in [
            "published",
            "confirmed",
            "consumed",
            "lost",
            "duration_s",
            "publish_rate",
            "mean_batch",
        ] {
            assert!(v[key].is_number(), "{key} in {text}");
        }
        assert_eq!(v["published"], 150);
        assert_eq!(v["lost"], 0);
        assert_eq!(v["ok"], true);
        assert_eq!(v["flush"], "timer:100ms");
        assert_eq!(v["transport"], "in-process");
        assert_eq!(v["publish_rate"], 50.0);
        assert_eq!(v["mean_batch"], 1.0);
        assert_eq!(v["wait"], "spin-then-park");
        assert_eq!(v["pin"], serde_json::json!([0, 1]));
        assert_eq!(v["confirm_latency_us"]["p50"], 40);
        assert_eq!(v["confirm_latency_us"]["p90"], 60);
        assert_eq!(v["confirm_latency_us"]["p99"], 80);
        assert_eq!(v["confirm_latency_us"]["p999"], 120);
        assert_eq!(v["confirm_latency_us"]["max"], 160);
        // No samples: nulls, not zeros.
        assert!(v["consume_latency_us"]["p50"].is_null());
        assert_eq!(v["consume_latency_us"]["count"], 0);
        assert!(!text.contains('\n'), "one line, for JSON Lines");

        let both = compare_json(&result(FlushStrategy::Dynamic, 20), &r);
        let v: serde_json::Value = serde_json::from_str(&both).expect("valid JSON");
        assert_eq!(v["dynamic"]["flush"], "dynamic");
        assert_eq!(v["ratio_timer_over_dynamic"]["confirm_p50"], 2.0);
    }

    #[test]
    fn the_progress_line_and_the_compare_table_show_confirm_and_consume_apart() {
        let (mut confirm, mut consume) = (crate::run::new_histogram(), crate::run::new_histogram());
        confirm.record(40).unwrap();
        consume.record(900).unwrap();
        let line = progress_line([50.0, 50.0, 50.0], &confirm, &consume);
        assert!(line.contains("confirm p50 40us"), "{line}");
        assert!(line.contains("consume p50 900us"), "{line}");
        let line = progress_line([0.0; 3], &crate::run::new_histogram(), &consume);
        assert!(line.contains("confirm -; consume p50 900us"), "{line}");

        let mut dynamic = result(FlushStrategy::Dynamic, 20);
        dynamic.consume_latency = Percentiles {
            count: 150,
            p50: 700,
            p90: 800,
            p99: 900,
            p999: 950,
            max: 1000,
            mean: 720.0,
        };
        let timer = result(FlushStrategy::Timer(Duration::from_millis(100)), 40);
        let table = compare_table(&dynamic, &timer);
        for row in [
            "confirm latency p50 (us)",
            "consume latency p50 (us)",
            "consume latency p99 (us)",
            "consume latency p99.9 (us)",
            "consume latency max (us)",
            "consumed",
        ] {
            assert!(table.contains(row), "{row} in {table}");
        }
        let p999 = table
            .lines()
            .find(|l| l.contains("consume latency p99.9"))
            .unwrap();
        assert!(p999.contains("950"), "{p999}");
        let text = summary(&dynamic);
        assert!(text.contains("publish -> confirm") && text.contains("publish -> consume"));
        assert!(text.contains("(acked: stored)"), "{text}");
    }

    #[test]
    fn one_queue_has_no_per_queue_figures_and_two_have_them() {
        let one = result(FlushStrategy::Dynamic, 20);
        let v: serde_json::Value = serde_json::from_str(&json(&one)).unwrap();
        assert!(
            v.get("queues").is_none() && v.get("per_queue").is_none(),
            "{v}"
        );
        assert!(!summary(&one).contains("per queue"));
        assert!(!describe(&one.scenario).contains("queue i %"));

        let mut two = one.clone();
        two.scenario.queues = 2;
        two.scenario.publishers = 2;
        two.scenario.consumers = 2;
        two.queues = (0..2)
            .map(|q| QueueResult {
                queue: q,
                publishers: 1,
                consumers: 1,
                published: 75,
                outcomes: Outcomes {
                    acked: 75,
                    ..Outcomes::default()
                },
                consumed: 75,
                confirm_latency: Percentiles {
                    count: 75,
                    p50: 10 + u64::from(q),
                    ..one.confirm_latency
                },
                consume_latency: Percentiles::default(),
            })
            .collect();
        let v: serde_json::Value = serde_json::from_str(&json(&two)).unwrap();
        assert_eq!(v["queues"], 2);
        let per = v["per_queue"].as_array().unwrap();
        assert_eq!(per.len(), 2);
        assert_eq!(per[1]["queue"], 1);
        assert_eq!(per[1]["confirmed"], 75);
        assert_eq!(per[1]["confirm_rate"], 25.0);
        assert_eq!(per[1]["confirm_latency_us"]["p50"], 11);
        assert!(per[0]["consume_latency_us"]["p50"].is_null());
        let text = summary(&two);
        let rows: Vec<&str> = (text.lines())
            .filter(|l| l.trim_start().starts_with("queue "))
            .collect();
        assert_eq!(rows.len(), 2, "{text}");
        assert!(
            rows[1].trim_start().starts_with("queue 1") && rows[1].contains("75"),
            "{text}"
        );
        assert!(
            text.lines().any(|l| l.trim_start().starts_with("total")),
            "{text}"
        );
        assert!(describe(&two.scenario).contains("2 priority queues, 2 consumers in all"));
    }

    #[test]
    fn non_finite_ratios_are_null() {
        let zero = result(FlushStrategy::Dynamic, 0);
        let text = compare_json(&zero, &zero);
        let v: serde_json::Value = serde_json::from_str(&text).expect("valid JSON");
        assert!(
            v["ratio_timer_over_dynamic"]["confirm_p50"].is_null(),
            "{text}"
        );
    }
}
