//! [`UploadOptions`] within the stores' limits, and the [`UploadMeter`]
//! that counts what uploads hold in memory.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use crate::error::{IoError, Result};

/// The smallest part S3 takes (all parts but the last).
pub const MIN_PART_BYTES: u64 = 5 << 20;
/// The largest part S3 takes.
pub const MAX_PART_BYTES: u64 = 5 << 30;
/// The most parts one S3 multipart upload may have.
pub const MAX_PARTS: u64 = 10_000;
/// The largest object S3 takes in one PUT.
pub const MAX_SINGLE_PUT_BYTES: u64 = 5 << 30;
/// The most parts one upload sends at once.
pub const MAX_PARTS_IN_FLIGHT: usize = 64;

/// How objects are uploaded: validated by [`UploadOptions::new`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UploadOptions {
    single_put_limit: u64,
    part_bytes: usize,
    parts_in_flight: usize,
}

impl Default for UploadOptions {
    /// One PUT up to 64 MiB, above it parts of 16 MiB, 4 at once: at most
    /// 80 MiB held per upload.
    fn default() -> Self {
        Self {
            single_put_limit: 64 << 20,
            part_bytes: 16 << 20,
            parts_in_flight: 4,
        }
    }
}

impl UploadOptions {
    /// Objects of at most `single_put_limit` bytes in one PUT, larger ones
    /// in parts of `part_bytes`, `parts_in_flight` at once; each within the
    /// limits in the module docs.
    pub fn new(single_put_limit: u64, part_bytes: u64, parts_in_flight: usize) -> Result<Self> {
        let bad = |reason: String| Err(IoError::UploadOptions { reason });
        if single_put_limit > MAX_SINGLE_PUT_BYTES {
            return bad(format!(
                "single-PUT limit {single_put_limit} is over the {MAX_SINGLE_PUT_BYTES} bytes a PUT may carry"
            ));
        }
        if !(MIN_PART_BYTES..=MAX_PART_BYTES).contains(&part_bytes) {
            return bad(format!(
                "part size {part_bytes} is outside {MIN_PART_BYTES}..={MAX_PART_BYTES} bytes (S3's limits)"
            ));
        }
        let Ok(part_bytes) = usize::try_from(part_bytes) else {
            return bad(format!(
                "part size {part_bytes} does not fit in memory here"
            ));
        };
        if !(1..=MAX_PARTS_IN_FLIGHT).contains(&parts_in_flight) {
            return bad(format!(
                "parts in flight {parts_in_flight} is outside 1..={MAX_PARTS_IN_FLIGHT}"
            ));
        }
        Ok(Self {
            single_put_limit,
            part_bytes,
            parts_in_flight,
        })
    }

    /// Objects of at most this many bytes are written with one PUT.
    pub fn single_put_limit(&self) -> u64 {
        self.single_put_limit
    }

    /// Size of every part but the last.
    pub fn part_bytes(&self) -> usize {
        self.part_bytes
    }

    /// Parts one upload sends at once.
    pub fn parts_in_flight(&self) -> usize {
        self.parts_in_flight
    }

    /// The most bytes one upload holds in memory at any time.
    pub fn memory_bound(&self) -> u64 {
        let part = self.part_bytes as u64;
        self.single_put_limit
            .max(part * self.parts_in_flight as u64)
            + part
    }

    /// The largest object these options can upload ([`MAX_PARTS`] parts).
    pub fn max_object_bytes(&self) -> u64 {
        self.part_bytes as u64 * MAX_PARTS
    }
}

/// Bytes held in memory by uploads, and the most ever held at once.
#[derive(Debug, Default)]
pub struct UploadMeter {
    held: AtomicU64,
    peak: AtomicU64,
    pub(super) parts: AtomicU64,
}

impl UploadMeter {
    /// Bytes held now.
    pub fn held(&self) -> u64 {
        self.held.load(Ordering::SeqCst)
    }

    /// The most bytes held at once so far.
    pub fn peak(&self) -> u64 {
        self.peak.load(Ordering::SeqCst)
    }

    /// Parts of multipart uploads completed so far.
    pub fn parts(&self) -> u64 {
        self.parts.load(Ordering::SeqCst)
    }

    fn add(&self, bytes: u64) {
        let now = self.held.fetch_add(bytes, Ordering::SeqCst) + bytes;
        self.peak.fetch_max(now, Ordering::SeqCst);
    }

    fn sub(&self, bytes: u64) {
        self.held.fetch_sub(bytes, Ordering::SeqCst);
    }
}

/// Bytes counted on a meter until dropped.
#[derive(Debug)]
pub(super) struct Held {
    meter: Arc<UploadMeter>,
    bytes: u64,
}

impl Held {
    pub(super) fn new(meter: &Arc<UploadMeter>) -> Self {
        Self {
            meter: Arc::clone(meter),
            bytes: 0,
        }
    }

    pub(super) fn set(&mut self, bytes: u64) {
        if bytes > self.bytes {
            self.meter.add(bytes - self.bytes);
        } else {
            self.meter.sub(self.bytes - bytes);
        }
        self.bytes = bytes;
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        self.meter.sub(self.bytes);
    }
}
