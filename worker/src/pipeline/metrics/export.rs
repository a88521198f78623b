//! The Prometheus view of a [`Metrics`]: the `tributary_rank_*` families of
//! `docs/METRICS.md`, read from the counters at scrape time (no second set
//! of counters to keep in step), every series with the constant labels
//! `job` and `rank`, in that order.

use std::collections::HashMap;
use std::sync::Arc;

use prometheus::core::{Collector, Desc};
use prometheus::proto::{Counter, Gauge, LabelPair, Metric, MetricFamily, MetricType};
use prometheus::Registry;

use super::{Metrics, MetricsSnapshot};

/// The fetch latency histogram's name (it lives in [`Metrics`]).
pub const FETCH_DURATION: &str = "tributary_rank_fetch_duration_seconds";
pub(super) const FETCH_DURATION_HELP: &str = "One object-store read, in seconds.";

/// A family read from a snapshot: name, help, type and value.
struct Family {
    name: &'static str,
    help: &'static str,
    kind: MetricType,
    value: fn(&MetricsSnapshot) -> f64,
}

const FAMILIES: [Family; 14] = [
    Family {
        name: "tributary_rank_samples_total",
        help: "Samples handed to the trainer.",
        kind: MetricType::COUNTER,
        value: |m| m.samples as f64,
    },
    Family {
        name: "tributary_rank_batches_total",
        help: "Batches handed to the trainer.",
        kind: MetricType::COUNTER,
        value: |m| m.batches as f64,
    },
    Family {
        name: "tributary_rank_fetched_bytes_total",
        help: "Bytes read by the fetch stage (from the object store or the shard cache).",
        kind: MetricType::COUNTER,
        value: |m| m.fetched_bytes as f64,
    },
    Family {
        name: "tributary_rank_fetch_requests_in_flight",
        help: "Object-store requests in flight.",
        kind: MetricType::GAUGE,
        value: |m| m.fetches_in_flight as f64,
    },
    Family {
        name: "tributary_rank_parse_seconds_total",
        help: "Time parsing shards, summed over threads.",
        kind: MetricType::COUNTER,
        value: |m| m.parse_time.as_secs_f64(),
    },
    Family {
        name: "tributary_rank_decode_seconds_total",
        help: "Time decoding and augmenting, summed over threads.",
        kind: MetricType::COUNTER,
        value: |m| m.decode_time.as_secs_f64(),
    },
    Family {
        name: "tributary_rank_data_wait_seconds_total",
        help: "Time the trainer spent waiting for a batch (waits that ended).",
        kind: MetricType::COUNTER,
        value: |m| m.consumer_wait.as_secs_f64(),
    },
    Family {
        name: "tributary_rank_data_wait_ratio",
        help: "Data wait over the loader's life: wait / time since the first next().",
        kind: MetricType::GAUGE,
        value: |m| m.data_wait,
    },
    Family {
        name: "tributary_rank_bad_samples_total",
        help: "Bad samples skipped.",
        kind: MetricType::COUNTER,
        value: |m| m.bad_samples as f64,
    },
    Family {
        name: "tributary_rank_cache_hits_total",
        help: "Range reads served from the local shard cache.",
        kind: MetricType::COUNTER,
        value: |m| m.cache.hits as f64,
    },
    Family {
        name: "tributary_rank_cache_misses_total",
        help: "Range reads of a rank with a shard cache sent to the object store.",
        kind: MetricType::COUNTER,
        value: |m| m.cache.misses as f64,
    },
    Family {
        name: "tributary_rank_cache_hit_bytes_total",
        help: "Bytes read from the local shard cache.",
        kind: MetricType::COUNTER,
        value: |m| m.cache.hit_bytes as f64,
    },
    Family {
        name: "tributary_rank_cache_fill_bytes_total",
        help: "Bytes of whole shards this process wrote into the shard cache.",
        kind: MetricType::COUNTER,
        value: |m| m.cache.fill_bytes as f64,
    },
    Family {
        name: "tributary_rank_cache_evictions_total",
        help: "Shard cache entries this process evicted to make room.",
        kind: MetricType::COUNTER,
        value: |m| m.cache.evictions as f64,
    },
];

/// Reads a [`Metrics`] when scraped.
#[derive(Debug)]
pub struct RankCollector {
    metrics: Arc<Metrics>,
    descs: Vec<Desc>,
    /// `job` and `rank`, added to every series.
    labels: Vec<LabelPair>,
}

impl RankCollector {
    /// Series of `metrics` labelled with `job` and `rank` (the torchrun
    /// rank, or a dynamic member's name).
    pub fn new(metrics: Arc<Metrics>, job: &str, rank: &str) -> prometheus::Result<Self> {
        let pairs = [("job", job), ("rank", rank)];
        let constant: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        let descs = FAMILIES
            .iter()
            .map(|f| Desc::new(f.name.into(), f.help.into(), Vec::new(), constant.clone()))
            .collect::<prometheus::Result<_>>()?;
        let labels = pairs
            .iter()
            .map(|(name, value)| {
                let mut pair = LabelPair::default();
                pair.set_name((*name).to_owned());
                pair.set_value((*value).to_owned());
                pair
            })
            .collect();
        Ok(Self {
            metrics,
            descs,
            labels,
        })
    }
}

impl Collector for RankCollector {
    fn desc(&self) -> Vec<&Desc> {
        let mut descs: Vec<&Desc> = self.descs.iter().collect();
        descs.extend(self.metrics.fetch_latency.desc());
        descs
    }

    fn collect(&self) -> Vec<MetricFamily> {
        let snapshot = self.metrics.snapshot();
        let mut families: Vec<MetricFamily> = FAMILIES
            .iter()
            .map(|f| {
                let value = (f.value)(&snapshot);
                let mut metric = Metric::default();
                if f.kind == MetricType::GAUGE {
                    let mut gauge = Gauge::default();
                    gauge.set_value(value);
                    metric.set_gauge(gauge);
                } else {
                    let mut counter = Counter::default();
                    counter.set_value(value);
                    metric.set_counter(counter);
                }
                let mut family = MetricFamily::default();
                family.set_name(f.name.into());
                family.set_help(f.help.into());
                family.set_field_type(f.kind);
                family.set_metric(vec![metric]);
                family
            })
            .collect();
        families.extend(self.metrics.fetch_latency.collect());
        for family in &mut families {
            for metric in family.mut_metric() {
                let mut labels = self.labels.clone();
                labels.extend(metric.take_label());
                metric.set_label(labels);
            }
        }
        families
    }
}

/// A registry of `metrics` alone, labelled as [`RankCollector::new`] says.
pub fn registry(metrics: Arc<Metrics>, job: &str, rank: &str) -> prometheus::Result<Registry> {
    let registry = Registry::new();
    registry.register(Box::new(RankCollector::new(metrics, job, rank)?))?;
    Ok(registry)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_family_of_the_docs_is_exported_with_the_job_and_rank() {
        let metrics = Arc::new(Metrics::default());
        metrics.fetch_started().done(2048);
        metrics.record_delivery(8);
        let registry = registry(Arc::clone(&metrics), "train", "3").expect("registry");
        let text = tributary_io::metrics::render(&registry);
        let docs = include_str!("../../../../docs/METRICS.md");
        let ranks = &docs[docs.find("## Ranks").expect("the Ranks section")..];
        let documented: Vec<&str> = ranks
            .lines()
            .filter_map(|l| l.strip_prefix("| `")?.split('`').next())
            .collect();
        assert_eq!(documented.len(), FAMILIES.len() + 1, "{documented:?}");
        for name in documented {
            assert!(text.contains(&format!("# TYPE {name} ")), "{name}:\n{text}");
        }
        for line in [
            "tributary_rank_samples_total{job=\"train\",rank=\"3\"} 8",
            "tributary_rank_fetched_bytes_total{job=\"train\",rank=\"3\"} 2048",
            "tributary_rank_fetch_requests_in_flight{job=\"train\",rank=\"3\"} 0",
            "tributary_rank_fetch_duration_seconds_count{job=\"train\",rank=\"3\"} 1",
        ] {
            assert!(text.contains(line), "{line}:\n{text}");
        }
    }
}
