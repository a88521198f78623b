//! What an epoch reads: the seeded order of a dataset's shards, the epoch's
//! spans, and [`EpochPlan`], the spans of one dataset or of a mix, which the
//! generation and lease planners take.

use super::seed::{self, Domain};
use super::span::{Span, SpanSet};

/// The order in which epoch `epoch` visits the dataset's shards: a ChaCha
/// permutation seeded by `(seed, epoch)`, equal on every machine.
pub fn shard_order(seed: u64, epoch: u64, shards: usize) -> Vec<u32> {
    let mut order: Vec<u32> = (0..shards as u32).collect();
    seed::shuffle(
        &mut seed::rng(Domain::ShardOrder, &[seed, epoch]),
        &mut order,
    );
    order
}

/// Every sample of the epoch, whole shards in the epoch's seeded order.
/// `shard_samples[i]` is the sample count of shard `i`.
pub fn epoch_spans(shard_samples: &[u32], seed: u64, epoch: u64) -> SpanSet {
    SpanSet::new(
        shard_order(seed, epoch, shard_samples.len())
            .into_iter()
            .map(|shard| Span::new(shard, 0, shard_samples[shard as usize])),
    )
}

/// Plans an epoch: one dataset's shard counts or a
/// [`Layout`](super::mix::Layout). The generation and lease planners take
/// either.
pub trait EpochPlan {
    /// Every sample of epoch `epoch`, in reading order.
    fn epoch_spans(&self, seed: u64, epoch: u64) -> SpanSet;
}

impl EpochPlan for [u32] {
    fn epoch_spans(&self, seed: u64, epoch: u64) -> SpanSet {
        epoch_spans(self, seed, epoch)
    }
}

impl<const N: usize> EpochPlan for [u32; N] {
    fn epoch_spans(&self, seed: u64, epoch: u64) -> SpanSet {
        epoch_spans(self, seed, epoch)
    }
}

impl EpochPlan for Vec<u32> {
    fn epoch_spans(&self, seed: u64, epoch: u64) -> SpanSet {
        epoch_spans(self, seed, epoch)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shard_order_is_a_seeded_permutation() {
        let a = shard_order(7, 0, 100);
        assert_eq!(a, shard_order(7, 0, 100));
        assert_ne!(a, shard_order(7, 1, 100));
        assert_ne!(a, shard_order(8, 0, 100));
        let mut sorted = a.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, (0..100).collect::<Vec<_>>());
    }
}
