//! Names of jobs this leader deleted lately, so that a rank still calling
//! one hears "job NAME was deleted" rather than "unknown job". Bounded
//! ([`REMEMBERED`] names, the oldest forgotten first) and in memory: a new
//! leader starts without them, and its answer is "unknown job" again.

use std::collections::VecDeque;
use std::sync::Mutex;

use tributary_common::ids::JobId;

use super::lifecycle::DeleteReason;
use crate::error::CoordError;

/// How many deleted job names are remembered.
pub const REMEMBERED: usize = 1024;

/// The recently deleted jobs, newest last.
#[derive(Debug, Default)]
pub struct DeletedJobs(Mutex<VecDeque<(JobId, DeleteReason)>>);

impl DeletedJobs {
    fn names(&self) -> std::sync::MutexGuard<'_, VecDeque<(JobId, DeleteReason)>> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// `name` was deleted for `reason`.
    pub fn remember(&self, name: &JobId, reason: DeleteReason) {
        let mut names = self.names();
        names.retain(|(n, _)| n != name);
        if names.len() >= REMEMBERED {
            names.pop_front();
        }
        names.push_back((name.clone(), reason));
    }

    /// `name` was created again: calls of it are the new job's.
    pub fn forget(&self, name: &JobId) {
        self.names().retain(|(n, _)| n != name);
    }

    /// The error for a call of `name`, a job this leader does not serve:
    /// "was deleted" when it deleted it lately, "unknown job" otherwise.
    pub fn unknown(&self, name: &JobId) -> CoordError {
        match self.names().iter().find(|(n, _)| n == name) {
            Some((_, reason)) => CoordError::DeletedJob {
                job: name.clone(),
                how: reason.how(),
            },
            None => CoordError::UnknownJob(name.clone()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rank_of_a_deleted_job_hears_it_was_deleted_not_unknown_job() {
        let deleted = DeletedJobs::default();
        let job = JobId::from("resnet");
        assert!(matches!(deleted.unknown(&job), CoordError::UnknownJob(_)));
        deleted.remember(&job, DeleteReason::Request);
        let message = deleted.unknown(&job).to_string();
        assert!(message.contains("job \"resnet\" was deleted"), "{message}");
        assert!(message.contains("tributary job delete"), "{message}");
        deleted.forget(&job);
        assert!(matches!(deleted.unknown(&job), CoordError::UnknownJob(_)));
    }

    #[test]
    fn the_names_are_bounded_the_oldest_forgotten_first() {
        let deleted = DeletedJobs::default();
        for i in 0..=REMEMBERED {
            deleted.remember(
                &JobId::from(format!("job-{i}").as_str()),
                DeleteReason::Expired,
            );
        }
        assert_eq!(deleted.names().len(), REMEMBERED);
        assert!(matches!(
            deleted.unknown(&JobId::from("job-0")),
            CoordError::UnknownJob(_)
        ));
        assert!(matches!(
            deleted.unknown(&JobId::from(format!("job-{REMEMBERED}").as_str())),
            CoordError::DeletedJob { .. }
        ));
    }
}
