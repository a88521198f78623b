//! Progress reporting for long jobs (packing, indexing, inspecting), kept
//! abstract so the library does not draw: the CLI plugs in a progress bar.

/// Receives progress from a long job. Called from many threads.
pub trait Progress: Send + Sync {
    /// The total amount of work, once known.
    fn total(&self, _samples: u64, _bytes: u64) {}
    /// `samples` more samples and `bytes` more bytes were processed.
    fn advance(&self, samples: u64, bytes: u64);
    /// The number of objects (shards) the job writes, once known.
    fn total_shards(&self, _shards: u64) {}
    /// `bytes` more bytes reached the store, and `shards` more objects were
    /// completed (a pack streams each shard in parts while it is built).
    fn uploaded(&self, _bytes: u64, _shards: u64) {}
    /// `tokens` more tokens were written (token packs and indexes).
    fn tokens(&self, _tokens: u64) {}
}

/// Reports nothing.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoProgress;

impl Progress for NoProgress {
    fn advance(&self, _samples: u64, _bytes: u64) {}
}
