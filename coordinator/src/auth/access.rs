//! Two kinds of bearer credential, and what each reaches.
//!
//! - The **operator token** (`--auth-token-file`) reaches everything:
//!   create, list and delete jobs, and every job's calls.
//! - A **job credential** reaches one job: CreateJob of that job's name,
//!   Join, the member calls and GetStatus of that job; never ListJobs,
//!   DeleteJob or another job. It reads `tj1:<job>:<tag>`, the tag an
//!   HMAC-SHA256 of the job's name under a key derived from the operator
//!   token, so any replica checks it without storing anything. The
//!   operator gets one from CreateJob's answer or from `tributary job
//!   token JOB`, and hands it to the job's ranks (a Kubernetes Secret per
//!   job); a trainer never holds the operator token.
//!
//! - A **member credential** (`super::scoped`) is a job credential narrowed
//!   to the ranks (or dynamic member) it may join as.
//!
//! A job credential cannot be revoked alone: rotating the operator token
//! revokes every job's.

use ring::hmac;
use tonic::Request;
use tributary_common::ids::JobId;

use tributary_common::identity::Identity;

use super::scoped::{self, Scope};
use crate::digest::hex;
use crate::error::{CoordError, Result};

/// What the caller's credential reaches: the token check puts it in every
/// request's extensions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Access {
    /// No token is configured: every caller reaches everything.
    Open,
    /// The operator token.
    Operator,
    /// A job credential: this job only.
    Job(JobId),
    /// A member credential: this job only, joining within its scope.
    Member { job: JobId, scope: Scope },
}

/// The prefix of a job credential.
const PREFIX: &str = "tj1:";
/// What the job credentials' key is derived from the operator token with.
const KEY_CONTEXT: &[u8] = b"tributary job credentials v1";

impl Access {
    /// The access the token check recorded on `request`; `Open` where no
    /// check ran (a service called in-process, without the interceptor).
    pub fn of<T>(request: &Request<T>) -> Self {
        request
            .extensions()
            .get::<Access>()
            .cloned()
            .unwrap_or(Access::Open)
    }

    /// The one job a job or member credential reaches.
    fn own_job(&self) -> Option<&JobId> {
        match self {
            Access::Job(own) | Access::Member { job: own, .. } => Some(own),
            Access::Open | Access::Operator => None,
        }
    }

    /// Refuses a job or member credential for another job than `job`.
    pub fn reach(&self, job: &JobId) -> Result<()> {
        match self.own_job() {
            Some(own) if own != job => Err(CoordError::PermissionDenied(format!(
                "this credential is job {:?}'s: it cannot act on job {:?}",
                own.as_str(),
                job.as_str()
            ))),
            _ => Ok(()),
        }
    }

    /// Refuses a job or member credential: `what` needs the operator token.
    pub fn operate(&self, what: &str) -> Result<()> {
        match self.own_job() {
            Some(own) => Err(CoordError::PermissionDenied(format!(
                "{what} needs the operator's token; this credential reaches only job {:?}",
                own.as_str()
            ))),
            None => Ok(()),
        }
    }

    /// Refuses a member credential's Join as an `identity` outside its
    /// scope: a trainer holding its own cannot take another's place.
    pub fn may_join(&self, identity: &Identity) -> Result<()> {
        match self {
            Access::Member { job, scope } if !scope.admits(identity) => {
                Err(CoordError::PermissionDenied(format!(
                    "this credential joins job {:?} as {scope} only, not as {}: each rank \
                     needs a credential that names it (`tributary job token {} --ranks ...`)",
                    job.as_str(),
                    describe(identity),
                    job.as_str()
                )))
            }
            _ => Ok(()),
        }
    }
}

/// An identity as a scope would name it.
fn describe(identity: &Identity) -> String {
    match identity {
        Identity::Torchrun { rank, .. } => format!("rank {rank}"),
        Identity::Name(name) => format!("member {name:?}"),
    }
}

/// Mints and checks job credentials under one operator token.
#[derive(Clone)]
pub struct JobKeys {
    key: hmac::Key,
}

impl std::fmt::Debug for JobKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("JobKeys(<redacted>)")
    }
}

impl JobKeys {
    pub fn new(operator_token: &str) -> Self {
        let derive = hmac::Key::new(hmac::HMAC_SHA256, operator_token.as_bytes());
        let key = hmac::sign(&derive, KEY_CONTEXT);
        Self {
            key: hmac::Key::new(hmac::HMAC_SHA256, key.as_ref()),
        }
    }

    /// The tag of `job`'s credential.
    fn tag(&self, job: &JobId) -> hmac::Tag {
        hmac::sign(&self.key, job.as_str().as_bytes())
    }

    /// The credential of `job`.
    pub fn mint(&self, job: &JobId) -> String {
        format!("{PREFIX}{}:{}", job.as_str(), hex(self.tag(job).as_ref()))
    }

    /// The member credential of `job` for `scope`.
    pub fn mint_member(&self, job: &JobId, scope: &Scope) -> String {
        scoped::mint(job, self.tag(job).as_ref(), scope)
    }

    /// The job `token` is a valid job credential of; `None` for anything
    /// else.
    pub fn check(&self, token: &str) -> Option<JobId> {
        let (job, tag) = parse_job_credential(token)?;
        hmac::verify(&self.key, job.as_str().as_bytes(), &tag).ok()?;
        Some(job)
    }

    /// What `token` reaches as a job or member credential; `None` when it
    /// is neither.
    pub fn access(&self, token: &str) -> Option<Access> {
        if token.starts_with(scoped::PREFIX) {
            let (job, scope, tag) = scoped::parse(token)?;
            return scoped::verify(self.tag(&job).as_ref(), &scope, &tag)
                .then_some(Access::Member { job, scope });
        }
        self.check(token).map(Access::Job)
    }
}

/// The job and tag a job credential names, as written.
fn parse_job_credential(token: &str) -> Option<(JobId, Vec<u8>)> {
    let (job, tag) = token.strip_prefix(PREFIX)?.rsplit_once(':')?;
    if !crate::keys::valid_name(job) {
        return None;
    }
    Some((JobId::from(job), scoped::unhex(tag)?))
}

/// The member credential for `scope` narrowed from the job credential
/// `job_credential` (offline: whoever holds a job's credential may narrow
/// it); `None` when it is not a job credential.
pub fn narrow(job_credential: &str, scope: &Scope) -> Option<String> {
    let (job, tag) = parse_job_credential(job_credential)?;
    Some(scoped::mint(&job, &tag, scope))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_job_credential_names_its_job_and_nothing_forges_one() {
        let keys = JobKeys::new("operator-token");
        let job = JobId::from("train-7");
        let credential = keys.mint(&job);
        assert!(credential.starts_with("tj1:train-7:"), "{credential}");
        assert_eq!(keys.check(&credential), Some(job.clone()));
        // Another operator token's credential, another job's tag, a
        // changed tag, the operator token itself: none is a credential.
        let other = JobKeys::new("another-token").mint(&job);
        let swapped = credential.replace("train-7", "train-8");
        let mut flipped = credential.clone();
        let last = flipped.pop().expect("a tag");
        flipped.push(if last == '0' { '1' } else { '0' });
        for bad in [
            other.as_str(),
            &swapped,
            &flipped,
            "operator-token",
            "tj1:",
            "tj1:a:zz",
        ] {
            assert_eq!(keys.check(bad), None, "{bad}");
        }
    }

    #[test]
    fn a_member_credential_joins_within_its_scope_only_and_nothing_forges_one() {
        let keys = JobKeys::new("operator-token");
        let job = JobId::from("train-7");
        let ranks = Scope::Ranks { first: 8, last: 15 };
        let minted = keys.mint_member(&job, &ranks);
        // Narrowed offline from the job credential, it is the same.
        assert_eq!(
            narrow(&keys.mint(&job), &ranks).as_deref(),
            Some(minted.as_str())
        );
        assert!(minted.starts_with("tm1:train-7:ranks=8-15:"), "{minted}");
        let access = keys.access(&minted).expect("a member credential");
        assert_eq!(
            access,
            Access::Member {
                job: job.clone(),
                scope: ranks.clone()
            }
        );
        let rank = |rank| Identity::Torchrun {
            rank,
            world: 32,
            run_id: "r".into(),
            restart: 3,
            dp: None,
        };
        access.may_join(&rank(8)).expect("its first rank");
        access.may_join(&rank(15)).expect("its last rank");
        for outside in [rank(7), rank(16), Identity::Name("rank-9".into())] {
            let error = access.may_join(&outside).expect_err("outside the scope");
            assert!(error.to_string().contains("as ranks=8-15 only"), "{error}");
        }
        access.reach(&job).expect("its job");
        access
            .reach(&JobId::from("other"))
            .expect_err("another job");
        access.operate("ListJobs").expect_err("an operator call");
        // A widened scope, another job's tag, another operator's: refused.
        let widened = minted.replace("ranks=8-15", "ranks=0-15");
        let moved = minted.replace("train-7", "train-8");
        let foreign = JobKeys::new("another-token").mint_member(&job, &ranks);
        for bad in [
            widened.as_str(),
            &moved,
            &foreign,
            "tm1:train-7:ranks=9-8:00",
        ] {
            assert_eq!(keys.access(bad), None, "{bad}");
        }
        // A named member's credential joins as that member only.
        let named = keys.mint_member(&job, &Scope::Member("m1".into()));
        let access = keys.access(&named).expect("a member credential");
        access
            .may_join(&Identity::Name("m1".into()))
            .expect("itself");
        access
            .may_join(&Identity::Name("m2".into()))
            .expect_err("another");
        access.may_join(&rank(0)).expect_err("a rank");
    }

    #[test]
    fn a_job_credential_reaches_its_job_only() {
        let own = JobId::from("a");
        let access = Access::Job(own.clone());
        access.reach(&own).expect("its own job");
        let error = access.reach(&JobId::from("b")).expect_err("another job");
        assert!(matches!(error, CoordError::PermissionDenied(_)), "{error}");
        let error = access.operate("DeleteJob").expect_err("an operator call");
        assert!(
            error
                .to_string()
                .contains("DeleteJob needs the operator's token"),
            "{error}"
        );
        for access in [Access::Open, Access::Operator] {
            access.reach(&JobId::from("b")).expect("any job");
            access.operate("DeleteJob").expect("operator calls");
        }
    }
}
