//! Coordinator replicas and rank processes (`tributary-rank`), each a real
//! process ([`Proc`]) that a test can `kill -9`, with every stdout line a
//! rank prints collected as it comes; and the job status a replica reports.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use tributary_common::proto::v1::coordinator_client::CoordinatorClient;
use tributary_common::proto::v1::{self, JobStatus};

use crate::cli::{tributary_bin, workspace_bin};
use crate::dataset::S3Dataset;
use crate::free_port;
use crate::process::Proc;
use crate::s3::S3_ENV;

/// A coordinator replica on a free port, state in etcd; returns it and its
/// address.
pub fn coordinator(etcd: &[String], s3_endpoint: &str) -> (Proc, String) {
    coordinator_with(etcd, s3_endpoint, &[])
}

/// [`coordinator`] with more flags.
pub fn coordinator_with(etcd: &[String], s3_endpoint: &str, extra: &[&str]) -> (Proc, String) {
    coordinator_command(Command::new(tributary_bin()), etcd, s3_endpoint, extra)
}

/// [`coordinator_with`] with its address space capped at `bytes`
/// (`prlimit --as`): an allocation past it aborts the process.
pub fn coordinator_limited(
    etcd: &[String],
    s3_endpoint: &str,
    extra: &[&str],
    bytes: u64,
) -> (Proc, String) {
    let mut command = Command::new("prlimit");
    command
        .arg(format!("--as={bytes}"))
        .arg("--")
        .arg(tributary_bin());
    coordinator_command(command, etcd, s3_endpoint, extra)
}

fn coordinator_command(
    mut command: Command,
    etcd: &[String],
    s3_endpoint: &str,
    extra: &[&str],
) -> (Proc, String) {
    let port = free_port();
    let address = format!("127.0.0.1:{port}");
    command.args([
        "coordinator",
        "--listen",
        &address,
        "--etcd",
        &etcd.join(","),
        "--leader-ttl-s",
        "2",
        "--s3-endpoint",
        s3_endpoint,
    ]);
    command.args(extra);
    command.envs(S3_ENV);
    (
        Proc::spawn(&format!("coordinator {address}"), command),
        address,
    )
}

/// `n` [`coordinator`] replicas on the same etcd, and their addresses.
pub fn coordinators(n: usize, etcd: &[String], s3_endpoint: &str) -> (Vec<Proc>, Vec<String>) {
    (0..n).map(|_| coordinator(etcd, s3_endpoint)).unzip()
}

/// The test rank, built with this package's tests.
pub fn rank_bin() -> PathBuf {
    workspace_bin(
        "tributary-rank",
        "cargo builds it with the tests of tributary-tests",
    )
}

/// Common arguments of every rank of a test job.
#[derive(Debug, Clone)]
pub struct JobArgs<'a> {
    pub coordinators: String,
    pub job: &'a str,
    pub dataset: &'a str,
    pub s3_endpoint: &'a str,
    pub extra: Vec<String>,
}

/// The units of [`JobArgs::dynamic`] jobs, in samples.
pub const DYNAMIC_UNIT: u32 = 16;

impl<'a> JobArgs<'a> {
    /// A job on `data` through the replicas at `coordinators` (comma
    /// separated), every rank started with `flags`.
    pub fn new(coordinators: String, job: &'a str, data: &'a S3Dataset, flags: &[&str]) -> Self {
        Self {
            coordinators,
            job,
            dataset: &data.url,
            s3_endpoint: data.endpoint(),
            extra: flags.iter().map(|flag| (*flag).to_owned()).collect(),
        }
    }

    /// A dynamic job on `data`: batches of 8, units of [`DYNAMIC_UNIT`]
    /// samples, a shuffle buffer of 16; each member takes `step_ms` a batch
    /// and is kept `ttl_s` without a word.
    pub fn dynamic(
        coordinators: String,
        job: &'a str,
        data: &'a S3Dataset,
        step_ms: u64,
        ttl_s: u64,
    ) -> Self {
        let (unit, step_ms, ttl_s) = (
            DYNAMIC_UNIT.to_string(),
            step_ms.to_string(),
            ttl_s.to_string(),
        );
        let flags = [
            "--batch-size",
            "8",
            "--unit-samples",
            &unit,
            "--step-ms",
            &step_ms,
            "--member-ttl-s",
            &ttl_s,
            "--shuffle-buffer",
            "16",
        ];
        Self::new(coordinators, job, data, &flags)
    }
}

/// A torchrun-style rank.
pub fn torchrun_rank(job: &JobArgs<'_>, rank: u32, world: u32, restart: u64) -> Proc {
    let mut command = rank_command(job);
    command.envs([
        ("RANK", rank.to_string()),
        ("WORLD_SIZE", world.to_string()),
        ("TORCHELASTIC_RUN_ID", "e2e".to_owned()),
        ("TORCHELASTIC_RESTART_COUNT", restart.to_string()),
    ]);
    Proc::spawn(&format!("rank {rank}/{world} restart {restart}"), command)
}

/// A torchrun-style rank started with `extra` flags after the job's (a
/// rank's own `--resume FILE`).
pub fn torchrun_rank_with(
    job: &JobArgs<'_>,
    rank: u32,
    world: u32,
    restart: u64,
    extra: &[&str],
) -> Proc {
    let mut command = rank_command(job);
    command.args(extra).envs([
        ("RANK", rank.to_string()),
        ("WORLD_SIZE", world.to_string()),
        ("TORCHELASTIC_RUN_ID", "e2e".to_owned()),
        ("TORCHELASTIC_RESTART_COUNT", restart.to_string()),
    ]);
    Proc::spawn(&format!("rank {rank}/{world} restart {restart}"), command)
}

/// A rank started as a plain process, not by torchrun (a re-run by hand, a
/// SLURM task, a Kubernetes pod): RANK and WORLD_SIZE, no restart count,
/// `run_id` (TORCHELASTIC_RUN_ID) when given, `extra` flags after the job's.
pub fn plain_rank(
    job: &JobArgs<'_>,
    rank: u32,
    world: u32,
    run_id: Option<&str>,
    extra: &[&str],
) -> Proc {
    let mut command = rank_command(job);
    command
        .args(extra)
        .envs([
            ("RANK", rank.to_string()),
            ("WORLD_SIZE", world.to_string()),
        ])
        .env_remove("TORCHELASTIC_RESTART_COUNT")
        .env_remove("TORCHELASTIC_RUN_ID");
    if let Some(run_id) = run_id {
        command.env("TORCHELASTIC_RUN_ID", run_id);
    }
    Proc::spawn(&format!("plain rank {rank}/{world}"), command)
}

/// The `world` ranks of a torchrun group at restart `restart`.
pub fn torchrun_group(job: &JobArgs<'_>, world: u32, restart: u64) -> Vec<Proc> {
    (0..world)
        .map(|rank| torchrun_rank(job, rank, world, restart))
        .collect()
}

/// A dynamic member joining by name.
pub fn named_member(job: &JobArgs<'_>, name: &str) -> Proc {
    let mut command = rank_command(job);
    command.args(["--name", name, "--mode", "dynamic"]);
    Proc::spawn(&format!("member {name}"), command)
}

/// `n` dynamic members named `m0`, `m1`, ...
pub fn named_members(job: &JobArgs<'_>, n: usize) -> Vec<Proc> {
    (0..n)
        .map(|i| named_member(job, &format!("m{i}")))
        .collect()
}

fn rank_command(job: &JobArgs<'_>) -> Command {
    let mut command = Command::new(rank_bin());
    command
        .args([
            "--coordinator",
            &job.coordinators,
            "--job",
            job.job,
            "--dataset",
            job.dataset,
            "--s3-endpoint",
            job.s3_endpoint,
        ])
        .args(&job.extra)
        .envs(S3_ENV);
    command
}

/// Calls the coordinator at `address` directly; a replica that does not
/// answer within 3 s (a frozen one) is an error.
pub fn status(address: &str, job: &str) -> Result<JobStatus, tonic::Status> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let call = async {
        let mut client = CoordinatorClient::connect(format!("http://{address}"))
            .await
            .map_err(|e| tonic::Status::unavailable(e.to_string()))?;
        client
            .get_status(v1::JobRequest {
                job: job.to_owned(),
            })
            .await
            .map(tonic::Response::into_inner)
    };
    runtime.block_on(async {
        tokio::time::timeout(Duration::from_secs(3), call)
            .await
            .unwrap_or_else(|_| {
                Err(tonic::Status::deadline_exceeded(format!(
                    "{address}: no answer"
                )))
            })
    })
}

/// The status from whichever replica leads.
pub fn leader_status(addresses: &[String], job: &str) -> Option<JobStatus> {
    addresses.iter().find_map(|a| status(a, job).ok())
}

/// The sample ids sync ranks delivered, by generation, from their `batch
/// GENERATION SAMPLES IDS...` lines.
pub fn delivered(ranks: &[Proc]) -> BTreeMap<u64, Vec<u64>> {
    let mut delivered: BTreeMap<u64, Vec<u64>> = BTreeMap::new();
    for rank in ranks {
        for line in rank.lines() {
            let parts: Vec<&str> = line.split(' ').collect();
            if parts[0] == "batch" {
                delivered
                    .entry(parts[1].parse().expect("generation"))
                    .or_default()
                    .extend(parts[3..].iter().map(|id| id.parse::<u64>().expect("id")));
            }
        }
    }
    delivered
}
