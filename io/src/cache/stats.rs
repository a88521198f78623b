//! The cache's counters: [`CacheStats`], what a process's cache did since
//! it was opened, and the atomics behind them.

use std::sync::atomic::{AtomicU64, Ordering};

/// The counters of a cache, since it was opened in this process.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CacheStats {
    /// Range reads served from a cached file, and their bytes.
    pub hits: u64,
    pub hit_bytes: u64,
    /// Range reads sent to the store (shards not cached, or too large).
    pub misses: u64,
    pub miss_bytes: u64,
    /// Whole shards written into the cache, and their bytes.
    pub fills: u64,
    pub fill_bytes: u64,
    /// Entries evicted by this process, and their bytes.
    pub evictions: u64,
    pub evicted_bytes: u64,
    /// Cached files that did not match their manifest (deleted).
    pub corrupt: u64,
    /// Fills or local reads that failed (logged; the store served instead).
    pub errors: u64,
}

#[derive(Debug, Default)]
pub(super) struct Counters([AtomicU64; 10]);

#[derive(Clone, Copy)]
pub(super) enum Counter {
    Hits,
    HitBytes,
    Misses,
    MissBytes,
    Fills,
    FillBytes,
    Evictions,
    EvictedBytes,
    Corrupt,
    Errors,
}

impl Counters {
    pub(super) fn add(&self, counter: Counter, n: u64) {
        self.0[counter as usize].fetch_add(n, Ordering::Relaxed);
    }

    fn get(&self, counter: Counter) -> u64 {
        self.0[counter as usize].load(Ordering::Relaxed)
    }
}

impl Counters {
    /// Their values now.
    pub(super) fn snapshot(&self) -> CacheStats {
        use Counter::*;
        CacheStats {
            hits: self.get(Hits),
            hit_bytes: self.get(HitBytes),
            misses: self.get(Misses),
            miss_bytes: self.get(MissBytes),
            fills: self.get(Fills),
            fill_bytes: self.get(FillBytes),
            evictions: self.get(Evictions),
            evicted_bytes: self.get(EvictedBytes),
            corrupt: self.get(Corrupt),
            errors: self.get(Errors),
        }
    }
}
