//! Where the coordinator's facts live in the metadata store: every key is
//! built and parsed here, nowhere else. Every key of a job sits under
//! `/tributary/<job>/`; job and member names are `[A-Za-z0-9_.-]` and never
//! start with `.`, so `/tributary/.leader` (the election) and
//! `/tributary/.txn/` (the etcd store's transaction guards) cannot collide
//! with a job.
//!
//! ```text
//! /tributary/<job>/config                        StoredJob
//! /tributary/<job>/finished                      when it finished (Unix ms)
//! /tributary/<job>/members/<member>              MemberRecord
//! /tributary/<job>/sync/gen/<generation:020>     GenMeta
//! /tributary/<job>/sync/commit                   CommitPoint (the group's)
//! /tributary/<job>/sync/commits/<part:06>        ranks' latest commits (256 a part)
//! /tributary/<job>/sync/progress/<part:06>       ranks' last reports (256 a part)
//! /tributary/<job>/dyn/epoch                     the open epoch
//! /tributary/<job>/dyn/<epoch:06>/leased/<unit:010>  member
//! /tributary/<job>/dyn/<epoch:06>/acked/<unit:010>   member
//! ```

use std::fmt;

use tributary_common::ids::{Epoch, Generation, JobId, MemberId};

/// Prefix of everything the coordinator stores.
pub const ROOT: &str = "/tributary/";

/// The election key (etcd election name).
pub const ELECTION: &str = "/tributary/.leader";

/// The longest a job name may be.
pub const MAX_JOB_NAME: usize = 128;
/// The longest a member name may be: a torchrun member is its run id (a
/// name) and two numbers.
pub const MAX_MEMBER_NAME: usize = 192;

/// One fact of one job, as a key.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Key {
    /// The job's stored record (config, manifest digests).
    Config { job: JobId },
    /// When the job finished, in Unix milliseconds: its retention counts
    /// from there, on whichever replica leads.
    Finished { job: JobId },
    /// A member (under a store lease only if an earlier coordinator put it
    /// there: `model::liveness`).
    Member { job: JobId, member: MemberId },
    /// A sync generation.
    Generation { job: JobId, generation: Generation },
    /// The sync job's last commit: the group's resume point.
    Commit { job: JobId },
    /// Each rank's latest commit in the group's current incarnation; the
    /// group's commit is their minimum. `part` `p` holds ranks
    /// `p * RANKS_PER_KEY ..` (`model::sync`), so a commit writes one
    /// bounded key however large the world; `None`: every rank in one key,
    /// as an earlier coordinator stored them (read, never written).
    RankCommits { job: JobId, part: Option<u32> },
    /// Each rank's last reported progress, in parts as `RankCommits`: the
    /// group-commit window writes each part at most once per flush however
    /// many of its ranks report.
    Progress { job: JobId, part: Option<u32> },
    /// The dynamic job's open epoch.
    DynEpoch { job: JobId },
    /// A unit of a dynamic epoch leased to a member.
    Leased { job: JobId, epoch: Epoch, unit: u32 },
    /// A unit of a dynamic epoch acked by a member.
    Acked { job: JobId, epoch: Epoch, unit: u32 },
}

/// A key under [`ROOT`] that is not one [`Key`] builds.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("key {key:?} is not a coordinator key: {why}")]
pub struct KeyError {
    pub key: String,
    pub why: &'static str,
}

impl Key {
    /// The job the key belongs to.
    pub fn job(&self) -> &JobId {
        match self {
            Key::Config { job }
            | Key::Finished { job }
            | Key::Member { job, .. }
            | Key::Generation { job, .. }
            | Key::Commit { job }
            | Key::RankCommits { job, .. }
            | Key::Progress { job, .. }
            | Key::DynEpoch { job }
            | Key::Leased { job, .. }
            | Key::Acked { job, .. } => job,
        }
    }

    /// Parses a key [`Key`]'s `Display` wrote; anything else (an unknown
    /// fact, a bad name, a number not written as this module writes it)
    /// is an error naming the key.
    pub fn parse(key: &str) -> Result<Key, KeyError> {
        let error = |why| KeyError {
            key: key.to_owned(),
            why,
        };
        let rest = key
            .strip_prefix(ROOT)
            .ok_or_else(|| error("not under /tributary/"))?;
        let (job, rest) = rest.split_once('/').ok_or_else(|| error("no job prefix"))?;
        if !valid_name(job) {
            return Err(error("the job name is not a valid name"));
        }
        let job = JobId::from(job);
        let parts: Vec<&str> = rest.split('/').collect();
        let parsed = match parts.as_slice() {
            ["config"] => Key::Config { job },
            ["finished"] => Key::Finished { job },
            ["members", member] => {
                if !valid_member(member) {
                    return Err(error("the member name is not a valid name"));
                }
                Key::Member {
                    job,
                    member: MemberId::from(*member),
                }
            }
            ["sync", "gen", generation] => Key::Generation {
                job,
                generation: Generation(number(generation).ok_or_else(|| error("bad generation"))?),
            },
            ["sync", "commit"] => Key::Commit { job },
            ["sync", "commits"] => Key::RankCommits { job, part: None },
            ["sync", "progress"] => Key::Progress { job, part: None },
            ["sync", kind @ ("commits" | "progress"), part] => {
                let part = number(part)
                    .and_then(|p| u32::try_from(p).ok())
                    .ok_or_else(|| error("bad part"))?;
                let part = Some(part);
                if *kind == "commits" {
                    Key::RankCommits { job, part }
                } else {
                    Key::Progress { job, part }
                }
            }
            ["dyn", "epoch"] => Key::DynEpoch { job },
            ["dyn", epoch, kind @ ("leased" | "acked"), unit] => {
                let epoch = Epoch(number(epoch).ok_or_else(|| error("bad epoch"))?);
                let unit = number(unit)
                    .and_then(|u| u32::try_from(u).ok())
                    .ok_or_else(|| error("bad unit"))?;
                if *kind == "leased" {
                    Key::Leased { job, epoch, unit }
                } else {
                    Key::Acked { job, epoch, unit }
                }
            }
            _ => return Err(error("unknown fact")),
        };
        // One spelling per key: a number padded otherwise is not ours.
        if parsed.to_string() != key {
            return Err(error("not written in the coordinator's form"));
        }
        Ok(parsed)
    }
}

/// Decimal digits only (no sign, no spaces), within u64.
fn number(text: &str) -> Option<u64> {
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    text.parse().ok()
}

impl fmt::Display for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let job = self.job();
        match self {
            Key::Config { .. } => write!(f, "{ROOT}{job}/config"),
            Key::Finished { .. } => write!(f, "{ROOT}{job}/finished"),
            Key::Member { member, .. } => write!(f, "{ROOT}{job}/members/{member}"),
            Key::Generation { generation, .. } => {
                write!(f, "{ROOT}{job}/sync/gen/{:020}", generation.get())
            }
            Key::Commit { .. } => write!(f, "{ROOT}{job}/sync/commit"),
            Key::RankCommits { part: None, .. } => write!(f, "{ROOT}{job}/sync/commits"),
            Key::RankCommits { part: Some(p), .. } => {
                write!(f, "{ROOT}{job}/sync/commits/{p:06}")
            }
            Key::Progress { part: None, .. } => write!(f, "{ROOT}{job}/sync/progress"),
            Key::Progress { part: Some(p), .. } => {
                write!(f, "{ROOT}{job}/sync/progress/{p:06}")
            }
            Key::DynEpoch { .. } => write!(f, "{ROOT}{job}/dyn/epoch"),
            Key::Leased { epoch, unit, .. } => {
                write!(f, "{ROOT}{job}/dyn/{:06}/leased/{unit:010}", epoch.get())
            }
            Key::Acked { epoch, unit, .. } => {
                write!(f, "{ROOT}{job}/dyn/{:06}/acked/{unit:010}", epoch.get())
            }
        }
    }
}

impl From<Key> for String {
    fn from(key: Key) -> Self {
        key.to_string()
    }
}

/// Everything of a job: the prefix of all its keys.
pub fn job(job: &JobId) -> String {
    format!("{ROOT}{job}/")
}

/// The prefix of a job's member keys.
pub fn members(job: &JobId) -> String {
    format!("{ROOT}{job}/members/")
}

/// The prefix of one dynamic epoch's leased and acked units.
pub fn dyn_units(job: &JobId, epoch: Epoch) -> String {
    format!("{ROOT}{job}/dyn/{:06}/", epoch.get())
}

/// The job a key under [`ROOT`] belongs to; None for keys that are no
/// job's (the election's, the store's transaction guards).
pub fn job_of(key: &str) -> Option<JobId> {
    let (job, _) = key.strip_prefix(ROOT)?.split_once('/')?;
    valid_name(job).then(|| JobId::from(job))
}

/// Is `name` usable as a job name (and so inside a key)? 1 to 128
/// characters of `[A-Za-z0-9_.-]`, not starting with `.`.
pub fn valid_name(name: &str) -> bool {
    name.len() <= MAX_JOB_NAME && key_segment(name)
}

/// Is `name` usable as a member name? As a job name, up to 192 characters.
pub fn valid_member(name: &str) -> bool {
    name.len() <= MAX_MEMBER_NAME && key_segment(name)
}

fn key_segment(name: &str) -> bool {
    !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || b == b'.')
        && !name.starts_with('.')
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn name(max: usize) -> impl Strategy<Value = String> {
        proptest::string::string_regex(&format!("[A-Za-z0-9_-][A-Za-z0-9_.-]{{0,{}}}", max - 1))
            .expect("regex")
    }

    fn key() -> impl Strategy<Value = Key> {
        let job = name(MAX_JOB_NAME).prop_map(JobId::from);
        (
            job,
            name(MAX_MEMBER_NAME),
            any::<u64>(),
            any::<u32>(),
            0..10u8,
        )
            .prop_map(|(job, member, n, unit, kind)| match kind {
                0 => Key::Config { job },
                1 => Key::Member {
                    job,
                    member: MemberId::from(member),
                },
                2 => Key::Generation {
                    job,
                    generation: Generation(n),
                },
                3 => Key::Commit { job },
                8 => Key::RankCommits {
                    job,
                    part: (unit % 2 == 0).then_some(unit / 2),
                },
                4 => Key::Progress {
                    job,
                    part: (unit % 2 == 0).then_some(unit / 2),
                },
                5 => Key::DynEpoch { job },
                7 => Key::Finished { job },
                6 => Key::Leased {
                    job,
                    epoch: Epoch(n),
                    unit,
                },
                _ => Key::Acked {
                    job,
                    epoch: Epoch(n),
                    unit,
                },
            })
    }

    proptest! {
        #[test]
        fn every_key_parses_back_to_itself(key in key()) {
            let text = key.to_string();
            prop_assert_eq!(Key::parse(&text), Ok(key.clone()));
            prop_assert_eq!(job_of(&text), Some(key.job().clone()));
            prop_assert!(text.starts_with(&job(key.job())));
        }
    }

    #[test]
    fn keys_that_are_no_jobs_fact_are_refused_naming_the_key() {
        for bad in [
            "/tributary/.leader/694d8a",
            "/tributary/.txn/1",
            "/elsewhere/job/config",
            "/tributary/job/what",
            "/tributary/job/members/",
            "/tributary/job/members/a/b",
            "/tributary/job/sync/gen/12",
            "/tributary/job/sync/progress/1",
            "/tributary/job/sync/commits/x",
            "/tributary/job/sync/gen/-0000000000000000001",
            "/tributary/job/dyn/000001/leased/x",
            "/tributary/job/dyn/000001/leased/99999999999",
            "/tributary/job/dyn/1/acked/0000000001",
        ] {
            let error = Key::parse(bad).expect_err(bad);
            assert_eq!(error.key, bad);
            assert!(error.to_string().contains(bad), "{error}");
        }
        assert_eq!(job_of("/tributary/.leader/694d8a"), None);
        assert_eq!(job_of("/tributary/a.b/config"), Some(JobId::from("a.b")));
    }

    #[test]
    fn names_are_the_documented_characters() {
        assert!(valid_name("run.1_a-B"));
        assert!(!valid_name(".leader"));
        assert!(!valid_name(""));
        assert!(!valid_name("a/b"));
        assert!(!valid_name(&"a".repeat(129)));
        assert!(valid_member(&"a".repeat(192)));
        assert!(!valid_member(&"a".repeat(193)));
    }
}
