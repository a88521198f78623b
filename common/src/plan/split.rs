//! The equal-count split of a cut over ranks, and the remainder it leaves
//! undelivered.

use serde::{Deserialize, Serialize};

use super::span::{Span, SpanSet};

/// What happens to the samples left over when a cut does not divide evenly.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Remainder {
    /// Every part gets `floor(len / parts)` samples; the last `len % parts`
    /// samples of the cut are not delivered this epoch.
    #[default]
    Drop,
    /// Every part gets `ceil(len / parts)` samples; the shortfall is filled
    /// with samples from the start of the cut, which are therefore delivered
    /// twice (as PyTorch's `DistributedSampler` does).
    Pad,
}

/// Splits `cut` into `parts` contiguous parts of equal sample count, in order.
///
/// Cost is linear in spans plus parts, independent of sample counts.
pub fn split_equal(cut: &SpanSet, parts: usize, remainder: Remainder) -> Vec<SpanSet> {
    assert!(parts > 0, "cannot split a cut over zero parts");
    let total = cut.len();
    let parts_u64 = parts as u64;
    let per_part = match remainder {
        Remainder::Drop => total / parts_u64,
        Remainder::Pad => total.div_ceil(parts_u64),
    };
    let mut out = Vec::with_capacity(parts);
    let mut spans = cut.spans().iter().copied();
    let mut current: Option<Span> = None;
    let mut padding = cut.spans().iter().copied().cycle();
    let mut pad_current: Option<Span> = None;
    for _ in 0..parts {
        let mut part = SpanSet::default();
        let mut need = per_part;
        need = take(&mut spans, &mut current, need, &mut part);
        if need > 0 && remainder == Remainder::Pad && total > 0 {
            take(&mut padding, &mut pad_current, need, &mut part);
        }
        out.push(part);
    }
    out
}

/// Part `part` of `split_equal(cut, parts, remainder)`, built alone: one
/// walk over the spans and one set allocated, however many parts (a
/// coordinator asks for one rank's part on every call; building all of
/// them made each call cost the world, issue 30).
pub fn split_one(cut: &SpanSet, parts: usize, part: usize, remainder: Remainder) -> SpanSet {
    assert!(part < parts, "part {part} is outside {parts} parts");
    let total = cut.len();
    let per_part = match remainder {
        Remainder::Drop => total / parts as u64,
        Remainder::Pad => total.div_ceil(parts as u64),
    };
    let mut out = SpanSet::default();
    if total == 0 {
        return out;
    }
    // Parts read the cut in order, then (padding) the cut again from its
    // start: part `part` begins `part * per_part` into that stream.
    let start = part as u64 * per_part;
    let mut spans = cut.spans().iter().copied();
    let mut current = skip(&mut spans, start.min(total));
    let need = take(&mut spans, &mut current, per_part, &mut out);
    if need > 0 && remainder == Remainder::Pad {
        // The padding stream is shared by the parts in order: this part's
        // begins where the earlier parts' padding ended.
        let padded_before = start.saturating_sub(total) % total;
        let mut padding = cut.spans().iter().copied().cycle();
        let mut pad_current = skip(&mut padding, padded_before);
        take(&mut padding, &mut pad_current, need, &mut out);
    }
    out
}

/// The samples of `cut` that no part of `split_equal(cut, parts, remainder)`
/// holds: with [`Remainder::Drop`] the last `len % parts` samples (fewer than
/// `parts`), with [`Remainder::Pad`] none. This is the documented remainder
/// of an epoch when `cut` is the cut of its final generation.
pub fn dropped(cut: &SpanSet, parts: usize, remainder: Remainder) -> SpanSet {
    assert!(parts > 0, "cannot split a cut over zero parts");
    match remainder {
        Remainder::Drop => {
            let total = cut.len();
            cut.split_at(total - total % parts as u64).1
        }
        Remainder::Pad => SpanSet::default(),
    }
}

/// Skips `n` samples of `spans`: returns what is left of the span the skip
/// ended inside (`None` when it ended on a span's end, or ran out).
fn skip(spans: &mut impl Iterator<Item = Span>, mut n: u64) -> Option<Span> {
    while n > 0 {
        let span = spans.next()?;
        if span.len() > n {
            return Some(Span::new(span.shard, span.start + n as u32, span.end));
        }
        n -= span.len();
    }
    None
}

/// Moves up to `need` samples from `source` (resuming `current`) into `part`;
/// returns how many are still needed.
fn take(
    source: &mut impl Iterator<Item = Span>,
    current: &mut Option<Span>,
    mut need: u64,
    part: &mut SpanSet,
) -> u64 {
    while need > 0 {
        let Some(span) = current.take().or_else(|| source.next()) else {
            break;
        };
        if span.len() <= need {
            need -= span.len();
            part.push(span);
        } else {
            let cut = span.start + need as u32;
            part.push(Span::new(span.shard, span.start, cut));
            *current = Some(Span::new(span.shard, cut, span.end));
            need = 0;
        }
    }
    need
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::invariants;
    use proptest::prelude::*;

    /// One part built alone is the part `split_equal` builds among all.
    #[test]
    fn one_part_alone_is_that_part_of_the_whole_split() {
        let cuts = [
            SpanSet::new([Span::new(0, 0, 5)]),
            SpanSet::new([Span::new(0, 0, 3), Span::new(2, 1, 9), Span::new(1, 4, 6)]),
            SpanSet::new((0..40).map(|s| Span::new(s, s % 3, 7 + s % 5))),
            SpanSet::default(),
        ];
        for cut in &cuts {
            for parts in 1..=(cut.len() as usize + 3).min(70) {
                for remainder in [Remainder::Drop, Remainder::Pad] {
                    let all = split_equal(cut, parts, remainder);
                    for (part, expected) in all.iter().enumerate() {
                        assert_eq!(
                            &split_one(cut, parts, part, remainder),
                            expected,
                            "part {part} of {parts} ({remainder:?}) of {cut:?}"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn pad_repeats_from_the_start() {
        let cut = SpanSet::new([Span::new(0, 0, 5)]);
        let parts = split_equal(&cut, 2, Remainder::Pad);
        assert_eq!(parts[0].spans(), &[Span::new(0, 0, 3)]);
        assert_eq!(parts[1].spans(), &[Span::new(0, 3, 5), Span::new(0, 0, 1)]);
    }

    fn arb_cut() -> impl Strategy<Value = SpanSet> {
        proptest::collection::vec((0u32..50, 0u32..40), 0..30).prop_map(|v| {
            SpanSet::new(
                v.into_iter()
                    .enumerate()
                    .map(|(i, (start, len))| Span::new(i as u32, start, start + len)),
            )
        })
    }

    proptest! {
        #[test]
        fn split_parts_are_equal_disjoint_and_cover_the_cut(
            cut in arb_cut(), parts in 1usize..17, pad in any::<bool>()
        ) {
            let remainder = if pad { Remainder::Pad } else { Remainder::Drop };
            let split = split_equal(&cut, parts, remainder);
            prop_assert_eq!(split.len(), parts);
            invariants::check_split(&cut, &split, remainder).map_err(|e| TestCaseError::fail(e.to_string()))?;
            prop_assert_eq!(&split, &split_equal(&cut, parts, remainder));
            // Under Drop, the parts and the dropped tail are the cut.
            let tail = dropped(&cut, parts, remainder);
            prop_assert!(tail.len() < parts as u64);
            if remainder == Remainder::Drop {
                let joined: Vec<_> = split.iter().chain([&tail]).flat_map(|p| p.samples()).collect();
                prop_assert_eq!(joined, cut.samples().collect::<Vec<_>>());
            } else {
                prop_assert!(tail.is_empty());
            }
        }
    }
}
