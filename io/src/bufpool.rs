//! Buffers reused across a pipeline's reads and samples.
//!
//! A pipeline reads a local shard (or a cached copy of one) a range of up to
//! a few MiB at a time, parses it, and copies each sample into a buffer of
//! its own (so that a sample in the shuffle buffer does not pin its whole
//! range); the range's buffer is then dropped, and each sample's once it is
//! decoded. Allocated afresh each time, every such buffer was zeroed or
//! mapped anew and then faulted in page by page. Here a buffer goes back to
//! a process-wide pool when the last [`Bytes`] slicing it is dropped, and
//! the next buffer of its size class reuses it: memory already mapped,
//! never zeroed again. In a profile of `tributary bench` (6000 samples, 2
//! threads) page faults went from 7.0% of the CPU to 5.4%, most of what is
//! left being the first buffers, made while the shuffle buffer fills; in
//! the steady part of the run, from 1.3% to 0.6%. Peak RSS fell by a sixth
//! (535 to 478 MiB): the allocator no longer fragments.
//!
//! A range read from an object store streams into a pooled buffer too
//! (`Filling`, sized by the range's length before the first byte): its
//! body used to be appended to a fresh `Vec`, faulted in as it filled. In a
//! profile of `tributary bench` over S3 (4000 samples, 2 threads, a local
//! S3-compatible server) page faults went from 5.8% of the CPU to 4.3%.
//!
//! Sizes are rounded up to classes four to a power of two, so a pooled
//! buffer is at most 25% larger than asked for (12% on average). The pool
//! keeps at most `MAX_IDLE_BYTES` (96 MiB) idle and `MAX_PER_CLASS` (256)
//! buffers of a class; buffers under `MIN_POOLED` (16 KiB) or over
//! `MAX_POOLED` (16 MiB) are allocated and freed as before. A buffer a
//! caller keeps (a manifest, say) stays out of the pool until it is dropped.

use std::ops::Range;
use std::os::unix::fs::FileExt;
use std::sync::{Mutex, PoisonError};

use bytes::Bytes;

/// Idle bytes the shared pool keeps at most.
const MAX_IDLE_BYTES: usize = 96 << 20;
/// Idle buffers of one size class the pool keeps at most.
const MAX_PER_CLASS: usize = 256;
/// Smaller buffers are not pooled: the allocator serves them well.
const MIN_POOLED: usize = 16 << 10;
/// Larger buffers are not pooled.
const MAX_POOLED: usize = 16 << 20;

/// The pool reads and samples share.
static SHARED: BufPool = BufPool::new(MAX_IDLE_BYTES);

/// Reads `range` of `file` whole into a pooled buffer.
pub(crate) fn read_exact_at(file: &std::fs::File, range: Range<u64>) -> std::io::Result<Bytes> {
    let len = usize::try_from(range.end.saturating_sub(range.start))
        .map_err(|_| std::io::Error::other("a range larger than this machine's address space"))?;
    SHARED.filled(len, |buf| file.read_exact_at(buf, range.start))
}

/// `parts` one after the other in one pooled buffer.
pub fn concat<'a, I>(parts: I) -> Bytes
where
    I: IntoIterator<Item = &'a [u8]>,
    I::IntoIter: Clone,
{
    let parts = parts.into_iter();
    let len = parts.clone().map(<[u8]>::len).sum();
    let Ok(bytes) = SHARED.filled(len, |buf| {
        let mut at = 0;
        for part in parts {
            buf[at..at + part.len()].copy_from_slice(part);
            at += part.len();
        }
        Ok::<_, std::convert::Infallible>(())
    });
    bytes
}

/// A buffer filled piece by piece, as an object store's body streams in:
/// pooled when [`Filling::reserve`] is told a pooled size before the first
/// byte (a range read knows its length), else (or once more bytes come than
/// were reserved) a growing `Vec`.
pub(crate) struct Filling {
    pool: &'static BufPool,
    pooled: Option<Pooled>,
    grown: Vec<u8>,
}

impl std::fmt::Debug for Filling {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Filling")
            .field("pooled", &self.pooled)
            .field("grown", &self.grown.len())
            .finish()
    }
}

impl Default for Filling {
    fn default() -> Self {
        Self::in_pool(&SHARED)
    }
}

impl Filling {
    fn in_pool(pool: &'static BufPool) -> Self {
        Self {
            pool,
            pooled: None,
            grown: Vec::new(),
        }
    }

    /// Takes a pooled buffer for `bytes` bytes, if that is a pooled size
    /// and nothing has been appended yet.
    pub(crate) fn reserve(&mut self, bytes: usize) {
        if self.pooled.is_some() || !self.grown.is_empty() {
            return;
        }
        match self.pool.take(bytes) {
            Some(pooled) => self.pooled = Some(pooled),
            None => self.grown.reserve(bytes),
        }
    }

    /// Appends `bytes`: into the pooled buffer while they fit, else into a
    /// `Vec` that takes over what the pooled buffer held (which goes back).
    pub(crate) fn append(&mut self, bytes: &[u8]) {
        if let Some(pooled) = &mut self.pooled {
            let end = pooled.len + bytes.len();
            if end <= pooled.buf.len() {
                pooled.buf[pooled.len..end].copy_from_slice(bytes);
                pooled.len = end;
                return;
            }
            let mut grown = Vec::with_capacity(end.max(2 * pooled.len));
            grown.extend_from_slice(&pooled.buf[..pooled.len]);
            self.grown = grown;
            self.pooled = None;
        }
        self.grown.extend_from_slice(bytes);
    }

    /// The bytes appended, owning their buffer.
    pub(crate) fn into_bytes(self) -> Bytes {
        match self.pooled {
            Some(pooled) => Bytes::from_owner(pooled),
            None => Bytes::from(self.grown),
        }
    }
}

/// The size class of a buffer of `len` bytes, and that class's size: four
/// classes to each power of two from [`MIN_POOLED`] to [`MAX_POOLED`].
fn class(len: usize) -> Option<(usize, usize)> {
    if !(MIN_POOLED..=MAX_POOLED).contains(&len) {
        return None;
    }
    // 2^bits < len <= 2^(bits + 1); the quarter of that octave len falls in.
    let bits = (usize::BITS - 1 - (len - 1).leading_zeros()) as usize;
    let quarter = ((len - 1) >> (bits - 2)) & 3;
    let size = (5 + quarter) << (bits - 2);
    let first = (MIN_POOLED.trailing_zeros() - 1) as usize;
    Some(((bits - first) * 4 + quarter, size))
}

/// Classes from MIN_POOLED (in the octave above 2^13) to MAX_POOLED.
const CLASSES: usize = 4 * (MAX_POOLED.trailing_zeros() - MIN_POOLED.trailing_zeros() + 1) as usize;

struct BufPool {
    idle: Mutex<Idle>,
    max_idle_bytes: usize,
}

/// The idle buffers of each class, all of the class's size and initialised.
struct Idle {
    classes: [Vec<Vec<u8>>; CLASSES],
    bytes: usize,
}

impl BufPool {
    const fn new(max_idle_bytes: usize) -> Self {
        BufPool {
            idle: Mutex::new(Idle {
                classes: [const { Vec::new() }; CLASSES],
                bytes: 0,
            }),
            max_idle_bytes,
        }
    }

    fn idle(&self) -> std::sync::MutexGuard<'_, Idle> {
        self.idle.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A buffer of `len` bytes or more, filled by `fill` from its start,
    /// as `Bytes` of `len` bytes; the buffer comes back to the pool when
    /// they are dropped (also when `fill` fails).
    fn filled<E>(
        &'static self,
        len: usize,
        fill: impl FnOnce(&mut [u8]) -> Result<(), E>,
    ) -> Result<Bytes, E> {
        let Some(mut pooled) = self.take(len) else {
            let mut buf = vec![0; len];
            fill(&mut buf)?;
            return Ok(Bytes::from(buf));
        };
        fill(&mut pooled.buf[..len])?;
        pooled.len = len;
        Ok(Bytes::from_owner(pooled))
    }

    /// An idle buffer of `len`'s class, or a new one; `None` for a size
    /// outside the classes. Its length (`Pooled::len`) starts at 0.
    fn take(&'static self, len: usize) -> Option<Pooled> {
        let (class, size) = class(len)?;
        let reused = {
            let mut idle = self.idle();
            let buf = idle.classes[class].pop();
            idle.bytes -= buf.as_ref().map_or(0, Vec::len);
            buf
        };
        Some(Pooled {
            buf: reused.unwrap_or_else(|| vec![0; size]),
            len: 0,
            class,
            pool: self,
        })
    }

    fn give_back(&self, class: usize, buf: Vec<u8>) {
        let mut idle = self.idle();
        if idle.classes[class].len() < MAX_PER_CLASS
            && idle.bytes + buf.len() <= self.max_idle_bytes
        {
            idle.bytes += buf.len();
            idle.classes[class].push(buf);
        }
    }
}

/// A pooled buffer's first `len` bytes, as the owner of a [`Bytes`].
struct Pooled {
    buf: Vec<u8>,
    len: usize,
    class: usize,
    pool: &'static BufPool,
}

impl std::fmt::Debug for Pooled {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pooled")
            .field("len", &self.len)
            .field("size", &self.buf.len())
            .finish()
    }
}

impl AsRef<[u8]> for Pooled {
    fn as_ref(&self) -> &[u8] {
        &self.buf[..self.len]
    }
}

impl Drop for Pooled {
    fn drop(&mut self) {
        self.pool
            .give_back(self.class, std::mem::take(&mut self.buf));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn idle_sizes(pool: &BufPool) -> Vec<usize> {
        let idle = pool.idle();
        let mut sizes: Vec<usize> = idle.classes.iter().flatten().map(Vec::len).collect();
        sizes.sort_unstable();
        sizes
    }

    #[test]
    fn classes_cover_every_pooled_size_at_most_a_quarter_over() {
        let mut last = (0, 0);
        for len in (MIN_POOLED..=MAX_POOLED)
            .step_by(997)
            .chain([MIN_POOLED, MAX_POOLED])
        {
            let (index, size) = class(len).expect("a pooled size");
            assert!(index < CLASSES, "{len}");
            assert!(size >= len && size - len <= len / 4, "{len} -> {size}");
            if len > last.0 {
                assert!(index >= last.1, "classes grow with the size");
            }
            // Every length of a class fits its size.
            assert_eq!(class(size).expect("a pooled size"), (index, size), "{len}");
            last = (len, index);
        }
        assert_eq!(class(MIN_POOLED - 1), None);
        assert_eq!(class(MAX_POOLED + 1), None);
        assert_eq!(class(MAX_POOLED).expect("a pooled size").0, CLASSES - 1);
    }

    #[test]
    fn a_buffer_returns_when_its_last_slice_drops_and_is_reused_without_stale_bytes() {
        let pool: &'static BufPool = Box::leak(Box::new(BufPool::new(200_000)));
        let mut file = tempfile::tempfile().expect("a temporary file");
        let data: Vec<u8> = (0..100_000u32).map(|i| (i % 251) as u8).collect();
        file.write_all(&data).expect("written");
        let read = |range: Range<u64>| {
            pool.filled(range.end as usize - range.start as usize, |buf| {
                file.read_exact_at(buf, range.start)
            })
        };

        let bytes = read(0..30_000).expect("read");
        assert_eq!(&bytes[..], &data[..30_000]);
        let slice = bytes.slice(10..20);
        drop(bytes);
        assert_eq!(idle_sizes(pool), [0; 0], "a slice still holds the buffer");
        drop(slice);
        assert_eq!(idle_sizes(pool), [32_768]);

        // A read of the same class reuses it and returns only its own bytes.
        let shorter = read(1000..30_000).expect("read");
        assert_eq!(&shorter[..], &data[1000..30_000]);
        assert_eq!(idle_sizes(pool), [0; 0]);
        drop(shorter);

        // Another class gets a buffer of its own.
        let other = read(0..50_000).expect("read");
        assert_eq!(&other[..], &data[..50_000]);
        drop(other);
        assert_eq!(idle_sizes(pool), [32_768, 57_344]);

        // A read that fails gives its buffer back all the same.
        let past = read(90_000..120_000);
        assert_eq!(
            past.expect_err("past the end").kind(),
            std::io::ErrorKind::UnexpectedEof
        );
        assert_eq!(idle_sizes(pool), [32_768, 57_344]);

        // Sizes outside the classes are not pooled.
        drop(read(0..100).expect("read"));
        assert_eq!(idle_sizes(pool), [32_768, 57_344]);

        // The pool keeps at most max_idle_bytes.
        let held: Vec<Bytes> = (0..4).map(|_| read(0..50_000).expect("read")).collect();
        drop(held);
        assert_eq!(idle_sizes(pool), [32_768, 57_344, 57_344]);
        assert_eq!(pool.idle().bytes, 32_768 + 2 * 57_344);
    }

    #[test]
    fn concat_joins_the_parts() {
        let parts: [&[u8]; 3] = [&[1; 20_000], &[], &[2; 5]];
        let joined = concat(parts);
        assert_eq!(joined.len(), 20_005);
        assert!(joined[..20_000].iter().all(|&b| b == 1) && joined[20_000..] == [2; 5]);
        assert_eq!(&concat([&b"ab"[..], &b"c"[..]])[..], b"abc");
    }

    #[test]
    fn a_filling_buffer_is_pooled_and_grows_past_its_reservation() {
        let pool: &'static BufPool = Box::leak(Box::new(BufPool::new(1 << 20)));
        let data: Vec<u8> = (0..60_000u32).map(|i| (i % 253) as u8).collect();
        let fill = |reserve: usize, end: usize| {
            let mut filling = Filling::in_pool(pool);
            filling.reserve(reserve);
            for piece in data[..end].chunks(7_000) {
                filling.append(piece);
            }
            filling.into_bytes()
        };

        // Reserved and filled: a pooled buffer, back in the pool once dropped.
        let bytes = fill(30_000, 30_000);
        assert_eq!(&bytes[..], &data[..30_000]);
        assert_eq!(idle_sizes(pool), [0; 0]);
        drop(bytes);
        assert_eq!(idle_sizes(pool), [32_768]);

        // More than reserved: the bytes move to a Vec, the buffer goes back.
        let bytes = fill(30_000, 60_000);
        assert_eq!(&bytes[..], &data[..]);
        assert_eq!(idle_sizes(pool), [32_768]);
        drop(bytes);
        assert_eq!(idle_sizes(pool), [32_768]);

        // Less than reserved: only the bytes appended.
        assert_eq!(&fill(30_000, 100)[..], &data[..100]);

        // Nothing or a small size reserved: a Vec, never pooled.
        assert_eq!(&fill(0, 20_000)[..], &data[..20_000]);
        assert_eq!(&fill(100, 20_000)[..], &data[..20_000]);
        assert_eq!(idle_sizes(pool), [32_768]);
    }
}
