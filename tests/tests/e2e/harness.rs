//! The cluster harness: locate the binary and the virtualenv, run commands,
//! start and stop an S3-compatible server on loopback.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// The repository root.
pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ has a parent")
        .to_owned()
}

/// The `tributary` binary built beside this test binary.
pub fn tributary_bin() -> PathBuf {
    if let Some(bin) = std::env::var_os("TRIBUTARY_BIN") {
        return bin.into();
    }
    let exe = std::env::current_exe().expect("current exe");
    let dir = exe
        .parent()
        .and_then(Path::parent)
        .expect("target/<profile>/deps");
    let bin = dir.join("tributary");
    assert!(
        bin.exists(),
        "{} is missing: run `cargo build -p tributary-cli` first (scripts/test.sh does)",
        bin.display()
    );
    bin
}

/// The test virtualenv's `bin/` directory.
pub fn venv_bin() -> PathBuf {
    let venv =
        std::env::var_os("TRIBUTARY_VENV").map_or_else(|| repo().join(".venv"), PathBuf::from);
    let bin = venv.join("bin");
    assert!(
        bin.join("python").exists(),
        "no test virtualenv at {}: run scripts/test.sh, or set TRIBUTARY_VENV",
        venv.display()
    );
    bin
}

/// Runs `tributary ARGS` with extra environment; returns its output.
pub fn tributary(args: &[&str], env: &[(&str, &str)]) -> Output {
    let output = Command::new(tributary_bin())
        .args(args)
        .env_remove("AWS_ENDPOINT_URL")
        .envs(env.iter().copied())
        .output()
        .expect("run tributary");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        !stderr.contains("panicked"),
        "tributary {args:?} panicked:\n{stderr}"
    );
    output
}

/// Runs `tributary ARGS` and requires success; returns stdout.
pub fn tributary_ok(args: &[&str], env: &[(&str, &str)]) -> String {
    let output = tributary(args, env);
    assert!(
        output.status.success(),
        "tributary {args:?} failed:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).expect("utf-8 output")
}

/// Runs a Python script from `tests/python/` in the virtualenv.
pub fn python(script: &str, args: &[&str]) -> String {
    let output = Command::new(venv_bin().join("python"))
        .arg(repo().join("tests/python").join(script))
        .args(args)
        .output()
        .expect("run python");
    assert!(
        output.status.success(),
        "{script} {args:?} failed:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).expect("utf-8 output")
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .expect("bind")
        .local_addr()
        .expect("addr")
        .port()
}

/// Polls `ready` every 50 ms until it holds or `deadline` passes.
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

/// A `moto_server` (S3-compatible) on a loopback port; killed on drop.
pub struct S3Server {
    child: Child,
    pub endpoint: String,
    port: u16,
}

/// Credentials and region moto accepts (it checks none of them).
pub const S3_ENV: [(&str, &str); 3] = [
    ("AWS_ACCESS_KEY_ID", "tributary-test"),
    ("AWS_SECRET_ACCESS_KEY", "tributary-test"),
    ("AWS_REGION", "us-east-1"),
];

impl S3Server {
    pub fn start() -> Self {
        let port = free_port();
        let child = Command::new(venv_bin().join("moto_server"))
            .args(["-H", "127.0.0.1", "-p", &port.to_string()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start moto_server");
        let server = Self {
            child,
            endpoint: format!("http://127.0.0.1:{port}"),
            port,
        };
        wait_until("moto_server to listen", Duration::from_secs(30), || {
            server.request("GET", "/").is_some()
        });
        server
    }

    /// Sends one bare HTTP request; returns the status line.
    fn request(&self, method: &str, path: &str) -> Option<String> {
        let mut stream = TcpStream::connect(("127.0.0.1", self.port)).ok()?;
        stream
            .set_read_timeout(Some(Duration::from_secs(10)))
            .ok()?;
        let request = format!("{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n", self.port);
        stream.write_all(request.as_bytes()).ok()?;
        let mut response = String::new();
        stream.read_to_string(&mut response).ok()?;
        response.lines().next().map(str::to_owned)
    }

    /// Creates a bucket.
    pub fn create_bucket(&self, bucket: &str) {
        let status = self
            .request("PUT", &format!("/{bucket}"))
            .expect("create bucket");
        assert!(status.contains(" 200 "), "create bucket {bucket}: {status}");
    }

    /// Environment for `tributary` to reach this server.
    pub fn env(&self) -> Vec<(&'static str, &str)> {
        let mut env = S3_ENV.to_vec();
        env.push(("AWS_ENDPOINT_URL", &self.endpoint));
        env
    }
}

impl Drop for S3Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Parses `tributary read` output into `(id, key, label)` rows.
pub fn parse_read(stdout: &str) -> Vec<(u64, String, i64)> {
    stdout
        .lines()
        .map(|line| {
            let mut parts = line.split('\t');
            let id = parts.next().and_then(|s| s.parse().ok()).expect("id");
            let key = parts.next().expect("key").to_owned();
            let label = parts.next().and_then(|s| s.parse().ok()).expect("label");
            (id, key, label)
        })
        .collect()
}

/// A temporary working directory whose entries are named by UTF-8 paths,
/// as command lines want them.
pub struct Scratch {
    dir: tempfile::TempDir,
}

impl Scratch {
    pub fn new() -> Self {
        Self {
            dir: tempfile::tempdir().expect("tempdir"),
        }
    }

    /// The path of entry `name`, as a string.
    pub fn path(&self, name: &str) -> String {
        self.dir
            .path()
            .join(name)
            .to_str()
            .expect("utf-8 temp path")
            .to_owned()
    }

    /// Synthesizes `images` images of `classes` classes into entry `name`.
    pub fn synth(&self, name: &str, images: usize, classes: usize) -> String {
        let path = self.path(name);
        let (images, classes) = (images.to_string(), classes.to_string());
        tributary_ok(
            &["synth", &path, "--images", &images, "--classes", &classes],
            &[],
        );
        path
    }
}
