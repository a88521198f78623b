//! The cluster harness of the elastic tests: etcd, coordinator replicas and
//! rank processes (`tributary-rank`), each a real process that a test can
//! `kill -9`, with every stdout line a rank prints collected as it comes.

use std::io::{BufRead, BufReader};
use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tributary_common::proto::v1::coordinator_client::CoordinatorClient;
use tributary_common::proto::v1::{self, JobStatus};

use crate::harness::{tributary_bin, wait_until, S3_ENV};

pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("free port")
}

/// A child process whose stdout lines are collected; killed (SIGKILL) on drop.
pub struct Proc {
    pub name: String,
    child: Child,
    lines: Arc<Mutex<Vec<String>>>,
}

impl Proc {
    pub fn spawn(name: &str, mut command: Command) -> Self {
        let mut child = command
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap_or_else(|e| panic!("start {name}: {e}"));
        let lines = Arc::new(Mutex::new(Vec::new()));
        let stdout = child.stdout.take().expect("stdout");
        let sink = Arc::clone(&lines);
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                sink.lock().expect("lines").push(line);
            }
        });
        Self {
            name: name.to_owned(),
            child,
            lines,
        }
    }

    pub fn lines(&self) -> Vec<String> {
        self.lines.lock().expect("lines").clone()
    }

    /// Sends `signal` (`STOP`, `CONT`, ...) with `kill -SIGNAL`.
    pub fn signal(&self, signal: &str) {
        let status = Command::new("kill")
            .arg(format!("-{signal}"))
            .arg(self.child.id().to_string())
            .status()
            .expect("run kill");
        assert!(status.success(), "kill -{signal} {}: {status}", self.name);
    }

    /// `kill -9`.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Waits for a clean exit.
    pub fn wait_ok(&mut self, deadline: Duration) {
        let mut status = None;
        wait_until(&format!("{} to exit", self.name), deadline, || {
            status = self.child.try_wait().expect("try_wait");
            status.is_some()
        });
        let status = status.expect("status");
        assert!(
            status.success(),
            "{} failed: {status}; output: {:?}",
            self.name,
            self.lines().last()
        );
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A coordinator replica on a free port, state in etcd.
pub fn coordinator(etcd: &[String], s3_endpoint: &str) -> (Proc, String) {
    coordinator_with(etcd, s3_endpoint, &[])
}

/// [`coordinator`] with more flags.
pub fn coordinator_with(etcd: &[String], s3_endpoint: &str, extra: &[&str]) -> (Proc, String) {
    let port = free_port();
    let address = format!("127.0.0.1:{port}");
    let mut command = Command::new(tributary_bin());
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

pub fn rank_bin() -> std::path::PathBuf {
    std::path::PathBuf::from(env!("CARGO_BIN_EXE_tributary-rank"))
}

/// Common arguments of every rank of a test job.
pub struct JobArgs<'a> {
    pub coordinators: String,
    pub job: &'a str,
    pub dataset: &'a str,
    pub s3_endpoint: &'a str,
    pub extra: Vec<String>,
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

/// A dynamic member joining by name.
pub fn named_member(job: &JobArgs<'_>, name: &str) -> Proc {
    let mut command = rank_command(job);
    command.args(["--name", name, "--mode", "dynamic"]);
    Proc::spawn(&format!("member {name}"), command)
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
