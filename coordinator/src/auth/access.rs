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
//! A job credential cannot be revoked alone: rotating the operator token
//! revokes every job's.

use ring::hmac;
use tonic::Request;
use tributary_common::ids::JobId;

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

    /// Refuses a job credential for another job than `job`.
    pub fn reach(&self, job: &JobId) -> Result<()> {
        match self {
            Access::Job(own) if own != job => Err(CoordError::PermissionDenied(format!(
                "this credential is job {:?}'s: it cannot act on job {:?}",
                own.as_str(),
                job.as_str()
            ))),
            _ => Ok(()),
        }
    }

    /// Refuses a job credential: `what` needs the operator token.
    pub fn operate(&self, what: &str) -> Result<()> {
        match self {
            Access::Job(own) => Err(CoordError::PermissionDenied(format!(
                "{what} needs the operator's token; this credential reaches only job {:?}",
                own.as_str()
            ))),
            _ => Ok(()),
        }
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

    /// The credential of `job`.
    pub fn mint(&self, job: &JobId) -> String {
        let tag = hmac::sign(&self.key, job.as_str().as_bytes());
        format!("{PREFIX}{}:{}", job.as_str(), hex(tag.as_ref()))
    }

    /// The job `token` is a valid credential of; `None` for anything else.
    pub fn check(&self, token: &str) -> Option<JobId> {
        let (job, hex) = token.strip_prefix(PREFIX)?.rsplit_once(':')?;
        if hex.len() != 64 || !crate::keys::valid_name(job) {
            return None;
        }
        let tag: Vec<u8> = (0..32)
            .map(|i| u8::from_str_radix(hex.get(2 * i..2 * i + 2)?, 16).ok())
            .collect::<Option<_>>()?;
        hmac::verify(&self.key, job.as_bytes(), &tag).ok()?;
        Some(JobId::from(job))
    }
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
