//! A real etcd on loopback for tests: one member ([`EtcdServer`]) or a
//! cluster ([`EtcdCluster`]), on free ports, with data in a temporary
//! directory, killed on drop; and a [`snapshot`] of the coordinator's keys.
//!
//! The binary is `$TRIBUTARY_ETCD`, else `etcd` on `PATH` (Debian's
//! `etcd-server`, installed by `scripts/setup.sh`).

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use etcd_client::GetOptions;
use tempfile::TempDir;

use crate::free_port;

/// How long a cluster may take to elect a leader and answer `/health`.
const START_DEADLINE: Duration = Duration::from_secs(30);
/// Start attempts: a free port can be taken between probing and binding.
const ATTEMPTS: usize = 3;

/// The etcd binary: `$TRIBUTARY_ETCD`, else `etcd` from `PATH`.
pub fn etcd_bin() -> PathBuf {
    if let Some(bin) = std::env::var_os("TRIBUTARY_ETCD") {
        return bin.into();
    }
    std::env::var_os("PATH")
        .and_then(|path| {
            std::env::split_paths(&path)
                .map(|dir| dir.join("etcd"))
                .find(|bin| bin.is_file())
        })
        .unwrap_or_else(|| {
            panic!("etcd is not on PATH: run scripts/setup.sh, or set TRIBUTARY_ETCD to the binary")
        })
}

/// TLS for a test etcd: PEM files. Members serve clients over TLS with
/// `cert`/`key` and, with `client_cert_auth`, admit only clients with a
/// certificate `ca` signed (etcd's `--client-cert-auth`).
#[derive(Debug, Clone)]
pub struct EtcdTlsFiles {
    pub ca: PathBuf,
    pub cert: PathBuf,
    pub key: PathBuf,
    pub client_cert_auth: bool,
}

/// One running member.
#[derive(Debug)]
struct Member {
    child: Child,
    client_port: u16,
    /// Plaintext `/health` and `/metrics`, whatever the client port speaks.
    metrics_port: u16,
    scheme: &'static str,
    log: PathBuf,
}

impl Member {
    fn endpoint(&self) -> String {
        format!("{}://127.0.0.1:{}", self.scheme, self.client_port)
    }

    /// The whole response to `GET path` on the plaintext metrics port;
    /// `None` when the member does not answer.
    fn get(&self, path: &str) -> Option<String> {
        let mut stream = TcpStream::connect(("127.0.0.1", self.metrics_port)).ok()?;
        let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
        let request = format!(
            "GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nConnection: close\r\n\r\n",
            self.metrics_port
        );
        let mut response = String::new();
        stream.write_all(request.as_bytes()).ok()?;
        stream.read_to_string(&mut response).ok()?;
        Some(response)
    }

    /// Whether `/health` answers `"health":"true"` (the member serves and
    /// the cluster has a leader).
    fn healthy(&self) -> bool {
        self.get("/health")
            .is_some_and(|response| response.contains(r#""health":"true""#))
    }

    /// Whether this member is the raft leader (its `/metrics` say
    /// `etcd_server_is_leader 1`); false when it does not answer.
    fn is_raft_leader(&self) -> bool {
        self.get("/metrics").is_some_and(|response| {
            response
                .lines()
                .any(|line| line.trim() == "etcd_server_is_leader 1")
        })
    }

    fn log_tail(&self) -> String {
        let log = std::fs::read_to_string(&self.log).unwrap_or_default();
        let start = log.len().saturating_sub(4000);
        log.get(start..).unwrap_or(&log).to_owned()
    }

    fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts `n` members of one new cluster in `dir`; `None` if one exited
/// early (a port was taken), after killing the others.
fn try_start(
    dir: &Path,
    n: usize,
    tls: Option<&EtcdTlsFiles>,
    attempt: usize,
) -> Option<Vec<Member>> {
    let ports: Vec<(u16, u16)> = (0..n).map(|_| (free_port(), free_port())).collect();
    let scheme = if tls.is_some() { "https" } else { "http" };
    let name = |i: usize| format!("m{i}");
    let cluster = ports
        .iter()
        .enumerate()
        .map(|(i, (_, peer))| format!("{}=http://127.0.0.1:{peer}", name(i)))
        .collect::<Vec<_>>()
        .join(",");
    // A single member never re-elects: tick fast, so the minimum lease TTL
    // is 1 s. A cluster on a busy machine keeps etcd's defaults (2 s).
    let (heartbeat, election) = if n == 1 {
        ("50", "500")
    } else {
        ("100", "1000")
    };
    let bin = etcd_bin();
    let mut members = Vec::new();
    for (i, (client, peer)) in ports.iter().enumerate() {
        let data = dir.join(format!("{}-{attempt}", name(i)));
        let log = dir.join(format!("{}-{attempt}.log", name(i)));
        let client_url = format!("{scheme}://127.0.0.1:{client}");
        let peer_url = format!("http://127.0.0.1:{peer}");
        let metrics_port = free_port();
        let stderr = std::fs::File::create(&log).expect("create the etcd log file");
        let mut command = Command::new(&bin);
        if let Some(tls) = tls {
            command
                .arg("--cert-file")
                .arg(&tls.cert)
                .arg("--key-file")
                .arg(&tls.key)
                .arg("--trusted-ca-file")
                .arg(&tls.ca);
            if tls.client_cert_auth {
                command.arg("--client-cert-auth");
            }
        }
        let child = command
            .arg("--name")
            .arg(name(i))
            .arg("--data-dir")
            .arg(&data)
            .args(["--listen-client-urls", &client_url])
            .args(["--advertise-client-urls", &client_url])
            .args([
                "--listen-metrics-urls",
                &format!("http://127.0.0.1:{metrics_port}"),
            ])
            .args(["--listen-peer-urls", &peer_url])
            .args(["--initial-advertise-peer-urls", &peer_url])
            .args(["--initial-cluster", &cluster])
            .args(["--initial-cluster-state", "new"])
            .args(["--initial-cluster-token", "tributary-test"])
            .args(["--heartbeat-interval", heartbeat])
            .args(["--election-timeout", election])
            .args(["--logger", "zap", "--log-level", "error"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(stderr)
            .spawn()
            .unwrap_or_else(|e| {
                panic!(
                    "cannot run {}: {e} (run scripts/setup.sh, or set TRIBUTARY_ETCD)",
                    bin.display()
                )
            });
        members.push(Member {
            child,
            client_port: *client,
            metrics_port,
            scheme,
            log,
        });
    }
    let start = Instant::now();
    loop {
        if let Some(exited) = members
            .iter_mut()
            .position(|m| m.child.try_wait().ok().flatten().is_some())
        {
            let tail = members[exited].log_tail();
            members.iter_mut().for_each(Member::kill);
            assert!(
                attempt + 1 < ATTEMPTS,
                "etcd member {exited} exited at start:\n{tail}"
            );
            return None;
        }
        if members.iter().all(Member::healthy) {
            return Some(members);
        }
        if start.elapsed() > START_DEADLINE {
            let tail = members[0].log_tail();
            members.iter_mut().for_each(Member::kill);
            panic!("etcd did not become healthy within {START_DEADLINE:?}:\n{tail}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn start_members(n: usize, tls: Option<&EtcdTlsFiles>) -> (TempDir, Vec<Member>) {
    assert!(n > 0, "a cluster needs a member");
    let dir = tempfile::Builder::new()
        .prefix("tributary-etcd-")
        .tempdir()
        .expect("create a temporary directory for etcd");
    for attempt in 0..ATTEMPTS {
        if let Some(members) = try_start(dir.path(), n, tls, attempt) {
            return (dir, members);
        }
    }
    unreachable!("try_start panics on its last attempt")
}

/// One etcd member on loopback; killed on drop.
#[derive(Debug)]
pub struct EtcdServer {
    member: Member,
    _dir: TempDir,
}

impl EtcdServer {
    /// Starts etcd and waits until it answers `/health`.
    pub fn start() -> Self {
        Self::start_with(None)
    }

    /// Starts etcd serving clients over TLS (`https://127.0.0.1:<port>`);
    /// the certificate must name 127.0.0.1.
    pub fn start_tls(tls: &EtcdTlsFiles) -> Self {
        Self::start_with(Some(tls))
    }

    fn start_with(tls: Option<&EtcdTlsFiles>) -> Self {
        let (dir, mut members) = start_members(1, tls);
        let member = members.pop().expect("one member");
        Self { member, _dir: dir }
    }

    /// The client URL, `http://127.0.0.1:<port>` (https with TLS).
    pub fn endpoint(&self) -> String {
        self.member.endpoint()
    }
}

impl Drop for EtcdServer {
    fn drop(&mut self) {
        self.member.kill();
    }
}

/// A cluster of etcd members on loopback; killed on drop.
#[derive(Debug)]
pub struct EtcdCluster {
    members: Vec<Member>,
    _dir: TempDir,
}

impl EtcdCluster {
    /// Starts `members` members and waits until all answer `/health`.
    pub fn start(members: usize) -> Self {
        let (dir, members) = start_members(members, None);
        Self { members, _dir: dir }
    }

    /// Every member's client URL.
    pub fn endpoints(&self) -> Vec<String> {
        self.members.iter().map(Member::endpoint).collect()
    }

    /// The index of the member that is the raft leader, once one is
    /// (within 10 s); panics if none is.
    pub fn raft_leader(&self) -> usize {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Some(leader) = self.members.iter().position(Member::is_raft_leader) {
                return leader;
            }
            assert!(
                Instant::now() < deadline,
                "no etcd member reports itself the raft leader"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Kills member `member` with SIGKILL; the rest keep a quorum if a
    /// majority remains.
    pub fn kill(&mut self, member: usize) {
        self.members[member].kill();
    }
}

impl Drop for EtcdCluster {
    fn drop(&mut self) {
        self.members.iter_mut().for_each(Member::kill);
    }
}

/// Every key under `/tributary/` with its value, and the store revision:
/// equal snapshots mean nothing was written in between.
pub async fn snapshot(endpoint: &str) -> (Vec<(String, Vec<u8>)>, i64) {
    let mut client = etcd_client::Client::connect([endpoint], None)
        .await
        .expect("connect etcd");
    let response = client
        .get("/tributary/", Some(GetOptions::new().with_prefix()))
        .await
        .expect("range");
    let revision = response.header().expect("header").revision();
    let kvs = response
        .kvs()
        .iter()
        .map(|kv| {
            (
                kv.key_str().expect("utf-8 key").to_owned(),
                kv.value().to_vec(),
            )
        })
        .collect();
    (kvs, revision)
}
