//! Pipeline metrics: throughput, bytes, reads in flight and their latency,
//! time per stage and the time the consumer spent waiting for a batch (the
//! number that says whether the loader keeps the accelerator busy).
//!
//! The stages count into one [`Metrics`] with relaxed atomics (and a
//! [`prometheus::Histogram`], itself atomics) and nothing else: reading them
//! is the reader's cost. A rank shares one `Metrics` between the loaders of
//! its epochs, so the counters cover the rank's life.
//!
//! - [`export`]: the Prometheus view, a collector that reads the counters at
//!   scrape time, in a registry labelled with the job and the rank.
//! - [`histogram`]: latency buckets and quantiles of a snapshot.

pub mod export;
pub mod histogram;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use prometheus::{Histogram, HistogramOpts};
use std::sync::Arc;
use tributary_io::{CacheStats, ShardCache};

pub use histogram::LatencyHistogram;

/// Upper bounds (seconds) of the fetch latency buckets: one range read of
/// an object store, from a local disk's millisecond to a 30 s stall.
pub const FETCH_BUCKETS: [f64; 14] = [
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
];

/// Counters shared by the pipeline's stages.
#[derive(Debug)]
pub struct Metrics {
    started: Instant,
    first_batch: OnceLock<Duration>,
    /// When the consumer first called `next()`.
    first_next: OnceLock<Instant>,
    /// Nanoseconds from `started` to the start of the wait in progress,
    /// plus one; 0 while the consumer is not waiting.
    waiting_since: AtomicU64,
    fetched_bytes: AtomicU64,
    fetch_requests: AtomicU64,
    fetch_nanos: AtomicU64,
    fetches_in_flight: AtomicU64,
    fetch_latency: Histogram,
    parse_nanos: AtomicU64,
    parsed_samples: AtomicU64,
    decode_nanos: AtomicU64,
    decoded_samples: AtomicU64,
    samples: AtomicU64,
    batches: AtomicU64,
    bad_samples: AtomicU64,
    wait_nanos: AtomicU64,
    /// The shard cache the reads go through, if any: its counters are read
    /// into each snapshot.
    cache: OnceLock<Arc<ShardCache>>,
}

impl Default for Metrics {
    fn default() -> Self {
        let opts = HistogramOpts::new(export::FETCH_DURATION, export::FETCH_DURATION_HELP)
            .buckets(FETCH_BUCKETS.to_vec());
        Self {
            started: Instant::now(),
            first_batch: OnceLock::new(),
            first_next: OnceLock::new(),
            waiting_since: AtomicU64::new(0),
            fetched_bytes: AtomicU64::new(0),
            fetch_requests: AtomicU64::new(0),
            fetch_nanos: AtomicU64::new(0),
            fetches_in_flight: AtomicU64::new(0),
            #[allow(clippy::expect_used, reason = "constant, valid options")]
            fetch_latency: Histogram::with_opts(opts).expect("valid histogram options"),
            parse_nanos: AtomicU64::new(0),
            parsed_samples: AtomicU64::new(0),
            decode_nanos: AtomicU64::new(0),
            decoded_samples: AtomicU64::new(0),
            samples: AtomicU64::new(0),
            batches: AtomicU64::new(0),
            bad_samples: AtomicU64::new(0),
            wait_nanos: AtomicU64::new(0),
            cache: OnceLock::new(),
        }
    }
}

fn nanos(d: Duration) -> u64 {
    d.as_nanos().min(u128::from(u64::MAX)) as u64
}

/// An object-store read in flight, counted from [`Metrics::fetch_started`]
/// until dropped, whether it completed, failed or was cancelled;
/// [`FetchInFlight::done`] records a completed read.
#[derive(Debug)]
#[must_use = "the read counts as in flight until this is dropped"]
pub(crate) struct FetchInFlight<'a> {
    metrics: &'a Metrics,
    started: Instant,
}

impl FetchInFlight<'_> {
    /// The read brought `bytes`: counts it, its bytes and its latency.
    pub(crate) fn done(self, bytes: u64) {
        let took = self.started.elapsed();
        let m = self.metrics;
        m.fetched_bytes.fetch_add(bytes, Ordering::Relaxed);
        m.fetch_requests.fetch_add(1, Ordering::Relaxed);
        m.fetch_nanos.fetch_add(nanos(took), Ordering::Relaxed);
        m.fetch_latency.observe(took.as_secs_f64());
    }
}

impl Drop for FetchInFlight<'_> {
    fn drop(&mut self) {
        self.metrics
            .fetches_in_flight
            .fetch_sub(1, Ordering::Relaxed);
    }
}

/// The consumer waiting for a batch, from [`Metrics::wait_started`] until
/// dropped (a batch, the end, an error, or the wait cancelled).
#[derive(Debug)]
#[must_use = "the consumer counts as waiting until this is dropped"]
pub(crate) struct Waiting<'a> {
    metrics: &'a Metrics,
    since: Instant,
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        let m = self.metrics;
        m.wait_nanos
            .fetch_add(nanos(self.since.elapsed()), Ordering::Relaxed);
        m.waiting_since.store(0, Ordering::Relaxed);
    }
}

impl Metrics {
    /// An object-store read starts: in flight until the guard is dropped.
    pub(crate) fn fetch_started(&self) -> FetchInFlight<'_> {
        self.fetches_in_flight.fetch_add(1, Ordering::Relaxed);
        FetchInFlight {
            metrics: self,
            started: Instant::now(),
        }
    }

    /// The consumer starts waiting in `next()`.
    pub(crate) fn wait_started(&self) -> Waiting<'_> {
        let now = Instant::now();
        self.first_next.get_or_init(|| now);
        let since = nanos(now.saturating_duration_since(self.started));
        self.waiting_since
            .store(since.saturating_add(1), Ordering::Relaxed);
        Waiting {
            metrics: self,
            since: now,
        }
    }

    /// `samples` were parsed out of a read in `took`.
    pub(crate) fn record_parse(&self, took: Duration, samples: usize) {
        self.parse_nanos.fetch_add(nanos(took), Ordering::Relaxed);
        self.parsed_samples
            .fetch_add(samples as u64, Ordering::Relaxed);
    }

    /// A batch of `samples` was decoded (and augmented) in `took`.
    pub(crate) fn record_decode(&self, took: Duration, samples: usize) {
        self.decode_nanos.fetch_add(nanos(took), Ordering::Relaxed);
        self.decoded_samples
            .fetch_add(samples as u64, Ordering::Relaxed);
    }

    pub(crate) fn record_delivery(&self, samples: usize) {
        self.first_batch.get_or_init(|| self.started.elapsed());
        self.samples.fetch_add(samples as u64, Ordering::Relaxed);
        self.batches.fetch_add(1, Ordering::Relaxed);
    }

    /// Reports `cache`'s counters with these metrics (the first cache
    /// given; a rank's loaders share one).
    pub fn watch_cache(&self, cache: &Arc<ShardCache>) {
        let _ = self.cache.set(Arc::clone(cache));
    }

    pub(crate) fn record_bad(&self, samples: u64) {
        self.bad_samples.fetch_add(samples, Ordering::Relaxed);
    }

    /// A consistent-enough copy of the counters.
    pub fn snapshot(&self) -> MetricsSnapshot {
        let load = |a: &AtomicU64| a.load(Ordering::Relaxed);
        let ns = |a: &AtomicU64| Duration::from_nanos(load(a));
        let now = Instant::now();
        let elapsed = now.saturating_duration_since(self.started);
        // Completed waits first: a wait that ends between the two loads is
        // then missed once rather than counted twice.
        let consumer_wait = ns(&self.wait_nanos);
        let ongoing = match load(&self.waiting_since) {
            0 => Duration::ZERO,
            since => elapsed.saturating_sub(Duration::from_nanos(since - 1)),
        };
        let data_wait = self.first_next.get().map_or(0.0, |first| {
            let consuming = now.saturating_duration_since(*first).as_secs_f64();
            if consuming > 0.0 {
                ((consumer_wait + ongoing).as_secs_f64() / consuming).clamp(0.0, 1.0)
            } else {
                0.0
            }
        });
        MetricsSnapshot {
            elapsed,
            first_batch: self.first_batch.get().copied(),
            fetched_bytes: load(&self.fetched_bytes),
            fetch_requests: load(&self.fetch_requests),
            fetch_time: ns(&self.fetch_nanos),
            fetches_in_flight: load(&self.fetches_in_flight),
            fetch_latency: LatencyHistogram::of(&self.fetch_latency),
            parse_time: ns(&self.parse_nanos),
            parsed_samples: load(&self.parsed_samples),
            decode_time: ns(&self.decode_nanos),
            decoded_samples: load(&self.decoded_samples),
            samples: load(&self.samples),
            batches: load(&self.batches),
            bad_samples: load(&self.bad_samples),
            consumer_wait,
            data_wait,
            cache: self.cache.get().map(|c| c.stats()).unwrap_or_default(),
        }
    }
}

/// Metrics at one moment. Stage times are summed over concurrent work.
#[derive(Debug, Clone, Default)]
pub struct MetricsSnapshot {
    /// Since the metrics were made (the loader built; a rank's first).
    pub elapsed: Duration,
    /// From then to the first batch handed to the consumer.
    pub first_batch: Option<Duration>,
    pub fetched_bytes: u64,
    /// Object-store reads completed.
    pub fetch_requests: u64,
    pub fetch_time: Duration,
    /// Object-store reads started and not yet ended.
    pub fetches_in_flight: u64,
    /// Latency of the completed reads (`count == fetch_requests`).
    pub fetch_latency: LatencyHistogram,
    pub parse_time: Duration,
    /// Samples parsed out of reads.
    pub parsed_samples: u64,
    pub decode_time: Duration,
    /// Samples decoded (and augmented), bad ones included.
    pub decoded_samples: u64,
    /// Samples handed to the consumer.
    pub samples: u64,
    pub batches: u64,
    /// Bad samples skipped (`on_error = skip`).
    pub bad_samples: u64,
    /// Time the consumer spent waiting in `next()` (waits that ended).
    pub consumer_wait: Duration,
    /// The share of the consumer's time spent waiting for a batch, 0 to 1:
    /// its waits (the one in progress included) over the time since its
    /// first `next()`; 0 before that.
    pub data_wait: f64,
    /// The shard cache's counters (zero without a cache).
    pub cache: CacheStats,
}

impl MetricsSnapshot {
    /// Samples per second delivered since the metrics were made.
    pub fn samples_per_sec(&self) -> f64 {
        self.samples as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }

    /// Bytes per second fetched since the metrics were made.
    pub fn bytes_per_sec(&self) -> f64 {
        self.fetched_bytes as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }

    /// Parse time per parsed sample, in seconds (0 before the first).
    pub fn parse_seconds_per_sample(&self) -> f64 {
        per_sample(self.parse_time, self.parsed_samples)
    }

    /// Decode and augment time per decoded sample, in seconds (0 before
    /// the first).
    pub fn decode_seconds_per_sample(&self) -> f64 {
        per_sample(self.decode_time, self.decoded_samples)
    }
}

fn per_sample(time: Duration, samples: u64) -> f64 {
    if samples == 0 {
        0.0
    } else {
        time.as_secs_f64() / samples as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_read_is_in_flight_until_its_guard_drops_and_counted_once_done() {
        let metrics = Metrics::default();
        let a = metrics.fetch_started();
        let b = metrics.fetch_started();
        assert_eq!(metrics.snapshot().fetches_in_flight, 2);
        a.done(100);
        // A failed or cancelled read: dropped without `done`.
        drop(b);
        let m = metrics.snapshot();
        assert_eq!(m.fetches_in_flight, 0);
        assert_eq!((m.fetch_requests, m.fetched_bytes), (1, 100));
        assert_eq!(m.fetch_latency.count, 1);
    }

    #[test]
    fn data_wait_is_zero_before_the_first_next_and_counts_a_wait_in_progress() {
        let metrics = Metrics::default();
        assert_eq!(metrics.snapshot().data_wait, 0.0);
        let waiting = metrics.wait_started();
        std::thread::sleep(Duration::from_millis(20));
        let during = metrics.snapshot();
        // Waiting all along since the first next(): nearly all of it.
        assert!(during.data_wait > 0.5, "{during:?}");
        assert_eq!(during.consumer_wait, Duration::ZERO);
        drop(waiting);
        let after = metrics.snapshot();
        assert!(after.consumer_wait >= Duration::from_millis(20));
        assert!((0.0..=1.0).contains(&after.data_wait), "{after:?}");
    }

    #[test]
    fn per_sample_times_divide_by_the_samples_of_their_stage() {
        let metrics = Metrics::default();
        assert_eq!(metrics.snapshot().parse_seconds_per_sample(), 0.0);
        metrics.record_parse(Duration::from_millis(10), 5);
        metrics.record_decode(Duration::from_millis(40), 4);
        let m = metrics.snapshot();
        assert!((m.parse_seconds_per_sample() - 0.002).abs() < 1e-9);
        assert!((m.decode_seconds_per_sample() - 0.010).abs() < 1e-9);
    }
}
