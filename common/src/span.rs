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
}
