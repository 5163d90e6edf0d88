//! Export of the processors' statistics through the [`metrics`] crate's facade
//! (cargo feature `metrics`), so that whichever recorder the application installs
//! (Prometheus, StatsD, OpenTelemetry, ...) sees every processor's queue.
//!
//! # Contract
//!
//! * [`export`] publishes what a set of [`ProcessorSnapshot`]s holds: the application calls
//!   it periodically (every scrape, or every few seconds) with
//!   [`DispatcherHandle::stats`](crate::DispatcherHandle::stats). Nothing is recorded on the event path;
//!   a process that never calls `export` pays nothing, and one without a recorder installed
//!   pays only the snapshot.
//! * Every metric carries the labels `client_type` (`session`, `queue`, `cluster`) and
//!   `processor` (the index in its pool); the quantile gauges add `quantile` (`0.5`, `0.9`,
//!   `0.99`, `0.999`, and `1` for the largest value), in the style of a Prometheus summary.
//! * Counters are set to the snapshot's totals with
//!   [`Counter::absolute`](::metrics::Counter::absolute): a recorder never sees them go
//!   back, and two exports of the same snapshot count nothing twice.
//! * Histograms are exported as their quantiles over the processor's whole life (the core
//!   never resets them), and lag by up to one `monitor_interval` (see
//!   [`ProcessorSnapshot`]).
//!
//! The names, kinds and units are in [`METRICS`].
//!
//! ```
//! use zerodispatch_core::{metrics, ClientType, Dispatcher, PoolConfig};
//!
//! let dispatcher = Dispatcher::<u64>::builder()
//!     .pool(ClientType::Queue, PoolConfig::new(2))
//!     .build()?;
//! // With a recorder installed (`metrics::set_global_recorder`), every call publishes the
//! // current figures; call it on a timer, or from the scrape handler.
//! metrics::export(&dispatcher.stats());
//! # Ok::<(), zerodispatch_core::ConfigError>(())
//! ```

use ::metrics::{Label, Unit, counter, describe_counter, describe_gauge, gauge};

use crate::{Percentiles, ProcessorSnapshot};

/// The kind of a metric in [`METRICS`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A value that goes up and down.
    Gauge,
    /// A total that only grows.
    Counter,
    /// One gauge per quantile (label `quantile`) of a histogram.
    Quantiles,
}

/// One metric that [`export`] publishes.
#[derive(Clone, Copy, Debug)]
pub struct Metric {
    /// Its name (Prometheus style: counters end in `_total`, units are spelt out).
    pub name: &'static str,
    /// Gauge, counter, or a histogram's quantiles.
    pub kind: Kind,
    /// Its unit, if it has one.
    pub unit: Option<Unit>,
    /// What it counts, for the recorder's help text.
    pub help: &'static str,
    value: Value,
}

/// Where a metric's value comes from in a snapshot.
#[derive(Clone, Copy, Debug)]
enum Value {
    /// A count or a depth.
    Number(fn(&ProcessorSnapshot) -> u64),
    /// A histogram's summary, and what to divide it by to convert its unit (ns to s).
    Quantiles(fn(&ProcessorSnapshot) -> Percentiles, f64),
}

const fn metric(name: &'static str, kind: Kind, help: &'static str, value: Value) -> Metric {
    Metric {
        name,
        kind,
        unit: None,
        help,
        value,
    }
}

/// Every metric [`export`] publishes, per processor.
pub const METRICS: [Metric; 18] = [
    metric(
        "zerodispatch_queue_depth",
        Kind::Gauge,
        "Items in the processor's queue now: events, control items and packs of a blocking batch's events.",
        Value::Number(|s| s.depth as u64),
    ),
    metric(
        "zerodispatch_queue_max_depth",
        Kind::Gauge,
        "The deepest the processor's queue has been.",
        Value::Number(|s| s.max_depth),
    ),
    metric(
        "zerodispatch_clients",
        Kind::Gauge,
        "Clients registered on the processor.",
        Value::Number(|s| s.clients as u64),
    ),
    metric(
        "zerodispatch_enqueued_total",
        Kind::Counter,
        "Events and control items accepted into the processor's queue, at least (not the monitor's probes).",
        Value::Number(|s| s.enqueued),
    ),
    metric(
        "zerodispatch_processed_total",
        Kind::Counter,
        "Events and control items the processor has handled (not the monitor's probes).",
        Value::Number(|s| s.processed),
    ),
    metric(
        "zerodispatch_flushes_total",
        Kind::Counter,
        "Client flushes the processor has made.",
        Value::Number(|s| s.flushes),
    ),
    metric(
        "zerodispatch_panics_total",
        Kind::Counter,
        "Panics caught in client handlers, flushes and dispatcher callbacks.",
        Value::Number(|s| s.panics),
    ),
    metric(
        "zerodispatch_spilled_callbacks_total",
        Kind::Counter,
        "Callbacks run that had been spilled to the heap.",
        Value::Number(|s| s.spilled),
    ),
    metric(
        "zerodispatch_stale_events_total",
        Kind::Counter,
        "Events dropped because their client had been unregistered.",
        Value::Number(|s| s.stale),
    ),
    metric(
        "zerodispatch_high_watermark_alarms_total",
        Kind::Counter,
        "Times the processor's high-watermark alarm was raised.",
        Value::Number(|s| s.high_watermark_alarms),
    ),
    metric(
        "zerodispatch_stuck_reports_total",
        Kind::Counter,
        "Times the monitor reported the processor stuck in one event.",
        Value::Number(|s| s.stuck_reports),
    ),
    metric(
        "zerodispatch_parks_total",
        Kind::Counter,
        "Times the processor parked its thread.",
        Value::Number(|s| s.parks),
    ),
    metric(
        "zerodispatch_outboxed_total",
        Kind::Counter,
        "Events the processor's clients dispatched that waited in its outbox.",
        Value::Number(|s| s.outboxed),
    ),
    metric(
        "zerodispatch_packs_total",
        Kind::Counter,
        "Packs the processor handled: runs of one blocking batch that came in one queue slot.",
        Value::Number(|s| s.packs),
    ),
    Metric {
        unit: Some(Unit::Seconds),
        ..metric(
            "zerodispatch_time_in_queue_seconds",
            Kind::Quantiles,
            "Time the monitor's probes spent in the processor's queue.",
            Value::Quantiles(|s| s.time_in_queue_ns, 1e9),
        )
    },
    metric(
        "zerodispatch_time_in_queue_probes_total",
        Kind::Counter,
        "Probes behind zerodispatch_time_in_queue_seconds.",
        Value::Number(|s| s.time_in_queue_ns.count),
    ),
    metric(
        "zerodispatch_batch_size",
        Kind::Quantiles,
        "Events the processor handled between two flush points.",
        Value::Quantiles(|s| s.batch_size, 1.0),
    ),
    metric(
        "zerodispatch_batches_total",
        Kind::Counter,
        "Batches behind zerodispatch_batch_size.",
        Value::Number(|s| s.batch_size.count),
    ),
];

/// A quantile as the `quantile` label writes it, and where a summary holds it.
type Quantile = (&'static str, fn(&Percentiles) -> u64);

/// The quantiles exported of each histogram.
const QUANTILES: [Quantile; 5] = [
    ("0.5", |p| p.p50),
    ("0.9", |p| p.p90),
    ("0.99", |p| p.p99),
    ("0.999", |p| p.p999),
    ("1", |p| p.max),
];

/// Publishes `snapshots` to the installed `metrics` recorder: every metric of [`METRICS`]
/// for each processor, with its description. See the module's contract.
pub fn export(snapshots: &[ProcessorSnapshot]) {
    describe();
    for snapshot in snapshots {
        let labels = vec![
            Label::new("client_type", snapshot.processor.client_type.name()),
            Label::new("processor", snapshot.processor.index.to_string()),
        ];
        for metric in &METRICS {
            match metric.value {
                Value::Number(read) => {
                    let value = read(snapshot);
                    if metric.kind == Kind::Counter {
                        counter!(metric.name, labels.clone()).absolute(value);
                    } else {
                        gauge!(metric.name, labels.clone()).set(value as f64);
                    }
                }
                Value::Quantiles(read, divisor) => {
                    let summary = read(snapshot);
                    for (quantile, value) in QUANTILES {
                        let mut labels = labels.clone();
                        labels.push(Label::new("quantile", quantile));
                        gauge!(metric.name, labels).set(value(&summary) as f64 / divisor);
                    }
                }
            }
        }
    }
}

/// Gives the recorder each metric's unit and help text.
fn describe() {
    for metric in &METRICS {
        match (metric.kind, metric.unit) {
            (Kind::Counter, Some(unit)) => describe_counter!(metric.name, unit, metric.help),
            (Kind::Counter, None) => describe_counter!(metric.name, metric.help),
            (_, Some(unit)) => describe_gauge!(metric.name, unit, metric.help),
            (_, None) => describe_gauge!(metric.name, metric.help),
        }
    }
}
