//! The report in words: the per-second line, the human summary, the CPU line, and the
//! side-by-side table of `--compare`.

use std::fmt::Write as _;

use hdrhistogram::Histogram;
use zerodispatch_core::Percentiles;

use crate::cli::format_duration;
use crate::cpu::CpuTime;
use crate::result::{RunResult, per_second};
use crate::scenario::Scenario;

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

/// `timer / dynamic`; NaN (written `null` in JSON) when `dynamic` is 0.
pub(super) fn ratio(timer: u64, dynamic: u64) -> f64 {
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
