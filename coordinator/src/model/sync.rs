//! Sync mode (torchrun, DDP): generations of equal parts.
//!
//! A generation is a world of `world` ranks, all from one incarnation of
//! the group, splitting one cut of one epoch. An incarnation is a torchrun
//! restart (`run_id`, `restart`) and the commit it resumed from: the first
//! join of a newer restart, or a join resuming from the job's commit
//! (`load_state_dict` of a plain re-run, a requeue, a pod restart: see
//! [`Resume`]), starts a new generation from that commit: the samples of the
//! committed generation's cut that its ranks had not emitted by the
//! commit, recomputed by the pure planner. When a rank of the current
//! generation asks for the next epoch, a generation over the whole next
//! epoch begins with the same world and incarnation.
//!
//! The job's commit is the group's: the minimum over the incarnation's
//! ranks of each rank's latest commit ([`SyncModel::commit`]), so a rank that died
//! behind holds it back whatever the others did. Each rank's progress and
//! commits are stored in parts of ranks (`parts`).

mod parts;
mod place;
mod resume;

use place::Rank;

mod finish;

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use tributary_common::ids::{Epoch, Generation, JobId};
use tributary_common::plan::generation::{
    generation_cut, rank_part, CommitPoint, GenerationRecord,
};
use tributary_common::plan::shuffle::ShuffleSpec;
use tributary_common::plan::span::SpanSet;

use parts::part_of;
pub use parts::{merge_parts, RANKS_PER_KEY};
pub use resume::{Resume, MAX_HISTORY};

use super::effects::put;
use super::status::{ModeStatus, RankProgress};
use super::{Dataset, GenMeta, Identity};
use crate::config::MAX_WORLD;
use crate::error::{CoordError, Result};
use crate::keys::Key;
use crate::store::Op;
use tributary_common::job::JobSpec;

/// A sync rank's part of an epoch: the spans it reads in the generation
/// that plans it, or that every epoch is done.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Assignment {
    pub epoch: u64,
    pub generation: u64,
    /// The part the rank reads (its data-parallel group, else its rank)
    /// and the number of parts: the peers of a group get the same.
    pub rank: u32,
    pub world: u32,
    pub spans: SpanSet,
    pub finished: bool,
    /// The plan records of the generation's epoch, from its first
    /// generation to this one (what a checkpoint's state carries).
    pub history: Vec<GenerationRecord>,
}

/// How far one join may move a run's restart count ahead of the job's
/// current one, and the largest first count of a run. torchrun's counts grow
/// by one per restart (bounded by `--max-restarts`); the group tokens of
/// `examples/train_resnet.py::join_group` are wall clocks in milliseconds,
/// growing by the time between two groups: 2^40 ms is 35 years. So no real
/// job comes near either bound, while a count of 2^64-1 (a bug, or a client
/// trying to lock the real ranks out for good) is refused, and `restart + 1`
/// can never overflow.
pub const MAX_RESTART_STEP: u64 = 1 << 40;
pub const MAX_FIRST_RESTART: u64 = 1 << 42;

/// Where a torchrun identity stands against the current generation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Place {
    /// Its run and restart are the current generation's.
    Current,
    /// A newer restart, another run, or no generation yet.
    Newer,
}

#[derive(Debug, Default)]
pub struct SyncModel {
    /// Generations in order of their numbers; those no longer needed to
    /// plan (see [`SyncModel::compact`]) are dropped, so numbers may skip.
    gens: Vec<GenMeta>,
    /// A rank asked for the epoch after the last: the job is done.
    pub finished: bool,
    /// The group's commit: what a restart resumes from.
    commit: Option<CommitPoint>,
    /// Each rank's latest commit in the current incarnation.
    ranks: BTreeMap<u32, CommitPoint>,
    cuts: HashMap<u64, Arc<SpanSet>>,
    /// Each rank's last report: its generation and samples.
    progress: BTreeMap<u32, (Generation, u64)>,
    /// The least number the next generation gets (a seeded job's history
    /// may number below generations it dropped).
    floor: u64,
    /// The current generation's ranks that have not read their part
    /// (`finish`), kept as they report.
    unread: Option<finish::Unread>,
}

/// The planner's inputs that stay fixed for a job.
fn spec(config: &JobSpec) -> ShuffleSpec {
    ShuffleSpec::new(config.shuffle_buffer as usize)
}

impl SyncModel {
    /// Rebuilds the model from stored generations, the group's commit and
    /// each rank's, checking what the planner will index and loop by:
    /// generations numbered 0..n, worlds within bounds, the commit naming a
    /// stored generation, each rank's commit a rank of the current world in
    /// the current incarnation. Each rank's last report is kept for the
    /// ranks of the current generation (the next epoch opens once they
    /// read their parts, whichever replica they reported to).
    pub fn load(
        mut gens: Vec<GenMeta>,
        commit: Option<CommitPoint>,
        ranks: BTreeMap<u32, CommitPoint>,
        mut progress: BTreeMap<u32, (Generation, u64)>,
    ) -> Result<Self> {
        gens.sort_by_key(|g| g.record.generation.0);
        let corrupt = |why: String| Err(CoordError::Corrupt(why));
        let stored = |g: u64| {
            gens.binary_search_by_key(&g, |m| m.record.generation.0)
                .is_ok()
        };
        for (i, gen) in gens.iter().enumerate() {
            let g = gen.record.generation.0;
            if i > 0 && gens[i - 1].record.generation.0 == g {
                return corrupt(format!("generation {g} is stored twice"));
            }
            if !(1..=MAX_WORLD).contains(&gen.record.world) {
                return corrupt(format!(
                    "generation {g} has a world of {} ranks (1..={MAX_WORLD})",
                    gen.record.world
                ));
            }
            if let Some(ranks) = gen.ranks {
                if !(1..=MAX_WORLD).contains(&ranks) || !ranks.is_multiple_of(gen.record.world) {
                    return corrupt(format!(
                        "generation {g} has {ranks} ranks in {} data-parallel groups \
                         (1..={MAX_WORLD} ranks, a multiple of the groups)",
                        gen.record.world
                    ));
                }
            }
            if let Some(from) = gen.record.from {
                if from.generation.0 >= g {
                    return corrupt(format!(
                        "generation {g} resumes from generation {}, which is not older",
                        from.generation.0
                    ));
                }
                if !stored(from.generation.0) {
                    return corrupt(format!(
                        "generation {g} resumes from generation {}, which is not stored",
                        from.generation.0
                    ));
                }
            }
        }
        if let Some(commit) = commit {
            if !stored(commit.generation.0) {
                return corrupt(format!(
                    "the commit names generation {}, which is not stored",
                    commit.generation.0
                ));
            }
        }
        let current = gens.last().map(|g| (g.record.generation, g.ranks()));
        progress.retain(|rank, (generation, _)| {
            current.is_some_and(|(g, ranks)| *generation == g && *rank < ranks)
        });
        let model = Self {
            gens,
            commit,
            ranks,
            progress,
            ..Self::default()
        };
        model.check_ranks()?;
        Ok(model)
    }

    fn current(&self) -> Option<&GenMeta> {
        self.gens.last()
    }

    /// The current generation's torchrun run and restart count.
    pub fn current_restart(&self) -> Option<(&str, u64)> {
        self.current().map(|g| (g.run_id.as_str(), g.restart))
    }

    /// Generation `g`, if stored.
    fn gen(&self, g: u64) -> Option<&GenMeta> {
        self.gens
            .binary_search_by_key(&g, |m| m.record.generation.0)
            .ok()
            .map(|i| &self.gens[i])
    }

    /// Generation `g`, which the caller knows is stored.
    fn known(&self, g: u64) -> Result<&GenMeta> {
        self.gen(g)
            .ok_or_else(|| CoordError::Precondition(format!("generation {g} is not stored")))
    }

    /// The number the next generation gets.
    fn next_generation(&self) -> u64 {
        self.current()
            .map_or(0, |g| g.record.generation.0 + 1)
            .max(self.floor)
    }

    /// How many generations the model holds.
    pub fn generations(&self) -> usize {
        self.gens.len()
    }

    /// Drops the generations no plan needs any more and returns the ops
    /// that delete them. Kept: the last commit's generation (a restart
    /// resumes from it), the current generation and the one before it (a
    /// rank finishing an epoch may still speak of the previous epoch's
    /// generation while another began the next), and each of their chains
    /// back to the start of its epoch (a cut is recomputed through them).
    /// Everything else is history no member or restart can ask for, so
    /// a job holds a bounded number of generations however long it runs.
    pub fn compact(&mut self, job: &JobId) -> Vec<Op> {
        let mut keep: std::collections::BTreeSet<u64> = self
            .gens
            .iter()
            .rev()
            .take(2)
            .map(|m| m.record.generation.0)
            .chain(self.commit.map(|c| c.generation.0))
            .collect();
        let mut walk: Vec<u64> = keep.iter().copied().collect();
        while let Some(g) = walk.pop() {
            if let Some(from) = self.gen(g).and_then(|m| m.record.from) {
                if keep.insert(from.generation.0) {
                    walk.push(from.generation.0);
                }
            }
        }
        let mut ops = Vec::new();
        self.gens.retain(|m| {
            let g = m.record.generation;
            let kept = keep.contains(&g.0);
            if !kept {
                ops.push(Op::Delete {
                    key: Key::Generation {
                        job: job.clone(),
                        generation: g,
                    }
                    .into(),
                });
            }
            kept
        });
        self.cuts.retain(|g, _| keep.contains(g));
        ops
    }

    /// The cut generation `g` splits (cached; recomputed from the history).
    fn cut(&mut self, config: &JobSpec, dataset: &Dataset, g: u64) -> Result<Arc<SpanSet>> {
        if let Some(cut) = self.cuts.get(&g) {
            return Ok(Arc::clone(cut));
        }
        let history: Vec<GenerationRecord> = self.gens.iter().map(|m| m.record).collect();
        let cut = generation_cut(
            &*dataset.layout,
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

    /// Part `part` of generation `g` (a data-parallel group's, or a
    /// rank's without groups). Every part of a generation is equally long.
    fn part(&mut self, config: &JobSpec, dataset: &Dataset, g: u64, part: u32) -> Result<SpanSet> {
        let parts = self.known(g)?.record.world;
        let cut = self.cut(config, dataset, g)?;
        Ok(rank_part(
            &cut,
            parts as usize,
            part as usize,
            config.remainder,
        ))
    }

    /// A rank joins: the current generation, or a new one for a restart;
    /// with `resume`, the generation that resumes from that commit (see
    /// [`Resume`]). Returns the generation and the ops to store.
    pub fn join(
        &mut self,
        job: &JobId,
        config: &JobSpec,
        dataset: &Dataset,
        identity: &Identity,
        resume: Option<&Resume>,
    ) -> Result<(GenMeta, Vec<Op>)> {
        let rank = Rank::of(identity)?;
        if let Some(resume) = resume {
            return self.resume(job, config, dataset, rank, resume);
        }
        if self.classify(rank)? {
            let current = self
                .current()
                .cloned()
                .ok_or_else(|| CoordError::Precondition("no generation yet".into()))?;
            return Ok((current, Vec::new()));
        }
        self.open(job, config, dataset, rank)
    }

    /// Opens a new incarnation of the group for `rank`'s run and restart:
    /// a generation from the job's commit (the rest of its epoch, or the
    /// next epoch when the commit ends its generation's parts). Each
    /// rank's commits start over; the job's commit stays the base.
    fn open(
        &mut self,
        job: &JobId,
        config: &JobSpec,
        dataset: &Dataset,
        rank: Rank<'_>,
    ) -> Result<(GenMeta, Vec<Op>)> {
        let generation = self.next_generation();
        let (epoch, from) = match self.commit {
            None => (0, None),
            Some(commit) => {
                let committed = self.known(commit.generation.0)?.record;
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
                world: rank.parts,
                from,
            },
            run_id: rank.run_id.to_owned(),
            restart: rank.restart,
            resumed: self.commit,
            ranks: rank.ranks(),
        };
        tracing::info!(
            job = job.as_str(),
            generation,
            epoch,
            world = rank.world,
            dp_size = rank.parts,
            ?from,
            "generation started"
        );
        let key = Key::Generation {
            job: job.clone(),
            generation: meta.record.generation,
        };
        let op = put(key, &meta)?;
        self.gens.push(meta.clone());
        self.progress.clear();
        let mut ops = vec![op];
        if !self.ranks.is_empty() {
            self.ranks.clear();
            // Every part, and the one key an earlier coordinator wrote.
            let whole = Key::RankCommits {
                job: job.clone(),
                part: None,
            };
            ops.push(Op::DeletePrefix {
                prefix: whole.into(),
            });
        }
        ops.extend(self.compact(job));
        Ok((meta, ops))
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
        job: &JobId,
        config: &JobSpec,
        dataset: &Dataset,
        identity: &Identity,
        epoch: Epoch,
    ) -> Result<(Assignment, Vec<Op>)> {
        let rank = Rank::of(identity)?;
        let epoch = epoch.get();
        let current = self.check_current(rank)?.clone();
        let mut ops = Vec::new();
        let gen = if epoch == current.record.epoch.0 {
            current
        } else if epoch == current.record.epoch.0 + 1 {
            self.check_epoch_read(job, config, dataset, rank.rank)?;
            if config.is_past_end(epoch) {
                self.finished = true;
                return Ok((
                    Assignment {
                        epoch,
                        finished: true,
                        ..Assignment::default()
                    },
                    ops,
                ));
            }
            let meta = GenMeta {
                record: GenerationRecord {
                    generation: Generation(self.next_generation()),
                    epoch: Epoch(epoch),
                    world: current.record.world,
                    from: None,
                },
                ..current
            };
            tracing::info!(
                job = job.as_str(),
                finished = epoch - 1,
                epoch,
                generation = meta.record.generation.0,
                "epoch finished; generation started for the next"
            );
            let key = Key::Generation {
                job: job.clone(),
                generation: meta.record.generation,
            };
            ops.push(put(key, &meta)?);
            self.gens.push(meta.clone());
            ops.extend(self.compact(job));
            meta
        } else {
            return Err(CoordError::Precondition(format!(
                "epoch {epoch} is not current: generation {} plans epoch {}",
                current.record.generation.0, current.record.epoch.0
            )));
        };
        if config.is_past_end(gen.record.epoch.0) {
            return Ok((
                Assignment {
                    epoch: gen.record.epoch.0,
                    generation: gen.record.generation.0,
                    finished: true,
                    ..Assignment::default()
                },
                ops,
            ));
        }
        let part = self.part(config, dataset, gen.record.generation.0, rank.part)?;
        Ok((
            Assignment {
                epoch: gen.record.epoch.0,
                generation: gen.record.generation.0,
                rank: rank.part,
                world: gen.record.world,
                spans: part,
                finished: false,
                history: self.history(gen.record.generation.0)?,
            },
            ops,
        ))
    }

    /// Checks that `rank` is current and `generation` one of its
    /// incarnation's generations (a rank finishing an epoch may still speak
    /// of the previous epoch's generation while another rank began the
    /// next).
    fn check_generation(&self, rank: Rank<'_>, generation: Generation) -> Result<()> {
        let current = self.check_current(rank)?;
        let Some(gen) = self.gen(generation.get()) else {
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
        if gen.resumed != current.resumed {
            return Err(CoordError::Stale(format!(
                "generation {generation} belongs to an older incarnation of the group: \
                 generation {} resumed from the commit {:?} since",
                current.record.generation.0, current.resumed
            )));
        }
        Ok(())
    }

    /// Progress of one rank (kept for status; stored in parts of
    /// [`RANKS_PER_KEY`] ranks, so a report writes one bounded key and the
    /// writer's window one write per part however many ranks report). A rank of
    /// an older restart is told it is stale, and its report is not stored.
    /// The report that completes the last epoch finishes the job
    /// (every rank of the last epoch's generation read its whole part).
    pub fn report(
        &mut self,
        job: &JobId,
        config: &JobSpec,
        dataset: &Dataset,
        identity: &Identity,
        generation: Generation,
        samples: u64,
    ) -> Result<Vec<Op>> {
        let rank = Rank::of(identity)?;
        self.check_generation(rank, generation)?;
        let part = self
            .part(config, dataset, generation.get(), rank.part)?
            .len();
        if samples > part {
            return Err(CoordError::Invalid(format!(
                "report of {samples} samples exceeds generation {generation}'s {part} samples per rank"
            )));
        }
        self.progress.insert(rank.rank, (generation, samples));
        self.note_read(rank.rank, generation, samples);
        if !self.finished && self.read_to_the_end(config, dataset)? {
            tracing::info!(
                job = job.as_str(),
                generation = generation.get(),
                "every rank read its part of the last epoch: job finished"
            );
            self.finished = true;
        }
        let (part, progress) = part_of(&self.progress, rank.rank);
        Ok(vec![put(
            Key::Progress {
                job: job.clone(),
                part: Some(part),
            },
            &progress,
        )?])
    }

    /// The sync part of a job's status.
    pub fn status(&self) -> ModeStatus {
        let epoch = self.current().map_or(0, |g| g.record.epoch.0);
        ModeStatus {
            epoch,
            finished: self.finished,
            generation: self.current().map(|g| g.record.generation.0),
            generations: self.gens.clone(),
            commit_generation: self.commit.map(|c| c.generation.0),
            commit_samples: self.commit.map_or(0, |c| c.samples),
            progress: self
                .progress
                .iter()
                .map(|(&rank, &(generation, samples))| RankProgress {
                    rank,
                    generation,
                    samples,
                })
                .collect(),
            ..ModeStatus::default()
        }
    }
}
