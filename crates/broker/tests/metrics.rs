//! The broker's `metrics` export (feature `metrics`): the sessions' totals, each queue's
//! counters and the dispatcher's processors reach the installed recorder.

use std::collections::HashMap;

use metrics_util::debugging::{DebugValue, DebuggingRecorder};
use metrics_util::{CompositeKey, MetricKind};
use zerodispatch_broker::Broker;
use zerodispatch_broker::metrics::{QUEUE_COUNTERS, QUEUE_HELD, SESSION_COUNTERS, export};

/// Each exported value by kind, name and labels.
type Values = HashMap<(MetricKind, String, Vec<(String, String)>), DebugValue>;

/// What `export` gave the recorder: each value, and each metric's description.
fn exported(broker: &Broker) -> (Values, HashMap<String, String>) {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    metrics::with_local_recorder(&recorder, || export(broker));
    let mut values = Values::new();
    let mut described = HashMap::new();
    for (key, _unit, description, value) in snapshotter.snapshot().into_vec() {
        let (kind, key) = CompositeKey::into_parts(key);
        if let Some(description) = description {
            described.insert(key.name().to_owned(), description.to_string());
        }
        let labels = key
            .labels()
            .map(|l| (l.key().to_owned(), l.value().to_owned()))
            .collect();
        values.insert((kind, key.name().to_owned(), labels), value);
    }
    (values, described)
}

mod support;

use support::{deaf_producer, drain, fanout, priority, publish, start_on};

#[test]
fn sessions_queues_and_processors_reach_the_recorder() {
    let broker = start_on(vec![priority(), fanout(2)], 1);
    let _consumer = drain(&broker, 0);
    let producer = deaf_producer(&broker, 1024);
    publish(&producer, 0, 0..100);
    broker.quiesce().unwrap();

    let (values, described) = exported(&broker);
    let queue_label = |id: Option<&str>| match id {
        Some(id) => vec![("queue".to_owned(), id.to_owned())],
        None => Vec::new(),
    };
    let counter = |name: &str, queue: Option<&str>| {
        let key = (MetricKind::Counter, name.to_owned(), queue_label(queue));
        match values.get(&key) {
            Some(DebugValue::Counter(v)) => *v,
            other => panic!("{name} {queue:?}: {other:?}"),
        }
    };
    let sessions = broker.session_stats();
    assert_eq!(sessions.published, 100);
    for (name, help, read) in SESSION_COUNTERS {
        assert_eq!(counter(name, None), read(&sessions), "{name}");
        assert_eq!(described[name], help);
    }
    let queues = broker.queue_stats();
    assert_eq!(queues[0].stored, 100);
    for (id, queue) in queues.iter().enumerate() {
        let id = id.to_string();
        for (name, help, read) in QUEUE_COUNTERS {
            assert_eq!(counter(name, Some(&id)), read(queue), "{name} {id}");
            assert_eq!(described[name], help);
        }
        let label = queue_label(Some(&id));
        let held = &values[&(MetricKind::Gauge, QUEUE_HELD.to_owned(), label)];
        assert_eq!(*held, DebugValue::Gauge((queue.held as f64).into()));
    }
    // The processors' processed events add up to what the dispatcher reports.
    let processed: u64 = values
        .iter()
        .filter(|((kind, _, _), _)| *kind == MetricKind::Counter)
        .filter(|((_, name, _), _)| name == "zerodispatch_processed_total")
        .map(|(_, v)| match v {
            DebugValue::Counter(v) => *v,
            other => panic!("{other:?}"),
        })
        .sum();
    let stats = broker.processor_stats();
    assert!(processed >= 200, "{processed}");
    assert!(processed <= stats.iter().map(|s| s.processed).sum::<u64>());
    drop(producer);
    broker.shutdown();
}
