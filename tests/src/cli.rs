//! The binaries tests run: `tributary` (built beside the test binary), the
//! test virtualenv's Python scripts, and a scratch directory whose paths
//! are command-line arguments.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The repository root.
pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ has a parent")
        .to_owned()
}

/// The binary `name` of this workspace, in the directory cargo builds
/// binaries into (`target/<profile>/`, the parent of the test binary's
/// `deps/`); panics saying `how` to build it if it is missing.
pub fn workspace_bin(name: &str, how: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("current exe");
    let dir = exe
        .parent()
        .and_then(Path::parent)
        .expect("target/<profile>/deps");
    let bin = dir.join(name);
    assert!(bin.exists(), "{} is missing: {how}", bin.display());
    bin
}

/// The `tributary` binary: `$TRIBUTARY_BIN`, else the one built beside
/// this test binary.
pub fn tributary_bin() -> PathBuf {
    if let Some(bin) = std::env::var_os("TRIBUTARY_BIN") {
        return bin.into();
    }
    workspace_bin(
        "tributary",
        "run `cargo build -p tributary-cli` first (scripts/test.sh builds it with the tests)",
    )
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
    success_stdout(&format!("tributary {args:?}"), tributary(args, env))
}

/// Runs a Python script from `tests/python/` in the virtualenv; requires
/// success and returns stdout.
pub fn python(script: &str, args: &[&str]) -> String {
    let output = Command::new(venv_bin().join("python"))
        .arg(repo().join("tests/python").join(script))
        .args(args)
        .output()
        .expect("run python");
    success_stdout(&format!("{script} {args:?}"), output)
}

/// The stdout of `what`, a command that must have succeeded (else a panic
/// with its stderr).
pub fn success_stdout(what: &str, output: Output) -> String {
    assert!(
        output.status.success(),
        "{what} failed:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).expect("utf-8 output")
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
#[derive(Debug)]
pub struct Scratch {
    dir: tempfile::TempDir,
}

impl Default for Scratch {
    fn default() -> Self {
        Self::new()
    }
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

    /// The directory itself.
    pub fn root(&self) -> &Path {
        self.dir.path()
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
