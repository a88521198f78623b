//! What GetStatus and ListJobs show of a job, as the model knows it: the
//! service turns these into the protocol's messages.

use std::time::Instant;

use tributary_common::ids::{Generation, JobId, MemberId};

use super::{GenMeta, Identity, Job, State};
use tributary_common::job::{JobSpec, Mode};

/// A job's status: its config, members, and its mode's progress.
#[derive(Debug, Clone, PartialEq)]
pub struct JobStatus {
    pub config: JobSpec,
    pub members: Vec<MemberId>,
    /// Each member as this leader has seen it.
    pub member_status: Vec<MemberStatus>,
    /// When the job finished (Unix ms); 0 until then.
    pub finished_at_ms: u64,
    /// The mode's progress: epoch, generations, commits, units.
    pub mode: ModeStatus,
}

/// A mode's part of a job's status ([`JobStatus::mode`]): what the other
/// mode has not stays zero.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ModeStatus {
    pub epoch: u64,
    pub finished: bool,
    pub generation: Option<u64>,
    pub generations: Vec<GenMeta>,
    pub commit_generation: Option<u64>,
    pub commit_samples: u64,
    pub progress: Vec<RankProgress>,
    pub acked_units: u64,
    pub total_units: u64,
    pub leased_units: u64,
}

/// A sync rank's last report.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RankProgress {
    pub rank: u32,
    pub generation: Generation,
    pub samples: u64,
}

/// One member as the leader has seen it.
#[derive(Debug, Clone, PartialEq)]
pub struct MemberStatus {
    pub member: MemberId,
    /// A torchrun member's rank and world (0: a named member).
    pub rank: Option<u32>,
    pub world: u32,
    /// Sync: the samples of its last report; dynamic: of the units it acked.
    pub samples: u64,
    pub samples_per_second: f64,
    /// How long ago its last call was; `None`: not seen by this leader.
    pub last_seen_ms: Option<u64>,
    pub leased_units: u32,
}

/// One line of ListJobs.
#[derive(Debug, Clone, PartialEq)]
pub struct JobSummary {
    pub job: JobId,
    pub mode: Mode,
    pub epoch: u64,
    /// `None`: unbounded.
    pub epochs: Option<u64>,
    pub members: u32,
    pub finished: bool,
    /// When the job finished (Unix ms); 0 until then.
    pub finished_at_ms: u64,
    pub leased_units: u64,
    /// How fast the members that reported lately read (see [`Rates`]).
    pub rates: Rates,
}

/// Members' samples per second (sync: consumed; dynamic: in the units they
/// acked), over those whose last moving report is recent: a member acking
/// far faster than its peers (or than it could decode) acks units it did
/// not read, and shows here and in `/metrics`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Rates {
    /// The fastest member and its rate.
    pub fastest: Option<(MemberId, f64)>,
    /// The median rate (the lower middle one of an even count).
    pub median: f64,
    /// Members that reported lately.
    pub members: u32,
}

impl Job {
    pub fn status(&self) -> JobStatus {
        JobStatus {
            config: self.stored.config.clone(),
            members: self.members.keys().cloned().collect(),
            member_status: self.member_status(Instant::now()),
            finished_at_ms: self.finished_at.unwrap_or(0),
            mode: self.mode_status(),
        }
    }

    /// The mode's part of the status alone (epoch, generations, units,
    /// finished): what a job's one-line summary needs.
    fn mode_status(&self) -> ModeStatus {
        match &self.state {
            State::Sync(model) => model.status(),
            State::Dynamic(model) => model.status(),
        }
    }

    /// Each member as this leader has seen it, at `now`.
    pub fn member_status(&self, now: Instant) -> Vec<MemberStatus> {
        let leased = |member: &MemberId| match &self.state {
            State::Dynamic(model) => model.leased_by(member),
            State::Sync(_) => 0,
        };
        self.members
            .iter()
            .map(|(member, record)| {
                let seen = self.seen.get(member);
                let (rank, world) = match &record.identity {
                    Identity::Torchrun { rank, world, .. } => (Some(*rank), *world),
                    Identity::Name(_) => (None, 0),
                };
                MemberStatus {
                    member: member.clone(),
                    rank,
                    world,
                    samples: seen.map_or(0, |s| s.samples),
                    samples_per_second: seen.map_or(0.0, |s| s.rate),
                    last_seen_ms: seen
                        .map(|s| now.saturating_duration_since(s.at).as_millis() as u64),
                    leased_units: leased(member),
                }
            })
            .collect()
    }

    /// One line of ListJobs.
    /// Built every housekeeping round for every job, so without the
    /// per-member part of the status.
    pub fn summary(&self) -> JobSummary {
        let status = self.mode_status();
        let config = &self.stored.config;
        JobSummary {
            job: self.name.clone(),
            mode: config.mode,
            epoch: status.epoch,
            epochs: config.epochs,
            members: self.members.len() as u32,
            finished: status.finished,
            finished_at_ms: self.finished_at.unwrap_or(0),
            leased_units: status.leased_units,
            rates: self.rates(Instant::now()),
        }
    }

    /// The members' recent rates at `now`.
    pub fn rates(&self, now: Instant) -> Rates {
        let mut rates: Vec<(&MemberId, f64)> = self
            .seen
            .iter()
            .filter_map(|(member, seen)| Some((member, seen.recent_rate(now)?)))
            .collect();
        if rates.is_empty() {
            return Rates::default();
        }
        rates.sort_by(|a, b| a.1.total_cmp(&b.1));
        let median = rates[(rates.len() - 1) / 2].1;
        let (fastest, rate) = rates[rates.len() - 1];
        Rates {
            fastest: Some((fastest.clone(), rate)),
            median,
            members: rates.len() as u32,
        }
    }
}
