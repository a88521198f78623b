//! A latency histogram read out of a [`prometheus::Histogram`], and its
//! quantiles estimated as Prometheus's `histogram_quantile` does.

use prometheus::core::Collector;
use prometheus::Histogram;

/// Cumulative buckets of observed latencies, in seconds.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LatencyHistogram {
    /// Observations.
    pub count: u64,
    /// Their sum, in seconds.
    pub sum: f64,
    /// `(upper bound in seconds, observations at or below it)`, bounds
    /// ascending; the `+Inf` bucket is [`LatencyHistogram::count`].
    pub buckets: Vec<(f64, u64)>,
}

impl LatencyHistogram {
    /// What `histogram` holds now.
    pub fn of(histogram: &Histogram) -> Self {
        let families = histogram.collect();
        let Some(metric) = families.first().and_then(|f| f.get_metric().first()) else {
            return Self::default();
        };
        let h = metric.get_histogram();
        Self {
            count: h.get_sample_count(),
            sum: h.get_sample_sum(),
            buckets: h
                .get_bucket()
                .iter()
                .map(|b| (b.upper_bound(), b.cumulative_count()))
                .collect(),
        }
    }

    /// The `q` quantile (0 to 1), interpolated linearly within its bucket
    /// (from 0 for the first); in the `+Inf` bucket, the largest finite
    /// bound. `None` without observations.
    pub fn quantile(&self, q: f64) -> Option<f64> {
        if self.count == 0 || !(0.0..=1.0).contains(&q) {
            return None;
        }
        let rank = q * self.count as f64;
        let (mut lower, mut below) = (0.0, 0u64);
        for &(upper, cumulative) in &self.buckets {
            if cumulative as f64 >= rank && cumulative > below {
                let share = (rank - below as f64) / (cumulative - below) as f64;
                return Some(lower + (upper - lower) * share.clamp(0.0, 1.0));
            }
            (lower, below) = (upper, cumulative);
        }
        Some(lower)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use prometheus::HistogramOpts;

    fn histogram(observations: &[f64]) -> LatencyHistogram {
        let opts = HistogramOpts::new("t", "t").buckets(vec![0.01, 0.1, 1.0]);
        let h = Histogram::with_opts(opts).expect("histogram");
        for &v in observations {
            h.observe(v);
        }
        LatencyHistogram::of(&h)
    }

    #[test]
    fn buckets_are_cumulative_and_quantiles_interpolate_within_them() {
        let h = histogram(&[0.005, 0.05, 0.05, 0.5]);
        assert_eq!(h.count, 4);
        assert!((h.sum - 0.605).abs() < 1e-9);
        assert_eq!(h.buckets, vec![(0.01, 1), (0.1, 3), (1.0, 4)]);
        // Rank 2 of 4: halfway through the (0.01, 0.1] bucket's two.
        let p50 = h.quantile(0.5).expect("p50");
        assert!((p50 - 0.055).abs() < 1e-9, "{p50}");
        assert_eq!(h.quantile(1.0), Some(1.0));
        assert_eq!(h.quantile(0.0), Some(0.0));
    }

    #[test]
    fn no_observations_no_quantile_and_overflow_gives_the_largest_bound() {
        assert_eq!(histogram(&[]).quantile(0.5), None);
        assert_eq!(histogram(&[5.0, 7.0]).quantile(0.9), Some(1.0));
        assert_eq!(histogram(&[0.5]).quantile(1.5), None);
    }
}
