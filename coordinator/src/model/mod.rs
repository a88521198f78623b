//! The coordinator's model of each job: what is in the metadata store, held
//! in memory by the leader. Every change is a method here that updates the
//! model and returns its [`Effects`] (store writes, leases to revoke,
//! events); the leader applies them ([`crate::leader::Leader`])
//! before answering. A new leader rebuilds the model from the store with
//! [`Job::load`]. What it answers is its own types; the service converts
//! them to the protocol's.
//!
//! - this file: the job, its members and their records, loading;
//! - `calls`: one method per member call (join, assignment, acquire,
//!   report, commit, leave);
//! - `lifecycle`: what the leader has seen of each member, the job's end;
//! - `liveness`: members forgotten once they stop calling;
//! - `status`: what GetStatus and ListJobs show;
//! - [`sync`], `dynamic`: the two modes' state;
//! - [`effects`]: what a change asks of the world.

mod calls;
mod dynamic;
pub mod effects;
mod lifecycle;
mod liveness;
mod status;
pub mod sync;

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use tributary_common::ids::{Epoch, JobId, MemberId};
use tributary_common::job::{JobSpec, Mode};
use tributary_common::plan::generation::{CommitPoint, GenerationRecord};
use tributary_common::plan::mix::Layout;

use crate::error::{CoordError, Result};
use crate::keys::Key;
use crate::limits::Fleet;
use crate::store::{KeyValue, LeaseId, Op};

pub use calls::{Acquired, Caller, Joined, Joiner};
pub use dynamic::{DynModel, Unit, UnitRef};
pub use effects::{outcome, Effects, Event, Outcome, Tally};
pub use lifecycle::{Progress, Seen, SeenMembers};
pub use status::{JobStatus, JobSummary, MemberStatus, ModeStatus, RankProgress, Rates};
pub use sync::{Assignment, SyncModel};
pub use tributary_common::identity::Identity;

/// What the store keeps about a job besides its progress.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoredJob {
    pub config: JobSpec,
    /// crc32c of the manifest's canonical JSON when the job was created.
    pub manifest_crc32c: u32,
    /// SHA-256 (hex) of the same: the digest a loaded job is checked
    /// against. Absent in jobs created before it was recorded, which are
    /// checked by their crc32c.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub manifest_sha256: Option<String>,
    /// A mixed job's manifests' SHA-256 (hex), in source order: the
    /// digest above is of these, and a changed one is named by them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub source_sha256: Vec<String>,
    pub samples: u64,
    pub shards: u32,
}

/// A generation as stored: its plan record and the incarnation of the
/// group it belongs to: the torchrun restart, and the commit the group
/// resumed from (a plain re-run's `load_state_dict` makes a new
/// incarnation with the same restart count; see [`sync`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GenMeta {
    pub record: GenerationRecord,
    pub run_id: String,
    pub restart: u64,
    /// The commit the group's incarnation resumed from (the first
    /// generation's `from`, or its previous epoch's end); next-epoch
    /// generations inherit it. `None` for a group that resumed nothing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resumed: Option<CommitPoint>,
    /// The torchrun ranks of the generation, when they form data-parallel
    /// groups: `record.world` is then the number of groups (the parts the
    /// plan splits the cut into), each of `ranks / record.world` peers
    /// reading one part. `None`: one rank per part (`record.world` ranks).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ranks: Option<u32>,
}

/// A member. Its liveness is the leader's to judge (`liveness`): the
/// record is stored under no lease.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemberRecord {
    pub identity: Identity,
    /// The store lease an earlier coordinator put the member's keys under
    /// (0: none). Such a member is forgotten when the store deletes its
    /// record, as it was then; nobody renews the lease any more.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub lease: LeaseId,
    /// SHA-256 (hex) of the secret the member got at Join; every
    /// member-scoped call must carry the secret. Empty in records written
    /// before secrets existed: such a member must join again.
    #[serde(default)]
    pub secret_sha256: String,
}

fn is_zero(lease: &LeaseId) -> bool {
    *lease == 0
}

impl MemberRecord {
    /// The store lease the member's keys go under: an earlier coordinator's,
    /// if any.
    pub fn store_lease(&self) -> Option<LeaseId> {
        (self.lease != 0).then_some(self.lease)
    }
}

/// The dataset facts planning needs: one dataset's shards, or several
/// datasets mixed.
#[derive(Debug, Clone)]
pub struct Dataset {
    pub layout: Arc<Layout>,
}

impl Dataset {
    /// One dataset of shards of these sample counts.
    pub fn single(shard_samples: Vec<u32>) -> Self {
        Self {
            layout: Arc::new(Layout::single(shard_samples)),
        }
    }
}

/// One job, as the leader holds it.
#[derive(Debug)]
pub struct Job {
    pub name: JobId,
    pub stored: StoredJob,
    pub dataset: Dataset,
    pub members: BTreeMap<MemberId, MemberRecord>,
    pub state: State,
    /// When the job finished (Unix ms), once recorded.
    pub finished_at: Option<u64>,
    /// What this leader has seen of each member (not stored).
    pub seen: SeenMembers,
    /// When each member last called (not stored: `liveness`).
    pub(crate) renewed: liveness::Renewals,
    /// Deleted: every change is refused; the handle is on its way out.
    pub deleted: bool,
    /// The most live members a Join may bring the job to (the leader's
    /// `Limits::members_per_job`).
    pub member_cap: usize,
    /// The leader's members over all jobs, which this job's are counted
    /// into (see [`Job::attach`]).
    fleet: Fleet,
}

impl Drop for Job {
    /// Counts the job's members out of its fleet: the leader no longer
    /// holds them (its leadership ended, or it reloaded or deleted the job).
    fn drop(&mut self) {
        self.fleet.remove(self.members.len() as u64, self.ttl_s());
    }
}

#[derive(Debug)]
pub enum State {
    Sync(SyncModel),
    Dynamic(DynModel),
}

fn parse<T: for<'de> Deserialize<'de>>(kv: &KeyValue) -> Result<T> {
    serde_json::from_slice(&kv.value)
        .map_err(|e| CoordError::Corrupt(format!("the value at {}: {e}", kv.key)))
}

impl Job {
    /// A new job; returns it and the effects that store it.
    pub fn create(name: JobId, stored: StoredJob, dataset: Dataset) -> Result<(Self, Effects)> {
        let mut ops = vec![effects::put(Key::Config { job: name.clone() }, &stored)?];
        let state = match stored.config.mode {
            Mode::Sync => State::Sync(SyncModel::default()),
            Mode::Dynamic => {
                ops.push(effects::put(
                    Key::DynEpoch { job: name.clone() },
                    &Epoch(0),
                )?);
                State::Dynamic(DynModel::new(&stored.config, &dataset, Epoch(0)))
            }
        };
        Ok((Self::new(name, stored, dataset, state), Effects::ops(ops)))
    }

    fn new(name: JobId, stored: StoredJob, dataset: Dataset, state: State) -> Self {
        Self {
            name,
            stored,
            dataset,
            members: BTreeMap::new(),
            state,
            finished_at: None,
            seen: SeenMembers::new(),
            renewed: liveness::Renewals::new(),
            deleted: false,
            member_cap: usize::MAX,
            fleet: Fleet::default(),
        }
    }

    /// Counts this job's members into the leader's `fleet` (from now on,
    /// as they join and leave), under the leader's caps.
    pub fn attach(&mut self, fleet: &Fleet, member_cap: usize) {
        let (members, ttl_s) = (self.members.len() as u64, self.ttl_s());
        self.fleet.remove(members, ttl_s);
        fleet.add(members, ttl_s);
        self.fleet = fleet.clone();
        self.member_cap = member_cap;
    }

    /// Forgets every member (the job is deleted), counting them out.
    pub(crate) fn forget_members(&mut self) {
        self.fleet.remove(self.members.len() as u64, self.ttl_s());
        self.members.clear();
        self.renewed.clear();
    }

    /// The job's `member_ttl_s`.
    fn ttl_s(&self) -> u32 {
        self.stored.config.member_ttl_s
    }

    /// Refuses one more member past the leader's caps over all jobs.
    pub(crate) fn fleet_room(&self) -> Result<()> {
        self.fleet.check_room(&self.name, self.ttl_s())
    }

    /// The stored job record, if `kvs` (every key under the job's prefix)
    /// has one.
    pub fn stored_of(name: &JobId, kvs: &[KeyValue]) -> Result<Option<StoredJob>> {
        let key = Key::Config { job: name.clone() }.to_string();
        let Some(kv) = kvs.iter().find(|kv| kv.key == key) else {
            return Ok(None);
        };
        let stored: StoredJob = parse(kv)?;
        stored.config.validate().map_err(|e| {
            CoordError::Corrupt(format!("the stored config of job {:?}: {e}", name.as_str()))
        })?;
        Ok(Some(stored))
    }

    /// Rebuilds a job from every key under its prefix. A key that is not
    /// one of the job's facts, or whose value does not read, is an error
    /// naming the key.
    pub fn load(
        name: &JobId,
        stored: StoredJob,
        dataset: Dataset,
        kvs: &[KeyValue],
    ) -> Result<Self> {
        let mut members = BTreeMap::new();
        let mut gens = Vec::new();
        let mut commit = None;
        let mut rank_commits = Vec::new();
        let mut progress = Vec::new();
        let mut dyn_epoch = Epoch(0);
        let mut leased = Vec::new();
        let mut acked = Vec::new();
        let mut finished_at = None;
        for kv in kvs {
            let key = Key::parse(&kv.key).map_err(|e| CoordError::Corrupt(e.to_string()))?;
            if key.job() != name {
                return Err(CoordError::Corrupt(format!(
                    "key {} is not under job {:?}",
                    kv.key,
                    name.as_str()
                )));
            }
            match key {
                Key::Config { .. } => {}
                Key::Progress { part, .. } => progress.push((part, parse(kv)?, kv.key.as_str())),
                Key::Finished { .. } => finished_at = Some(parse::<u64>(kv)?),
                Key::Member { member, .. } => {
                    members.insert(member, parse::<MemberRecord>(kv)?);
                }
                Key::Generation { .. } => gens.push(parse::<GenMeta>(kv)?),
                Key::Commit { .. } => commit = Some(parse(kv)?),
                Key::RankCommits { part, .. } => {
                    rank_commits.push((part, parse(kv)?, kv.key.as_str()));
                }
                Key::DynEpoch { .. } => dyn_epoch = parse(kv)?,
                Key::Leased { epoch, unit, .. } => {
                    leased.push((epoch, unit, parse::<MemberId>(kv)?, kv.key.as_str()));
                }
                Key::Acked { epoch, unit, .. } => {
                    acked.push((epoch, unit, parse::<MemberId>(kv)?, kv.key.as_str()));
                }
            }
        }
        let state = match stored.config.mode {
            Mode::Sync => State::Sync(SyncModel::load(
                gens,
                commit,
                sync::merge_parts(rank_commits)?,
                sync::merge_parts(progress)?,
            )?),
            Mode::Dynamic => {
                let mut model = DynModel::new(&stored.config, &dataset, dyn_epoch);
                let corrupt = |key: &str, e: tributary_common::PoolError| {
                    CoordError::Corrupt(format!("the unit at {key}: {e}"))
                };
                // Units of older epochs are left from an advance whose
                // prefix delete had not landed; they plan nothing.
                for (_, unit, member, key) in leased.into_iter().filter(|a| a.0 == dyn_epoch) {
                    // A unit of a member whose lease is gone is in the pool.
                    if members.contains_key(&member) {
                        model
                            .restore_leased(unit, &member)
                            .map_err(|e| corrupt(key, e))?;
                    }
                }
                // An ack overrides a lease of the same unit restored before it.
                for (_, unit, member, key) in acked.into_iter().filter(|a| a.0 == dyn_epoch) {
                    model
                        .restore_acked(unit, &member)
                        .map_err(|e| corrupt(key, e))?;
                }
                State::Dynamic(model)
            }
        };
        let mut job = Self::new(name.clone(), stored, dataset, state);
        job.fleet.add(members.len() as u64, job.ttl_s());
        // A leader that takes over gives every member a whole TTL.
        let now = std::time::Instant::now();
        job.renewed = members.keys().map(|m| (m.clone(), now)).collect();
        job.members = members;
        job.finished_at = finished_at;
        if let (Some(_), State::Sync(model)) = (finished_at, &mut job.state) {
            model.finished = true;
        }
        Ok(job)
    }

    /// The member's record, or `UnknownMember`.
    pub fn member(&self, member: &MemberId) -> Result<&MemberRecord> {
        self.members
            .get(member)
            .ok_or_else(|| CoordError::UnknownMember {
                job: self.name.clone(),
                member: member.clone(),
            })
    }

    /// The member's record when `secret` is the one its Join returned:
    /// `UnknownMember` for a member the job does not have,
    /// `PermissionDenied` for anyone else speaking for it.
    pub fn authorize(&self, member: &MemberId, secret: &str) -> Result<&MemberRecord> {
        let record = self.member(member)?;
        if record.secret_sha256.is_empty()
            || crate::auth::secret_digest(secret) != record.secret_sha256
        {
            return Err(CoordError::PermissionDenied(format!(
                "member {:?} of job {:?}: the call does not carry the member's secret",
                member.as_str(),
                self.name.as_str()
            )));
        }
        Ok(record)
    }

    /// Adds a member, alive as of `now`; returns the op that stores it.
    pub fn add_member(
        &mut self,
        member: MemberId,
        record: MemberRecord,
        now: std::time::Instant,
    ) -> Result<Op> {
        let op = effects::leased_put(
            Key::Member {
                job: self.name.clone(),
                member: member.clone(),
            },
            &record,
            record.store_lease(),
        )?;
        self.renewed.insert(member.clone(), now);
        if self.members.insert(member, record).is_none() {
            self.fleet.add(1, self.ttl_s());
        }
        Ok(op)
    }

    /// Forgets a member (it left, or stopped calling); its leased units
    /// return to the pool. Returns the effects to apply: none when the job
    /// had no such member.
    pub fn remove_member(&mut self, member: &MemberId) -> Effects {
        if self.members.remove(member).is_none() {
            return Effects::default();
        }
        self.fleet.remove(1, self.ttl_s());
        self.seen.remove(member);
        self.renewed.remove(member);
        let mut effects = Effects::ops(vec![Op::Delete {
            key: Key::Member {
                job: self.name.clone(),
                member: member.clone(),
            }
            .into(),
        }]);
        effects.wake = true;
        if let State::Dynamic(model) = &mut self.state {
            let returned = model.release(member);
            effects.ops.extend(returned.iter().map(|&unit| {
                Op::Delete {
                    key: Key::Leased {
                        job: self.name.clone(),
                        epoch: model.epoch(),
                        unit,
                    }
                    .into(),
                }
            }));
            if !returned.is_empty() {
                effects.events.push(Event::PoolChanged(model.epoch()));
            }
            effects.tally.units_reassigned = returned.len() as u64;
        }
        effects
    }
}

#[cfg(test)]
mod tests;
