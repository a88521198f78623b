//! Where a torchrun identity stands against a sync job's current
//! generation: its bounds, its restart count, its world and its
//! data-parallel groups.
//!
//! A generation plans over data-parallel groups: its record's `world` is
//! the number of groups (`dp_size`; without groups, the torchrun world),
//! and each rank reads its group's part (`dp_rank`; without groups, its
//! rank). Every torchrun rank is still a member of the generation: each
//! reports and commits, the job's commit is the minimum over all of them
//! (a group's progress is its slowest peer's), and the last epoch is read
//! once every rank read its whole part.

use tributary_common::identity::DataParallel;

use super::{Place, Resume, SyncModel, MAX_FIRST_RESTART, MAX_RESTART_STEP};
use crate::config::MAX_WORLD;
use crate::error::{CoordError, Result};
use crate::model::{GenMeta, Identity};

/// A torchrun [`Identity`]'s fields, borrowed: what a sync call is checked
/// by. Sync jobs take only torchrun identities.
#[derive(Debug, Clone, Copy)]
pub(super) struct Rank<'a> {
    pub rank: u32,
    /// The torchrun world: the ranks of the generation.
    pub world: u32,
    pub run_id: &'a str,
    pub restart: u64,
    /// The part the rank reads (its data-parallel group, else its rank)
    /// and the number of parts (`dp_size`, else the world).
    pub part: u32,
    pub parts: u32,
    /// The rank gave its data-parallel group.
    pub grouped: bool,
}

impl<'a> Rank<'a> {
    pub fn of(identity: &'a Identity) -> Result<Self> {
        match identity {
            Identity::Torchrun {
                rank,
                world,
                run_id,
                restart,
                dp,
            } => {
                let part = dp.unwrap_or(DataParallel {
                    rank: *rank,
                    size: *world,
                });
                Ok(Rank {
                    rank: *rank,
                    world: *world,
                    run_id,
                    restart: *restart,
                    part: part.rank,
                    parts: part.size,
                    grouped: dp.is_some(),
                })
            }
            Identity::Name(name) => Err(CoordError::Invalid(format!(
                "member {name:?} joined by name; sync jobs need a torchrun identity (RANK, WORLD_SIZE)"
            ))),
        }
    }

    /// The torchrun world a generation of this rank stores beside its
    /// plan record's world of groups, when the two differ.
    pub fn ranks(&self) -> Option<u32> {
        (self.world != self.parts).then_some(self.world)
    }
}

impl GenMeta {
    /// The torchrun ranks of the generation: its members.
    pub fn ranks(&self) -> u32 {
        self.ranks.unwrap_or(self.record.world)
    }
}

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
        if rank.grouped {
            let dp = DataParallel {
                rank: rank.part,
                size: rank.parts,
            };
            dp.check(rank.world)
                .map_err(|e| CoordError::Invalid(format!("torchrun identity: {e}")))?;
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

    /// Checks that `rank`'s world and its number of data-parallel groups
    /// are the current generation's.
    pub(super) fn same_world(&self, rank: Rank<'_>) -> Result<()> {
        let Some(current) = self.current() else {
            return Ok(());
        };
        if rank.world != current.ranks() {
            return Err(CoordError::Precondition(format!(
                "conflicting world size: restart {} of run {:?} has {} ranks, not {}",
                rank.restart,
                rank.run_id,
                current.ranks(),
                rank.world
            )));
        }
        if rank.parts != current.record.world {
            return Err(CoordError::Precondition(format!(
                "conflicting dp_size: rank {} gives dp_size {}, but generation {} (restart {} of \
                 run {:?}) plans over dp_size {}; every rank of a world must pass the same \
                 data_parallel size (no data_parallel: dp_size is the world size, {})",
                rank.rank,
                rank.parts,
                current.record.generation.0,
                rank.restart,
                rank.run_id,
                current.record.world,
                rank.world
            )));
        }
        Ok(())
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

#[cfg(test)]
mod tests;
