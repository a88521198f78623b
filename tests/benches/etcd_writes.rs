//! etcd writes per second under simulated ranks, with and without the
//! group-commit window.
//!
//! Starts a real etcd on loopback and, per scenario, an in-process
//! coordinator on it; N simulated torchrun ranks (each its own gRPC
//! connection) join one sync job and then, every `--report-ms` on their own
//! clocks (phases spread evenly), report their progress, committing a checkpoint every 20 reports as DDP ranks do (all
//! ranks commit the same point). Prints the write requests the ranks sent
//! (what a coordinator writing each request on its own would send to etcd),
//! the store revisions etcd actually advanced by (one per transaction), the
//! ratio, and the report latency the window costs.
//!
//! ```text
//! cargo bench -p tributary-tests --bench etcd_writes
//! cargo bench -p tributary-tests --bench etcd_writes -- --ranks 64 --seconds 10
//! ```
//!
//! Needs the `etcd` binary (`scripts/setup.sh` installs it).

#![allow(clippy::print_stdout, reason = "a benchmark prints its figures")]

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::net::TcpListener;
use tributary_common::proto::v1::{self, join_request::Identity};
use tributary_coordinator::store::{EtcdElection, EtcdStore, MetaStore};
use tributary_coordinator::{keys, ServerConfig};
use tributary_tests::coordinator::leader_client;
use tributary_tests::dataset::tiny_dataset;
use tributary_tests::etcd::EtcdServer;

struct Args {
    ranks: Vec<u32>,
    seconds: u64,
    report_ms: u64,
    windows_ms: Vec<u64>,
}

fn parse_args() -> Args {
    let mut args = Args {
        ranks: vec![8, 64, 256],
        seconds: 5,
        report_ms: 100,
        windows_ms: vec![0, 50],
    };
    let list = |v: &str| -> Vec<u64> {
        v.split(',')
            .map(|n| n.parse().expect("a comma-separated list of numbers"))
            .collect()
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().unwrap_or_else(|| panic!("{flag} needs a value"));
        match flag.as_str() {
            "--ranks" => args.ranks = list(&value()).into_iter().map(|n| n as u32).collect(),
            "--seconds" => args.seconds = value().parse().expect("--seconds"),
            "--report-ms" => args.report_ms = value().parse().expect("--report-ms"),
            "--windows-ms" => args.windows_ms = list(&value()),
            // cargo bench passes --bench; ignore what is not ours.
            _ => {}
        }
    }
    args
}

struct Outcome {
    requests: u64,
    revisions: i64,
    latencies: Vec<Duration>,
}

async fn scenario(
    etcd: &EtcdServer,
    url: &str,
    job: &str,
    ranks: u32,
    window: Duration,
    args: &Args,
) -> Outcome {
    let store = EtcdStore::connect(&[etcd.endpoint()])
        .await
        .expect("connect etcd");
    let election = EtcdElection::new(
        store.clone(),
        keys::ELECTION.to_owned(),
        Duration::from_secs(2),
    );
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let address = listener.local_addr().expect("address").to_string();
    let mut config = ServerConfig::new(address.clone());
    config.flush_interval = window;
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(tributary_coordinator::run(
        listener,
        Arc::new(store.clone()),
        Arc::new(election),
        config,
        async {
            let _ = stopped.await;
        },
    ));
    let mut admin = leader_client(&address).await;
    admin
        .create_job(v1::CreateJobRequest {
            job: job.to_owned(),
            config: Some(v1::JobConfig {
                manifest_url: url.to_owned(),
                batch_size: 1,
                epochs: 1,
                member_ttl_s: 60,
                ..v1::JobConfig::default()
            }),
        })
        .await
        .expect("create job");

    // Every rank joins, then all start reporting at once.
    let mut members = Vec::new();
    for rank in 0..ranks {
        let mut client = leader_client(&address).await;
        let joined = client
            .join(v1::JoinRequest {
                job: job.to_owned(),
                identity: Some(Identity::Torchrun(v1::TorchrunIdentity {
                    rank,
                    world_size: ranks,
                    run_id: job.to_owned(),
                    restart_count: 0,
                    ..v1::TorchrunIdentity::default()
                })),
                secret: String::new(),
                ..v1::JoinRequest::default()
            })
            .await
            .expect("join")
            .into_inner();
        members.push((client, joined));
    }
    let revision =
        |store: EtcdStore| async move { store.range("/tributary/.none").await.expect("range").1 };
    let start_revision = revision(store.clone()).await;
    let started = Instant::now();
    let deadline = started + Duration::from_secs(args.seconds);
    let period = Duration::from_millis(args.report_ms);
    let tasks: Vec<_> = members
        .into_iter()
        .enumerate()
        .map(|(rank, (mut client, joined))| {
            let job = job.to_owned();
            // Ranks report on their own clocks: spread their phases evenly,
            // the worst case for batching.
            let phase = period * rank as u32 / ranks;
            tokio::spawn(async move {
                let mut latencies = Vec::new();
                let mut requests = 0u64;
                let mut ticker = tokio::time::interval_at(
                    tokio::time::Instant::from_std(started) + phase,
                    period,
                );
                let mut step = 0u64;
                while Instant::now() < deadline {
                    ticker.tick().await;
                    step += 1;
                    let sent = Instant::now();
                    client
                        .report(v1::ReportRequest {
                            job: job.clone(),
                            member: joined.member.clone(),
                            generation: joined.generation,
                            samples: step,
                            step,
                            acked: Vec::new(),
                            secret: joined.secret.clone(),
                        })
                        .await
                        .expect("report");
                    latencies.push(sent.elapsed());
                    requests += 1;
                    if step.is_multiple_of(20) {
                        client
                            .commit(v1::CommitRequest {
                                job: job.clone(),
                                member: joined.member.clone(),
                                generation: joined.generation,
                                samples: step,
                                secret: joined.secret.clone(),
                            })
                            .await
                            .expect("commit");
                        requests += 1;
                    }
                }
                (requests, latencies)
            })
        })
        .collect();
    let mut outcome = Outcome {
        requests: 0,
        revisions: 0,
        latencies: Vec::new(),
    };
    for task in tasks {
        let (requests, latencies) = task.await.expect("rank");
        outcome.requests += requests;
        outcome.latencies.extend(latencies);
    }
    let elapsed = started.elapsed();
    outcome.revisions = revision(store).await - start_revision;
    // Per second, over the measured interval.
    outcome.requests = (outcome.requests as f64 / elapsed.as_secs_f64()).round() as u64;
    outcome.revisions = (outcome.revisions as f64 / elapsed.as_secs_f64()).round() as i64;
    let _ = stop.send(());
    let _ = server.await;
    outcome
}

fn percentile(sorted: &[Duration], p: f64) -> f64 {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted.get(i).map_or(0.0, |d| d.as_secs_f64() * 1e3)
}

#[tokio::main]
async fn main() {
    let args = parse_args();
    let etcd = EtcdServer::start();
    let dir = tempfile::tempdir().expect("tempdir");
    let max_ranks = args.ranks.iter().copied().max().unwrap_or(1);
    let url = tiny_dataset(dir.path(), max_ranks * 64, 256).await;
    println!(
        "etcd writes: {} s per scenario, each rank reports every {} ms and commits every 20 reports",
        args.seconds, args.report_ms
    );
    println!(
        "{:>6} {:>10} {:>16} {:>14} {:>8} {:>14} {:>14}",
        "ranks", "window", "write reqs/s", "etcd txns/s", "ratio", "report p50", "report p99"
    );
    for &ranks in &args.ranks {
        for &window_ms in &args.windows_ms {
            let job = format!("bench-{ranks}-{window_ms}");
            let window = Duration::from_millis(window_ms);
            let mut outcome = scenario(&etcd, &url, &job, ranks, window, &args).await;
            outcome.latencies.sort_unstable();
            println!(
                "{ranks:>6} {:>10} {:>16} {:>14} {:>7.1}x {:>11.1} ms {:>11.1} ms",
                format!("{window_ms} ms"),
                outcome.requests,
                outcome.revisions,
                outcome.requests as f64 / outcome.revisions.max(1) as f64,
                percentile(&outcome.latencies, 0.5),
                percentile(&outcome.latencies, 0.99),
            );
        }
    }
}
