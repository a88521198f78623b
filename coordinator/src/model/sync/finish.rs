//! When a finite sync job is finished: once every rank of its last epoch's
//! generation (each peer of each data-parallel group) has read its whole
//! part, whether or not any rank asks for the
//! epoch after the last (the README's `for epoch in range(N)` loop never
//! does).

use std::collections::BTreeSet;

use tributary_common::ids::{Generation, JobId};
use tributary_common::job::JobSpec;

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
        Ok(config.is_last_epoch(current.epoch.0)
            && self.unread(config, dataset)?.is_some_and(Unread::is_empty))
    }

    /// The ranks of the current generation that have not reported reading
    /// their whole part: built from the reports once per generation, then
    /// kept as reports arrive ([`SyncModel::note_read`]), so the checks a
    /// report or a next-epoch ask makes cost no walk over the world.
    /// `None` before the job's first generation.
    fn unread(&mut self, config: &JobSpec, dataset: &Dataset) -> Result<Option<&Unread>> {
        let Some((record, ranks)) = self.current().map(|g| (g.record, g.ranks())) else {
            return Ok(None);
        };
        if self.unread.as_ref().map(|u| u.generation) != Some(record.generation) {
            // Every part (a data-parallel group's) is equally long.
            let part = self.part(config, dataset, record.generation.0, 0)?.len();
            let ranks = (0..ranks)
                .filter(|rank| self.read_of(*rank, record.generation) < Some(part))
                .collect();
            self.unread = Some(Unread {
                generation: record.generation,
                part,
                ranks,
            });
        }
        Ok(self.unread.as_ref())
    }

    /// Keeps [`SyncModel::unread`] as `rank` reports `samples` of
    /// `generation` (a later, smaller report puts it back).
    pub(super) fn note_read(&mut self, rank: u32, generation: Generation, samples: u64) {
        if let Some(unread) = self.unread.as_mut().filter(|u| u.generation == generation) {
            if samples >= unread.part {
                unread.ranks.remove(&rank);
            } else {
                unread.ranks.insert(rank);
            }
        }
    }

    /// The samples `rank` reported of `generation`, if it reported any.
    fn read_of(&self, rank: u32, generation: Generation) -> Option<u64> {
        self.progress
            .get(&rank)
            .filter(|(g, _)| *g == generation)
            .map(|&(_, samples)| samples)
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
        let Some(unread) = self.unread(config, dataset)? else {
            return Ok(());
        };
        let (generation, part, behind) = (unread.generation, unread.part, unread.ranks.len());
        let (Some(&first), caller_behind) = (unread.ranks.first(), unread.ranks.contains(&caller))
        else {
            return Ok(());
        };
        let epoch = self.current().map_or(0, |g| g.record.epoch.0);
        let read = |rank: u32| match self.read_of(rank, generation) {
            Some(samples) => format!("{samples} of its {part} samples"),
            None => format!("none of its {part} samples"),
        };
        if caller_behind {
            return Err(CoordError::Precondition(format!(
                "job {:?}: rank {caller} asked for epoch {} but has read {} of epoch {epoch} \
                 (generation {generation}): the next epoch opens once every rank read its part. \
                 Read this epoch to its end first (a loop that breaks early, or set_epoch / \
                 epoch= ahead of it, skips samples)",
                job.as_str(),
                epoch + 1,
                read(caller),
            )));
        }
        Err(CoordError::EpochUnread(format!(
            "job {:?}: epoch {} opens once every rank of generation {generation} read its part \
             of epoch {epoch}, and {behind} rank(s) have not: rank {first} reported {}. The \
             ranks' clients retry while the others finish; a rank that moves past an epoch it \
             did not read to its end (set_epoch to the next epoch before the end) must read it \
             first",
            job.as_str(),
            epoch + 1,
            read(first),
        )))
    }
}

/// The ranks of one generation that have not read their whole part.
#[derive(Debug)]
pub(super) struct Unread {
    generation: Generation,
    /// Samples in each rank's part.
    part: u64,
    ranks: BTreeSet<u32>,
}

impl Unread {
    fn is_empty(&self) -> bool {
        self.ranks.is_empty()
    }
}
