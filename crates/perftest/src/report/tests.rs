//! The report's tests: the JSON's shape, the lines and tables, the per-queue figures.

use std::time::Duration;

use zerodispatch_broker::{ConfirmMode, FlushStrategy, WaitStrategy};
use zerodispatch_core::Percentiles;

use super::*;
use crate::counters::Outcomes;
use crate::latency::new_histogram;
use crate::result::{QueueResult, RunResult};
use crate::scenario::{Scenario, Transport};

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
            driven: false,
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
    let (mut confirm, mut consume) = (new_histogram(), new_histogram());
    confirm.record(40).unwrap();
    consume.record(900).unwrap();
    let line = progress_line([50.0, 50.0, 50.0], &confirm, &consume);
    assert!(line.contains("confirm p50 40us"), "{line}");
    assert!(line.contains("consume p50 900us"), "{line}");
    let line = progress_line([0.0; 3], &new_histogram(), &consume);
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
