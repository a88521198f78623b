//! The protocol's edge, both ways. What comes in over the wire is
//! converted to what the leader and the model take: each request's
//! `TryFrom` checks names, identities and counts against their bounds,
//! with errors naming the field, and wraps ids in their newtypes. What
//! they answer is converted to the protocol's messages by the `From`
//! impls at the end.

use std::time::Duration;

use tributary_common::ids::{Epoch, Generation, JobId, MemberId};
use tributary_common::proto::{spans_to_proto, v1};

use crate::auth::MAX_SECRET_BYTES;
use crate::config::MAX_WORLD;
use crate::error::{CoordError, Result};
use crate::keys::{self, MAX_MEMBER_NAME};
use crate::leader::{CreatedJob, JobLine};
use crate::model::sync::{Resume, MAX_HISTORY};
use crate::model::{
    Acquired, Assignment, Caller, Event, GenMeta, Identity, JobStatus, Joined, Joiner,
    MemberStatus, RankProgress, Unit, UnitRef,
};
use tributary_common::job::JobSpec;
use tributary_common::plan::generation::{CommitPoint, GenerationRecord};

/// The most units one Report may acknowledge.
pub const MAX_ACKS_PER_REPORT: usize = 4096;
/// The most units one Acquire may lease.
pub const MAX_UNITS_PER_ACQUIRE: u32 = 1024;
/// The longest an `Acquire` waits for units.
pub const MAX_WAIT: Duration = Duration::from_secs(30);

/// `name` as a job or member name, or INVALID_ARGUMENT naming `field`.
pub fn name(field: &str, name: &str) -> Result<()> {
    if keys::valid_name(name) {
        return Ok(());
    }
    let shown: String = name.chars().take(64).collect();
    Err(CoordError::Invalid(format!(
        "{field} {shown:?} must be 1-128 characters of [A-Za-z0-9_.-], not starting with '.'"
    )))
}

/// A job name, checked.
pub fn job(field: &str, job: String) -> Result<JobId> {
    name(field, &job)?;
    Ok(JobId::from(job))
}

/// A CreateJob: the job and its validated config.
#[derive(Debug)]
pub struct CreateJob {
    pub job: JobId,
    pub config: JobSpec,
}

impl TryFrom<v1::CreateJobRequest> for CreateJob {
    type Error = CoordError;

    fn try_from(request: v1::CreateJobRequest) -> Result<Self> {
        let job = job("job name", request.job)?;
        let config = crate::config::job_spec(request.config)?;
        Ok(Self { job, config })
    }
}

/// A Join: the job, and who joins.
#[derive(Debug)]
pub struct Join {
    pub job: JobId,
    pub joiner: Joiner,
    /// The digest of the dataset the rank opened (64 hex digits), if given.
    pub manifest_sha256: Option<String>,
}

impl TryFrom<v1::JoinRequest> for Join {
    type Error = CoordError;

    fn try_from(request: v1::JoinRequest) -> Result<Self> {
        let job = job("job", request.job)?;
        bounded_secret(&request.secret)?;
        let (identity, member) = identity(request.identity)?;
        let resume = request.resume.map(resume).transpose()?;
        let joiner = Joiner {
            identity,
            member,
            secret: request.secret,
            resume,
        };
        let manifest_sha256 = match request.manifest_sha256 {
            sha if sha.is_empty() => None,
            sha if sha.len() == 64
                && sha.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) =>
            {
                Some(sha)
            }
            sha => {
                return Err(CoordError::Invalid(format!(
                    "manifest_sha256 must be 64 lowercase hex digits (the SHA-256 of the dataset \
                     the rank opened) or empty, not {} characters",
                    sha.len()
                )))
            }
        };
        Ok(Self {
            job,
            joiner,
            manifest_sha256,
        })
    }
}

/// A Join's resume point, its history bounded ([`MAX_HISTORY`] records,
/// worlds within 1..=MAX_WORLD); the model checks the rest (order, links,
/// the point against the job).
pub fn resume(raw: v1::Resume) -> Result<Resume> {
    if raw.history.len() > MAX_HISTORY {
        return Err(CoordError::Invalid(format!(
            "resume.history has {} records (at most {MAX_HISTORY})",
            raw.history.len()
        )));
    }
    if let Some(bad) = raw
        .history
        .iter()
        .find(|r| !(1..=MAX_WORLD).contains(&r.world))
    {
        return Err(CoordError::Invalid(format!(
            "resume.history: generation {} has a world of {} ranks (1..={MAX_WORLD})",
            bad.generation, bad.world
        )));
    }
    Ok(Resume {
        point: CommitPoint {
            generation: Generation(raw.generation),
            samples: raw.samples,
        },
        history: raw
            .history
            .into_iter()
            .map(GenerationRecord::from)
            .collect(),
    })
}

/// The identity of a Join and the member name it stands for.
pub fn identity(raw: Option<v1::join_request::Identity>) -> Result<(Identity, MemberId)> {
    let identity =
        Identity::from(raw.ok_or_else(|| CoordError::Invalid("identity is missing".into()))?);
    match &identity {
        Identity::Torchrun {
            rank,
            world,
            run_id,
            restart,
            dp,
        } => {
            name("torchrun.run_id", run_id)?;
            if !(1..=MAX_WORLD).contains(world) {
                return Err(CoordError::Invalid(format!(
                    "torchrun.world_size {world} is outside 1..={MAX_WORLD}"
                )));
            }
            if rank >= world {
                return Err(CoordError::RankOutOfRange {
                    rank: *rank,
                    world: *world,
                });
            }
            if let Some(e) = dp.and_then(|dp| dp.check(*world).err()) {
                return Err(CoordError::Invalid(format!(
                    "torchrun.dp_rank/dp_size: {e}"
                )));
            }
            let member = format!("{run_id}.{restart}.{rank}");
            // run_id (128) + two numbers: the member name can exceed what
            // a name may be; it is a key segment, so check it as one.
            if member.len() > MAX_MEMBER_NAME {
                return Err(CoordError::Invalid(format!(
                    "torchrun identity makes a member name of {} bytes",
                    member.len()
                )));
            }
            Ok((identity, MemberId::from(member)))
        }
        Identity::Name(member) => {
            name("name", member)?;
            let member = MemberId::from(member.as_str());
            Ok((identity, member))
        }
    }
}

/// A member-scoped call: its job, its caller, and what it asks (`T`).
#[derive(Debug)]
pub struct Call<T> {
    pub job: JobId,
    pub caller: Caller,
    pub args: T,
}

/// What an Acquire asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Acquire {
    /// How long to wait for units, at most [`MAX_WAIT`].
    pub wait: Duration,
    /// How many units, 1 to [`MAX_UNITS_PER_ACQUIRE`].
    pub max: usize,
}

/// What a Report tells.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Report {
    pub generation: Generation,
    pub samples: u64,
    /// At most [`MAX_ACKS_PER_REPORT`].
    pub acked: Vec<UnitRef>,
}

/// What a Commit records.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Commit {
    pub generation: Generation,
    pub samples: u64,
}

/// A member-scoped request's job, member and secret, bounded.
fn call<T>(job: String, member: String, secret: String, args: T) -> Result<Call<T>> {
    let job = self::job("job", job)?;
    if member.is_empty() || member.len() > MAX_MEMBER_NAME {
        return Err(CoordError::Invalid(format!(
            "member must be 1-{MAX_MEMBER_NAME} bytes, not {}",
            member.len()
        )));
    }
    bounded_secret(&secret)?;
    Ok(Call {
        job,
        caller: Caller {
            member: MemberId::from(member),
            secret,
        },
        args,
    })
}

impl TryFrom<v1::MemberRequest> for Call<()> {
    type Error = CoordError;

    fn try_from(r: v1::MemberRequest) -> Result<Self> {
        call(r.job, r.member, r.secret, ())
    }
}

impl TryFrom<v1::AssignmentRequest> for Call<Epoch> {
    type Error = CoordError;

    fn try_from(r: v1::AssignmentRequest) -> Result<Self> {
        call(r.job, r.member, r.secret, Epoch(r.epoch))
    }
}

impl TryFrom<v1::AcquireRequest> for Call<Acquire> {
    type Error = CoordError;

    fn try_from(r: v1::AcquireRequest) -> Result<Self> {
        let args = Acquire {
            wait: Duration::from_millis(u64::from(r.wait_ms)).min(MAX_WAIT),
            max: r.max_units.clamp(1, MAX_UNITS_PER_ACQUIRE) as usize,
        };
        call(r.job, r.member, r.secret, args)
    }
}

impl TryFrom<v1::ReportRequest> for Call<Report> {
    type Error = CoordError;

    fn try_from(r: v1::ReportRequest) -> Result<Self> {
        let Call { job, caller, .. } = call(r.job, r.member, r.secret, ())?;
        if r.acked.len() > MAX_ACKS_PER_REPORT {
            return Err(CoordError::Invalid(format!(
                "acked lists {} units; the limit is {MAX_ACKS_PER_REPORT} per report",
                r.acked.len()
            )));
        }
        let args = Report {
            generation: Generation(r.generation),
            samples: r.samples,
            acked: r.acked.into_iter().map(UnitRef::from).collect(),
        };
        Ok(Call { job, caller, args })
    }
}

impl TryFrom<v1::CommitRequest> for Call<Commit> {
    type Error = CoordError;

    fn try_from(r: v1::CommitRequest) -> Result<Self> {
        let args = Commit {
            generation: Generation(r.generation),
            samples: r.samples,
        };
        call(r.job, r.member, r.secret, args)
    }
}

impl From<v1::UnitRef> for UnitRef {
    fn from(unit: v1::UnitRef) -> Self {
        Self {
            epoch: Epoch(unit.epoch),
            unit: unit.id,
        }
    }
}

/// A secret, bounded.
pub fn bounded_secret(secret: &str) -> Result<()> {
    if secret.len() > MAX_SECRET_BYTES {
        return Err(CoordError::Invalid(format!(
            "secret is {} bytes; the limit is {MAX_SECRET_BYTES}",
            secret.len()
        )));
    }
    Ok(())
}

// What the leader and the model answer, as the protocol's messages.

impl From<CreatedJob> for v1::CreateJobResponse {
    fn from(created: CreatedJob) -> Self {
        Self {
            config: Some(v1::JobConfig::from(&created.config)),
            created: created.created,
            samples: created.samples,
            shards: created.shards,
            job_token: String::new(),
        }
    }
}

impl From<Joined> for v1::JoinResponse {
    fn from(joined: Joined) -> Self {
        Self {
            member: joined.member.to_string(),
            config: Some(v1::JobConfig::from(&joined.config)),
            ttl_ms: joined.ttl.as_millis() as u32,
            generation: joined.generation,
            epoch: joined.epoch,
            rank: joined.rank,
            world: joined.world,
            secret: joined.secret,
            committed_generation: joined.committed.map(|c| c.generation.get()),
            committed_samples: joined.committed.map_or(0, |c| c.samples),
        }
    }
}

impl From<Assignment> for v1::Assignment {
    fn from(assignment: Assignment) -> Self {
        Self {
            epoch: assignment.epoch,
            generation: assignment.generation,
            rank: assignment.rank,
            world: assignment.world,
            spans: spans_to_proto(&assignment.spans),
            finished: assignment.finished,
            history: assignment
                .history
                .iter()
                .map(v1::PlanRecord::from)
                .collect(),
        }
    }
}

impl From<Event> for v1::JobEvent {
    fn from(event: Event) -> Self {
        let event = match event {
            Event::Generation(g) => v1::job_event::Event::Generation(g.get()),
            Event::PoolChanged(e) => v1::job_event::Event::PoolChanged(e.get()),
        };
        v1::JobEvent { event: Some(event) }
    }
}

impl From<Unit> for v1::Unit {
    fn from(unit: Unit) -> Self {
        Self {
            epoch: unit.epoch,
            id: unit.id,
            span: Some(unit.span.into()),
        }
    }
}

/// An Acquire's answer (`Leader::acquire` never answers `Advanced`: it
/// looks again).
impl From<Acquired> for v1::AcquireResponse {
    fn from(acquired: Acquired) -> Self {
        match acquired {
            Acquired::Units { units, epoch } => Self {
                units: units.into_iter().map(v1::Unit::from).collect(),
                epoch: epoch.get(),
                ..Self::default()
            },
            Acquired::Finished(epoch) => Self {
                finished: true,
                epoch: epoch.get(),
                ..Self::default()
            },
            Acquired::Empty(epoch) => Self {
                drained: true,
                epoch: epoch.get(),
                ..Self::default()
            },
            Acquired::Advanced => Self::default(),
        }
    }
}

impl From<GenMeta> for v1::GenerationInfo {
    fn from(g: GenMeta) -> Self {
        Self {
            generation: g.record.generation.0,
            epoch: g.record.epoch.0,
            world: g.record.world,
            run_id: g.run_id,
            restart_count: g.restart,
            from_generation: g.record.from.map(|f| f.generation.0),
            from_samples: g.record.from.map_or(0, |f| f.samples),
        }
    }
}

impl From<RankProgress> for v1::RankProgress {
    fn from(p: RankProgress) -> Self {
        Self {
            rank: p.rank,
            generation: p.generation.get(),
            samples: p.samples,
        }
    }
}

impl From<MemberStatus> for v1::MemberStatus {
    fn from(m: MemberStatus) -> Self {
        Self {
            member: m.member.to_string(),
            rank: m.rank,
            world: m.world,
            samples: m.samples,
            samples_per_second: m.samples_per_second,
            last_seen_ms: m.last_seen_ms,
            leased_units: m.leased_units,
        }
    }
}

/// A job's status, but for the leader's address (the service's to add).
impl From<JobStatus> for v1::JobStatus {
    fn from(s: JobStatus) -> Self {
        let m = s.mode;
        Self {
            config: Some(v1::JobConfig::from(&s.config)),
            epoch: m.epoch,
            generations: m.generations.into_iter().map(Into::into).collect(),
            commit_generation: m.commit_generation,
            commit_samples: m.commit_samples,
            acked_units: m.acked_units,
            total_units: m.total_units,
            members: s.members.iter().map(MemberId::to_string).collect(),
            finished: m.finished,
            leader: String::new(),
            progress: m.progress.into_iter().map(Into::into).collect(),
            failed: String::new(),
            member_status: s.member_status.into_iter().map(Into::into).collect(),
            leased_units: m.leased_units,
            generation: m.generation,
            finished_at_ms: s.finished_at_ms,
        }
    }
}

impl From<JobLine> for v1::JobSummary {
    fn from(line: JobLine) -> Self {
        match line {
            JobLine::Ready(s) => Self {
                job: s.job.to_string(),
                mode: v1::Mode::from(s.mode) as i32,
                epoch: s.epoch,
                epochs: s.epochs.unwrap_or(0),
                members: s.members,
                finished: s.finished,
                finished_at_ms: s.finished_at_ms,
                leased_units: s.leased_units,
                ..Self::default()
            },
            JobLine::Loading(job) => Self {
                job: job.to_string(),
                loading: true,
                ..Self::default()
            },
            JobLine::Failed { job, reason } => Self {
                job: job.to_string(),
                failed: reason,
                ..Self::default()
            },
        }
    }
}

#[cfg(test)]
mod tests;
