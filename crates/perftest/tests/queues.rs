//! `perftest --queues`: over two queues both confirm and the per-queue figures add up to
//! the totals; without `--queues` the JSON has no per-queue figures.

use std::process::Command;

use serde_json::Value;

/// Runs the perftest for 300 ms at saturation with `args` and returns its JSON summary.
fn perftest(args: &[&str]) -> Value {
    let out = Command::new(env!("CARGO_BIN_EXE_perftest"))
        .args(["--rate", "0", "--duration", "300ms", "--json", "--quiet"])
        .args(args)
        .output()
        .expect("the perftest runs");
    assert!(
        out.status.success(),
        "perftest {args:?}: {}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("one JSON object")
}

/// The count `v[key]`.
fn count(v: &Value, key: &str) -> u64 {
    v[key]
        .as_u64()
        .unwrap_or_else(|| panic!("{key} is a count in {v}"))
}

/// A run over two queues on `transport`, checked queue by queue and against the totals.
fn two_queues(transport: &str) {
    // Publishers 0, 2 on queue 0 and 1 on queue 1; consumers 0 and 1 one each.
    let d = perftest(&["--transport", transport, "--queues=2", "--publishers=3"]);
    assert_eq!(d["ok"], true, "{d}");
    assert_eq!(d["queues"], 2, "{d}");
    let per = d["per_queue"].as_array().expect("per_queue entries");
    assert_eq!(per.len(), 2, "{d}");
    for (i, q) in per.iter().enumerate() {
        assert_eq!(q["queue"], i, "{d}");
        let confirmed = count(q, "confirmed");
        assert!(confirmed > 0, "queue {i} confirmed nothing: {d}");
        assert!(count(q, "consumed") > 0, "queue {i} consumed nothing: {d}");
        assert_eq!(q["confirm_latency_us"]["count"], q["confirmed"], "{d}");
        assert!(q["confirm_latency_us"]["p50"].as_u64().unwrap() > 0, "{d}");
        assert!(q["confirm_rate"].as_f64().unwrap() > 0.0, "{d}");
    }
    assert_eq!([&per[0]["publishers"], &per[1]["publishers"]], [2, 1]);
    assert_eq!([&per[0]["consumers"], &per[1]["consumers"]], [1, 1]);
    for key in ["published", "confirmed", "consumed"] {
        let sum: u64 = per.iter().map(|q| count(q, key)).sum();
        let total = count(&d, key);
        assert_eq!(sum, total, "{key}: queues add up to the total in {d}");
    }
    let samples: u64 = per
        .iter()
        .map(|q| count(&q["confirm_latency_us"], "count"))
        .sum();
    assert_eq!(samples, count(&d["confirm_latency_us"], "count"), "{d}");
    let rates: f64 = per
        .iter()
        .map(|q| q["confirm_rate"].as_f64().unwrap())
        .sum();
    let total = d["confirm_rate"].as_f64().unwrap();
    assert!((rates - total).abs() <= 1e-6 * total, "{rates} != {total}");
}

#[test]
fn two_queues_in_process_both_confirm_and_add_up_to_the_total() {
    two_queues("in-process");
}

#[test]
fn two_queues_over_tcp_both_confirm_and_add_up_to_the_total() {
    two_queues("tcp");
}

#[test]
fn one_queue_writes_the_json_it_always_did() {
    let d = perftest(&[]);
    assert_eq!(d["ok"], true, "{d}");
    let per_queue = d.get("queues").or(d.get("per_queue"));
    assert!(per_queue.is_none(), "{d}");
    assert_eq!(d["publishers"], 1);
    assert_eq!(d["consumers"], 1);
}

#[test]
fn a_queue_without_a_consumer_is_refused() {
    let out = Command::new(env!("CARGO_BIN_EXE_perftest"))
        .args(["--queues", "2", "--consumers", "1", "--duration", "100ms"])
        .output()
        .expect("the perftest runs");
    assert_eq!(out.status.code(), Some(2), "clap's usage error");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--queues 2 needs --consumers 2"), "{err}");
}

/// A saturation run's `broker_threads_s` is above zero and at most the process's (it read
/// 0.0 when read after the broker had stopped its threads).
#[test]
fn the_cpu_of_the_broker_threads_is_counted_before_they_stop() {
    for transport in ["in-process", "tcp"] {
        let d = perftest(&["--transport", transport]);
        let cpu = &d["cpu"];
        let broker = cpu["broker_threads_s"].as_f64().expect("broker_threads_s");
        let process = cpu["process_s"].as_f64().expect("process_s");
        assert!(broker > 0.0, "{transport}: {cpu}");
        assert!(broker <= process, "{transport}: {cpu}");
    }
}
