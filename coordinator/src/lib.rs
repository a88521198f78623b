//! # tributary-coordinator
//!
//! The coordinator hands each trainer rank its part of every epoch and keeps
//! that assignment correct while ranks come and go.
//!
//! Today a single process plans locally: [`local_assignment`] gives rank `r`
//! of `n` its part of an epoch with the pure planner of `tributary-common`,
//! which is exactly the split the networked coordinator (tonic gRPC, state in
//! etcd, leader election) will serve.
//!
//! ## Layout
//!
//! - [`local_assignment`]: the static, single-process assignment used by the
//!   quickstart and by ranks that run without a coordinator.

use tributary_common::manifest::Manifest;
use tributary_common::plan::{epoch_spans, split_equal, Remainder};
use tributary_common::span::SpanSet;

/// Rank `rank`'s spans of epoch `epoch` when `world` ranks share the dataset
/// statically: the epoch's seeded shard order, split into equal parts.
///
/// ```
/// # use tributary_common::manifest::{CompressionKind, Manifest, ShardMeta};
/// # use tributary_common::plan::Remainder;
/// # let shard = |name: &str, n: u32| ShardMeta { name: name.into(), samples: n, bytes: 2048 * u64::from(n),
/// #     crc32c: 0, chunk_offsets: (0..=u64::from(n)).map(|i| i * 1024).collect(),
/// #     chunk_samples: vec![], chunk_crc32c: vec![0; n as usize] };
/// # let manifest = Manifest::new(CompressionKind::None, vec![], vec![], vec![shard("a.tar", 10), shard("b.tar", 7)])?;
/// let parts: Vec<_> = (0..2)
///     .map(|rank| tributary_coordinator::local_assignment(&manifest, 42, 0, rank, 2, Remainder::Drop))
///     .collect();
/// assert_eq!(parts[0].len(), 8);
/// assert_eq!(parts[1].len(), 8);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn local_assignment(
    manifest: &Manifest,
    seed: u64,
    epoch: u64,
    rank: usize,
    world: usize,
    remainder: Remainder,
) -> SpanSet {
    assert!(rank < world, "rank {rank} is outside a world of {world}");
    let counts: Vec<u32> = manifest.shards.iter().map(|s| s.samples).collect();
    let cut = epoch_spans(&counts, seed, epoch);
    split_equal(&cut, world, remainder).swap_remove(rank)
}
