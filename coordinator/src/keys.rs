//! Where the coordinator's facts live in the metadata store. Every key of a
//! job sits under `/tributary/<job>/`; job names are restricted to
//! `[A-Za-z0-9_-]`, so `/tributary/.leader` (the election) cannot collide.

/// Prefix of everything the coordinator stores.
pub const ROOT: &str = "/tributary/";

/// The election key (etcd election name).
pub const ELECTION: &str = "/tributary/.leader";

pub fn job(job: &str) -> String {
    format!("{ROOT}{job}/")
}

pub fn config(job: &str) -> String {
    format!("{ROOT}{job}/config")
}

pub fn members(job: &str) -> String {
    format!("{ROOT}{job}/members/")
}

pub fn member(job: &str, member: &str) -> String {
    format!("{ROOT}{job}/members/{member}")
}

pub fn generation(job: &str, generation: u64) -> String {
    format!("{ROOT}{job}/sync/gen/{generation:020}")
}

pub fn generations(job: &str) -> String {
    format!("{ROOT}{job}/sync/gen/")
}

pub fn commit(job: &str) -> String {
    format!("{ROOT}{job}/sync/commit")
}

/// Every rank's last reported progress, in one key: the group-commit
/// window then writes it at most once per flush however many ranks report.
pub fn progress(job: &str) -> String {
    format!("{ROOT}{job}/sync/progress")
}

pub fn dyn_epoch(job: &str) -> String {
    format!("{ROOT}{job}/dyn/epoch")
}

pub fn dyn_units(job: &str, epoch: u64) -> String {
    format!("{ROOT}{job}/dyn/{epoch:06}/")
}

pub fn leased(job: &str, epoch: u64, unit: u32) -> String {
    format!("{ROOT}{job}/dyn/{epoch:06}/leased/{unit:010}")
}

pub fn acked(job: &str, epoch: u64, unit: u32) -> String {
    format!("{ROOT}{job}/dyn/{epoch:06}/acked/{unit:010}")
}

/// The job a key belongs to and the rest of the key.
pub fn split(key: &str) -> Option<(&str, &str)> {
    key.strip_prefix(ROOT)?.split_once('/')
}

/// Is `name` usable as a job or member name (and so inside a key)?
pub fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 128
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || b == b'.')
        && !name.starts_with('.')
}
