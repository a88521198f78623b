//! A job's life beyond its members' calls: when it finished, its deletion,
//! and what the leader has seen of each member (for status; not stored).

use std::collections::BTreeMap;
use std::time::Instant;

use tributary_common::ids::MemberId;
use tributary_common::proto::v1;

use super::effects::{put, Effects};
use super::{Identity, Job, State};
use crate::keys::{self, Key};
use crate::store::Op;

/// What the leader has seen of one member since it took over.
#[derive(Debug, Clone, Copy)]
pub struct Seen {
    /// The member's last call.
    pub at: Instant,
    /// Sync: the samples of its last report; dynamic: the samples of the
    /// units it acked.
    pub samples: u64,
    /// Samples per second between its last two reports that moved.
    pub rate: f64,
    /// When `samples` last changed.
    reported: Option<Instant>,
}

/// What a member's call says of its progress.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Progress {
    /// A call that reports nothing (a keep-alive, an acquire).
    None,
    /// A sync report: samples consumed in the current generation.
    Consumed(u64),
    /// Dynamic acks: samples in the units just acked.
    Acked(u64),
}

/// Members seen, by name.
pub type SeenMembers = BTreeMap<MemberId, Seen>;

impl Job {
    /// Records a call of `member` at `now` (a member the job does not hold
    /// is not recorded: the map stays bounded by the members).
    pub fn touch(&mut self, member: &MemberId, now: Instant, progress: Progress) {
        if !self.members.contains_key(member) {
            return;
        }
        let seen = self.seen.entry(member.clone()).or_insert(Seen {
            at: now,
            samples: 0,
            rate: 0.0,
            reported: None,
        });
        seen.at = now;
        let samples = match progress {
            Progress::None => return,
            Progress::Consumed(samples) => samples,
            Progress::Acked(samples) => seen.samples.saturating_add(samples),
        };
        if samples != seen.samples {
            if let Some(then) = seen.reported {
                let secs = now.saturating_duration_since(then).as_secs_f64();
                if samples > seen.samples && secs > 0.0 {
                    seen.rate = (samples - seen.samples) as f64 / secs;
                }
            }
            seen.reported = Some(now);
            seen.samples = samples;
        } else if seen.reported.is_none() {
            seen.reported = Some(now);
        }
    }

    /// Whether every epoch is done.
    pub fn is_finished(&self) -> bool {
        match &self.state {
            State::Sync(model) => model.finished,
            State::Dynamic(model) => model.finished(),
        }
    }

    /// When the job is done and that is not yet recorded: records `now_ms`
    /// (Unix milliseconds) and returns the op that stores it, so the
    /// retention counts from the same moment on whichever replica leads.
    pub fn mark_finished(&mut self, now_ms: u64) -> Option<Op> {
        if self.finished_at.is_some() || !self.is_finished() {
            return None;
        }
        let op = put(
            Key::Finished {
                job: self.name.clone(),
            },
            &now_ms,
        );
        match op {
            Ok(op) => {
                self.finished_at = Some(now_ms);
                Some(op)
            }
            Err(error) => {
                tracing::error!(job = self.name.as_str(), %error, "cannot record that the job finished");
                None
            }
        }
    }

    /// Deletes the job: every key under its prefix, its members' leases.
    /// Every later change of this model is refused ([`Job::deleted`]).
    pub fn delete(&mut self) -> Effects {
        self.deleted = true;
        let mut effects = Effects::ops(vec![Op::DeletePrefix {
            prefix: keys::job(&self.name),
        }]);
        effects.revoke = self.members.values().map(|r| r.lease).collect();
        effects.wake = true;
        self.members.clear();
        self.seen.clear();
        effects
    }

    /// Each member as this leader has seen it, at `now`.
    pub fn member_status(&self, now: Instant) -> Vec<v1::MemberStatus> {
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
                v1::MemberStatus {
                    member: member.to_string(),
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
    pub fn summary(&self) -> v1::JobSummary {
        let status = self.progress_status();
        let config = &self.stored.config;
        v1::JobSummary {
            job: self.name.to_string(),
            mode: v1::Mode::from(config.mode) as i32,
            epoch: status.epoch,
            epochs: config.epochs,
            members: self.members.len() as u32,
            finished: status.finished,
            finished_at_ms: self.finished_at.unwrap_or(0),
            leased_units: status.leased_units,
            ..v1::JobSummary::default()
        }
    }
}
