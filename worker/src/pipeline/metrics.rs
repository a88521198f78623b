//! Pipeline metrics: throughput, bytes, time per stage and the time the
//! consumer spent waiting for a batch (the number that says whether the
//! loader keeps the accelerator busy).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// Counters shared by the pipeline's stages.
#[derive(Debug)]
pub struct Metrics {
    started: Instant,
    first_batch: OnceLock<Duration>,
    fetched_bytes: AtomicU64,
    fetch_requests: AtomicU64,
    fetch_nanos: AtomicU64,
    parse_nanos: AtomicU64,
    decode_nanos: AtomicU64,
    samples: AtomicU64,
    batches: AtomicU64,
    bad_samples: AtomicU64,
    wait_nanos: AtomicU64,
}

impl Default for Metrics {
    fn default() -> Self {
        Self {
            started: Instant::now(),
            first_batch: OnceLock::new(),
            fetched_bytes: AtomicU64::new(0),
            fetch_requests: AtomicU64::new(0),
            fetch_nanos: AtomicU64::new(0),
            parse_nanos: AtomicU64::new(0),
            decode_nanos: AtomicU64::new(0),
            samples: AtomicU64::new(0),
            batches: AtomicU64::new(0),
            bad_samples: AtomicU64::new(0),
            wait_nanos: AtomicU64::new(0),
        }
    }
}

fn nanos(d: Duration) -> u64 {
    d.as_nanos().min(u128::from(u64::MAX)) as u64
}

impl Metrics {
    pub(crate) fn record_fetch(&self, bytes: u64, took: Duration) {
        self.fetched_bytes.fetch_add(bytes, Ordering::Relaxed);
        self.fetch_requests.fetch_add(1, Ordering::Relaxed);
        self.fetch_nanos.fetch_add(nanos(took), Ordering::Relaxed);
    }

    pub(crate) fn record_parse(&self, took: Duration) {
        self.parse_nanos.fetch_add(nanos(took), Ordering::Relaxed);
    }

    pub(crate) fn record_decode(&self, took: Duration) {
        self.decode_nanos.fetch_add(nanos(took), Ordering::Relaxed);
    }

    pub(crate) fn record_delivery(&self, samples: usize, waited: Duration) {
        self.first_batch.get_or_init(|| self.started.elapsed());
        self.samples.fetch_add(samples as u64, Ordering::Relaxed);
        self.batches.fetch_add(1, Ordering::Relaxed);
        self.wait_nanos.fetch_add(nanos(waited), Ordering::Relaxed);
    }

    pub(crate) fn record_bad(&self, samples: u64) {
        self.bad_samples.fetch_add(samples, Ordering::Relaxed);
    }

    /// A consistent-enough copy of the counters.
    pub fn snapshot(&self) -> MetricsSnapshot {
        let ns = |a: &AtomicU64| Duration::from_nanos(a.load(Ordering::Relaxed));
        MetricsSnapshot {
            elapsed: self.started.elapsed(),
            first_batch: self.first_batch.get().copied(),
            fetched_bytes: self.fetched_bytes.load(Ordering::Relaxed),
            fetch_requests: self.fetch_requests.load(Ordering::Relaxed),
            fetch_time: ns(&self.fetch_nanos),
            parse_time: ns(&self.parse_nanos),
            decode_time: ns(&self.decode_nanos),
            samples: self.samples.load(Ordering::Relaxed),
            batches: self.batches.load(Ordering::Relaxed),
            bad_samples: self.bad_samples.load(Ordering::Relaxed),
            consumer_wait: ns(&self.wait_nanos),
        }
    }
}

/// Metrics at one moment. Stage times are summed over concurrent work.
#[derive(Debug, Clone, Default)]
pub struct MetricsSnapshot {
    /// Since the loader was built.
    pub elapsed: Duration,
    /// From build to the first batch handed to the consumer.
    pub first_batch: Option<Duration>,
    pub fetched_bytes: u64,
    pub fetch_requests: u64,
    pub fetch_time: Duration,
    pub parse_time: Duration,
    pub decode_time: Duration,
    /// Samples handed to the consumer.
    pub samples: u64,
    pub batches: u64,
    /// Bad samples skipped (`on_error = skip`).
    pub bad_samples: u64,
    /// Time the consumer spent waiting in `next()`.
    pub consumer_wait: Duration,
}

impl MetricsSnapshot {
    /// Samples per second delivered since the loader was built.
    pub fn samples_per_sec(&self) -> f64 {
        self.samples as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }

    /// Bytes per second fetched since the loader was built.
    pub fn bytes_per_sec(&self) -> f64 {
        self.fetched_bytes as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }
}
