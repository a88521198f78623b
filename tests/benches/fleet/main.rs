//! A fleet of simulated ranks against the release coordinator, to see what
//! one sync job of N ranks (or, with `--dynamic`, one dynamic job of N
//! members) costs it.
//!
//! Per rank count: starts a real etcd on loopback, the `tributary
//! coordinator` binary of this profile as its own process (so its CPU and
//! memory are read from `/proc/PID`), creates one sync job on a tiny
//! dataset, and runs N ranks over a few shared gRPC connections. Each rank
//! speaks as `tributary_worker::coordinated` does (Join with the dataset's
//! digest, GetAssignment, a Report every step, a Commit every few steps, a
//! KeepAlive every third of the TTL) and decodes nothing. Prints the join
//! storm (first Join sent to last assignment received), the calls per
//! second of the steady window, p50/p99 per call, failures by status code,
//! the coordinator's CPU (share of one core over the window) and its
//! resident memory (peak and at the end).
//!
//! ```text
//! cargo build --release -p tributary-cli
//! cargo bench -p tributary-tests --bench fleet -- --ranks 256,1024,4096
//! cargo bench -p tributary-tests --bench fleet -- --ranks 16384 --step-ms 2000 --ttl-s 60
//! cargo bench -p tributary-tests --bench fleet -- --dynamic --ranks 4096
//! ```
//!
//! After each run it asks the coordinator for the job's status: a replica
//! that lost its leadership under the load (or stopped answering) fails
//! the run, and so does any failed call with `--require-clean`. A sync run
//! checks that epoch 0 was split exactly once over the ranks and that the
//! group's commit is the least rank's; with `--restart`, every rank then
//! restarts and the resumed generation must hold the rest of the epoch,
//! each sample once. `scripts/test.sh` runs 2,048 ranks so.
//!
//! `TRIBUTARY_BIN` names another coordinator binary. Needs the `etcd`
//! binary (`scripts/setup.sh` installs it).

#![allow(clippy::print_stdout, reason = "a benchmark prints its figures")]

mod probe;
mod rank;
mod restart;

use std::collections::BTreeMap;
use std::sync::atomic::AtomicUsize;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use clap::Parser;
use tokio::sync::Notify;
use tokio::time::Instant;
use tonic::transport::{Channel, Endpoint};
use tonic::Code;
use tributary_common::proto::v1::{self, coordinator_client::CoordinatorClient};
use tributary_tests::cli::tributary_bin;
use tributary_tests::coordinator::{create_request, leader_client};
use tributary_tests::dataset::tiny_dataset;
use tributary_tests::etcd::EtcdServer;
use tributary_tests::free_port;
use tributary_tests::process::Proc;

use probe::{mib, status_bytes, CpuMark, RssSampler};
use rank::{Plan, Rpc, Tally};

#[derive(Debug, Parser)]
#[command(about = "Simulated ranks of one sync job against the release coordinator")]
struct Args {
    /// Rank counts to run, comma separated; each gets its own etcd and
    /// coordinator.
    #[arg(long, value_delimiter = ',', default_values_t = [256u32, 1024, 4096])]
    ranks: Vec<u32>,
    /// Time between two reports of one rank, in milliseconds.
    #[arg(long, default_value_t = 1000)]
    step_ms: u64,
    /// A commit every this many steps.
    #[arg(long, default_value_t = 10)]
    commit_every: u64,
    /// Length of the steady window, in seconds.
    #[arg(long, default_value_t = 20)]
    seconds: u64,
    /// Time after the join storm before the window opens, in seconds.
    #[arg(long, default_value_t = 3)]
    warmup_s: u64,
    /// The job's member TTL (KeepAlive every third of it), in seconds.
    #[arg(long, default_value_t = 30)]
    ttl_s: u32,
    /// gRPC connections the ranks share.
    #[arg(long, default_value_t = 16)]
    channels: usize,
    /// Samples of the dataset (one shard per `--per-shard`).
    #[arg(long, default_value_t = 65_536)]
    samples: u32,
    #[arg(long, default_value_t = 64)]
    per_shard: u32,
    /// One dynamic job of N members (acquire a unit, ack it, every step)
    /// instead of a sync job of N ranks.
    #[arg(long)]
    dynamic: bool,
    /// Exit non-zero if any call failed.
    #[arg(long)]
    require_clean: bool,
    /// Sync: after the run, restart every rank (restart count 1) and check
    /// that the generation they get resumes exactly from the group's commit.
    #[arg(long)]
    restart: bool,
    /// More flags for the coordinator, space separated.
    #[arg(long, default_value = "")]
    coordinator_flags: String,
    /// Passed by `cargo bench`.
    #[arg(long, hide = true)]
    bench: bool,
}

/// One row of the table.
#[derive(Debug)]
struct Row {
    ranks: u32,
    /// Whether the coordinator answered GetStatus as leader after the run.
    leading: bool,
    storm: Option<Duration>,
    calls_per_s: f64,
    tally: Tally,
    cpu_percent: f64,
    rss_peak: u64,
    rss_end: u64,
}

fn percentile(sorted: &[u32], p: f64) -> f64 {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted.get(i).map_or(f64::NAN, |&us| f64::from(us) / 1e3)
}

async fn connect(address: &str, n: usize) -> Vec<Channel> {
    let endpoint = Endpoint::from_shared(format!("http://{address}"))
        .expect("uri")
        .tcp_nodelay(true);
    let mut channels = Vec::with_capacity(n);
    for _ in 0..n {
        channels.push(endpoint.connect().await.expect("connect"));
    }
    channels
}

async fn scenario(args: &Args, url: &str, digest: &str, ranks: u32) -> Row {
    let etcd = EtcdServer::start();
    let address = format!("127.0.0.1:{}", free_port());
    let mut command = std::process::Command::new(tributary_bin());
    command
        .args([
            "coordinator",
            "--listen",
            &address,
            "--etcd",
            &etcd.endpoint(),
        ])
        .args(args.coordinator_flags.split_whitespace())
        .env("RUST_LOG", "warn");
    let coordinator = Proc::spawn(&format!("coordinator {address}"), command);
    let pid = coordinator.pid();
    let mut admin = leader_client(&address).await;
    let job = format!("fleet-{ranks}");
    admin
        .create_job(create_request(
            &job,
            v1::JobConfig {
                manifest_url: url.to_owned(),
                batch_size: 1,
                epochs: 1000,
                member_ttl_s: args.ttl_s,
                mode: if args.dynamic {
                    v1::Mode::Dynamic
                } else {
                    v1::Mode::Sync
                } as i32,
                unit_samples: args.per_shard,
                ..v1::JobConfig::default()
            },
        ))
        .await
        .expect("create job");
    drop(admin);
    let rss_idle = status_bytes(pid, "VmRSS:").unwrap_or(0);
    let sampler = RssSampler::start(pid, Duration::from_millis(200));
    let channels = connect(&address, args.channels).await;
    let plan = Arc::new(Plan {
        job,
        digest: digest.to_owned(),
        world: ranks,
        dynamic: args.dynamic,
        step: Duration::from_millis(args.step_ms),
        commit_every: args.commit_every.max(1),
        window: Mutex::new(None),
        stop: Mutex::new(None),
        assigned: AtomicUsize::new(0),
        storm_end: Mutex::new(None),
        storm_over: Notify::new(),
    });
    let storm_start = Instant::now();
    let tasks: Vec<_> = (0..ranks)
        .map(|rank| {
            let channel = channels[rank as usize % channels.len()].clone();
            tokio::spawn(rank::run(Arc::clone(&plan), channel, rank))
        })
        .collect();
    // The storm ends when the last rank holds its part; give up after a
    // minute (the failures are counted).
    let give_up = storm_start + Duration::from_secs(60);
    let _ = tokio::time::timeout_at(give_up, plan.storm_over.notified()).await;
    let storm = plan
        .storm_end
        .lock()
        .expect("storm")
        .map(|end| end - storm_start);
    let rss_joined = status_bytes(pid, "VmRSS:").unwrap_or(0);
    tokio::time::sleep(Duration::from_secs(args.warmup_s)).await;
    let (from, to) = (
        Instant::now(),
        Instant::now() + Duration::from_secs(args.seconds),
    );
    *plan.window.lock().expect("window") = Some((from, to));
    *plan.stop.lock().expect("stop") = Some(to + Duration::from_millis(200));
    let cpu = CpuMark::now(pid).expect("the coordinator's /proc/PID/stat");
    tokio::time::sleep_until(to).await;
    let cpu_percent = cpu.percent_since(pid).unwrap_or(f64::NAN);
    let rss_end = status_bytes(pid, "VmRSS:").unwrap_or(0);
    let mut tally = Tally::default();
    for task in tasks {
        tally.merge(task.await.expect("rank task"));
    }
    // Still the leader, serving the job: a replica that lost its election
    // under the load answers UNAVAILABLE (and so do the calls meanwhile).
    let status = CoordinatorClient::new(channels[0].clone())
        .get_status(v1::JobRequest {
            job: plan.job.clone(),
        })
        .await;
    let leading = match status {
        Ok(status) => {
            if !args.dynamic {
                let status = status.into_inner();
                check_sync(args, ranks, &tally, &status);
                if args.restart && status.commit_generation == Some(0) {
                    let committed = status.commit_samples;
                    restart::check(&plan.job, digest, ranks, args.samples, committed, &channels)
                        .await;
                }
            }
            true
        }
        Err(status) => {
            println!("  GetStatus after the run: {status}");
            false
        }
    };
    let timed_steady: usize = [Rpc::Report, Rpc::Commit, Rpc::KeepAlive, Rpc::Acquire]
        .iter()
        .filter_map(|rpc| tally.micros.get(rpc).map(Vec::len))
        .sum();
    let steady_errors: u64 = tally
        .errors
        .iter()
        .filter(|((rpc, _), _)| !matches!(rpc, Rpc::Join | Rpc::Assignment))
        .map(|(_, n)| n)
        .sum();
    let calls_per_s = (timed_steady as u64 + steady_errors) as f64 / args.seconds as f64;
    let rss_peak = sampler.peak().max(status_bytes(pid, "VmHWM:").unwrap_or(0));
    drop(sampler);
    println!(
        "  {ranks} ranks: idle {:.0} MiB, joined {:.0} MiB, end {:.0} MiB, peak {:.0} MiB",
        mib(rss_idle),
        mib(rss_joined),
        mib(rss_end),
        mib(rss_peak)
    );
    drop(coordinator);
    drop(etcd);
    Row {
        ranks,
        leading,
        storm,
        calls_per_s,
        tally,
        cpu_percent,
        rss_peak,
        rss_end,
    }
}

/// A sync job's ranks were assigned every sample of epoch 0 exactly once,
/// and the group's commit is the least of the ranks' last commits (what a
/// restart resumes from). Panics if not.
fn check_sync(args: &Args, ranks: u32, tally: &Tally, status: &v1::JobStatus) {
    let (assigned, distinct) = rank::samples_in(&tally.spans);
    assert_eq!(
        (assigned, distinct),
        (args.samples as usize, args.samples as usize),
        "{ranks} ranks: epoch 0's {} samples assigned exactly once",
        args.samples
    );
    if let Some(committed) = tally.committed {
        assert_eq!(
            (status.commit_generation, status.commit_samples),
            (Some(0), committed),
            "{ranks} ranks: the group's commit is the least rank's"
        );
    }
    println!(
        "  {ranks} ranks: epoch 0 split exactly ({assigned} samples, each once); group commit {:?} at {} samples",
        status.commit_generation, status.commit_samples
    );
}

fn print_row(row: &mut Row) {
    let mut latencies = String::new();
    for rpc in Rpc::ALL {
        if let Some(micros) = row.tally.micros.get_mut(&rpc) {
            micros.sort_unstable();
            latencies.push_str(&format!(
                " {}={:.1}/{:.1}",
                rpc.name(),
                percentile(micros, 0.5),
                percentile(micros, 0.99)
            ));
        }
    }
    let mut errors: BTreeMap<String, u64> = BTreeMap::new();
    for ((rpc, code), n) in &row.tally.errors {
        *errors
            .entry(format!("{}:{}", rpc.name(), code_name(*code)))
            .or_default() += n;
    }
    if !row.leading {
        errors.insert("GetStatus after the run".into(), 1);
    }
    let errors = if errors.is_empty() {
        "none".to_owned()
    } else {
        errors
            .iter()
            .map(|(what, n)| format!("{what}={n}"))
            .collect::<Vec<_>>()
            .join(",")
    };
    let storm = row.storm.map_or("incomplete".to_owned(), |d| {
        format!("{:.2} s", d.as_secs_f64())
    });
    println!(
        "{:>6} {:>11} {:>9.0} {:>6.1}% {:>9.1} {:>9.1} {:>9.0}  {}",
        row.ranks,
        storm,
        row.calls_per_s,
        row.cpu_percent,
        mib(row.rss_peak),
        mib(row.rss_end),
        row.rss_end as f64 / f64::from(row.ranks.max(1)) / 1024.0,
        errors
    );
    println!("       p50/p99 ms:{latencies}");
}

fn code_name(code: i32) -> String {
    format!("{:?}", Code::from_i32(code))
}

#[tokio::main]
async fn main() {
    let args = Args::parse();
    let dir = tempfile::tempdir().expect("tempdir");
    let url = tiny_dataset(dir.path(), args.samples, args.per_shard).await;
    let opened = tributary_io::open_any(&url, &tributary_io::StoreOptions::default())
        .await
        .expect("open the dataset");
    let digest = tributary_io::dataset_sha256(&[opened.manifest_sha256()], false);
    println!(
        "fleet: one {} job, {} samples in shards of {}; a report every {} ms, a commit every {} \
         steps, TTL {} s; {} connections; {} s window after {} s warm-up; coordinator {}",
        if args.dynamic { "dynamic" } else { "sync" },
        args.samples,
        args.per_shard,
        args.step_ms,
        args.commit_every,
        args.ttl_s,
        args.channels,
        args.seconds,
        args.warmup_s,
        tributary_bin().display()
    );
    let mut rows = Vec::new();
    for &ranks in &args.ranks {
        rows.push(scenario(&args, &url, &digest, ranks).await);
    }
    println!(
        "{:>6} {:>11} {:>9} {:>7} {:>9} {:>9} {:>9}  errors",
        "ranks", "join storm", "calls/s", "cpu", "peak MiB", "end MiB", "KiB/rank"
    );
    for row in &mut rows {
        print_row(row);
    }
    let unclean: Vec<u32> = rows
        .iter()
        .filter(|row| !row.leading || (args.require_clean && !row.tally.errors.is_empty()))
        .map(|row| row.ranks)
        .collect();
    if !unclean.is_empty() {
        eprintln!("fleet: failed calls or a lost leadership at {unclean:?} ranks");
        std::process::exit(1);
    }
}
