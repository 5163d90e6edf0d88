//! The `metrics` export: every figure reaches the recorder under the documented names.

mod common;

use std::collections::HashMap;
use std::time::{Duration, Instant};

use common::{Sink, dispatch_all, first_queue, on_queue_processor, sessions_and_queues};
use metrics::{Label, Unit};
use metrics_util::debugging::{DebugValue, DebuggingRecorder};
use metrics_util::{CompositeKey, MetricKind};
use zerodispatch_core::metrics::{Kind, METRICS, export};
use zerodispatch_core::{Callback, Dispatcher, PoolConfig, ProcessorSnapshot};

/// A metric as the recorder keys it: kind, name, and labels sorted.
type Key = (MetricKind, String, Vec<(String, String)>);

/// `labels` owned and sorted, as a [`Key`] holds them.
fn sorted<'a>(labels: impl Iterator<Item = (&'a str, &'a str)>) -> Vec<(String, String)> {
    let mut labels: Vec<_> = labels.map(|(k, v)| (k.to_owned(), v.to_owned())).collect();
    labels.sort();
    labels
}

/// What a recorder holds after `export`: each metric by name and sorted labels, and units.
struct Exported {
    values: HashMap<Key, DebugValue>,
    described: HashMap<String, (Option<Unit>, String)>,
}

impl Exported {
    fn of(snapshots: &[ProcessorSnapshot], times: usize) -> Self {
        let recorder = DebuggingRecorder::new();
        let snapshotter = recorder.snapshotter();
        metrics::with_local_recorder(&recorder, || {
            for _ in 0..times {
                export(snapshots);
            }
        });
        let mut values = HashMap::new();
        let mut described = HashMap::new();
        for (key, unit, description, value) in snapshotter.snapshot().into_vec() {
            let (kind, key) = CompositeKey::into_parts(key);
            let labels = sorted(key.labels().map(|l: &Label| (l.key(), l.value())));
            if let Some(description) = description {
                described.insert(key.name().to_owned(), (unit, description.to_string()));
            }
            values.insert((kind, key.name().to_owned(), labels), value);
        }
        Self { values, described }
    }

    fn get(&self, kind: MetricKind, name: &str, labels: &[(&str, &str)]) -> &DebugValue {
        let labels = sorted(labels.iter().copied());
        let value = self.values.get(&(kind, name.to_owned(), labels.clone()));
        value.unwrap_or_else(|| panic!("{name} {labels:?} not exported"))
    }

    fn counter(&self, name: &str, labels: &[(&str, &str)]) -> u64 {
        match self.get(MetricKind::Counter, name, labels) {
            DebugValue::Counter(v) => *v,
            other => panic!("{name} is {other:?}"),
        }
    }

    fn gauge(&self, name: &str, labels: &[(&str, &str)]) -> f64 {
        match self.get(MetricKind::Gauge, name, labels) {
            DebugValue::Gauge(v) => v.into_inner(),
            other => panic!("{name} is {other:?}"),
        }
    }
}

/// Two queue processors and a session one, 1000 events to the first, published and probed.
fn loaded() -> (Dispatcher<u64>, Vec<ProcessorSnapshot>) {
    let d = sessions_and_queues(PoolConfig::new(1), PoolConfig::new(2));
    let queue = first_queue(&d);
    let client = on_queue_processor(&d, queue.index, Sink);
    dispatch_all(&d, client, 0..1000);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        // Awake for a while, as under a load: the monitor probes a processor it finds awake
        // at a tick (resting, it ticks at most 1 s apart; `monitor.rs`).
        let busy = Callback::new(|| std::thread::sleep(Duration::from_millis(20)));
        d.execute(queue, busy).unwrap();
        d.synchronize(queue).unwrap();
        let stats = d.stats();
        let first = stats.iter().find(|s| s.processor == queue).unwrap();
        let published = first.batch_size.count > 0 && first.time_in_queue_ns.count > 0;
        if published || Instant::now() > deadline {
            return (d, stats);
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn every_processor_figure_reaches_the_recorder() {
    let (mut d, stats) = loaded();
    let exported = Exported::of(&stats, 1);
    assert_eq!(stats.len(), 3);
    for s in &stats {
        let index = s.processor.index.to_string();
        let labels = [
            ("client_type", s.processor.client_type.name()),
            ("processor", index.as_str()),
        ];
        let counter = |name| exported.counter(name, &labels);
        let gauge = |name| exported.gauge(name, &labels);
        assert_eq!(counter("zerodispatch_processed_total"), s.processed);
        assert_eq!(counter("zerodispatch_enqueued_total"), s.enqueued);
        assert_eq!(counter("zerodispatch_flushes_total"), s.flushes);
        assert_eq!(counter("zerodispatch_panics_total"), s.panics);
        assert_eq!(counter("zerodispatch_spilled_callbacks_total"), s.spilled);
        assert_eq!(counter("zerodispatch_stale_events_total"), s.stale);
        assert_eq!(counter("zerodispatch_parks_total"), s.parks);
        assert_eq!(counter("zerodispatch_outboxed_total"), s.outboxed);
        assert_eq!(counter("zerodispatch_batches_total"), s.batch_size.count);
        assert_eq!(gauge("zerodispatch_queue_depth"), s.depth as f64);
        assert_eq!(gauge("zerodispatch_queue_max_depth"), s.max_depth as f64);
        assert_eq!(gauge("zerodispatch_clients"), s.clients as f64);
        for (quantile, ns) in [
            ("0.5", s.time_in_queue_ns.p50),
            ("0.9", s.time_in_queue_ns.p90),
            ("0.99", s.time_in_queue_ns.p99),
            ("0.999", s.time_in_queue_ns.p999),
            ("1", s.time_in_queue_ns.max),
        ] {
            let labels = [labels[0], labels[1], ("quantile", quantile)];
            let seconds = exported.gauge("zerodispatch_time_in_queue_seconds", &labels);
            assert_eq!(seconds, ns as f64 / 1e9, "{quantile}");
        }
        let labels = [labels[0], labels[1], ("quantile", "1")];
        let batch_size = exported.gauge("zerodispatch_batch_size", &labels);
        assert_eq!(batch_size, s.batch_size.max as f64);
    }
    // The loaded processor's figures are real ones, not zeros.
    let queue0 = [("client_type", "queue"), ("processor", "0")];
    assert!(exported.counter("zerodispatch_processed_total", &queue0) >= 1000);
    assert!(exported.counter("zerodispatch_batches_total", &queue0) > 0);
    assert!(exported.counter("zerodispatch_time_in_queue_probes_total", &queue0) > 0);
    let longest = [queue0[0], queue0[1], ("quantile", "1")];
    assert!(exported.gauge("zerodispatch_time_in_queue_seconds", &longest) > 0.0);
    d.shutdown();
}

#[test]
fn every_metric_is_described_and_exporting_twice_counts_nothing_twice() {
    let (mut d, stats) = loaded();
    let once = Exported::of(&stats, 1);
    let twice = Exported::of(&stats, 2);
    assert_eq!(once.values, twice.values);
    for metric in &METRICS {
        let name = metric.name;
        let described = once.described.get(name);
        let (unit, help) = described.unwrap_or_else(|| panic!("{name} not described"));
        assert_eq!(*unit, metric.unit, "{name}");
        assert_eq!(help, metric.help);
        let total = name.ends_with("_total");
        let only = "counters and only counters end in _total";
        assert_eq!(total, metric.kind == Kind::Counter, "{name}: {only}");
    }
    let seconds = once.described["zerodispatch_time_in_queue_seconds"].0;
    assert_eq!(seconds, Some(Unit::Seconds));
    // 3 processors: 13 counters and 3 gauges each, 2 histograms of 5 quantiles.
    assert_eq!(once.values.len(), 3 * (13 + 3 + 2 * 5));
    d.shutdown();
}
