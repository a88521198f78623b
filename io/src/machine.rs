//! What the machine has, for budgets that must fit it.

/// The machine's physical memory (MemTotal of /proc/meminfo) in bytes;
/// `None` where /proc is not there.
pub fn physical_memory_bytes() -> Option<u64> {
    let meminfo = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = meminfo.lines().find(|l| l.starts_with("MemTotal:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib.saturating_mul(1024))
}
