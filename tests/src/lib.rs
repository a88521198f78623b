//! Test support shared by the workspace's tests and benches, one home per
//! concern:
//!
//! - [`etcd`]: a real etcd on loopback, one member or a cluster, and a
//!   snapshot of what the coordinator keeps in it;
//! - [`s3`]: an S3-compatible server (`moto_server`) on loopback and the
//!   store options that reach it; [`faulty_s3`]: one that misbehaves on
//!   command; [`azurite`] and [`gcs`]: Azure Blob Storage and GCS
//!   emulators, and the environment that reaches them;
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

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::{Duration, Instant};

pub mod azurite;
pub mod cli;
pub mod cluster;
pub mod coordinator;
pub mod dataset;
pub mod etcd;
pub mod faulty_s3;
pub mod gcs;
pub mod parquet;
pub mod process;
pub mod s3;
pub mod tls;
pub mod tokens;

/// A loopback port free when asked (another process may take it before it
/// is bound: starters that can tell retry).
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .expect("bind a free loopback port")
        .port()
}

/// Sends one bare HTTP/1.1 request to `127.0.0.1:port` and reads the whole
/// response; returns its status code and its text (for messages), or
/// `None` when nothing answered.
pub fn http_request(
    port: u16,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> Option<(u16, String)> {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).ok()?;
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .ok()?;
    let mut head = format!(
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Length: {}\r\nConnection: close\r\n",
        body.len()
    );
    for (name, value) in headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str("\r\n");
    stream.write_all(head.as_bytes()).ok()?;
    stream.write_all(body).ok()?;
    let mut response = Vec::new();
    stream.read_to_end(&mut response).ok()?;
    let text = String::from_utf8_lossy(&response).into_owned();
    let status = text.split(' ').nth(1)?.parse().ok()?;
    Some((status, text))
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
