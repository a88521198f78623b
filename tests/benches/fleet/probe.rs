//! What a process costs, read from `/proc/PID`: CPU time and resident
//! memory, sampled while the ranks run.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Clock ticks per second of `/proc/PID/stat` times (`getconf CLK_TCK`).
fn clock_ticks() -> u64 {
    std::process::Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|out| String::from_utf8(out.stdout).ok())
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(100)
}

/// User plus system CPU time of `pid` so far; None once it is gone.
pub fn cpu_time(pid: u32) -> Option<Duration> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The fields after the command name, which may hold spaces: state is
    // field 3, utime 14 and stime 15.
    let rest = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks: u64 = fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
    Some(Duration::from_millis(ticks * 1000 / clock_ticks()))
}

pub use tributary_tests::process::status_bytes;

/// Samples a process's resident memory every `every` until stopped; keeps
/// the peak seen (VmHWM is the kernel's own peak, read at the end too).
#[derive(Debug)]
pub struct RssSampler {
    peak: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl RssSampler {
    pub fn start(pid: u32, every: Duration) -> Self {
        let (peak, stop) = (
            Arc::new(AtomicU64::new(0)),
            Arc::new(AtomicBool::new(false)),
        );
        let thread = {
            let (peak, stop) = (Arc::clone(&peak), Arc::clone(&stop));
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    if let Some(rss) = status_bytes(pid, "VmRSS:") {
                        peak.fetch_max(rss, Ordering::Relaxed);
                    }
                    std::thread::sleep(every);
                }
            })
        };
        Self {
            peak,
            stop,
            thread: Some(thread),
        }
    }

    /// The largest resident size sampled so far.
    pub fn peak(&self) -> u64 {
        self.peak.load(Ordering::Relaxed)
    }
}

impl Drop for RssSampler {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// CPU used by `pid` between two instants, as a share of one core.
#[derive(Debug, Clone, Copy)]
pub struct CpuMark {
    at: Instant,
    cpu: Duration,
}

impl CpuMark {
    pub fn now(pid: u32) -> Option<Self> {
        Some(Self {
            at: Instant::now(),
            cpu: cpu_time(pid)?,
        })
    }

    /// Percent of one core used since `self`.
    pub fn percent_since(&self, pid: u32) -> Option<f64> {
        let now = Self::now(pid)?;
        let wall = now.at.duration_since(self.at).as_secs_f64();
        Some(100.0 * (now.cpu - self.cpu).as_secs_f64() / wall.max(1e-9))
    }
}

/// Bytes as MiB, for tables.
pub fn mib(bytes: u64) -> f64 {
    bytes as f64 / (1 << 20) as f64
}
