//! Seed derivation: every random choice Tributary makes is drawn from a ChaCha
//! stream keyed by a *path* of integers, so that a choice depends only on what
//! it is about (seed, epoch, sample id, ...) and never on thread scheduling.

use rand_chacha::ChaCha8Rng;
use rand_core::{Rng, SeedableRng};

/// Domain tags keep streams for different purposes independent even when the
/// rest of their path is equal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u64)]
pub enum Domain {
    /// Per-epoch shard permutation: `(seed, epoch)`.
    ShardOrder = 0x5348_4152_445f_4f52,
    /// Rank-local shuffle buffer: `(seed, epoch, generation, rank)`.
    ShuffleBuffer = 0x5348_5546_464c_4542,
    /// Per-sample augmentation: `(seed, epoch, sample id)`.
    Augment = 0x4155_474d_454e_5421,
    /// Synthetic data generation: `(seed, image index)`.
    Synth = 0x5359_4e54_4845_5449,
    /// A mixed dataset's shard order in one pass: `(seed, epoch, dataset, pass)`.
    MixShards = 0x4d49_585f_5348_5244,
    /// The interleave of a mixed epoch: `(seed, epoch, dataset)`.
    MixOrder = 0x4d49_585f_4f52_4452,
    /// A token shard's block order under `concat` packing: `(seed, epoch, shard)`.
    TokenBlocks = 0x544f_4b5f_424c_4b53,
    /// The document order inside one block of a token shard under `concat`
    /// packing: `(seed, epoch, shard, block)`.
    TokenDocs = 0x544f_4b5f_444f_4353,
}

/// SplitMix64's output function: a bijective, avalanching 64-bit mix.
fn mix(value: u64) -> u64 {
    let mut z = value.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// A ChaCha8 generator keyed by `domain` and `path`.
///
/// Equal inputs give equal streams on every machine; any change to the path
/// gives an unrelated stream.
pub fn rng(domain: Domain, path: &[u64]) -> ChaCha8Rng {
    // Each step feeds the mixed state forward, so every part of the path
    // avalanches into every bit of the key (no xor/add shortcuts between
    // paths such as `[seed, i]` and `[seed + 1, j]`).
    let mut state = mix(domain as u64);
    for &part in path {
        state = mix(state ^ mix(part));
    }
    let mut key = [0u8; 32];
    for (i, chunk) in key.chunks_exact_mut(8).enumerate() {
        chunk.copy_from_slice(&mix(state ^ i as u64).to_le_bytes());
    }
    ChaCha8Rng::from_seed(key)
}

/// A uniform `f64` in `[0, 1)` with 53 bits of precision.
pub fn unit_f64(rng: &mut impl Rng) -> f64 {
    (rng.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
}

/// A uniform integer in `[0, n)`, without modulo bias. `n` must be non-zero.
pub fn below(rng: &mut impl Rng, n: u64) -> u64 {
    assert!(n > 0, "below(0) has no values to choose from");
    // Lemire's nearly-divisionless method: draws whose low word is below the
    // threshold `2^64 mod n` are rejected. The threshold is less than `n`,
    // so the division that computes it is needed only when the low word is
    // below `n` (rarely, for small `n`): the draws and results are those of
    // always computing it, without a division per call.
    let mut wide = u128::from(rng.next_u64()) * u128::from(n);
    if (wide as u64) < n {
        let threshold = n.wrapping_neg() % n;
        while (wide as u64) < threshold {
            wide = u128::from(rng.next_u64()) * u128::from(n);
        }
    }
    (wide >> 64) as u64
}

/// Shuffles `items` in place (Fisher-Yates) with `rng`.
pub fn shuffle<T>(rng: &mut impl Rng, items: &mut [T]) {
    for i in (1..items.len()).rev() {
        let j = below(rng, i as u64 + 1) as usize;
        items.swap(i, j);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_path_same_stream_and_paths_differ() {
        let a: Vec<u64> = (0..4)
            .map(|_| rng(Domain::Augment, &[1, 2, 3]).next_u64())
            .collect();
        assert!(a.windows(2).all(|w| w[0] == w[1]));
        let b = rng(Domain::Augment, &[1, 2, 4]).next_u64();
        let c = rng(Domain::ShardOrder, &[1, 2, 3]).next_u64();
        assert_ne!(a[0], b);
        assert_ne!(a[0], c);
        // Path boundaries matter: [1, 23] is not [12, 3].
        assert_ne!(
            rng(Domain::Augment, &[1, 23]).next_u64(),
            rng(Domain::Augment, &[12, 3]).next_u64()
        );
    }

    #[test]
    fn nearby_paths_never_share_a_stream() {
        // Regression: a near-linear mix made (seed, i) and (seed', j) collide.
        let mut firsts = std::collections::HashSet::new();
        for seed in 0..40u64 {
            for i in 0..500u64 {
                assert!(
                    firsts.insert(rng(Domain::Synth, &[seed, i]).next_u64()),
                    "stream of ({seed}, {i}) repeats another"
                );
            }
        }
    }

    /// The division-free fast path changes no draw: compare with computing
    /// the threshold on every call, for small and huge bounds (where
    /// rejections happen).
    #[test]
    fn below_matches_the_always_dividing_form() {
        fn reference(rng: &mut impl Rng, n: u64) -> u64 {
            let threshold = n.wrapping_neg() % n;
            loop {
                let wide = u128::from(rng.next_u64()) * u128::from(n);
                if (wide as u64) >= threshold {
                    return (wide >> 64) as u64;
                }
            }
        }
        let mut bounds = rng(Domain::Synth, &[1]);
        let mut a = rng(Domain::Synth, &[2]);
        let mut b = rng(Domain::Synth, &[2]);
        for i in 0..200_000u64 {
            let n = match i % 4 {
                0 => 1 + i % 1000,
                1 => (1 << 63) + bounds.next_u64() % 1000,
                2 => u64::MAX - i % 7,
                _ => 1 + bounds.next_u64() % (1 << (1 + i % 63)),
            };
            assert_eq!(below(&mut a, n), reference(&mut b, n), "bound {n}");
        }
    }

    #[test]
    fn below_stays_in_range_and_covers_it() {
        let mut r = rng(Domain::Synth, &[7]);
        let mut seen = [false; 7];
        for _ in 0..1000 {
            let v = below(&mut r, 7);
            seen[v as usize] = true;
        }
        assert!(seen.iter().all(|&s| s));
        for _ in 0..1000 {
            let u = unit_f64(&mut r);
            assert!((0.0..1.0).contains(&u));
        }
    }
}
