//! Printing: the per-second line, the human summary, the JSON summary, and the side-by-side
//! table of `--compare`.

use std::fmt::{self, Write as _};

use hdrhistogram::Histogram;

use crate::cli::format_duration;
use crate::run::{Percentiles, RunResult, Scenario};

/// The per-second line, in the stream clients' style: the last second's rates (published,
/// confirmed, consumed) and the last second's publish -> confirm latency.
#[must_use]
pub fn progress_line(rates: [f64; 3], confirm: &Histogram<u64>) -> String {
    let mut line = format!(
        "Published {:>10.1} msg/s | Confirmed {:>10.1} msg/s | Consumed {:>10.1} msg/s | latency ",
        rates[0], rates[1], rates[2]
    );
    if confirm.is_empty() {
        line.push_str("- (confirm, last second)");
    } else {
        let _ = write!(
            line,
            "p50 {}us p99 {}us p99.9 {}us max {}us (confirm, last second)",
            confirm.value_at_quantile(0.5),
            confirm.value_at_quantile(0.99),
            confirm.value_at_quantile(0.999),
            confirm.max()
        );
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
    let queue = if s.fanout >= 2 {
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
        "{} at {} each, {queue}, flush {}, batch {}, {} B payloads, {} confirms, {}",
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
        "  confirmed {:>12}           {:>12.1} msg/s (acked)",
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
    let _ = writeln!(
        out,
        "  mean messages per PUT frame: {:.2} ({} messages in {} frames)",
        r.mean_batch(),
        r.put_messages,
        r.put_frames
    );
    let _ = writeln!(
        out,
        "  drain after publishing: {:.3} s; processors wait: {}; pinning: {}",
        r.drain_s,
        r.scenario.wait,
        pin_name(r.scenario.pin.as_deref())
    );
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
        "  check: published {} = acked {} + other outcomes {} (queue full {}, producer full {}, unknown queue {}, closed {}, timed out {}, not sent {}); lost {}, duplicated {}, send errors {}, broker counted {} published",
        r.published,
        o.acked,
        others,
        o.rejected_queue_full,
        o.rejected_producer_full,
        o.rejected_unknown_queue,
        o.closed,
        o.timed_out,
        o.not_sent,
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

/// A JSON value, written by hand (no serializer needed for one flat summary).
#[derive(Clone, Debug, PartialEq)]
pub enum Json {
    /// `null`.
    Null,
    /// `true` or `false`.
    Bool(bool),
    /// An integer.
    Int(u64),
    /// A number (`null` when not finite).
    Num(f64),
    /// A string.
    Str(String),
    /// An array.
    Arr(Vec<Json>),
    /// An object, keys in order.
    Obj(Vec<(&'static str, Json)>),
}

impl fmt::Display for Json {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Json::Null => f.write_str("null"),
            Json::Bool(b) => write!(f, "{b}"),
            Json::Int(n) => write!(f, "{n}"),
            Json::Num(x) if x.is_finite() => {
                // Shortest round-trip form; keep integers-valued floats recognisable.
                if x.fract() == 0.0 && x.abs() < 1e15 {
                    write!(f, "{x:.1}")
                } else {
                    write!(f, "{x}")
                }
            }
            Json::Num(_) => f.write_str("null"),
            Json::Str(s) => write_json_string(f, s),
            Json::Arr(items) => {
                f.write_str("[")?;
                for (i, v) in items.iter().enumerate() {
                    if i > 0 {
                        f.write_str(",")?;
                    }
                    write!(f, "{v}")?;
                }
                f.write_str("]")
            }
            Json::Obj(fields) => {
                f.write_str("{")?;
                for (i, (k, v)) in fields.iter().enumerate() {
                    if i > 0 {
                        f.write_str(",")?;
                    }
                    write_json_string(f, k)?;
                    write!(f, ":{v}")?;
                }
                f.write_str("}")
            }
        }
    }
}

fn write_json_string(f: &mut fmt::Formatter<'_>, s: &str) -> fmt::Result {
    f.write_str("\"")?;
    for c in s.chars() {
        match c {
            '"' => f.write_str("\\\"")?,
            '\\' => f.write_str("\\\\")?,
            '\n' => f.write_str("\\n")?,
            '\r' => f.write_str("\\r")?,
            '\t' => f.write_str("\\t")?,
            c if (c as u32) < 0x20 => write!(f, "\\u{:04x}", c as u32)?,
            c => f.write_char(c)?,
        }
    }
    f.write_str("\"")
}

fn latency_json(p: &Percentiles) -> Json {
    if p.count == 0 {
        return Json::Obj(vec![
            ("p50", Json::Null),
            ("p99", Json::Null),
            ("p999", Json::Null),
            ("max", Json::Null),
            ("mean", Json::Null),
            ("count", Json::Int(0)),
        ]);
    }
    Json::Obj(vec![
        ("p50", Json::Int(p.p50)),
        ("p99", Json::Int(p.p99)),
        ("p999", Json::Int(p.p999)),
        ("max", Json::Int(p.max)),
        ("mean", Json::Num(p.mean)),
        ("count", Json::Int(p.count)),
    ])
}

/// The JSON summary of a run: one object.
#[must_use]
pub fn json(r: &RunResult) -> Json {
    let s = &r.scenario;
    let o = &r.outcomes;
    Json::Obj(vec![
        ("published", Json::Int(r.published)),
        ("confirmed", Json::Int(o.acked)),
        ("consumed", Json::Int(r.consumed)),
        ("lost", Json::Int(r.lost)),
        ("ok", Json::Bool(r.ok())),
        ("duration_s", Json::Num(r.duration_s)),
        ("drain_s", Json::Num(r.drain_s)),
        ("publish_rate", Json::Num(r.publish_rate())),
        ("confirm_rate", Json::Num(r.confirm_rate())),
        ("consume_rate", Json::Num(r.consume_rate())),
        ("confirm_latency_us", latency_json(&r.confirm_latency)),
        ("consume_latency_us", latency_json(&r.consume_latency)),
        ("mean_batch", Json::Num(r.mean_batch())),
        ("put_frames", Json::Int(r.put_frames)),
        ("put_messages", Json::Int(r.put_messages)),
        ("flush", Json::Str(s.flush.to_string())),
        ("rate", Json::Num(s.rate)),
        ("publishers", Json::Int(u64::from(s.publishers))),
        ("consumers", Json::Int(u64::from(s.consumers))),
        ("fanout", Json::Int(u64::from(s.fanout))),
        ("size", Json::Int(u64::from(s.size))),
        ("batch_size", Json::Int(u64::from(s.batch_size))),
        ("max_unconfirmed", Json::Int(u64::from(s.max_unconfirmed))),
        ("callbacks", Json::Str(s.callbacks.to_string())),
        ("wait", Json::Str(s.wait.to_string())),
        (
            "pin",
            s.pin.as_ref().map_or(Json::Null, |ids| {
                Json::Arr(ids.iter().map(|&id| Json::Int(id as u64)).collect())
            }),
        ),
        (
            "session_processors",
            Json::Int(u64::from(s.session_processors)),
        ),
        ("queue_processors", Json::Int(u64::from(s.queue_processors))),
        (
            "outcomes",
            Json::Obj(vec![
                ("acked", Json::Int(o.acked)),
                ("rejected_queue_full", Json::Int(o.rejected_queue_full)),
                (
                    "rejected_producer_full",
                    Json::Int(o.rejected_producer_full),
                ),
                (
                    "rejected_unknown_queue",
                    Json::Int(o.rejected_unknown_queue),
                ),
                ("closed", Json::Int(o.closed)),
                ("timed_out", Json::Int(o.timed_out)),
                ("not_sent", Json::Int(o.not_sent)),
            ]),
        ),
        ("duplicated", Json::Int(r.extra_outcomes)),
        ("behind", Json::Int(r.behind)),
        ("send_errors", Json::Int(r.send_errors)),
        ("broker_published", Json::Int(r.broker_published)),
        ("redelivered", Json::Int(r.redelivered)),
        ("drained", Json::Bool(r.drained)),
    ])
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
    let rows: [(&str, u64, u64, bool); 8] = [
        ("confirm latency p50 (us)", d.p50, t.p50, true),
        ("confirm latency p99 (us)", d.p99, t.p99, true),
        ("confirm latency p99.9 (us)", d.p999, t.p999, false),
        ("confirm latency max (us)", d.max, t.max, false),
        ("consume latency p50 (us)", dc.p50, tc.p50, true),
        ("consume latency p99 (us)", dc.p99, tc.p99, true),
        ("published", dynamic.published, timer.published, false),
        (
            "confirmed",
            dynamic.outcomes.acked,
            timer.outcomes.acked,
            false,
        ),
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

/// The JSON of `--compare`: both runs' summaries and the latency ratios (timer / dynamic).
#[must_use]
pub fn compare_json(dynamic: &RunResult, timer: &RunResult) -> Json {
    let (d, t) = (&dynamic.confirm_latency, &timer.confirm_latency);
    let (dc, tc) = (&dynamic.consume_latency, &timer.consume_latency);
    Json::Obj(vec![
        ("dynamic", json(dynamic)),
        ("timer", json(timer)),
        (
            "ratio_timer_over_dynamic",
            Json::Obj(vec![
                ("confirm_p50", Json::Num(ratio(t.p50, d.p50))),
                ("confirm_p99", Json::Num(ratio(t.p99, d.p99))),
                ("consume_p50", Json::Num(ratio(tc.p50, dc.p50))),
                ("consume_p99", Json::Num(ratio(tc.p99, dc.p99))),
            ]),
        ),
    ])
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use zerodispatch_broker::{ConfirmMode, FlushStrategy, WaitStrategy};

    use crate::run::Outcomes;

    fn result(flush: FlushStrategy, p50: u64) -> RunResult {
        RunResult {
            scenario: Scenario {
                publishers: 1,
                consumers: 1,
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
        }
    }

    #[test]
    fn the_json_summary_has_the_documented_shape() {
        let r = result(FlushStrategy::Timer(Duration::from_millis(100)), 40);
        let text = json(&r).to_string();
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
        assert_eq!(v["publish_rate"], 50.0);
        assert_eq!(v["mean_batch"], 1.0);
        assert_eq!(v["wait"], "spin-then-park");
        assert_eq!(v["pin"], serde_json::json!([0, 1]));
        assert_eq!(v["confirm_latency_us"]["p50"], 40);
        assert_eq!(v["confirm_latency_us"]["p99"], 80);
        assert_eq!(v["confirm_latency_us"]["p999"], 120);
        assert_eq!(v["confirm_latency_us"]["max"], 160);
        // No samples: nulls, not zeros.
        assert!(v["consume_latency_us"]["p50"].is_null());
        assert_eq!(v["consume_latency_us"]["count"], 0);
        assert!(!text.contains('\n'), "one line, for JSON Lines");

        let both = compare_json(&result(FlushStrategy::Dynamic, 20), &r).to_string();
        let v: serde_json::Value = serde_json::from_str(&both).expect("valid JSON");
        assert_eq!(v["dynamic"]["flush"], "dynamic");
        assert_eq!(v["ratio_timer_over_dynamic"]["confirm_p50"], 2.0);
    }

    #[test]
    fn json_strings_are_escaped() {
        let v = Json::Obj(vec![
            ("a", Json::Str("q\"b\\\n\u{1}".into())),
            ("n", Json::Num(f64::NAN)),
        ]);
        let text = v.to_string();
        let parsed: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(parsed["a"], "q\"b\\\n\u{1}");
        assert!(parsed["n"].is_null());
    }
}
