//! What comes in over the wire, converted to what the model takes: each
//! request's `TryFrom` checks names, identities and counts against their
//! bounds, with errors naming the field, and wraps ids in their newtypes.

use std::time::Duration;

use tributary_common::ids::{Epoch, Generation, JobId, MemberId};
use tributary_common::job::JobSpec;
use tributary_common::proto::v1;

use crate::auth::MAX_SECRET_BYTES;
use crate::config::MAX_WORLD;
use crate::error::{CoordError, Result};
use crate::keys::{self, MAX_MEMBER_NAME};
use crate::model::{Caller, Identity, Joiner, UnitRef};

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
}

impl TryFrom<v1::JoinRequest> for Join {
    type Error = CoordError;

    fn try_from(request: v1::JoinRequest) -> Result<Self> {
        let job = job("job", request.job)?;
        bounded_secret(&request.secret)?;
        let (identity, member) = identity(request.identity)?;
        let joiner = Joiner {
            identity,
            member,
            secret: request.secret,
        };
        Ok(Self { job, joiner })
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn torchrun(rank: u32, world: u32, restart: u64) -> Option<v1::join_request::Identity> {
        Some(v1::join_request::Identity::Torchrun(v1::TorchrunIdentity {
            rank,
            world_size: world,
            run_id: "run".into(),
            restart_count: restart,
        }))
    }

    fn member_call(job: &str, member: &str, secret: &str) -> Result<Call<()>> {
        Call::try_from(v1::MemberRequest {
            job: job.into(),
            member: member.into(),
            secret: secret.into(),
        })
    }

    #[test]
    fn a_world_beyond_the_bound_is_refused_before_anything_is_sized_by_it() {
        let error = identity(torchrun(0, u32::MAX, 0)).expect_err("huge world");
        assert!(error.to_string().contains("torchrun.world_size"), "{error}");
        assert!(identity(torchrun(0, 0, 0)).is_err());
        assert!(matches!(
            identity(torchrun(4, 4, 0)),
            Err(CoordError::RankOutOfRange { .. })
        ));
        let (_, member) = identity(torchrun(3, 4, u64::MAX)).expect("ok");
        assert_eq!(member.as_str(), format!("run.{}.3", u64::MAX));
    }

    #[test]
    fn oversized_fields_are_invalid_and_named() {
        assert!(member_call("job", "m", &"s".repeat(129))
            .expect_err("secret")
            .to_string()
            .contains("secret"));
        assert!(member_call("job", &"m".repeat(193), "").is_err());
        assert!(member_call("bad/job", "m", "").is_err());
        let many = v1::ReportRequest {
            job: "job".into(),
            member: "m".into(),
            acked: vec![v1::UnitRef::default(); MAX_ACKS_PER_REPORT + 1],
            ..v1::ReportRequest::default()
        };
        assert!(Call::<Report>::try_from(many)
            .expect_err("acks")
            .to_string()
            .contains("acked"));
        assert!(identity(None).is_err());
    }

    #[test]
    fn an_acquire_asks_within_its_bounds() {
        let request = |wait_ms, max_units| v1::AcquireRequest {
            job: "job".into(),
            member: "m".into(),
            wait_ms,
            max_units,
            ..v1::AcquireRequest::default()
        };
        let call = Call::<Acquire>::try_from(request(u32::MAX, u32::MAX)).expect("ok");
        assert_eq!(call.args.wait, MAX_WAIT);
        assert_eq!(call.args.max, MAX_UNITS_PER_ACQUIRE as usize);
        let call = Call::<Acquire>::try_from(request(0, 0)).expect("ok");
        assert_eq!(call.args.max, 1);
    }
}
