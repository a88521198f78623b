//! Member credentials: a job credential narrowed to the members it may
//! join as, so that one trainer's credential cannot take another's place.
//!
//! With one credential per job, any holder may Join as any rank, and a
//! holder that joins first as another's rank (keeping the membership
//! alive) locks the real rank out. A member credential reads
//! `tm1:<job>:<scope>:<tag>`, the scope `ranks=<first>-<last>` (torchrun
//! ranks, of any run and restart) or `member=<name>` (a dynamic member),
//! the tag an HMAC-SHA256 of the scope under the job credential's own tag.
//! So whoever holds the job credential mints member credentials offline
//! (`tributary job token JOB --ranks 0-7`: a Kubernetes init container that
//! alone mounts the job's Secret, for the pod's ranks), any replica checks
//! them without state, and a trainer that holds only its own cannot Join as
//! a rank outside it. It reaches what its job credential reaches otherwise:
//! member-scoped calls are its members' already (each carries the secret
//! its Join returned).

use ring::hmac;
use tributary_common::identity::Identity;
use tributary_common::ids::JobId;

use crate::digest::hex;

/// The prefix of a member credential.
pub(super) const PREFIX: &str = "tm1:";

/// The members a member credential may join as.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Scope {
    /// Torchrun ranks `first..=last`, of any run and restart.
    Ranks { first: u32, last: u32 },
    /// The dynamic member of this name.
    Member(String),
}

impl Scope {
    /// `ranks=FIRST-LAST` or `member=NAME`; `None` for anything else.
    pub fn parse(text: &str) -> Option<Self> {
        if let Some(ranks) = text.strip_prefix("ranks=") {
            let (first, last) = ranks.split_once('-')?;
            let (first, last) = (first.parse().ok()?, last.parse().ok()?);
            return (first <= last).then_some(Self::Ranks { first, last });
        }
        let name = text.strip_prefix("member=")?;
        crate::keys::valid_member(name).then(|| Self::Member(name.to_owned()))
    }

    /// Whether a Join as `identity` is within the scope.
    pub fn admits(&self, identity: &Identity) -> bool {
        match (self, identity) {
            (Self::Ranks { first, last }, Identity::Torchrun { rank, .. }) => {
                (*first..=*last).contains(rank)
            }
            (Self::Member(own), Identity::Name(name)) => own == name,
            _ => false,
        }
    }
}

impl std::fmt::Display for Scope {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Ranks { first, last } => write!(f, "ranks={first}-{last}"),
            Self::Member(name) => write!(f, "member={name}"),
        }
    }
}

/// The member credential of `job` for `scope`, under the job credential's
/// tag `job_tag`.
pub(super) fn mint(job: &JobId, job_tag: &[u8], scope: &Scope) -> String {
    let key = hmac::Key::new(hmac::HMAC_SHA256, job_tag);
    let scope = scope.to_string();
    let tag = hmac::sign(&key, scope.as_bytes());
    format!("{PREFIX}{}:{scope}:{}", job.as_str(), hex(tag.as_ref()))
}

/// The job, scope and tag of a member credential, as written; `None` when
/// it does not read as one.
pub(super) fn parse(token: &str) -> Option<(JobId, Scope, Vec<u8>)> {
    let (job, rest) = token.strip_prefix(PREFIX)?.split_once(':')?;
    let (scope, tag) = rest.rsplit_once(':')?;
    if !crate::keys::valid_name(job) {
        return None;
    }
    Some((JobId::from(job), Scope::parse(scope)?, unhex(tag)?))
}

/// 32 bytes from 64 hex digits.
pub(super) fn unhex(text: &str) -> Option<Vec<u8>> {
    if text.len() != 64 {
        return None;
    }
    (0..32)
        .map(|i| u8::from_str_radix(text.get(2 * i..2 * i + 2)?, 16).ok())
        .collect()
}

/// Whether `tag` is `scope`'s under the job credential's tag `job_tag`.
pub(super) fn verify(job_tag: &[u8], scope: &Scope, tag: &[u8]) -> bool {
    let key = hmac::Key::new(hmac::HMAC_SHA256, job_tag);
    hmac::verify(&key, scope.to_string().as_bytes(), tag).is_ok()
}
