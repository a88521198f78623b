//! The coordinator's Prometheus metrics (names in `docs/METRICS.md`), one
//! [`Metrics`] per replica, served by `tributary_io::metrics` on
//! `--metrics-listen`.
//!
//! Counters are bumped where things happen: the service counts calls and
//! their codes, the writer its transactions, the leader what
//! a change's [`crate::model::Tally`] says it did. Job-labelled gauges are
//! rebuilt from the leader's jobs by [`crate::leader::housekeeping`] every
//! [`JOB_GAUGES_INTERVAL`], so a deleted job's series go with it.

use std::time::Duration;

use prometheus::{
    exponential_buckets, GaugeVec, Histogram, HistogramOpts, HistogramVec, IntCounter,
    IntCounterVec, IntGauge, IntGaugeVec, Opts, Registry,
};
use tributary_io::metrics::prometheus;

use crate::model::Tally;

/// How often job gauges are rebuilt from the leader's jobs.
pub const JOB_GAUGES_INTERVAL: Duration = Duration::from_secs(2);

/// One replica's metrics.
#[derive(Debug, Clone)]
pub struct Metrics {
    registry: Registry,
    pub leader: IntGauge,
    pub leadership_changes: IntCounterVec,
    pub jobs: IntGaugeVec,
    pub job_members: IntGaugeVec,
    pub job_epoch: IntGaugeVec,
    pub job_leased_units: IntGaugeVec,
    pub job_member_rate: GaugeVec,
    pub generations: IntCounter,
    pub commits: IntCounter,
    pub units_leased: IntCounter,
    pub units_acked: IntCounter,
    pub units_reassigned: IntCounter,
    pub member_leases_expired: IntCounter,
    pub jobs_deleted: IntCounterVec,
    pub txn_duration: Histogram,
    pub txn_failures: IntCounter,
    pub group_commit_ops: Histogram,
    pub rpc_requests: IntCounterVec,
    pub rpc_duration: HistogramVec,
}

fn name(short: &str) -> String {
    format!("tributary_coordinator_{short}")
}

/// Registers `metric` in `registry`; the names are constants, so a clash
/// is a bug caught by the tests.
fn registered<M: prometheus::core::Collector + Clone + 'static>(
    registry: &Registry,
    metric: prometheus::Result<M>,
) -> M {
    #[allow(clippy::expect_used)]
    let metric = metric.expect("a metric's constant definition is valid");
    #[allow(clippy::expect_used)]
    registry
        .register(Box::new(metric.clone()))
        .expect("each metric is registered once");
    metric
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    pub fn new() -> Self {
        let registry = Registry::new();
        let r = &registry;
        let counter = |short: &str, help: &str| registered(r, IntCounter::new(name(short), help));
        let counter_vec = |short: &str, help: &str, labels: &[&str]| {
            registered(r, IntCounterVec::new(Opts::new(name(short), help), labels))
        };
        let job_gauge = |short: &str, help: &str| {
            registered(r, IntGaugeVec::new(Opts::new(name(short), help), &["job"]))
        };
        let latency = exponential_buckets(0.0005, 2.0, 16).unwrap_or_default();
        Self {
            leader: registered(
                r,
                IntGauge::new(name("leader"), "1 while this replica leads."),
            ),
            leadership_changes: counter_vec(
                "leadership_changes_total",
                "Elections won and leaderships lost by this replica.",
                &["change"],
            ),
            jobs: registered(
                r,
                IntGaugeVec::new(
                    Opts::new(name("jobs"), "Jobs the leader holds, by state."),
                    &["state"],
                ),
            ),
            job_members: job_gauge("job_members", "Members of each job."),
            job_epoch: job_gauge("job_epoch", "Each job's current epoch."),
            job_leased_units: job_gauge(
                "job_leased_units",
                "Dynamic jobs: units leased and not yet acked.",
            ),
            job_member_rate: registered(
                r,
                GaugeVec::new(
                    Opts::new(
                        name("job_member_samples_per_second"),
                        "Each job's fastest and median member, in samples per second consumed \
                         (sync) or acked (dynamic), over members that reported in the last 10 s.",
                    ),
                    &["job", "stat"],
                ),
            ),
            generations: counter(
                "generations_total",
                "Sync generations started (torchrun restarts and epochs).",
            ),
            commits: counter("commits_total", "Sync commits recorded."),
            units_leased: counter("units_leased_total", "Dynamic units leased to members."),
            units_acked: counter("units_acked_total", "Dynamic units acknowledged."),
            units_reassigned: counter(
                "units_reassigned_total",
                "Leased units returned to the pool (their member left or its lease expired).",
            ),
            member_leases_expired: counter(
                "member_leases_expired_total",
                "Members forgotten because they made no call for their job's member TTL.",
            ),
            jobs_deleted: counter_vec(
                "jobs_deleted_total",
                "Jobs deleted, on request or when their retention after finishing passed.",
                &["reason"],
            ),
            txn_duration: registered(
                r,
                Histogram::with_opts(
                    HistogramOpts::new(
                        name("store_txn_duration_seconds"),
                        "Metadata store (etcd) transaction latency.",
                    )
                    .buckets(latency.clone()),
                ),
            ),
            txn_failures: counter(
                "store_txn_failures_total",
                "Metadata store transactions that failed or were rejected.",
            ),
            group_commit_ops: registered(
                r,
                Histogram::with_opts(
                    HistogramOpts::new(
                        name("group_commit_ops"),
                        "Operations per group-commit transaction.",
                    )
                    .buckets(exponential_buckets(1.0, 2.0, 8).unwrap_or_default()),
                ),
            ),
            rpc_requests: counter_vec(
                "rpc_requests_total",
                "gRPC calls by method and status code.",
                &["method", "code"],
            ),
            rpc_duration: registered(
                r,
                HistogramVec::new(
                    HistogramOpts::new(name("rpc_duration_seconds"), "gRPC call latency.")
                        .buckets(latency),
                    &["method"],
                ),
            ),
            registry,
        }
    }

    /// The registry to serve.
    pub fn registry(&self) -> &Registry {
        &self.registry
    }

    /// Counts what one change did.
    pub fn count(&self, tally: &Tally) {
        self.generations.inc_by(tally.generations);
        self.commits.inc_by(tally.commits);
        self.units_leased.inc_by(tally.units_leased);
        self.units_acked.inc_by(tally.units_acked);
        self.units_reassigned.inc_by(tally.units_reassigned);
        self.member_leases_expired.inc_by(tally.leases_expired);
    }

    /// Counts one gRPC call.
    pub fn rpc(&self, method: &str, code: tonic::Code, took: Duration) {
        self.rpc_requests
            .with_label_values(&[method, code_name(code)])
            .inc();
        self.rpc_duration
            .with_label_values(&[method])
            .observe(took.as_secs_f64());
    }

    /// This replica won or lost the election.
    pub fn set_leader(&self, leading: bool) {
        self.leader.set(i64::from(leading));
        let change = if leading { "won" } else { "lost" };
        self.leadership_changes.with_label_values(&[change]).inc();
    }
}

/// A gRPC code as its canonical upper-case name (`NOT_FOUND`).
pub fn code_name(code: tonic::Code) -> &'static str {
    use tonic::Code::*;
    match code {
        Ok => "OK",
        Cancelled => "CANCELLED",
        Unknown => "UNKNOWN",
        InvalidArgument => "INVALID_ARGUMENT",
        DeadlineExceeded => "DEADLINE_EXCEEDED",
        NotFound => "NOT_FOUND",
        AlreadyExists => "ALREADY_EXISTS",
        PermissionDenied => "PERMISSION_DENIED",
        ResourceExhausted => "RESOURCE_EXHAUSTED",
        FailedPrecondition => "FAILED_PRECONDITION",
        Aborted => "ABORTED",
        OutOfRange => "OUT_OF_RANGE",
        Unimplemented => "UNIMPLEMENTED",
        Internal => "INTERNAL",
        Unavailable => "UNAVAILABLE",
        DataLoss => "DATA_LOSS",
        Unauthenticated => "UNAUTHENTICATED",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_metric_registers_and_renders_with_its_documented_name() {
        let metrics = Metrics::new();
        metrics.rpc("Join", tonic::Code::NotFound, Duration::from_millis(3));
        metrics.set_leader(true);
        metrics.count(&Tally {
            units_reassigned: 4,
            ..Tally::default()
        });
        let text = tributary_io::metrics::render(metrics.registry());
        assert!(text.contains("tributary_coordinator_leader 1\n"), "{text}");
        assert!(
            text.contains(
                "tributary_coordinator_rpc_requests_total{code=\"NOT_FOUND\",method=\"Join\"} 1\n"
            ),
            "{text}"
        );
        assert!(
            text.contains("tributary_coordinator_units_reassigned_total 4\n"),
            "{text}"
        );
        let documented = include_str!("../../docs/METRICS.md");
        for line in text.lines().filter(|l| l.starts_with("# TYPE ")) {
            let name = line.split(' ').nth(2).unwrap_or_default();
            assert!(
                documented.contains(&format!("`{name}`")),
                "{name} is not in docs/METRICS.md"
            );
        }
    }
}
