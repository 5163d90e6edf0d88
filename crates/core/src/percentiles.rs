//! [`Percentiles`]: the summary of a histogram that the processors' stats, the metrics
//! export and the perftest's report all print, so that every figure the project shows is
//! read from a histogram the same way.

use hdrhistogram::Histogram;

/// The summary of a histogram of `u64` values (nanoseconds, events, microseconds: the
/// histogram's unit): how many, where the quantiles sit, the largest and the mean.
///
/// A quantile is the value at or below which that fraction of the recorded values fall,
/// to the histogram's precision (hdrhistogram's `value_at_quantile`: the highest value
/// equivalent to the one at that rank). An empty histogram gives all zeros.
///
/// ```
/// use hdrhistogram::Histogram;
/// use zerodispatch_core::Percentiles;
///
/// let mut h = Histogram::<u64>::new_with_bounds(1, 1_000_000, 3)?;
/// for v in 1..=1000 {
///     h.record(v)?;
/// }
/// let p = Percentiles::of(&h);
/// assert_eq!((p.count, p.p50, p.p90, p.p99, p.p999, p.max), (1000, 500, 900, 990, 999, 1000));
/// assert_eq!(p.mean, 500.5);
/// assert_eq!(Percentiles::of(&Histogram::<u64>::new(3)?), Percentiles::default());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Percentiles {
    /// Values recorded.
    pub count: u64,
    /// Median.
    pub p50: u64,
    /// 90th percentile.
    pub p90: u64,
    /// 99th percentile.
    pub p99: u64,
    /// 99.9th percentile.
    pub p999: u64,
    /// Largest value recorded.
    pub max: u64,
    /// Mean.
    pub mean: f64,
}

impl Percentiles {
    /// The summary of `histogram`.
    ///
    /// This names a third-party type in the core's API, on purpose: a user (the perftest
    /// is one) summarises latencies of their own with the same quantile rule as the
    /// processors' statistics, from the histogram type they already record into. So
    /// `hdrhistogram` is a public dependency: a new major version of it is a breaking
    /// change of this crate. Nothing else of the API takes or returns one.
    #[must_use]
    pub fn of(histogram: &Histogram<u64>) -> Self {
        if histogram.is_empty() {
            return Self::default();
        }
        Self {
            count: histogram.len(),
            p50: histogram.value_at_quantile(0.5),
            p90: histogram.value_at_quantile(0.9),
            p99: histogram.value_at_quantile(0.99),
            p999: histogram.value_at_quantile(0.999),
            max: histogram.max(),
            mean: histogram.mean(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_follow_the_histogram_precision() {
        // Two significant digits, as the processors' histograms: values are equivalent
        // within 1%, and a quantile is the highest value of its bucket.
        let mut h = Histogram::<u64>::new_with_bounds(1, 60_000_000_000, 2).unwrap();
        for v in 1..=10_000_u64 {
            h.record(v * 1_000).unwrap();
        }
        let p = Percentiles::of(&h);
        assert_eq!(p.count, 10_000);
        for (got, want) in [
            (p.p50, 5_000_000),
            (p.p90, 9_000_000),
            (p.p99, 9_900_000),
            (p.p999, 9_990_000),
            (p.max, 10_000_000),
        ] {
            assert!(
                got.abs_diff(want) <= want / 100,
                "{got} not within 1% of {want}: {p:?}"
            );
        }
        assert!(p.p50 <= p.p90 && p.p90 <= p.p99 && p.p99 <= p.p999 && p.p999 <= p.max);
    }
}
