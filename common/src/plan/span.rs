//! Spans and span sets: the unit of every assignment.
//!
//! A [`Span`] is a run of consecutive samples of one shard; a [`SpanSet`] is
//! an ordered list of spans, read in order. Sizes are per span, never per
//! sample, so plans stay small however large the dataset.

use serde::{Deserialize, Serialize};

/// Samples `start..end` of shard `shard` (indices into the manifest).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Span {
    pub shard: u32,
    pub start: u32,
    pub end: u32,
}

impl Span {
    pub fn new(shard: u32, start: u32, end: u32) -> Self {
        debug_assert!(start <= end, "span {shard}:{start}..{end} runs backwards");
        Self { shard, start, end }
    }

    /// Number of samples.
    pub fn len(&self) -> u64 {
        u64::from(self.end - self.start)
    }

    pub fn is_empty(&self) -> bool {
        self.start == self.end
    }
}

/// An ordered list of non-empty spans.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SpanSet {
    spans: Vec<Span>,
}

impl SpanSet {
    /// Builds a set from spans in reading order, dropping empty spans and
    /// merging a span into its predecessor when it continues it.
    pub fn new(spans: impl IntoIterator<Item = Span>) -> Self {
        let mut set = Self::default();
        for span in spans {
            set.push(span);
        }
        set
    }

    /// Appends a span (merged with the last one when contiguous).
    pub fn push(&mut self, span: Span) {
        if span.is_empty() {
            return;
        }
        match self.spans.last_mut() {
            Some(last) if last.shard == span.shard && last.end == span.start => last.end = span.end,
            _ => self.spans.push(span),
        }
    }

    pub fn spans(&self) -> &[Span] {
        &self.spans
    }

    /// Total samples.
    pub fn len(&self) -> u64 {
        self.spans.iter().map(Span::len).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.spans.is_empty()
    }

    /// Splits into the first `n` samples and the rest.
    pub fn split_at(&self, n: u64) -> (SpanSet, SpanSet) {
        let mut head = SpanSet::default();
        let mut tail = SpanSet::default();
        let mut left = n;
        for &span in &self.spans {
            if left >= span.len() {
                left -= span.len();
                head.push(span);
            } else if left > 0 {
                let cut = span.start + left as u32;
                head.push(Span::new(span.shard, span.start, cut));
                tail.push(Span::new(span.shard, cut, span.end));
                left = 0;
            } else {
                tail.push(span);
            }
        }
        (head, tail)
    }

    /// The samples of `self` that are not in `other`, in `self`'s order.
    ///
    /// `other` may list its samples in any order and more than once. Cost is
    /// `O((s + o) log o)` for `s` spans in `self` and `o` in `other`: `other`
    /// is sorted and merged into disjoint intervals per shard, and each span
    /// of `self` looks up the intervals it meets.
    pub fn subtract(&self, other: &SpanSet) -> SpanSet {
        let mut holes: Vec<Span> = other.spans.clone();
        holes.sort_unstable_by_key(|h| (h.shard, h.start));
        let mut merged: Vec<Span> = Vec::with_capacity(holes.len());
        for hole in holes {
            match merged.last_mut() {
                Some(last) if last.shard == hole.shard && hole.start <= last.end => {
                    last.end = last.end.max(hole.end);
                }
                _ => merged.push(hole),
            }
        }
        // Within a shard the merged intervals are disjoint and sorted, so
        // their ends are sorted too: the first interval that can meet `span`
        // is found by binary search on `(shard, end)`.
        let mut out = SpanSet::default();
        for &span in &self.spans {
            let mut i = merged.partition_point(|h| (h.shard, h.end) <= (span.shard, span.start));
            let mut start = span.start;
            while start < span.end {
                match merged.get(i) {
                    Some(hole) if hole.shard == span.shard && hole.start < span.end => {
                        if hole.start > start {
                            out.push(Span::new(span.shard, start, hole.start));
                        }
                        start = start.max(hole.end);
                        i += 1;
                    }
                    _ => {
                        out.push(Span::new(span.shard, start, span.end));
                        break;
                    }
                }
            }
        }
        out
    }

    /// `(shard, index)` of every sample, in order. Per-sample: for tests,
    /// invariant checks and small sets only.
    pub fn samples(&self) -> impl Iterator<Item = (u32, u32)> + '_ {
        self.spans
            .iter()
            .flat_map(|s| (s.start..s.end).map(move |i| (s.shard, i)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::HashSet;

    #[test]
    fn push_merges_and_split_at_cuts_inside_spans() {
        let set = SpanSet::new([
            Span::new(0, 0, 3),
            Span::new(0, 3, 5),
            Span::new(2, 1, 1),
            Span::new(1, 0, 4),
        ]);
        assert_eq!(set.spans(), &[Span::new(0, 0, 5), Span::new(1, 0, 4)]);
        let (head, tail) = set.split_at(7);
        assert_eq!(head.spans(), &[Span::new(0, 0, 5), Span::new(1, 0, 2)]);
        assert_eq!(tail.spans(), &[Span::new(1, 2, 4)]);
        let (all, none) = set.split_at(100);
        assert_eq!(all, set);
        assert!(none.is_empty());
    }

    fn arb_set(shards: u32) -> impl Strategy<Value = SpanSet> {
        proptest::collection::vec((0..shards, 0u32..30, 0u32..12), 0..12).prop_map(|v| {
            SpanSet::new(
                v.into_iter()
                    .map(|(shard, start, len)| Span::new(shard, start, start + len)),
            )
        })
    }

    proptest! {
        /// `subtract` agrees with a per-sample model: keep, in order, every
        /// sample of `a` that `b` does not hold.
        #[test]
        fn subtract_matches_a_per_sample_model(a in arb_set(4), b in arb_set(4)) {
            let holes: HashSet<(u32, u32)> = b.samples().collect();
            let expected: Vec<(u32, u32)> = a.samples().filter(|s| !holes.contains(s)).collect();
            let result = a.subtract(&b);
            prop_assert_eq!(result.samples().collect::<Vec<_>>(), expected);
            prop_assert!(result.spans().iter().all(|s| !s.is_empty()));
            prop_assert_eq!(a.subtract(&SpanSet::default()), a.clone());
            prop_assert!(a.subtract(&a).is_empty());
        }
    }
}
