//! The coordinator's errors and their one mapping to gRPC statuses.

use tonic::{Code, Status};
use tributary_common::ids::{JobId, MemberId};
use tributary_common::proto::LEADER_METADATA;

use crate::store::StoreError;

/// Every way a coordinator request can fail. Messages name the job, member,
/// rank, generation or field at fault (names quoted as `{:?}` of the
/// string).
#[derive(Debug, thiserror::Error)]
pub enum CoordError {
    #[error("unknown job {:?}", .0.as_str())]
    UnknownJob(JobId),
    #[error(
        "unknown member {:?} of job {:?} (it made no call for its job's member_ttl_s, or it left: join again)",
        .member.as_str(),
        .job.as_str()
    )]
    UnknownMember { job: JobId, member: MemberId },
    #[error("rank {rank} is outside a world of {world} ranks")]
    RankOutOfRange { rank: u32, world: u32 },
    #[error("stale generation: {0}")]
    Stale(String),
    #[error(
        "job {:?} exists with a different config: {diff}; to proceed, delete it \
         (`tributary job delete {}`) or pass another job name (job= in Python, --job on the \
         command line)",
        .job.as_str(),
        .job.as_str()
    )]
    ConflictingConfig { job: JobId, diff: String },
    /// A job this leader deleted lately (`leader::deleted`).
    #[error(
        "job {:?} was deleted {how}: its ranks have nothing left to read; start a new job \
         (create it again, or pass another job name)",
        .job.as_str()
    )]
    DeletedJob { job: JobId, how: &'static str },
    #[error("{0}")]
    Precondition(String),
    #[error("invalid request: {0}")]
    Invalid(String),
    #[error("cannot read the dataset of job {:?}: {error}", .job.as_str())]
    Dataset { job: JobId, error: String },
    #[error(
        "member {:?} of job {:?} is already joined and live: \
         a Join replacing it must carry its secret (or wait up to {ttl_s} s for it to expire)",
        .member.as_str(),
        .job.as_str()
    )]
    AlreadyJoined {
        job: JobId,
        member: MemberId,
        ttl_s: u32,
    },
    #[error("job {:?} has failed: {reason}", .job.as_str())]
    JobFailed { job: JobId, reason: String },
    #[error("stored state is corrupt: {0}")]
    Corrupt(String),
    #[error("cannot encode the value of {key}: {error}")]
    Encode { key: String, error: String },
    #[error("unauthenticated: {0}")]
    Unauthenticated(String),
    /// A Join that would strand the live members of the current
    /// generation by skipping restart counts (`model::calls`).
    #[error("{0}")]
    Stranding(String),
    /// A sync rank asked for the next epoch before every rank of the
    /// current generation read its part (`model::sync::finish`).
    #[error("{0}")]
    EpochUnread(String),
    /// Over one of the replica's caps (`crate::limits`).
    #[error("{0}")]
    Exhausted(String),
    #[error("permission denied: {0}")]
    PermissionDenied(String),
    #[error("not the leader (leader: {})", .0.as_deref().unwrap_or("none elected yet"))]
    NotLeader(Option<String>),
    #[error(transparent)]
    Store(#[from] StoreError),
}

pub type Result<T> = std::result::Result<T, CoordError>;

impl From<CoordError> for Status {
    fn from(error: CoordError) -> Self {
        let code = match &error {
            CoordError::UnknownJob(_)
            | CoordError::DeletedJob { .. }
            | CoordError::UnknownMember { .. } => Code::NotFound,
            CoordError::RankOutOfRange { .. } => Code::OutOfRange,
            CoordError::Stale(_) | CoordError::Precondition(_) => Code::FailedPrecondition,
            // Retried by the client's Join, as a live previous membership is.
            CoordError::ConflictingConfig { .. }
            | CoordError::AlreadyJoined { .. }
            | CoordError::Stranding(_) => Code::AlreadyExists,
            CoordError::Invalid(_) => Code::InvalidArgument,
            CoordError::Dataset { .. } | CoordError::JobFailed { .. } | CoordError::Corrupt(_) => {
                Code::FailedPrecondition
            }
            CoordError::Encode { .. } => Code::Internal,
            CoordError::Unauthenticated(_) => Code::Unauthenticated,
            CoordError::PermissionDenied(_) => Code::PermissionDenied,
            CoordError::Exhausted(_) => Code::ResourceExhausted,
            // Retried by the rank's client while the other ranks finish.
            CoordError::EpochUnread(_) => Code::Aborted,
            CoordError::NotLeader(_) | CoordError::Store(_) => Code::Unavailable,
        };
        let mut status = Status::new(code, error.to_string());
        if let CoordError::NotLeader(leader) = &error {
            if let Ok(value) = leader.as_deref().unwrap_or("").parse() {
                status.metadata_mut().insert(LEADER_METADATA, value);
            }
        }
        status
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_in_messages_read_as_quoted_names() {
        let error = CoordError::UnknownMember {
            job: JobId::from("j"),
            member: MemberId::from("run.0.1"),
        };
        assert_eq!(
            error.to_string(),
            r#"unknown member "run.0.1" of job "j" (it made no call for its job's member_ttl_s, or it left: join again)"#
        );
        assert_eq!(
            CoordError::UnknownJob(JobId::from("j")).to_string(),
            r#"unknown job "j""#
        );
    }
}
