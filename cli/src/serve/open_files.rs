//! The coordinator's file-descriptor limit.

/// Raises this process's soft limit on open files to its hard limit, so
/// the replica's cap on connections (`--max-connections`) is met before
/// the descriptor limit (often 1024). Returns the limit in force.
#[allow(
    unsafe_code,
    reason = "getrlimit and setrlimit on a local rlimit; the block states its invariant"
)]
pub fn raise() -> std::io::Result<u64> {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes one `rlimit` through the pointer, and
    // setrlimit reads one; it points at a live, writable `rlimit` owned by
    // this frame.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &raw mut limit) != 0 {
            return Err(std::io::Error::last_os_error());
        }
        if limit.rlim_cur < limit.rlim_max {
            limit.rlim_cur = limit.rlim_max;
            if libc::setrlimit(libc::RLIMIT_NOFILE, &raw const limit) != 0 {
                return Err(std::io::Error::last_os_error());
            }
        }
    }
    Ok(limit.rlim_cur)
}
