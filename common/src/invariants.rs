//! The invariants of the system, written once. Property tests, end-to-end
//! tests that kill processes, the quickstart's final check and debug
//! assertions all call these functions.
//!
//! - *Nothing lost, nothing twice*: the multiset of delivered samples equals
//!   the expected set ([`check_exactly_once`]).
//! - *Equal counts, contiguous parts*: a split of a cut gives every part the
//!   same count, and the parts, in order, are the cut (minus the dropped tail
//!   or plus the padding) ([`check_split`]).

use std::collections::HashMap;
use std::fmt::Write;

use crate::plan::Remainder;
use crate::span::SpanSet;

/// A broken invariant, with enough detail to debug it.
#[derive(Debug, thiserror::Error)]
#[error("invariant violated: {0}")]
pub struct Violation(pub String);

fn list(ids: &[u64]) -> String {
    let mut text = String::new();
    for id in ids.iter().take(10) {
        let _ = write!(text, "{id} ");
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
    let mut counts: HashMap<u64, u32> = HashMap::new();
    for id in expected {
        if counts.insert(id, 0).is_some() {
            return Err(Violation(format!(
                "the expected set lists sample {id} twice"
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
    let mut missing: Vec<u64> = counts
        .iter()
        .filter(|(_, &c)| c == 0)
        .map(|(&id, _)| id)
        .collect();
    let mut twice: Vec<u64> = counts
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
