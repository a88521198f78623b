//! A child process whose stdout lines are collected as they come, that a
//! test can signal, `kill -9`, or wait on.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::wait_until;

/// A child process whose stdout lines are collected; killed (SIGKILL) on drop.
#[derive(Debug)]
pub struct Proc {
    pub name: String,
    child: Child,
    lines: Arc<Mutex<Vec<String>>>,
}

impl Proc {
    /// Starts `command`, its stdout collected and its stderr inherited.
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

    /// Every stdout line so far.
    pub fn lines(&self) -> Vec<String> {
        self.lines.lock().expect("lines").clone()
    }

    /// How many stdout lines so far start with `prefix`.
    pub fn count(&self, prefix: &str) -> usize {
        self.lines
            .lock()
            .expect("lines")
            .iter()
            .filter(|line| line.starts_with(prefix))
            .count()
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

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Resident memory (VmRSS), in bytes; None once the process is gone.
    pub fn rss(&self) -> Option<u64> {
        self.status_bytes("VmRSS:")
    }

    /// The most resident memory the process has had (VmHWM), in bytes.
    pub fn peak_rss(&self) -> Option<u64> {
        self.status_bytes("VmHWM:")
    }

    /// A `kB` field of `/proc/PID/status`, in bytes.
    fn status_bytes(&self, field: &str) -> Option<u64> {
        status_bytes(self.pid(), field)
    }

    /// `kill -9`.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// The exit status, if the process has exited (it is reaped then).
    pub fn try_exit(&mut self) -> Option<std::process::ExitStatus> {
        self.child.try_wait().expect("try_wait")
    }

    /// Waits for the process to exit, however it does.
    pub fn wait_exit(&mut self, deadline: Duration) -> std::process::ExitStatus {
        let mut status = None;
        wait_until(&format!("{} to exit", self.name), deadline, || {
            status = self.child.try_wait().expect("try_wait");
            status.is_some()
        });
        status.expect("status")
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

/// A `kB` field of `/proc/PID/status` (`VmRSS:`, `VmHWM:`), in bytes.
pub fn status_bytes(pid: u32, field: &str) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let kb: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix(field))?
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()?;
    Some(kb * 1024)
}
