//! When a finite sync job is finished: once every rank of its last epoch's
//! generation (each peer of each data-parallel group) has read its whole
//! part, whether or not any rank asks for the
//! epoch after the last (the README's `for epoch in range(N)` loop never
//! does).

use tributary_common::job::JobSpec;

use tributary_common::ids::JobId;

use super::{Dataset, SyncModel};
use crate::error::{CoordError, Result};

impl SyncModel {
    /// Whether the job's last epoch is read: the current generation plans
    /// the last epoch of a finite job and every one of its ranks reported
    /// its whole part of it. (A generation resumed from a commit plans what
    /// was left of the epoch: its parts are that remainder.)
    pub(super) fn read_to_the_end(&mut self, config: &JobSpec, dataset: &Dataset) -> Result<bool> {
        let Some(current) = self.current().map(|g| g.record) else {
            return Ok(false);
        };
        Ok(config.is_last_epoch(current.epoch.0) && self.unread(config, dataset)?.is_empty())
    }

    /// The ranks of the current generation that have not reported reading
    /// their whole part, each with the samples it reported (`None`: no
    /// report of this generation): empty once the generation is read.
    pub(super) fn unread(&mut self, config: &JobSpec, dataset: &Dataset) -> Result<Vec<Behind>> {
        let Some(current) = self.current().map(|g| (g.record, g.ranks())) else {
            return Ok(Vec::new());
        };
        let (record, ranks) = current;
        // Every part (a data-parallel group's) is equally long.
        let part = self.part(config, dataset, record.generation.0, 0)?.len();
        let behind = (0..ranks)
            .filter_map(|rank| {
                let read = self
                    .progress
                    .get(&rank)
                    .filter(|(generation, _)| *generation == record.generation)
                    .map(|&(_, samples)| samples);
                (read < Some(part)).then_some(Behind { rank, read, part })
            })
            .collect();
        Ok(behind)
    }

    /// Refuses to open the epoch after the current generation's until every
    /// rank of that generation reported reading its whole part: one rank
    /// (or a client holding the job's credential) cannot move the group
    /// past an epoch it has not read, nor finish the job early. When
    /// others are behind, answered ABORTED, which the asking rank's client
    /// retries while they finish; when the asking rank (`caller`, a rank of
    /// the generation) is behind itself, waiting cannot help: answered
    /// FAILED_PRECONDITION at once.
    pub(super) fn check_epoch_read(
        &mut self,
        job: &JobId,
        config: &JobSpec,
        dataset: &Dataset,
        caller: u32,
    ) -> Result<()> {
        let behind = self.unread(config, dataset)?;
        let Some(first) = behind.first() else {
            return Ok(());
        };
        let (epoch, generation) = self
            .current()
            .map_or((0, 0), |g| (g.record.epoch.0, g.record.generation.0));
        let read = |behind: &Behind| match behind.read {
            Some(samples) => format!("{samples} of its {} samples", behind.part),
            None => format!("none of its {} samples", behind.part),
        };
        if let Some(own) = behind.iter().find(|b| b.rank == caller) {
            return Err(CoordError::Precondition(format!(
                "job {:?}: rank {caller} asked for epoch {} but has read {} of epoch {epoch} \
                 (generation {generation}): the next epoch opens once every rank read its part. \
                 Read this epoch to its end first (a loop that breaks early, or set_epoch / \
                 epoch= ahead of it, skips samples)",
                job.as_str(),
                epoch + 1,
                read(own),
            )));
        }
        let read = read(first);
        Err(CoordError::EpochUnread(format!(
            "job {:?}: epoch {} opens once every rank of generation {generation} read its part \
             of epoch {epoch}, and {} rank(s) have not: rank {} reported {read}. The ranks' \
             clients retry while the others finish; a rank that moves past an epoch it did not \
             read to its end (set_epoch to the next epoch before the end) must read it first",
            job.as_str(),
            epoch + 1,
            behind.len(),
            first.rank,
        )))
    }
}

/// A rank of the current generation that has not read its whole part.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Behind {
    pub rank: u32,
    /// Samples it reported of this generation (`None`: none yet).
    pub read: Option<u64>,
    pub part: u64,
}
