//! The invariants of the system, written once. Property tests, end-to-end
//! tests that kill processes and the quickstart's final check all call
//! these functions. No debug assertion does: each walks samples one by one,
//! too slow for the coordinator's commit and ack paths even in debug builds.
//!
//! - *Nothing lost, nothing twice*: the multiset of delivered samples equals
//!   the expected set ([`check_exactly_once`]).
//! - *Equal counts, contiguous parts*: a split of a cut gives every part the
//!   same count, and the parts, in order, are the cut (minus the dropped tail
//!   or plus the padding) ([`check_split`]).
//! - *An epoch's commits*: over all generations of an epoch, the committed
//!   samples are the epoch's samples, each once, minus the documented
//!   remainder of its final generation ([`check_epoch_commits`]); in the
//!   dynamic mode every unit is acknowledged once and the units are the
//!   epoch ([`check_unit_acks`]).
//!
//! These checks walk samples one by one: they are for tests and small
//! epochs, never for the planner's hot path.

use std::collections::HashMap;
use std::fmt::{Debug, Write};
use std::hash::Hash;

use crate::plan::span::{Span, SpanSet};
use crate::plan::Remainder;

/// A broken invariant, with enough detail to debug it.
#[derive(Debug, thiserror::Error)]
#[error("invariant violated: {0}")]
pub struct Violation(pub String);

fn list<K: Debug>(ids: &[K]) -> String {
    let mut text = String::new();
    for id in ids.iter().take(10) {
        let _ = write!(text, "{id:?} ");
    }
    if ids.len() > 10 {
        let _ = write!(text, "... ({} in all)", ids.len());
    }
    text.trim_end().to_owned()
}

/// Checks that `delivered` holds each id of `expected` exactly once and
/// nothing else.
pub fn check_exactly_once(
    expected: impl IntoIterator<Item = u64>,
    delivered: impl IntoIterator<Item = u64>,
) -> Result<(), Violation> {
    exactly_once(expected, delivered)
}

/// Counts of each expected id in `delivered`, and the delivered ids that
/// were not expected.
fn tally<K: Copy + Eq + Hash + Debug>(
    expected: impl IntoIterator<Item = K>,
    delivered: impl IntoIterator<Item = K>,
) -> Result<(HashMap<K, u32>, Vec<K>), Violation> {
    let mut counts: HashMap<K, u32> = HashMap::new();
    for id in expected {
        if counts.insert(id, 0).is_some() {
            return Err(Violation(format!(
                "the expected set lists sample {id:?} twice"
            )));
        }
    }
    let mut unexpected = Vec::new();
    for id in delivered {
        match counts.get_mut(&id) {
            Some(count) => *count += 1,
            None => unexpected.push(id),
        }
    }
    Ok((counts, unexpected))
}

fn exactly_once<K: Copy + Eq + Hash + Ord + Debug>(
    expected: impl IntoIterator<Item = K>,
    delivered: impl IntoIterator<Item = K>,
) -> Result<(), Violation> {
    let (counts, mut unexpected) = tally(expected, delivered)?;
    let mut missing: Vec<K> = counts
        .iter()
        .filter(|(_, &c)| c == 0)
        .map(|(&id, _)| id)
        .collect();
    let mut twice: Vec<K> = counts
        .iter()
        .filter(|(_, &c)| c > 1)
        .map(|(&id, _)| id)
        .collect();
    if missing.is_empty() && twice.is_empty() && unexpected.is_empty() {
        return Ok(());
    }
    missing.sort_unstable();
    twice.sort_unstable();
    unexpected.sort_unstable();
    Err(Violation(format!(
        "{} samples never delivered [{}]; {} delivered more than once [{}]; {} not in the expected set [{}]",
        missing.len(),
        list(&missing),
        twice.len(),
        list(&twice),
        unexpected.len(),
        list(&unexpected)
    )))
}

/// Checks that `parts` is a valid equal split of `cut` under `remainder`.
pub fn check_split(
    cut: &SpanSet,
    parts: &[SpanSet],
    remainder: Remainder,
) -> Result<(), Violation> {
    let total = cut.len();
    let n = parts.len() as u64;
    let per_part = match remainder {
        Remainder::Drop => total / n,
        Remainder::Pad => total.div_ceil(n),
    };
    if let Some((i, part)) = parts.iter().enumerate().find(|(_, p)| p.len() != per_part) {
        return Err(Violation(format!(
            "part {i} has {} samples, expected {per_part} for each of {n} parts of {total}",
            part.len()
        )));
    }
    let joined: Vec<(u32, u32)> = parts.iter().flat_map(|p| p.samples()).collect();
    let original: Vec<(u32, u32)> = cut.samples().collect();
    let covered = joined.len().min(original.len());
    if joined[..covered] != original[..covered] {
        return Err(Violation(
            "the parts, in order, are not the cut in order".into(),
        ));
    }
    match remainder {
        Remainder::Drop => {
            let dropped = total - per_part * n;
            if dropped >= n.max(1) {
                return Err(Violation(format!(
                    "{dropped} samples dropped for {n} parts"
                )));
            }
        }
        Remainder::Pad => {
            let padding = &joined[covered..];
            if padding
                .iter()
                .zip(original.iter().cycle())
                .any(|(a, b)| a != b)
            {
                return Err(Violation("padding does not repeat the cut's start".into()));
            }
        }
    }
    Ok(())
}

/// What an epoch's commits may lack or repeat, by [`Remainder`] policy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EpochRemainder {
    /// [`Remainder::Drop`]: exactly `tail` is never committed: the samples of
    /// the final generation's cut that no part held
    /// ([`crate::plan::dropped`]), fewer than its `world`.
    Dropped { tail: SpanSet, world: u64 },
    /// [`Remainder::Pad`]: nothing is missing, and samples are committed at
    /// most `max_extra` times more than once in all (the padding of the
    /// generations that committed, each fewer than its world).
    Padded { max_extra: u64 },
}

/// Checks an epoch's committed samples (from every generation, each sample
/// as `(shard, index)`) against the epoch's sample set: each committed once,
/// all committed, except for the documented `remainder`.
pub fn check_epoch_commits(
    epoch: &SpanSet,
    committed: impl IntoIterator<Item = (u32, u32)>,
    remainder: &EpochRemainder,
) -> Result<(), Violation> {
    match remainder {
        EpochRemainder::Dropped { tail, world } => {
            if tail.len() >= (*world).max(1) {
                return Err(Violation(format!(
                    "{} samples dropped by a final generation of {world} ranks",
                    tail.len()
                )));
            }
            let outside = tail.subtract(epoch);
            if !outside.is_empty() {
                return Err(Violation(format!(
                    "the dropped tail holds samples outside the epoch: {:?}",
                    outside.spans()
                )));
            }
            let expected = epoch.subtract(tail);
            exactly_once(expected.samples(), committed)
                .map_err(|v| Violation(format!("epoch commits (drop-last): {}", v.0)))
        }
        EpochRemainder::Padded { max_extra } => {
            let (counts, mut unexpected) = tally(epoch.samples(), committed)
                .map_err(|v| Violation(format!("epoch commits (pad): {}", v.0)))?;
            let mut missing: Vec<(u32, u32)> = counts
                .iter()
                .filter(|(_, &c)| c == 0)
                .map(|(&id, _)| id)
                .collect();
            let extra: u64 = counts
                .values()
                .map(|&c| u64::from(c.saturating_sub(1)))
                .sum();
            if missing.is_empty() && unexpected.is_empty() && extra <= *max_extra {
                return Ok(());
            }
            missing.sort_unstable();
            unexpected.sort_unstable();
            Err(Violation(format!(
                "epoch commits (pad): {} samples never committed [{}]; {extra} repeated commits \
                 (at most {max_extra} allowed); {} not in the epoch [{}]",
                missing.len(),
                list(&missing),
                unexpected.len(),
                list(&unexpected)
            )))
        }
    }
}

/// Checks the dynamic mode: every unit of `units` acknowledged exactly once
/// (`acked` lists unit indices, in any order), and the units together hold
/// each sample of `epoch` exactly once.
pub fn check_unit_acks(
    epoch: &SpanSet,
    units: &[Span],
    acked: impl IntoIterator<Item = u32>,
) -> Result<(), Violation> {
    exactly_once(0..units.len() as u32, acked)
        .map_err(|v| Violation(format!("unit acknowledgements: {}", v.0)))?;
    let samples = units
        .iter()
        .flat_map(|u| (u.start..u.end).map(move |i| (u.shard, i)));
    exactly_once(epoch.samples(), samples)
        .map_err(|v| Violation(format!("acknowledged samples: {}", v.0)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn epoch_commit_checks_catch_loss_repeats_and_wrong_remainders() {
        let epoch = SpanSet::new([Span::new(0, 0, 4), Span::new(1, 0, 3)]);
        let tail = SpanSet::new([Span::new(1, 2, 3)]);
        let all_but_tail: Vec<_> = epoch.subtract(&tail).samples().collect();
        let dropped = EpochRemainder::Dropped {
            tail: tail.clone(),
            world: 2,
        };
        check_epoch_commits(&epoch, all_but_tail.iter().copied(), &dropped).expect("valid");
        // The tail must be smaller than the final world.
        let big = EpochRemainder::Dropped {
            tail: tail.clone(),
            world: 1,
        };
        assert!(check_epoch_commits(&epoch, all_but_tail.iter().copied(), &big).is_err());
        // A missing sample that is not the tail, or a sample twice.
        assert!(check_epoch_commits(&epoch, all_but_tail[1..].iter().copied(), &dropped).is_err());
        let twice = all_but_tail.iter().copied().chain([(0, 0)]);
        let error = check_epoch_commits(&epoch, twice, &dropped).expect_err("twice");
        assert!(
            error
                .to_string()
                .contains("1 delivered more than once [(0, 0)]"),
            "{error}"
        );
        // Pad: everything, repeats bounded.
        let padded = EpochRemainder::Padded { max_extra: 1 };
        let all: Vec<_> = epoch.samples().collect();
        check_epoch_commits(&epoch, all.iter().copied().chain([(0, 0)]), &padded)
            .expect("one repeat");
        assert!(
            check_epoch_commits(&epoch, all.iter().copied().chain([(0, 0), (0, 1)]), &padded)
                .is_err()
        );
        assert!(check_epoch_commits(&epoch, all[1..].iter().copied(), &padded).is_err());
        assert!(check_epoch_commits(&epoch, all.iter().copied().chain([(9, 9)]), &padded).is_err());
    }

    #[test]
    fn unit_ack_checks() {
        let epoch = SpanSet::new([Span::new(0, 0, 4)]);
        let units = [Span::new(0, 0, 3), Span::new(0, 3, 4)];
        check_unit_acks(&epoch, &units, [1, 0]).expect("valid");
        assert!(check_unit_acks(&epoch, &units, [1, 0, 0]).is_err());
        assert!(check_unit_acks(&epoch, &units, [1]).is_err());
        assert!(check_unit_acks(&epoch, &units[..1], [0]).is_err());
    }
}
