//! When a finite sync job is finished: once every rank of its last epoch's
//! generation (each peer of each data-parallel group) has read its whole
//! part, whether or not any rank asks for the
//! epoch after the last (the README's `for epoch in range(N)` loop never
//! does).

use tributary_common::job::JobSpec;

use super::{Dataset, SyncModel};
use crate::error::Result;

impl SyncModel {
    /// Whether the job's last epoch is read: the current generation plans
    /// the last epoch of a finite job and every one of its ranks reported
    /// its whole part of it. (A generation resumed from a commit plans what
    /// was left of the epoch: its parts are that remainder.)
    pub(super) fn read_to_the_end(&mut self, config: &JobSpec, dataset: &Dataset) -> Result<bool> {
        let Some(current) = self.current().map(|g| g.record) else {
            return Ok(false);
        };
        if !config.is_last_epoch(current.epoch.0) {
            return Ok(false);
        }
        let ranks = self.current().map_or(0, |g| g.ranks());
        // Every part (a data-parallel group's) is equally long.
        let part = self.part(config, dataset, current.generation.0, 0)?.len();
        for rank in 0..ranks {
            let Some(&(generation, samples)) = self.progress.get(&rank) else {
                return Ok(false);
            };
            if generation != current.generation || samples < part {
                return Ok(false);
            }
        }
        Ok(true)
    }
}
