//! The parts of ranks that share the data without a coordinator: a
//! shuffled epoch split into equal parts ([`static_assignment`]), or an
//! unshuffled (evaluation) read of the whole dataset in manifest order
//! ([`ordered_assignment`]), whose uneven end [`Tail`] settles.

use std::fmt;
use std::str::FromStr;

use super::mix::Layout;
use super::span::{Span, SpanSet};
use super::split::{split_equal, Remainder};

/// How an unshuffled (evaluation) split of `N` samples over `W` ranks ends
/// when `W` does not divide `N`. Either way every sample is read exactly
/// once.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Tail {
    /// The first `N % W` ranks read one sample more; batch counts may
    /// differ by one between ranks.
    #[default]
    Uneven,
    /// Every rank reads `ceil(N / W)` samples: ranks short of that repeat
    /// their last sample, marked as padding (the loader's `Batch::padded`,
    /// Python's validity mask), so batch counts are equal and no padded
    /// sample counts twice.
    Pad,
}

impl FromStr for Tail {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        match text {
            "uneven" => Ok(Self::Uneven),
            "pad" => Ok(Self::Pad),
            other => Err(format!("tail must be \"uneven\" or \"pad\", not {other:?}")),
        }
    }
}

impl fmt::Display for Tail {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Uneven => "uneven",
            Self::Pad => "pad",
        })
    }
}

/// How many samples the epoch's stream holds, and from which position on
/// they are padding (`tail = pad`): positions `real..total` repeat the last
/// sample read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Padding {
    pub real: u64,
    pub total: u64,
}

/// Rank `rank`'s spans of epoch `epoch` when `world` ranks share the data
/// without a coordinator: the epoch's spans (for one dataset, its seeded
/// shard order), split into equal parts (the last `samples % world`
/// samples dropped).
pub fn static_assignment(
    layout: &Layout,
    seed: u64,
    epoch: u64,
    rank: usize,
    world: usize,
) -> SpanSet {
    let cut = layout.epoch_spans(seed, epoch);
    split_equal(&cut, world, Remainder::Drop).swap_remove(rank)
}

/// Rank `rank`'s part of an unshuffled (evaluation) read of the whole
/// dataset by `world` ranks: contiguous in manifest order (a mix: every
/// dataset once, in mix order, whatever an epoch takes), the first
/// `samples % world` ranks one sample longer, nothing dropped. With
/// [`Tail::Pad`] every rank's stream is `ceil(samples / world)` long, the
/// short ones padded by repeating their last sample (a rank with no sample
/// of its own reads the dataset's first, all of it padding).
pub fn ordered_assignment(
    layout: &Layout,
    rank: usize,
    world: usize,
    tail: Tail,
) -> (SpanSet, Option<Padding>) {
    let all = SpanSet::new((0..layout.concatenated_shards()).filter_map(|shard| {
        let samples = layout.shard_samples(shard)?;
        (samples > 0).then(|| Span::new(shard, 0, samples))
    }));
    let (n, w, r) = (all.len(), world as u64, rank as u64);
    let (base, extra) = (n / w, n % w);
    let start = r * base + r.min(extra);
    let len = base + u64::from(r < extra);
    let mine = all.split_at(start).1.split_at(len).0;
    match tail {
        Tail::Uneven => (mine, None),
        Tail::Pad => {
            let total = n.div_ceil(w);
            let padding = Padding { real: len, total };
            if mine.is_empty() && total > 0 {
                (all.split_at(1).0, Some(padding))
            } else {
                (mine, Some(padding))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn static_parts_are_the_equal_split_of_the_epoch() {
        let layout = Layout::single(vec![7, 5, 9]);
        let cut = layout.epoch_spans(3, 1);
        let parts = split_equal(&cut, 4, Remainder::Drop);
        for (rank, part) in parts.iter().enumerate() {
            assert_eq!(&static_assignment(&layout, 3, 1, rank, 4), part);
        }
    }

    #[test]
    fn ordered_parts_cover_the_dataset_in_order() {
        let layout = Layout::single(vec![7, 0, 5, 9]);
        let parts: Vec<_> = (0..4)
            .map(|rank| ordered_assignment(&layout, rank, 4, Tail::Uneven))
            .collect();
        assert!(parts.iter().all(|(_, padding)| padding.is_none()));
        let lens: Vec<u64> = parts.iter().map(|(part, _)| part.len()).collect();
        assert_eq!(lens, [6, 5, 5, 5]);
        let joined: Vec<_> = parts.iter().flat_map(|(part, _)| part.samples()).collect();
        let all: Vec<(u32, u32)> = [(0, 7), (2, 5), (3, 9)]
            .into_iter()
            .flat_map(|(shard, n)| (0..n).map(move |i| (shard, i)))
            .collect();
        assert_eq!(joined, all);
    }

    #[test]
    fn padded_parts_are_equally_long() {
        let layout = Layout::single(vec![2]);
        let (mine, padding) = ordered_assignment(&layout, 1, 3, Tail::Pad);
        assert_eq!(mine.len(), 1);
        assert_eq!(padding, Some(Padding { real: 1, total: 1 }));
        let (mine, padding) = ordered_assignment(&layout, 2, 3, Tail::Pad);
        assert_eq!(mine.spans(), &[Span::new(0, 0, 1)]);
        assert_eq!(padding, Some(Padding { real: 0, total: 1 }));
    }
}
