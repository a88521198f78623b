//! One simulated rank: the calls `tributary_worker::coordinated` makes for a
//! sync rank (Join with the dataset's digest, GetAssignment, a Report every
//! step, a Commit every few steps, a KeepAlive every third of the TTL), or
//! for a member of a dynamic job (Join, then every step a Report acking the
//! unit it held and an Acquire of the next), without reading or decoding
//! anything. Each call's latency and each failure's status code are kept
//! for the table.

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;
use tonic::transport::Channel;
use tributary_common::proto::v1::{self, coordinator_client::CoordinatorClient};
use tributary_tests::coordinator::{named_join, torchrun_join, unit_refs, MemberCalls};

/// The calls a rank makes, in table order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Rpc {
    Join,
    Assignment,
    Report,
    Commit,
    KeepAlive,
    Acquire,
}

impl Rpc {
    pub const ALL: [Rpc; 6] = [
        Rpc::Join,
        Rpc::Assignment,
        Rpc::Report,
        Rpc::Commit,
        Rpc::KeepAlive,
        Rpc::Acquire,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Rpc::Join => "Join",
            Rpc::Assignment => "GetAssignment",
            Rpc::Report => "Report",
            Rpc::Commit => "Commit",
            Rpc::KeepAlive => "KeepAlive",
            Rpc::Acquire => "Acquire",
        }
    }
}

/// What every rank of one run shares: the job, the pacing, and the
/// instants of the run.
#[derive(Debug)]
pub struct Plan {
    pub job: String,
    pub digest: String,
    pub world: u32,
    /// A dynamic job's members instead of a sync job's ranks.
    pub dynamic: bool,
    pub step: Duration,
    pub commit_every: u64,
    /// The steady window: calls started inside it are timed and counted.
    pub window: Mutex<Option<(Instant, Instant)>>,
    /// When every rank stops.
    pub stop: Mutex<Option<Instant>>,
    /// Ranks that hold their first assignment.
    pub assigned: AtomicUsize,
    /// When the last of them got it.
    pub storm_end: Mutex<Option<Instant>>,
    /// Told once `storm_end` is set.
    pub storm_over: Notify,
}

/// What one rank saw.
#[derive(Debug, Default)]
pub struct Tally {
    /// Latency in microseconds of each call timed, by call.
    pub micros: BTreeMap<Rpc, Vec<u32>>,
    /// Failed calls by call and status code (the whole run).
    pub errors: BTreeMap<(Rpc, i32), u64>,
    /// Sync: the spans of epoch 0 the ranks were assigned (shard, start, end).
    pub spans: Vec<(u32, u32, u32)>,
    /// Sync: the least of the ranks' last acknowledged commits, in samples
    /// (what the group's commit must be).
    pub committed: Option<u64>,
}

/// How many samples `spans` (shard, start, end) hold, and how many of them
/// are distinct.
pub fn samples_in(spans: &[(u32, u32, u32)]) -> (usize, usize) {
    let mut samples: Vec<(u32, u32)> = spans
        .iter()
        .flat_map(|&(shard, start, end)| (start..end).map(move |i| (shard, i)))
        .collect();
    let given = samples.len();
    samples.sort_unstable();
    samples.dedup();
    (given, samples.len())
}

impl Tally {
    pub fn merge(&mut self, other: Tally) {
        for (rpc, micros) in other.micros {
            self.micros.entry(rpc).or_default().extend(micros);
        }
        for (key, n) in other.errors {
            *self.errors.entry(key).or_default() += n;
        }
        self.spans.extend(other.spans);
        self.committed = match (self.committed, other.committed) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
    }

    /// Times a call and counts its failure; `timed` when it started in the
    /// steady window (or during the join storm).
    async fn call<T>(
        &mut self,
        rpc: Rpc,
        timed: bool,
        call: impl Future<Output = Result<tonic::Response<T>, tonic::Status>>,
    ) -> Option<T> {
        let sent = Instant::now();
        let result = call.await;
        match result {
            Ok(answer) => {
                if timed {
                    let micros = sent.elapsed().as_micros().min(u128::from(u32::MAX)) as u32;
                    self.micros.entry(rpc).or_default().push(micros);
                }
                Some(answer.into_inner())
            }
            Err(status) => {
                *self.errors.entry((rpc, status.code() as i32)).or_default() += 1;
                None
            }
        }
    }
}

fn in_window(plan: &Plan, at: Instant) -> bool {
    plan.window
        .lock()
        .expect("window")
        .is_some_and(|(from, to)| from <= at && at < to)
}

fn stopped(plan: &Plan, at: Instant) -> bool {
    plan.stop
        .lock()
        .expect("stop")
        .is_some_and(|stop| at >= stop)
}

/// Counts a rank that holds its first part (or unit); the last one ends
/// the join storm.
fn arrived(plan: &Plan) {
    if plan.assigned.fetch_add(1, Ordering::SeqCst) + 1 == plan.world as usize {
        *plan.storm_end.lock().expect("storm") = Some(Instant::now());
        plan.storm_over.notify_one();
    }
}

/// Rank `rank`: joins, takes its part of epoch 0, then reports, commits and
/// renews until the run stops. A rank whose Join or assignment fails gives
/// up (its error counted).
pub async fn run(plan: Arc<Plan>, channel: Channel, rank: u32) -> Tally {
    if plan.dynamic {
        return run_dynamic(plan, channel, rank).await;
    }
    let mut client = CoordinatorClient::new(channel);
    let mut tally = Tally::default();
    let join = v1::JoinRequest {
        manifest_sha256: plan.digest.clone(),
        ..torchrun_join(&plan.job, rank, plan.world, 0)
    };
    let Some(joined) = tally.call(Rpc::Join, true, client.join(join)).await else {
        return tally;
    };
    let calls = MemberCalls::own(&plan.job, &joined);
    let assignment = calls.assignment(joined.epoch);
    let Some(assignment) = tally
        .call(Rpc::Assignment, true, client.get_assignment(assignment))
        .await
    else {
        return tally;
    };
    arrived(&plan);
    tally
        .spans
        .extend(assignment.spans.iter().map(|s| (s.shard, s.start, s.end)));
    let part: u64 = assignment
        .spans
        .iter()
        .map(|s| u64::from(s.end.saturating_sub(s.start)))
        .sum();
    let member = calls.member();
    // Ranks step on their own clocks: phases spread evenly over a step.
    let start = Instant::now() + plan.step * rank / plan.world;
    let renew_every = Duration::from_millis(u64::from(joined.ttl_ms.max(300)) / 3);
    let (mut next_step, mut next_renewal) = (start, Instant::now() + renew_every);
    let mut step = 0u64;
    loop {
        let at = next_step.min(next_renewal);
        tokio::time::sleep_until(at).await;
        if stopped(&plan, at) {
            return tally;
        }
        let timed = in_window(&plan, at);
        if at == next_renewal {
            next_renewal += renew_every;
            let renew = client.keep_alive(member.clone());
            let _ = tally.call(Rpc::KeepAlive, timed, renew).await;
            continue;
        }
        next_step += plan.step;
        step += 1;
        // Batches of one sample; a rank at the end of its part keeps
        // reporting its end, as a trainer waiting for its peers would.
        let samples = step.min(part);
        let report = v1::ReportRequest {
            step,
            ..calls.report(assignment.generation, samples)
        };
        let _ = tally.call(Rpc::Report, timed, client.report(report)).await;
        if step.is_multiple_of(plan.commit_every) {
            let commit = calls.commit(assignment.generation, samples);
            if tally
                .call(Rpc::Commit, timed, client.commit(commit))
                .await
                .is_some()
            {
                tally.committed = Some(samples);
            }
        }
    }
}

/// Member `n` of a dynamic job: joins, then every step acks the unit it
/// holds (a Report) and acquires the next, renewing every third of the
/// TTL, until the run stops. A member whose Join fails gives up.
async fn run_dynamic(plan: Arc<Plan>, channel: Channel, n: u32) -> Tally {
    let mut client = CoordinatorClient::new(channel);
    let mut tally = Tally::default();
    let join = named_join(&plan.job, &format!("m{n}"), "");
    let Some(joined) = tally.call(Rpc::Join, true, client.join(join)).await else {
        return tally;
    };
    let calls = MemberCalls::own(&plan.job, &joined);
    let member = calls.member();
    let mut held = Vec::new();
    let mut first = true;
    let start = Instant::now() + plan.step * n / plan.world;
    let renew_every = Duration::from_millis(u64::from(joined.ttl_ms.max(300)) / 3);
    let (mut next_step, mut next_renewal) = (start, Instant::now() + renew_every);
    loop {
        let at = if first {
            Instant::now()
        } else {
            next_step.min(next_renewal)
        };
        tokio::time::sleep_until(at).await;
        if stopped(&plan, at) {
            return tally;
        }
        let timed = first || in_window(&plan, at);
        if !first && at == next_renewal {
            next_renewal += renew_every;
            let renew = client.keep_alive(member.clone());
            let _ = tally.call(Rpc::KeepAlive, timed, renew).await;
            continue;
        }
        if !held.is_empty() {
            let report = v1::ReportRequest {
                acked: std::mem::take(&mut held),
                ..calls.report(0, 0)
            };
            let _ = tally.call(Rpc::Report, timed, client.report(report)).await;
        }
        let acquire = client.acquire(calls.acquire(1));
        if let Some(got) = tally.call(Rpc::Acquire, timed, acquire).await {
            held = unit_refs(&got.units);
        }
        if first {
            first = false;
            arrived(&plan);
        } else {
            next_step += plan.step;
        }
    }
}
