//! The latency recorders the callbacks write ([`Recorder`]), their histograms, and a
//! distribution's JSON form ([`LatencyJson`]).

use std::sync::{Arc, Mutex, MutexGuard};

use hdrhistogram::Histogram;
use serde::Serialize;
use zerodispatch_core::Percentiles;

/// Latencies above this (in microseconds: one hour) are recorded as this.
const MAX_LATENCY_US: u64 = 3_600_000_000;

/// Significant figures of the latency histograms.
const SIGFIGS: u8 = 3;

/// A latency recorder: the last interval's histogram (taken by the reporter each second)
/// and the whole run's. One per producer or consumer, locked once per callback batch.
pub(crate) struct Recorder {
    interval: Histogram<u64>,
    total: Histogram<u64>,
}

impl Recorder {
    pub(crate) fn new() -> Self {
        Self {
            interval: new_histogram(),
            total: new_histogram(),
        }
    }

    pub(crate) fn record(&mut self, us: u64) {
        self.interval.saturating_record(us);
        self.total.saturating_record(us);
    }
}

pub(crate) type Shared = Arc<Mutex<Recorder>>;

pub(crate) fn lock(recorder: &Shared) -> MutexGuard<'_, Recorder> {
    recorder.lock().unwrap_or_else(|e| e.into_inner())
}

/// An empty latency histogram: 1 us to one hour, three significant figures.
#[must_use]
pub fn new_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, MAX_LATENCY_US, SIGFIGS).expect("valid histogram bounds")
}

/// Merges every recorder's interval histogram into one and resets them.
pub(crate) fn take_interval(recorders: &[Shared]) -> Histogram<u64> {
    let mut merged = new_histogram();
    for r in recorders {
        let mut r = lock(r);
        merged.add(&r.interval).expect("same bounds");
        r.interval.reset();
    }
    merged
}

/// Merges every recorder's whole-run histogram into one.
pub(crate) fn merge_total(recorders: &[Shared]) -> Histogram<u64> {
    let mut merged = new_histogram();
    for r in recorders {
        merged.add(&lock(r).total).expect("same bounds");
    }
    merged
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
