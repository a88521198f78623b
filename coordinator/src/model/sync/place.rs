//! Where a torchrun identity stands against a sync job's current
//! generation: its bounds, its restart count, its world.

use super::{Place, Rank, Resume, SyncModel, MAX_FIRST_RESTART, MAX_RESTART_STEP};
use crate::config::MAX_WORLD;
use crate::error::{CoordError, Result};
use crate::model::Identity;

impl SyncModel {
    /// Checks a torchrun identity against the current generation: Ok(true)
    /// when it belongs to it, Ok(false) when it is newer (a restart).
    pub(super) fn classify(&self, rank: Rank<'_>) -> Result<bool> {
        match self.place(rank)? {
            Place::Newer => Ok(false),
            Place::Current => {
                self.same_world(rank)?;
                Ok(true)
            }
        }
    }

    /// Where `rank` stands (its bounds, and a restart count neither stale
    /// nor too far ahead), its world not compared yet.
    pub(super) fn place(&self, rank: Rank<'_>) -> Result<Place> {
        if !(1..=MAX_WORLD).contains(&rank.world) {
            return Err(CoordError::Invalid(format!(
                "torchrun.world_size {} is outside 1..={MAX_WORLD}",
                rank.world
            )));
        }
        if rank.rank >= rank.world {
            return Err(CoordError::RankOutOfRange {
                rank: rank.rank,
                world: rank.world,
            });
        }
        let Some(current) = self.current().filter(|c| c.run_id == rank.run_id) else {
            if rank.restart > MAX_FIRST_RESTART {
                return Err(CoordError::Invalid(format!(
                    "torchrun.restart_count {} is above {MAX_FIRST_RESTART} for the first group of run {:?}",
                    rank.restart, rank.run_id
                )));
            }
            return Ok(Place::Newer);
        };
        if rank.restart - current.restart.min(rank.restart) > MAX_RESTART_STEP {
            return Err(CoordError::Invalid(format!(
                "torchrun.restart_count {} is more than {MAX_RESTART_STEP} ahead of the job's current restart {}",
                rank.restart, current.restart
            )));
        }
        if rank.restart < current.restart {
            return Err(CoordError::Stale(format!(
                "restart count {} is older than the job's current restart {} (generation {})",
                rank.restart, current.restart, current.record.generation.0
            )));
        }
        if rank.restart > current.restart {
            return Ok(Place::Newer);
        }
        Ok(Place::Current)
    }

    /// Checks that `rank`'s world is the current generation's.
    pub(super) fn same_world(&self, rank: Rank<'_>) -> Result<()> {
        match self.current() {
            Some(current) if rank.world != current.record.world => {
                Err(CoordError::Precondition(format!(
                    "conflicting world size: restart {} of run {:?} has {} ranks, not {}",
                    rank.restart, rank.run_id, current.record.world, rank.world
                )))
            }
            _ => Ok(()),
        }
    }

    /// Whether a Join of `identity` (resuming from `resume`, if given)
    /// would be refused as the job stands (a name, a stale restart, a
    /// conflicting world, a resume point that is not the job's commit),
    /// changing nothing.
    pub fn check_join(&self, identity: &Identity, resume: Option<&Resume>) -> Result<()> {
        let rank = Rank::of(identity)?;
        match resume {
            None => self.classify(rank).map(|_| ()),
            Some(resume) => self.check_resume(rank, resume),
        }
    }
}
