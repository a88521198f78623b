//! A seeded, bounded shuffle buffer.
//!
//! Items enter in a deterministic order (span order); once the buffer holds
//! `capacity` items, each new item makes it emit one resident chosen by its
//! ChaCha stream. So that the first batch does not wait for a full buffer,
//! emission starts once `initial` items are in, and until the buffer is full
//! it emits on every second item only, so the buffer keeps growing (the
//! scheme of WebDataset's `shuffle(bufsize, initial)`). The emission order is therefore a pure function of the
//! input order and the seed `(seed, epoch, generation, rank)`: given a rank's
//! span set and how many samples it emitted, anyone can recompute which ones
//! (`generation::emitted` does, in the coordinator, for ranks that died).
//!
//! A buffer may also be bounded by bytes ([`ShuffleBuffer::max_bytes`],
//! items pushed with [`ShuffleBuffer::push_sized`]): while the items it
//! holds take more than that, it emits more of them, so a few huge samples
//! cannot pile up. That order depends on the items' sizes, which a replay
//! from positions alone does not know: a buffer whose emissions a
//! coordinator recomputes is bounded by count only.
//!
//! It lives in `common` rather than in the worker so that the buffer that
//! shuffles samples and the replay that recomputes its output are the same
//! code and cannot drift apart.

use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

use super::seed::{self, Domain};

/// The shape of a rank's shuffle buffer: part of a job's configuration,
/// needed by anyone who recomputes what a rank emitted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShuffleSpec {
    /// Items held at most (0 or 1: no shuffling).
    pub capacity: usize,
    /// Items held before the first emission.
    pub initial: usize,
}

impl ShuffleSpec {
    /// A buffer of `capacity` items that starts emitting at
    /// [`DEFAULT_INITIAL`] items (or when full, if smaller).
    pub fn new(capacity: usize) -> Self {
        Self {
            capacity,
            initial: DEFAULT_INITIAL.min(capacity),
        }
    }

    /// Sets how many items are held before the first emission (clamped to
    /// `1..=capacity`, as [`ShuffleBuffer::initial`] does).
    pub fn with_initial(mut self, initial: usize) -> Self {
        self.initial = initial.clamp(1, self.capacity.max(1));
        self
    }
}

/// The shuffle buffer. A capacity of 0 or 1 passes items straight through.
#[derive(Debug)]
pub struct ShuffleBuffer<T> {
    items: Vec<T>,
    /// The size of each of `items`, at the same index.
    sizes: Vec<u64>,
    /// Their sum, and the most it may be after a push.
    held_bytes: u64,
    max_bytes: u64,
    capacity: usize,
    initial: usize,
    pushed: u64,
    rng: ChaCha8Rng,
}

/// Items held before the first emission, unless the capacity is smaller.
pub const DEFAULT_INITIAL: usize = 128;

impl<T> ShuffleBuffer<T> {
    /// A buffer of `capacity` items seeded by `(seed, epoch, generation, rank)`.
    pub fn new(capacity: usize, seed: u64, epoch: u64, generation: u64, rank: u64) -> Self {
        Self {
            items: Vec::with_capacity(capacity + 1),
            sizes: Vec::with_capacity(capacity + 1),
            held_bytes: 0,
            max_bytes: u64::MAX,
            capacity,
            initial: DEFAULT_INITIAL.min(capacity),
            pushed: 0,
            rng: seed::rng(Domain::ShuffleBuffer, &[seed, epoch, generation, rank]),
        }
    }

    /// A buffer shaped by `spec` (its fields used as they are) seeded by
    /// `(seed, epoch, generation, rank)`.
    pub fn with_spec(spec: ShuffleSpec, seed: u64, epoch: u64, generation: u64, rank: u64) -> Self {
        Self {
            initial: spec.initial,
            ..Self::new(spec.capacity, seed, epoch, generation, rank)
        }
    }

    /// Sets how many items are held before the first emission.
    pub fn initial(mut self, initial: usize) -> Self {
        self.initial = initial.clamp(1, self.capacity.max(1));
        self
    }

    /// Bounds the bytes of the items held (those pushed with
    /// [`ShuffleBuffer::push_sized`]) as well as their count.
    pub fn max_bytes(mut self, max_bytes: u64) -> Self {
        self.max_bytes = max_bytes;
        self
    }

    /// The bytes of the items held.
    pub fn held_bytes(&self) -> u64 {
        self.held_bytes
    }

    /// Items currently held.
    pub fn len(&self) -> usize {
        self.items.len()
    }

    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// The items currently held, in no meaningful order.
    pub fn residents(&self) -> &[T] {
        &self.items
    }

    /// Adds `item`; when the buffer is over capacity, returns a uniformly
    /// chosen resident (possibly `item` itself).
    pub fn push(&mut self, item: T) -> Option<T> {
        self.enter(item, 0)
    }

    /// [`ShuffleBuffer::push`] of an item of `bytes` bytes.
    fn enter(&mut self, item: T, bytes: u64) -> Option<T> {
        if self.capacity <= 1 {
            return Some(item);
        }
        self.items.push(item);
        self.sizes.push(bytes);
        self.held_bytes = self.held_bytes.saturating_add(bytes);
        self.pushed += 1;
        let full = self.items.len() > self.capacity;
        let growing = self.items.len() >= self.initial && self.pushed.is_multiple_of(2);
        (full || growing).then(|| self.take())
    }

    /// Adds `item` of `bytes` bytes and appends to `out` what the buffer
    /// gives out for it: what [`ShuffleBuffer::push`] would, then more
    /// uniformly chosen residents while those held take more than
    /// [`ShuffleBuffer::max_bytes`] (an item larger than that alone leaves
    /// the buffer at once, with every other resident).
    pub fn push_sized(&mut self, item: T, bytes: u64, out: &mut Vec<T>) {
        out.extend(self.enter(item, bytes));
        while self.held_bytes > self.max_bytes && !self.items.is_empty() {
            out.push(self.take());
        }
    }

    fn take(&mut self) -> T {
        let j = seed::below(&mut self.rng, self.items.len() as u64) as usize;
        self.held_bytes -= self.sizes.swap_remove(j);
        self.items.swap_remove(j)
    }

    /// Empties the buffer in random order (the end of the input).
    pub fn drain(&mut self) -> impl Iterator<Item = T> + '_ {
        std::iter::from_fn(move || (!self.items.is_empty()).then(|| self.take()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(capacity: usize, seed: u64, n: u32) -> Vec<u32> {
        let mut buffer = ShuffleBuffer::new(capacity, seed, 0, 0, 0);
        let mut out: Vec<u32> = (0..n).filter_map(|i| buffer.push(i)).collect();
        out.extend(buffer.drain());
        out
    }

    #[test]
    fn emits_every_item_once_in_a_seeded_order() {
        let a = run(16, 1, 200);
        assert_eq!(a, run(16, 1, 200));
        assert_ne!(a, run(16, 2, 200));
        assert_ne!(a, (0..200).collect::<Vec<_>>());
        let mut sorted = a.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, (0..200).collect::<Vec<_>>());
        // Bounded, and growing: nothing leaves before `initial` items are
        // in; then every second push emits until the buffer is full; then
        // every push emits and the buffer stays at capacity.
        let mut buffer = ShuffleBuffer::new(16, 1, 0, 0, 0).initial(4);
        let emitted: Vec<bool> = (0..40).map(|i| buffer.push(i).is_some()).collect();
        assert!(emitted[..3].iter().all(|e| !e));
        assert!(
            emitted[3],
            "the 4th push reaches `initial` on an even count"
        );
        assert_eq!(buffer.len(), 16);
        assert!(emitted[30..].iter().all(|&e| e), "full: every push emits");
        assert_eq!(run(0, 1, 5), vec![0, 1, 2, 3, 4]);
    }

    #[test]
    fn the_shuffle_buffer_is_bounded_by_bytes() {
        // 64 items of 10 bytes in a buffer of 32 items but 100 bytes: at
        // most 10 held at once; every item out once; the order is seeded.
        let sized = |seed: u64, max_bytes: u64, sizes: &dyn Fn(u32) -> u64| {
            let mut buffer = ShuffleBuffer::new(32, seed, 0, 0, 0)
                .initial(4)
                .max_bytes(max_bytes);
            let (mut out, mut most) = (Vec::new(), 0);
            for i in 0..64u32 {
                buffer.push_sized(i, sizes(i), &mut out);
                assert!(buffer.held_bytes() <= max_bytes);
                assert_eq!(
                    buffer.held_bytes(),
                    buffer.residents().iter().map(|&i| sizes(i)).sum::<u64>()
                );
                most = most.max(buffer.len());
            }
            out.extend(buffer.drain());
            (out, most)
        };
        let (out, most) = sized(1, 100, &|_| 10);
        assert_eq!(most, 10, "the byte bound, not the 32 items, holds");
        assert_eq!(out, sized(1, 100, &|_| 10).0);
        let mut sorted = out.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, (0..64).collect::<Vec<_>>());
        assert_ne!(out, sorted, "still shuffled");
        // Unbounded by bytes, it is the count-bounded buffer.
        let (plain, most) = sized(1, u64::MAX, &|_| 10);
        assert_eq!(most, 32);
        assert_eq!(plain, run_initial(32, 1, 64, 4));
        // An item over the bound alone leaves at once.
        let (out, _) = sized(2, 100, &|i| if i == 5 { 1000 } else { 1 });
        assert_eq!(out.len(), 64);
    }

    fn run_initial(capacity: usize, seed: u64, n: u32, initial: usize) -> Vec<u32> {
        let mut buffer = ShuffleBuffer::new(capacity, seed, 0, 0, 0).initial(initial);
        let mut out: Vec<u32> = (0..n).filter_map(|i| buffer.push(i)).collect();
        out.extend(buffer.drain());
        out
    }

    #[test]
    fn a_spec_builds_the_same_buffer_as_new_and_initial() {
        let stream = |mut buffer: ShuffleBuffer<u32>| {
            let mut out: Vec<u32> = (0..300).filter_map(|i| buffer.push(i)).collect();
            out.extend(buffer.drain());
            out
        };
        for capacity in [0, 1, 2, 50, 200] {
            assert_eq!(
                stream(ShuffleBuffer::with_spec(
                    ShuffleSpec::new(capacity),
                    3,
                    1,
                    2,
                    5
                )),
                stream(ShuffleBuffer::new(capacity, 3, 1, 2, 5))
            );
            assert_eq!(
                stream(ShuffleBuffer::with_spec(
                    ShuffleSpec::new(capacity).with_initial(7),
                    3,
                    1,
                    2,
                    5
                )),
                stream(ShuffleBuffer::new(capacity, 3, 1, 2, 5).initial(7))
            );
        }
    }
}
