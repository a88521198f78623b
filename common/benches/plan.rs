//! How long planning takes at scale, printed as a table rather than asserted
//! (timings on shared machines make poor test oracles):
//!
//! ```text
//! cargo bench -p tributary-common --bench plan
//! ```
//!
//! Every dataset has shards of 1000 samples and 1024 members. Figures are
//! the median of a few runs:
//!
//! - *split*: the epoch's shard order plus the equal split over members
//!   (what every generation start and every rank's `rank_part` costs);
//! - *resume @k*: starting a generation of 1000 ranks that resumed from a
//!   commit at which each of 1024 ranks had emitted `k` samples:
//!   `generation_cut` (one split, 1024 shuffle-buffer replays of `k`
//!   emissions with a 1024-sample buffer) and the split of the new cut;
//! - *units*, *pool*: the dynamic mode's units of 1000 samples, a pool over
//!   them, and leasing every unit to the members 8 at a time.

#![allow(clippy::print_stdout)]

use std::hint::black_box;
use std::time::{Duration, Instant};

use tributary_common::plan::generation::{generation_cut, CommitPoint, GenerationRecord};
use tributary_common::plan::lease::{units, LeasePool};
use tributary_common::plan::shuffle::ShuffleSpec;
use tributary_common::plan::{epoch_spans, split_equal, Remainder};
use tributary_common::{Epoch, Generation, MemberId};

const MEMBERS: usize = 1024;
const SAMPLES_PER_SHARD: u32 = 1000;
const SEED: u64 = 42;
const EPOCH: u64 = 3;

fn median(runs: usize, mut f: impl FnMut()) -> Duration {
    let mut times: Vec<Duration> = (0..runs)
        .map(|_| {
            let start = Instant::now();
            f();
            start.elapsed()
        })
        .collect();
    times.sort_unstable();
    times[runs / 2]
}

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1e3)
}

fn resume(counts: &[u32], k: u64, runs: usize) -> Duration {
    let history = [
        GenerationRecord {
            generation: Generation(0),
            epoch: Epoch(EPOCH),
            world: MEMBERS as u32,
            from: None,
        },
        GenerationRecord {
            generation: Generation(1),
            epoch: Epoch(EPOCH),
            world: MEMBERS as u32 - 24,
            from: Some(CommitPoint {
                generation: Generation(0),
                samples: k,
            }),
        },
    ];
    let spec = ShuffleSpec::new(1024);
    median(runs, || {
        let cut = generation_cut(counts, SEED, Remainder::Drop, spec, &history, Generation(1));
        black_box(cut.map(|c| c.len()).ok());
    })
}

fn main() {
    let members: Vec<MemberId> = (0..MEMBERS)
        .map(|i| MemberId::new(format!("rank-{i}")))
        .collect();
    println!(
        "{:>9} {:>7} {:>14} {:>10} {:>12} {:>12} {:>10} {:>10} {:>12}",
        "shards",
        "members",
        "samples",
        "split",
        "resume @1k",
        "resume @10k",
        "units",
        "pool new",
        "lease all"
    );
    for shards in [100_000usize, 1_000_000] {
        let counts = vec![SAMPLES_PER_SHARD; shards];
        let split = median(5, || {
            let cut = epoch_spans(&counts, SEED, EPOCH);
            black_box(split_equal(&cut, MEMBERS, Remainder::Drop));
        });
        let resume_1k = resume(&counts, 1_000, 3);
        let resume_10k = resume(&counts, 10_000, 3);
        let unit_time = median(5, || {
            black_box(units(&counts, SEED, EPOCH, SAMPLES_PER_SHARD));
        });
        let n = units(&counts, SEED, EPOCH, SAMPLES_PER_SHARD).len();
        let pool_new = median(5, || {
            black_box(LeasePool::new(n));
        });
        let lease_all = median(3, || {
            let mut pool = LeasePool::new(n);
            while pool.free_count() > 0 {
                for member in &members {
                    black_box(pool.lease(member, 8));
                }
            }
        });
        println!(
            "{:>9} {:>7} {:>14} {:>10} {:>12} {:>12} {:>10} {:>10} {:>12}",
            shards,
            MEMBERS,
            shards as u64 * u64::from(SAMPLES_PER_SHARD),
            ms(split),
            ms(resume_1k),
            ms(resume_10k),
            ms(unit_time),
            ms(pool_new),
            ms(lease_all)
        );
    }
    // Replaying is linear in what was committed: a commit half-way through
    // an epoch of 100k shards replays 50M buffer steps.
    let counts = vec![SAMPLES_PER_SHARD; 100_000];
    let half = 100_000 * u64::from(SAMPLES_PER_SHARD) / MEMBERS as u64 / 2;
    println!(
        "resume @{half} (half the epoch), 100000 shards: {}",
        ms(resume(&counts, half, 1))
    );
}
