//! Test support shared by the workspace's tests and benches, one home per
//! concern:
//!
//! - [`etcd`]: a real etcd on loopback, one member or a cluster, and a
//!   snapshot of what the coordinator keeps in it;
//! - [`s3`]: an S3-compatible server (`moto_server`) on loopback and the
//!   store options that reach it; [`faulty_s3`]: one that misbehaves on
//!   command;
//! - [`cli`]: the `tributary` binary, the test virtualenv's Python, and a
//!   scratch directory;
//! - [`process`]: a child process whose output lines are collected;
//! - [`cluster`]: coordinator replicas and rank processes (`tributary-rank`);
//! - [`coordinator`]: gRPC clients of a coordinator and the requests tests
//!   send it;
//! - [`dataset`]: datasets packed for tests;
//! - [`tls`]: test certificates.
//!
//! End-to-end tests live in `tests/e2e/`.

use std::net::TcpListener;
use std::time::{Duration, Instant};

pub mod cli;
pub mod cluster;
pub mod coordinator;
pub mod dataset;
pub mod etcd;
pub mod faulty_s3;
pub mod process;
pub mod s3;
pub mod tls;

/// A loopback port free when asked (another process may take it before it
/// is bound: starters that can tell retry).
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .expect("bind a free loopback port")
        .port()
}

/// Polls `ready` every 50 ms until it holds; panics naming `what` once
/// `deadline` has passed.
pub fn wait_until(what: &str, deadline: Duration, mut ready: impl FnMut() -> bool) {
    let start = Instant::now();
    while !ready() {
        assert!(
            start.elapsed() < deadline,
            "timed out after {deadline:?} waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// [`wait_until`] for an async condition, polled every `every` on the
/// current tokio runtime.
pub async fn eventually(
    what: &str,
    deadline: Duration,
    every: Duration,
    mut ready: impl AsyncFnMut() -> bool,
) {
    let start = Instant::now();
    while !ready().await {
        assert!(
            start.elapsed() < deadline,
            "timed out after {deadline:?} waiting for {what}"
        );
        tokio::time::sleep(every).await;
    }
}
