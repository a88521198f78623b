//! Synchronous elasticity as pure functions: what a rank emitted, what is
//! left of a cut after a commit, and the cut of any generation replayed
//! from the small facts the store keeps.
//!
//! A generation splits its cut with [`split_equal`]; rank `r` pushes its part
//! through a [`ShuffleBuffer`] seeded by `(seed, epoch, generation, r)`, sample
//! by sample in span order. Because the buffer is a pure function of that
//! order and seed, "rank `r` emitted `k` samples" says exactly *which*
//! samples, so the coordinator derives the remainder of a dead rank without
//! asking it ([`emitted`], [`next_cut`]). The store therefore keeps only a
//! [`GenerationRecord`] per generation (its epoch, world size and the commit
//! it resumed from), and [`generation_cut`] recomputes every cut from them.
//!
//! Costs: splitting is linear in spans and ranks. Replaying a buffer costs
//! one step per emitted sample plus the buffer's capacity, and memory for
//! the capacity only; no function here holds an array over the epoch's
//! samples.
//!
//! The documented remainder: with [`Remainder::Drop`] the final generation of
//! an epoch leaves the last `len(cut) % world` samples of its cut (fewer
//! than `world`) undelivered ([`crate::plan::dropped`]); with
//! [`Remainder::Pad`] nothing is lost, and each generation that commits
//! delivers fewer than `world` extra copies (padding repeats of its cut's
//! first samples). Earlier generations drop nothing: what they leave unread
//! is in the next cut.

use std::ops::Range;

use serde::{Deserialize, Serialize};

use super::epoch::EpochPlan;
use super::shuffle::{ShuffleBuffer, ShuffleSpec};
use super::span::{Span, SpanSet};
use super::split::{split_equal, split_one, Remainder};
use crate::error::PlanError;
use crate::ids::{Epoch, Generation};

/// The samples among the first `k` that a rank emitted from `part` (clamped
/// to the part's length), as a span set in part order.
///
/// Replays the rank's [`ShuffleBuffer`] over positions in the part (the
/// very same buffer the worker runs, fed `u64` indices instead of samples):
/// everything pushed and no longer held has been emitted. Cost `O(k +
/// capacity + spans)` time and `O(capacity)` memory, independent of the
/// part's length beyond that.
pub fn emitted(
    part: &SpanSet,
    k: u64,
    seed: u64,
    epoch: u64,
    generation: u64,
    rank: u64,
    spec: ShuffleSpec,
) -> SpanSet {
    let replay = Replay::run(part.len(), k, spec, [seed, epoch, generation, rank]);
    positions(part, replay.emitted())
}

/// Where a rank's buffer stands after emitting `k` items: positions
/// `0..pushed` went in, and `held` (sorted) are still inside.
#[derive(Debug)]
struct Replay {
    pushed: u64,
    held: Vec<u64>,
}

impl Replay {
    fn run(len: u64, k: u64, spec: ShuffleSpec, path: [u64; 4]) -> Self {
        let k = k.min(len);
        if k == 0 {
            return Self {
                pushed: 0,
                held: Vec::new(),
            };
        }
        let [seed, epoch, generation, rank] = path;
        let mut buffer = ShuffleBuffer::with_spec(spec, seed, epoch, generation, rank);
        let mut out = 0u64;
        let mut pushed = 0u64;
        while out < k && pushed < len {
            if buffer.push(pushed).is_some() {
                out += 1;
            }
            pushed += 1;
        }
        if out < k {
            // The whole part is in: the rest comes from draining the buffer.
            out += buffer.drain().take((k - out) as usize).count() as u64;
        }
        debug_assert_eq!(out, k, "the buffer emits every item it is given");
        let mut held = buffer.residents().to_vec();
        held.sort_unstable();
        Self { pushed, held }
    }

    /// Position ranges emitted: `0..pushed` minus `held`.
    fn emitted(&self) -> impl Iterator<Item = Range<u64>> + '_ {
        let starts = std::iter::once(0).chain(self.held.iter().map(|&p| p + 1));
        let ends = self.held.iter().copied().chain([self.pushed]);
        starts.zip(ends).filter(|(a, b)| a < b).map(|(a, b)| a..b)
    }

    /// Position ranges below `end` not emitted: `held`, then `pushed..`.
    fn unemitted(&self, end: u64) -> impl Iterator<Item = Range<u64>> + '_ {
        let held = self.held.iter().map(|&p| p..p + 1);
        held.chain(std::iter::once(self.pushed..end.max(self.pushed)))
            .map(move |r| r.start.min(end)..r.end.min(end))
            .filter(|r| r.start < r.end)
    }
}

/// The samples at positions `ranges` (sorted, disjoint) of `part`.
fn positions(part: &SpanSet, ranges: impl IntoIterator<Item = Range<u64>>) -> SpanSet {
    let mut out = SpanSet::default();
    let mut spans = part.spans().iter();
    let mut current: Option<&Span> = spans.next();
    // Position of `current`'s first sample in the part.
    let mut offset = 0u64;
    for range in ranges {
        let mut from = range.start;
        while from < range.end {
            let Some(span) = current else {
                return out;
            };
            let span_end = offset + span.len();
            if from >= span_end {
                offset = span_end;
                current = spans.next();
                continue;
            }
            let to = range.end.min(span_end);
            out.push(Span::new(
                span.shard,
                span.start + (from - offset) as u32,
                span.start + (to - offset) as u32,
            ));
            from = to;
        }
    }
    out
}

/// Rank `rank`'s part of `cut` when split over `world` ranks.
///
/// # Panics
///
/// If `rank >= world`.
pub fn rank_part(cut: &SpanSet, world: usize, rank: usize, remainder: Remainder) -> SpanSet {
    assert!(rank < world, "rank {rank} is outside a world of {world}");
    split_one(cut, world, rank, remainder)
}

/// The samples of `cut` left unconsumed once every rank of a generation
/// (`world` ranks, parts from [`split_equal`], buffers seeded with the
/// generation and each rank) emitted `committed` samples (clamped to its
/// part's length). The result keeps `cut`'s order.
///
/// A sample counts as consumed if any rank emitted it: under
/// [`Remainder::Pad`] a padding copy of one of the cut's first samples may be
/// emitted by the last ranks while the original is not.
///
/// Each part's leftover is found in position space (what its buffer still
/// held, and what it had not pushed yet), so the cost is one replay per rank
/// plus `O(spans + world × capacity)`, with no sort over the emitted sets.
#[allow(clippy::too_many_arguments)]
pub fn next_cut(
    cut: &SpanSet,
    world: usize,
    remainder: Remainder,
    committed: u64,
    seed: u64,
    epoch: u64,
    generation: u64,
    spec: ShuffleSpec,
) -> SpanSet {
    let total = cut.len();
    let parts = split_equal(cut, world, remainder);
    let mut left: Vec<Span> = Vec::with_capacity(cut.spans().len());
    let mut padding_emitted: Vec<Span> = Vec::new();
    let mut start = 0u64;
    for (rank, part) in parts.iter().enumerate() {
        let replay = Replay::run(
            part.len(),
            committed,
            spec,
            [seed, epoch, generation, rank as u64],
        );
        // Positions from `real` on are padding: copies of the cut's start.
        let real = total.saturating_sub(start).min(part.len());
        left.extend_from_slice(positions(part, replay.unemitted(real)).spans());
        if real < part.len() {
            let emitted_padding = replay
                .emitted()
                .map(|r| r.start.max(real)..r.end)
                .filter(|r| r.start < r.end);
            padding_emitted.extend_from_slice(positions(part, emitted_padding).spans());
        }
        start += part.len();
    }
    // Under Drop, the tail no part holds stays for the next generation.
    left.extend_from_slice(cut.split_at(start.min(total)).1.spans());
    let left = SpanSet::new(left);
    if padding_emitted.is_empty() {
        left
    } else {
        left.subtract(&SpanSet::new(padding_emitted))
    }
}

/// A commit of the synchronous mode: every rank of `generation` had emitted
/// `samples` samples (the loader state saved with a checkpoint, or the step
/// every live rank reached). Points are ordered by generation, then
/// samples: the order in which a job passes them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct CommitPoint {
    pub generation: Generation,
    pub samples: u64,
}

/// What the store keeps about one generation; enough to recompute its cut.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct GenerationRecord {
    pub generation: Generation,
    pub epoch: Epoch,
    /// Ranks in the generation.
    pub world: u32,
    /// The commit of an earlier generation of the same epoch it resumed
    /// from; `None` starts at the beginning of the epoch (the whole
    /// [`EpochPlan::epoch_spans`]).
    pub from: Option<CommitPoint>,
}

/// The cut of generation `target`, replayed from `history` (records sorted
/// by generation; only the chain of `from` links leading to `target` is
/// read).
///
/// `cut(g)` is [`EpochPlan::epoch_spans`] when `g` starts its epoch, otherwise
/// [`next_cut`] of the cut it resumed from, with that generation's world and
/// seeds and the committed sample count.
pub fn generation_cut(
    plan: &(impl EpochPlan + ?Sized),
    seed: u64,
    remainder: Remainder,
    spec: ShuffleSpec,
    history: &[GenerationRecord],
    target: Generation,
) -> Result<SpanSet, PlanError> {
    if let Some(pair) = history
        .windows(2)
        .find(|pair| pair[0].generation >= pair[1].generation)
    {
        return Err(PlanError::OutOfOrder {
            generation: pair[1].generation,
            previous: pair[0].generation,
        });
    }
    let find = |generation: Generation| {
        history
            .binary_search_by_key(&generation, |r| r.generation)
            .ok()
            .map(|i| history[i])
    };
    let mut record = find(target).ok_or(PlanError::UnknownGeneration { generation: target })?;
    // Walk back to the start of the epoch, collecting the commits to replay.
    let mut chain: Vec<(GenerationRecord, CommitPoint)> = Vec::new();
    while let Some(from) = record.from {
        let bad = |reason: String| PlanError::BadResume {
            generation: record.generation,
            from: from.generation,
            reason,
        };
        if from.generation >= record.generation {
            return Err(bad("which is not an earlier generation".into()));
        }
        let earlier =
            find(from.generation).ok_or_else(|| bad("which is not in the history".into()))?;
        if earlier.epoch != record.epoch {
            return Err(bad(format!(
                "which belongs to epoch {}, not epoch {}",
                earlier.epoch, record.epoch
            )));
        }
        chain.push((earlier, from));
        record = earlier;
    }
    let epoch = record.epoch.get();
    let mut cut = plan.epoch_spans(seed, epoch);
    for (earlier, from) in chain.into_iter().rev() {
        if earlier.world == 0 {
            return Err(PlanError::EmptyWorld {
                generation: earlier.generation,
            });
        }
        cut = next_cut(
            &cut,
            earlier.world as usize,
            remainder,
            from.samples,
            seed,
            epoch,
            earlier.generation.get(),
            spec,
        );
    }
    Ok(cut)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::epoch_spans;
    use proptest::prelude::*;

    fn arb_part() -> impl Strategy<Value = SpanSet> {
        proptest::collection::vec((0u32..40, 0u32..60), 0..8).prop_map(|v| {
            SpanSet::new(
                v.into_iter()
                    .enumerate()
                    .map(|(i, (start, len))| Span::new(i as u32, start, start + len)),
            )
        })
    }

    fn arb_spec() -> impl Strategy<Value = ShuffleSpec> {
        (0usize..70, 1usize..40)
            .prop_map(|(capacity, initial)| ShuffleSpec::new(capacity).with_initial(initial))
    }

    /// What the worker does: push the part's samples, then drain.
    fn real(part: &SpanSet, spec: ShuffleSpec, path: [u64; 4]) -> Vec<(u32, u32)> {
        let [seed, epoch, generation, rank] = path;
        let mut buffer = ShuffleBuffer::with_spec(spec, seed, epoch, generation, rank);
        let mut out: Vec<_> = part.samples().filter_map(|s| buffer.push(s)).collect();
        out.extend(buffer.drain());
        out
    }

    proptest! {
        /// The replay over positions names exactly the samples the real
        /// buffer emitted first, for every prefix length.
        #[test]
        fn emitted_matches_the_real_buffer(
            part in arb_part(), spec in arb_spec(), path in any::<[u64; 4]>(), fraction in 0.0f64..1.2
        ) {
            let stream = real(&part, spec, path);
            let k = (stream.len() as f64 * fraction) as u64;
            let [seed, epoch, generation, rank] = path;
            let replay = emitted(&part, k, seed, epoch, generation, rank, spec);
            let mut first: Vec<_> = stream[..(k as usize).min(stream.len())].to_vec();
            let order: std::collections::HashMap<_, _> =
                part.samples().enumerate().map(|(i, s)| (s, i)).collect();
            first.sort_unstable_by_key(|s| order[s]);
            prop_assert_eq!(replay.samples().collect::<Vec<_>>(), first);
        }
    }

    proptest! {
        /// `next_cut` equals its definition: the cut minus every sample any
        /// rank emitted by the commit.
        #[test]
        fn next_cut_removes_what_any_rank_emitted(
            cut in arb_part(), world in 1usize..9, pad in any::<bool>(),
            spec in arb_spec(), path in any::<[u64; 3]>(), committed in 0u64..80,
        ) {
            let remainder = if pad { Remainder::Pad } else { Remainder::Drop };
            let [seed, epoch, generation] = path;
            let mut consumed = Vec::new();
            for (rank, part) in split_equal(&cut, world, remainder).iter().enumerate() {
                let done = emitted(part, committed, seed, epoch, generation, rank as u64, spec);
                consumed.extend_from_slice(done.spans());
            }
            let expected = cut.subtract(&SpanSet::new(consumed));
            let next = next_cut(&cut, world, remainder, committed, seed, epoch, generation, spec);
            prop_assert_eq!(next, expected);
        }
    }

    #[test]
    fn emitted_costs_follow_k_not_the_part() {
        // A part of four billion samples: replaying 1000 of them is instant.
        let part = SpanSet::new((0..1000).map(|shard| Span::new(shard, 0, 4_000_000)));
        let spec = ShuffleSpec::new(256);
        let done = emitted(&part, 1000, 1, 2, 3, 4, spec);
        assert_eq!(done.len(), 1000);
        assert!(done.spans().iter().all(|s| s.shard == 0 && s.end <= 1256));
    }

    #[test]
    fn history_errors_name_the_generation() {
        let record = |generation: u64, epoch: u64, from: Option<(u64, u64)>| GenerationRecord {
            generation: Generation(generation),
            epoch: Epoch(epoch),
            world: 2,
            from: from.map(|(generation, samples)| CommitPoint {
                generation: Generation(generation),
                samples,
            }),
        };
        let cut = |history: &[GenerationRecord], target: u64| {
            generation_cut(
                &[10, 10],
                1,
                Remainder::Drop,
                ShuffleSpec::new(4),
                history,
                Generation(target),
            )
        };
        let error = |history: &[GenerationRecord], target| {
            cut(history, target).expect_err("must fail").to_string()
        };
        assert_eq!(
            error(&[record(0, 0, None)], 1),
            "generation 1 is not in the history"
        );
        assert_eq!(
            error(&[record(1, 0, None), record(0, 0, None)], 0),
            "generation history out of order: generation 0 follows generation 1"
        );
        assert_eq!(
            error(&[record(0, 0, None), record(1, 0, Some((1, 3)))], 1),
            "generation 1 resumes from generation 1, which is not an earlier generation"
        );
        assert_eq!(
            error(&[record(1, 0, None), record(2, 0, Some((0, 3)))], 2),
            "generation 2 resumes from generation 0, which is not in the history"
        );
        assert_eq!(
            error(&[record(0, 0, None), record(2, 1, Some((0, 3)))], 2),
            "generation 2 resumes from generation 0, which belongs to epoch 0, not epoch 1"
        );
        let mut empty = record(0, 0, None);
        empty.world = 0;
        assert_eq!(
            error(&[empty, record(1, 0, Some((0, 3)))], 1),
            "generation 0 has no members"
        );
        // A resumed generation's cut is the epoch minus what was committed.
        let history = [record(0, 0, None), record(1, 0, Some((0, 3)))];
        let start = cut(&history, 0).expect("cut 0");
        assert_eq!(start, epoch_spans(&[10, 10], 1, 0));
        assert_eq!(cut(&history, 1).expect("cut 1").len(), 20 - 2 * 3);
    }
}
