//! Commits and resumes of a sync job: the group's commit point, and where
//! a rank that restored a checkpoint reads next.
//!
//! Every rank commits its own point (`commit(state)` once its checkpoint is
//! durable); the job's commit, the point a restarted group resumes from,
//! is the minimum over the incarnation's ranks of each rank's latest
//! commit, points ordered by (generation, samples). A rank that has not
//! committed in the incarnation holds it back at the incarnation's base
//! (the commit it resumed from), so a rank that died behind, while others
//! went on committing without a collective holding them, can never be
//! skipped.
//!
//! A rank that restored a checkpoint says so at Join ([`Resume`]): the
//! incarnation is derived from the checkpoint, no counter bumped by hand.
//! A resume point equal to the job's commit opens a new generation from it
//! (when the current generation did not already resume from it, as the
//! other ranks of the same re-run or a torchrun restart did: those join
//! it); any other point is refused, saying which checkpoint to load or
//! which ranks have not committed. A job with no commit at all (a fresh
//! in-process coordinator) is seeded from the point's plan history, which
//! the checkpoint carries.

use tributary_common::ids::{Generation, JobId};
use tributary_common::job::JobSpec;
use tributary_common::plan::generation::{
    generation_cut, rank_part, CommitPoint, GenerationRecord,
};

use super::{put, spec, Dataset, GenMeta, Place, Rank, SyncModel};
pub use crate::config::MAX_HISTORY;
use crate::config::MAX_WORLD;
use crate::error::{CoordError, Result};
use crate::keys::Key;
use crate::store::Op;
use tributary_common::identity::Identity;

/// A checkpoint a joining rank restored: its commit point, and the plan
/// records of that point's epoch up to the point's generation (empty in
/// states saved before they were recorded).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resume {
    pub point: CommitPoint,
    pub history: Vec<GenerationRecord>,
}

fn show(point: Option<CommitPoint>) -> String {
    match point {
        Some(c) => format!("generation {}, {} samples", c.generation.0, c.samples),
        None => "none".into(),
    }
}

impl SyncModel {
    /// Checks each rank's stored commit against the current generation:
    /// a rank of its world, a generation of its incarnation.
    pub(super) fn check_ranks(&self) -> Result<()> {
        if self.ranks.is_empty() {
            return Ok(());
        }
        let Some(current) = self.current() else {
            return Err(CoordError::Corrupt(
                "ranks' commits are stored without a generation".into(),
            ));
        };
        for (&rank, point) in &self.ranks {
            let ours = self.gen(point.generation.0).is_none_or(|g| {
                (g.run_id.as_str(), g.restart, g.resumed)
                    == (current.run_id.as_str(), current.restart, current.resumed)
            });
            if rank >= current.ranks() || !ours {
                return Err(CoordError::Corrupt(format!(
                    "rank {rank}'s commit ({}) is not of the current generation {}'s group",
                    show(Some(*point)),
                    current.record.generation.0
                )));
            }
        }
        Ok(())
    }

    /// The group's point: the minimum of every rank's latest commit when
    /// each rank of the world has one, else none.
    fn group_point(&self) -> Option<CommitPoint> {
        let world = self.current()?.ranks();
        // Every key is a rank of the world (`check_ranks`, `commit`): all
        // have one when there are as many.
        debug_assert!(self.ranks.keys().all(|&r| r < world));
        if self.ranks.len() < world as usize {
            return None;
        }
        self.ranks.values().min().copied()
    }

    /// The ranks whose latest commit is behind `point` (or that have none).
    fn behind(&self, point: CommitPoint) -> Vec<u32> {
        let world = self.current().map_or(0, GenMeta::ranks);
        (0..world)
            .filter(|r| self.ranks.get(r).is_none_or(|c| *c < point))
            .collect()
    }

    /// Rank `identity` had emitted `samples` of `generation` when its
    /// checkpoint became durable. The job's commit moves to the minimum
    /// over the ranks once every rank has committed past it.
    pub fn commit(
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
        let point = CommitPoint {
            generation,
            samples,
        };
        if self
            .ranks
            .get(&rank.rank)
            .is_some_and(|last| point <= *last)
        {
            // The rank committed this far already: nothing to record.
            return Ok(Vec::new());
        }
        let part = self.part(config, dataset, generation.0, rank.part)?.len();
        if samples > part {
            return Err(CoordError::Invalid(format!(
                "commit of {samples} samples exceeds generation {}'s {part} samples per rank",
                generation.0
            )));
        }
        self.ranks.insert(rank.rank, point);
        let (part, commits) = super::part_of(&self.ranks, rank.rank);
        let key = Key::RankCommits {
            job: job.clone(),
            part: Some(part),
        };
        let mut ops = vec![put(key, &commits)?];
        if let Some(group) = self.group_point().filter(|g| Some(*g) > self.commit) {
            ops.push(put(Key::Commit { job: job.clone() }, &group)?);
            self.commit = Some(group);
            ops.extend(self.compact(job));
        }
        Ok(ops)
    }

    /// The job's commit when the group committed past the point `gen`'s
    /// incarnation began from: a new process reading `gen` from its start
    /// would replay what the group committed since.
    pub fn committed_since(&self, gen: &GenMeta) -> Option<CommitPoint> {
        self.commit.filter(|c| Some(*c) > gen.resumed)
    }

    /// The plan records of generation `g`'s epoch, from its first
    /// generation to `g`, oldest first.
    pub(super) fn history(&self, g: u64) -> Result<Vec<GenerationRecord>> {
        let mut chain = vec![self.known(g)?.record];
        while let Some(from) = chain.last().and_then(|r| r.from) {
            chain.push(self.known(from.generation.0)?.record);
            if chain.len() > MAX_HISTORY {
                return Err(CoordError::Precondition(format!(
                    "generation {g}'s epoch has more than {MAX_HISTORY} generations"
                )));
            }
        }
        chain.reverse();
        Ok(chain)
    }

    /// Whether the job has no commit at all and nothing read yet, so a
    /// resume seeds it. A job whose ranks already read part of a generation
    /// that nobody committed is not seeded by a late rank's state (one
    /// written by its own group a moment before it joined): that would
    /// start a generation of its own beside the group's. Such a state is
    /// past the job's commit, and refused as such.
    fn unseeded(&self) -> bool {
        self.commit.is_none()
            && self.ranks.is_empty()
            && self.progress.values().all(|&(_, samples)| samples == 0)
    }

    /// Checks a Join resuming from `resume` without changing anything.
    pub(super) fn check_resume(&self, rank: Rank<'_>, resume: &Resume) -> Result<()> {
        let place = self.place(rank)?;
        let point = resume.point;
        if self.unseeded() && !resume.history.is_empty() {
            return Ok(());
        }
        match self.commit {
            Some(commit) if commit == point => {}
            Some(commit) if point < commit => {
                return Err(CoordError::Stale(format!(
                    "the checkpoint's loader state ({}) is older than the job's last commit ({}): \
                     resuming from it would train samples twice; load the checkpoint saved at the \
                     job's last commit",
                    show(Some(point)),
                    show(Some(commit))
                )))
            }
            commit => {
                let behind: Vec<String> = self.behind(point).iter().map(u32::to_string).collect();
                let why = if self.unseeded() {
                    "the job has no commit and the state carries no plan history (saved by an \
                     older tributary), so it can resume only a job whose coordinator still holds \
                     its commit"
                        .to_owned()
                } else {
                    format!(
                        "rank(s) {} of the group have not committed that far; every rank must \
                         call commit(state) once its checkpoint is durable, and a restart resumes \
                         from the point every rank reached",
                        behind.join(", ")
                    )
                };
                return Err(CoordError::Precondition(format!(
                    "the checkpoint's loader state ({}) is past the job's commit ({}): {why}",
                    show(Some(point)),
                    show(commit)
                )));
            }
        }
        if place == Place::Current && self.current().and_then(|c| c.resumed) == Some(point) {
            self.same_world(rank)?;
        }
        Ok(())
    }

    /// A rank joins resuming from `resume`: the current generation when it
    /// resumed from that point already, else a new incarnation from it
    /// (the job seeded from the point's history first when it has no
    /// commit).
    pub(super) fn resume(
        &mut self,
        job: &JobId,
        config: &JobSpec,
        dataset: &Dataset,
        rank: Rank<'_>,
        resume: &Resume,
    ) -> Result<(GenMeta, Vec<Op>)> {
        self.check_resume(rank, resume)?;
        let mut ops = Vec::new();
        if self.unseeded() && !resume.history.is_empty() {
            ops = self.seed(job, config, dataset, resume)?;
        } else if self.place(rank)? == Place::Current
            && self.current().and_then(|c| c.resumed) == Some(resume.point)
        {
            let current = self
                .current()
                .cloned()
                .ok_or_else(|| CoordError::Precondition("no generation yet".into()))?;
            return Ok((current, ops));
        }
        let (meta, opened) = self.open(job, config, dataset, rank)?;
        ops.extend(opened);
        Ok((meta, ops))
    }

    /// Makes `resume`'s history the job's past, and its point the job's
    /// commit; returns the ops that store them. The history is checked as
    /// hostile input: ordered, one epoch, worlds in bounds, linked from the
    /// epoch's start to the point's generation, replayable, and the point
    /// within its generation's parts.
    fn seed(
        &mut self,
        job: &JobId,
        config: &JobSpec,
        dataset: &Dataset,
        resume: &Resume,
    ) -> Result<Vec<Op>> {
        let (history, point) = (&resume.history, resume.point);
        let invalid = |why: String| Err(CoordError::Invalid(format!("resume.history: {why}")));
        if history.len() > MAX_HISTORY {
            return invalid(format!("{} records (at most {MAX_HISTORY})", history.len()));
        }
        let (Some(first), Some(last)) = (history.first(), history.last()) else {
            return invalid("empty".into());
        };
        if last.generation != point.generation {
            return invalid(format!(
                "ends at generation {}, not the resume point's {}",
                last.generation.0, point.generation.0
            ));
        }
        if first.from.is_some() {
            return invalid(format!(
                "starts at generation {}, which resumed from another (not the epoch's first)",
                first.generation.0
            ));
        }
        for record in history {
            if record.epoch != first.epoch {
                return invalid(format!(
                    "generation {} is of epoch {}, not {}",
                    record.generation.0, record.epoch.0, first.epoch.0
                ));
            }
            if !(1..=MAX_WORLD).contains(&record.world) {
                return invalid(format!(
                    "generation {} has a world of {} ranks (1..={MAX_WORLD})",
                    record.generation.0, record.world
                ));
            }
        }
        let cut = generation_cut(
            &*dataset.layout,
            config.seed,
            config.remainder,
            spec(config),
            history,
            point.generation,
        )
        .map_err(|e| CoordError::Invalid(format!("resume.history: {e}")))?;
        let part = rank_part(&cut, last.world as usize, 0, config.remainder).len();
        if point.samples > part {
            return invalid(format!(
                "the resume point's {} samples exceed generation {}'s {part} samples per rank",
                point.samples, point.generation.0
            ));
        }
        // Whatever generations the job has are dropped: nothing of them
        // was committed. The history keeps its numbers (the shuffles are
        // seeded by them); later generations number past both.
        let past = self.next_generation();
        let kept = |g: Generation| history.iter().any(|r| r.generation == g);
        let mut ops: Vec<Op> = self
            .gens
            .drain(..)
            .filter(|m| !kept(m.record.generation))
            .map(|m| Op::Delete {
                key: Key::Generation {
                    job: job.clone(),
                    generation: m.record.generation,
                }
                .into(),
            })
            .collect();
        self.cuts.clear();
        for record in history {
            let meta = GenMeta {
                record: *record,
                run_id: String::new(),
                restart: 0,
                resumed: None,
                ranks: None,
            };
            ops.push(put(
                Key::Generation {
                    job: job.clone(),
                    generation: record.generation,
                },
                &meta,
            )?);
            self.gens.push(meta);
        }
        self.floor = past.max(self.next_generation());
        ops.push(put(Key::Commit { job: job.clone() }, &point)?);
        self.commit = Some(point);
        tracing::info!(
            job = job.as_str(),
            generation = point.generation.0,
            samples = point.samples,
            "job seeded from a checkpoint"
        );
        Ok(ops)
    }
}

#[cfg(test)]
pub(super) mod tests;
