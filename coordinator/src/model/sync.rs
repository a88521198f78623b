//! Sync mode (torchrun, DDP): generations of equal parts.
//!
//! A generation is a world of `world` ranks, all from one torchrun restart
//! (`run_id`, `restart`), splitting one cut of one epoch. The first join of
//! a newer restart starts a new generation from the last commit: the samples
//! of the committed generation's cut that its ranks had not emitted by the
//! commit, recomputed by the pure planner. When a rank of the current
//! generation asks for the next epoch, a generation over the whole next
//! epoch begins with the same world.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use tributary_common::generation::{generation_cut, rank_part, CommitPoint, GenerationRecord};
use tributary_common::ids::{Epoch, Generation};
use tributary_common::proto::{spans_to_proto, v1};
use tributary_common::shuffle::ShuffleSpec;
use tributary_common::span::SpanSet;

use super::{json, put, Dataset};
use crate::config::JobConfig;
use crate::error::{CoordError, Result};
use crate::keys;
use crate::store::Op;

/// A generation as stored: its plan record and the torchrun restart it
/// belongs to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GenMeta {
    pub record: GenerationRecord,
    pub run_id: String,
    pub restart: u64,
}

/// The rank's torchrun identity.
#[derive(Debug, Clone, Copy)]
pub struct Rank<'a> {
    pub rank: u32,
    pub world: u32,
    pub run_id: &'a str,
    pub restart: u64,
}

#[derive(Debug, Default)]
pub struct SyncModel {
    gens: Vec<GenMeta>,
    commit: Option<CommitPoint>,
    cuts: HashMap<u64, Arc<SpanSet>>,
    progress: BTreeMap<u32, (u64, u64)>,
}

/// The planner's inputs that stay fixed for a job.
fn spec(config: &JobConfig) -> ShuffleSpec {
    ShuffleSpec::new(config.shuffle_buffer as usize)
}

impl SyncModel {
    pub fn load(mut gens: Vec<GenMeta>, commit: Option<CommitPoint>) -> Self {
        gens.sort_by_key(|g| g.record.generation.0);
        Self {
            gens,
            commit,
            ..Self::default()
        }
    }

    fn current(&self) -> Option<&GenMeta> {
        self.gens.last()
    }

    /// The cut generation `g` splits (cached; recomputed from the history).
    fn cut(&mut self, config: &JobConfig, dataset: &Dataset, g: u64) -> Result<Arc<SpanSet>> {
        if let Some(cut) = self.cuts.get(&g) {
            return Ok(Arc::clone(cut));
        }
        let history: Vec<GenerationRecord> = self.gens.iter().map(|m| m.record).collect();
        let cut = generation_cut(
            &dataset.shard_samples,
            config.seed,
            config.remainder,
            spec(config),
            &history,
            Generation(g),
        )
        .map_err(|e| CoordError::Precondition(format!("cannot plan generation {g}: {e}")))?;
        let cut = Arc::new(cut);
        self.cuts.insert(g, Arc::clone(&cut));
        Ok(cut)
    }

    fn part(
        &mut self,
        config: &JobConfig,
        dataset: &Dataset,
        g: u64,
        rank: u32,
    ) -> Result<SpanSet> {
        let world = self.gens[g as usize].record.world;
        let cut = self.cut(config, dataset, g)?;
        Ok(rank_part(
            &cut,
            world as usize,
            rank as usize,
            config.remainder,
        ))
    }

    /// Checks a torchrun identity against the current generation: Ok(true)
    /// when it belongs to it, Ok(false) when it is newer (a restart).
    fn classify(&self, rank: Rank<'_>) -> Result<bool> {
        if rank.world == 0 {
            return Err(CoordError::Invalid(
                "torchrun.world_size must be at least 1".into(),
            ));
        }
        if rank.rank >= rank.world {
            return Err(CoordError::RankOutOfRange {
                rank: rank.rank,
                world: rank.world,
            });
        }
        let Some(current) = self.current() else {
            return Ok(false);
        };
        if current.run_id != rank.run_id {
            return Ok(false);
        }
        if rank.restart < current.restart {
            return Err(CoordError::Stale(format!(
                "restart count {} is older than the job's current restart {} (generation {})",
                rank.restart, current.restart, current.record.generation.0
            )));
        }
        if rank.restart > current.restart {
            return Ok(false);
        }
        if rank.world != current.record.world {
            return Err(CoordError::Precondition(format!(
                "conflicting world size: restart {} of run {:?} has {} ranks, not {}",
                rank.restart, rank.run_id, current.record.world, rank.world
            )));
        }
        Ok(true)
    }

    /// A rank joins: the current generation, or a new one for a restart.
    /// Returns the generation and the ops to store.
    pub fn join(
        &mut self,
        job: &str,
        config: &JobConfig,
        dataset: &Dataset,
        rank: Rank<'_>,
    ) -> Result<(GenMeta, Vec<Op>)> {
        if self.classify(rank)? {
            let current = self
                .current()
                .cloned()
                .ok_or_else(|| CoordError::Precondition("no generation yet".into()))?;
            return Ok((current, Vec::new()));
        }
        let generation = self.gens.len() as u64;
        let (epoch, from) = match self.commit {
            None => (0, None),
            Some(commit) => {
                let committed = self.gens[commit.generation.0 as usize].record;
                let part = self.part(config, dataset, commit.generation.0, 0)?.len();
                if commit.samples >= part {
                    (committed.epoch.0 + 1, None)
                } else {
                    (committed.epoch.0, Some(commit))
                }
            }
        };
        let meta = GenMeta {
            record: GenerationRecord {
                generation: Generation(generation),
                epoch: Epoch(epoch),
                world: rank.world,
                from,
            },
            run_id: rank.run_id.to_owned(),
            restart: rank.restart,
        };
        tracing::info!(
            job,
            generation,
            epoch,
            world = rank.world,
            ?from,
            "new generation"
        );
        self.gens.push(meta.clone());
        self.progress.clear();
        Ok((
            meta.clone(),
            vec![put(keys::generation(job, generation), json(&meta))],
        ))
    }

    /// Checks that `rank` belongs to the current generation.
    fn check_current(&self, rank: Rank<'_>) -> Result<&GenMeta> {
        if !self.classify(rank)? {
            let current = self.current().map_or(0, |g| g.record.generation.0);
            return Err(CoordError::Stale(format!(
                "rank {} of restart {} is not in the current generation {current}",
                rank.rank, rank.restart
            )));
        }
        self.current()
            .ok_or_else(|| CoordError::Precondition("no generation yet".into()))
    }

    /// The rank's part of `epoch`: the current generation's when it plans
    /// that epoch; a new generation over the whole epoch when `epoch` is the
    /// next one.
    pub fn assignment(
        &mut self,
        job: &str,
        config: &JobConfig,
        dataset: &Dataset,
        rank: Rank<'_>,
        epoch: u64,
    ) -> Result<(v1::Assignment, Vec<Op>)> {
        let current = self.check_current(rank)?.clone();
        let mut ops = Vec::new();
        let gen = if epoch == current.record.epoch.0 {
            current
        } else if epoch == current.record.epoch.0 + 1 {
            if epoch >= config.epochs {
                return Ok((
                    v1::Assignment {
                        epoch,
                        finished: true,
                        ..v1::Assignment::default()
                    },
                    ops,
                ));
            }
            let meta = GenMeta {
                record: GenerationRecord {
                    generation: Generation(self.gens.len() as u64),
                    epoch: Epoch(epoch),
                    world: current.record.world,
                    from: None,
                },
                ..current
            };
            tracing::info!(
                job,
                generation = meta.record.generation.0,
                epoch,
                "next epoch"
            );
            ops.push(put(
                keys::generation(job, meta.record.generation.0),
                json(&meta),
            ));
            self.gens.push(meta.clone());
            meta
        } else {
            return Err(CoordError::Precondition(format!(
                "epoch {epoch} is not current: generation {} plans epoch {}",
                current.record.generation.0, current.record.epoch.0
            )));
        };
        if gen.record.epoch.0 >= config.epochs {
            return Ok((
                v1::Assignment {
                    epoch: gen.record.epoch.0,
                    generation: gen.record.generation.0,
                    finished: true,
                    ..v1::Assignment::default()
                },
                ops,
            ));
        }
        let part = self.part(config, dataset, gen.record.generation.0, rank.rank)?;
        Ok((
            v1::Assignment {
                epoch: gen.record.epoch.0,
                generation: gen.record.generation.0,
                rank: rank.rank,
                world: gen.record.world,
                spans: spans_to_proto(&part),
                finished: false,
            },
            ops,
        ))
    }

    /// Every rank of `generation` consumed `samples`: the checkpoint point
    /// the next restart resumes from.
    pub fn commit(
        &mut self,
        job: &str,
        config: &JobConfig,
        dataset: &Dataset,
        rank: Rank<'_>,
        generation: u64,
        samples: u64,
    ) -> Result<Vec<Op>> {
        self.check_generation(rank, generation)?;
        if let Some(last) = self.commit {
            if generation < last.generation.0
                || (generation == last.generation.0 && samples <= last.samples)
            {
                // Another rank of the group already committed this far (the
                // commit stands for every rank): nothing to record.
                return Ok(Vec::new());
            }
        }
        let part = self.part(config, dataset, generation, rank.rank)?.len();
        if samples > part {
            return Err(CoordError::Invalid(format!(
                "commit of {samples} samples exceeds generation {generation}'s {part} samples per rank"
            )));
        }
        let commit = CommitPoint {
            generation: Generation(generation),
            samples,
        };
        self.commit = Some(commit);
        Ok(vec![put(keys::commit(job), json(&commit))])
    }

    /// Checks that `rank` is current and `generation` one of its restart's
    /// generations (a rank finishing an epoch may still speak of the
    /// previous epoch's generation while another rank began the next).
    fn check_generation(&self, rank: Rank<'_>, generation: u64) -> Result<()> {
        let current = self.check_current(rank)?;
        let Some(gen) = self.gens.get(generation as usize) else {
            return Err(CoordError::Stale(format!(
                "generation {generation} does not exist (current: {})",
                current.record.generation.0
            )));
        };
        if (gen.run_id.as_str(), gen.restart) != (current.run_id.as_str(), current.restart) {
            return Err(CoordError::Stale(format!(
                "generation {generation} belongs to restart {}, the job is at restart {}",
                gen.restart, current.restart
            )));
        }
        Ok(())
    }

    /// Progress of one rank (kept for status; stored as one key per job, so
    /// the writer's window bounds its writes however many ranks report). A rank of
    /// an older restart is told it is stale, and its report is not stored.
    pub fn report(
        &mut self,
        job: &str,
        rank: Rank<'_>,
        generation: u64,
        samples: u64,
    ) -> Result<Vec<Op>> {
        self.check_generation(rank, generation)?;
        self.progress.insert(rank.rank, (generation, samples));
        Ok(vec![put(keys::progress(job), json(&self.progress))])
    }

    pub fn fill_status(&self, status: &mut v1::JobStatus, epochs: u64) {
        status.generations = self
            .gens
            .iter()
            .map(|g| v1::GenerationInfo {
                generation: g.record.generation.0,
                epoch: g.record.epoch.0,
                world: g.record.world,
                run_id: g.run_id.clone(),
                restart_count: g.restart,
                from_generation: g.record.from.map(|f| f.generation.0),
                from_samples: g.record.from.map_or(0, |f| f.samples),
            })
            .collect();
        status.epoch = self.current().map_or(0, |g| g.record.epoch.0);
        status.commit_generation = self.commit.map(|c| c.generation.0);
        status.commit_samples = self.commit.map_or(0, |c| c.samples);
        status.finished = status.epoch >= epochs;
        status.progress = self
            .progress
            .iter()
            .map(|(&rank, &(generation, samples))| v1::RankProgress {
                rank,
                generation,
                samples,
            })
            .collect();
    }
}
