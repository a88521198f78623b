//! A job's life beyond its members' calls: when it finished, its deletion,
//! and what the leader has seen of each member (for status; not stored).

use std::collections::BTreeMap;
use std::time::Instant;

use tributary_common::ids::MemberId;

use super::calls::Caller;
use super::effects::{put, Effects, Outcome};
use super::{Job, MemberRecord, State};
use crate::error::Result;
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

/// How recent a member's last moving report must be for its rate to
/// count in [`JobSummary::rates`](super::JobSummary): a member that stopped
/// reporting is not the job's fastest for ever.
pub const RATE_FRESH: std::time::Duration = std::time::Duration::from_secs(10);

impl Seen {
    /// Samples per second between the member's last two moving reports,
    /// when the last was within `RATE_FRESH` of `now`.
    pub fn recent_rate(&self, now: Instant) -> Option<f64> {
        let then = self.reported?;
        (now.saturating_duration_since(then) <= RATE_FRESH && self.rate > 0.0).then_some(self.rate)
    }
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
        if let Some(renewed) = self.renewed.get_mut(member) {
            *renewed = now;
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

    /// `outcome`, having recorded the call as `caller`'s at `now` when it
    /// was answered (a caller refused, for another member's secret or any
    /// other reason, is not seen: its call changed nothing); `progress`
    /// says what the call reported, from its effects.
    pub fn seen<T>(
        &mut self,
        caller: &Caller,
        now: Instant,
        (answer, effects): Outcome<T>,
        progress: impl FnOnce(&Effects) -> Progress,
    ) -> Outcome<T> {
        if answer.is_ok() || effects.tally.units_acked > 0 {
            self.touch(&caller.member, now, progress(&effects));
        }
        (answer, effects)
    }

    /// The calling member's KeepAlive at `now`: it lives another
    /// [`Job::member_ttl`], which is returned.
    pub fn renew(&mut self, caller: &Caller, now: Instant) -> Result<std::time::Duration> {
        self.authorize(&caller.member, &caller.secret)?;
        self.touch(&caller.member, now, Progress::None);
        Ok(self.member_ttl())
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

    /// Deletes the job: every key under its prefix, its members' store
    /// leases (an earlier coordinator's).
    /// Every later change of this model is refused ([`Job::deleted`]).
    pub fn delete(&mut self) -> Effects {
        self.deleted = true;
        let mut effects = Effects::ops(vec![Op::DeletePrefix {
            prefix: keys::job(&self.name),
        }]);
        effects.revoke = self
            .members
            .values()
            .filter_map(MemberRecord::store_lease)
            .collect();
        effects.wake = true;
        self.forget_members();
        self.seen.clear();
        effects
    }
}
