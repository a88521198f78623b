//! Ranks' progress and commits are stored in parts of [`RANKS_PER_KEY`]
//! ranks (keys `sync/progress/NNNNNN`, `sync/commits/NNNNNN`): a call
//! writes its rank's part, so what one call encodes is bounded however
//! large the world is; a load merges the parts.

use std::collections::BTreeMap;

use crate::error::{CoordError, Result};

/// Ranks whose commits (or progress) one stored key holds.
pub const RANKS_PER_KEY: u32 = 256;

/// The part `rank` belongs to, and that part's entries of `map`.
pub(crate) fn part_of<V: Copy>(map: &BTreeMap<u32, V>, rank: u32) -> (u32, BTreeMap<u32, V>) {
    let part = rank / RANKS_PER_KEY;
    let first = part * RANKS_PER_KEY;
    let entries = map
        .range(first..first.saturating_add(RANKS_PER_KEY))
        .map(|(&r, &v)| (r, v))
        .collect();
    (part, entries)
}

/// Ranks' entries stored in parts, merged; a part overrides the one key an
/// earlier coordinator kept them all in (`None`). An entry in a part its
/// rank is not of is an error naming the key.
pub fn merge_parts<V>(
    mut parts: Vec<(Option<u32>, BTreeMap<u32, V>, &str)>,
) -> Result<BTreeMap<u32, V>> {
    parts.sort_by_key(|(part, _, _)| *part);
    let mut merged = BTreeMap::new();
    for (part, entries, key) in parts {
        if let Some(part) = part {
            if let Some(rank) = entries.keys().find(|&&r| r / RANKS_PER_KEY != part) {
                return Err(CoordError::Corrupt(format!(
                    "{key} holds rank {rank}, which is not of its part {part}"
                )));
            }
        }
        merged.extend(entries);
    }
    Ok(merged)
}
