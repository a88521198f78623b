//! Mixing datasets: what each epoch takes from each of several datasets,
//! and the epoch's spans over all of them, as pure functions of
//! `(seed, epoch)`.
//!
//! A job of several datasets plans over one *virtual* shard space: the
//! datasets' shards concatenated (dataset 0's first), repeated `copies`
//! times. Virtual shard `v` is copy `v / S` of concatenated shard `v % S`,
//! where `S` is the shards of all datasets together. An epoch that takes a
//! dataset more than once reads its shards under different copies, so every
//! span of an epoch names distinct samples of the virtual space and
//! everything built on span sets (generations, commits, leased units,
//! exactly-once accounting) works as it does for one dataset. A sample's id
//! is its position in the virtual space ([`Layout::shard_start`]), so a
//! repeated sample has a different id (and different augmentations) in each
//! copy.
//!
//! What an epoch takes from each dataset ([`Take`], as MosaicML's
//! `Stream(proportion=, choose=, repeat=)`):
//! - [`Take::Weight`]: a share of the epoch proportional to the weight (all
//!   datasets weighted, or none). The epoch has `epoch_samples` samples
//!   (default: all datasets' samples together), apportioned exactly by the
//!   largest remainder: each dataset gets the floor or the ceiling of its
//!   quota, and the counts sum to the epoch.
//! - [`Take::Samples`]: exactly that many samples.
//! - [`Take::Repeat`]: that many passes (`round(repeat * samples)`).
//!
//! Dataset `d` taking `n` of its `N` samples reads `n / N` whole passes and
//! then `n % N` samples: whole shards in a seeded order, the last one cut
//! short. Its spans are cut into pieces of [`MIX_PIECE`] samples, and the
//! datasets' pieces are interleaved evenly (piece `k` of dataset `d`'s `m`
//! at position `(k + jitter_d) / m` of the epoch, the jitter seeded by
//! `(seed, epoch, d)`): any stretch of the epoch, and so any rank's part of
//! it and any window of its shuffle buffer, holds each dataset in
//! proportion, and a shard's pieces are still read in order.

use serde::{Deserialize, Serialize};

use super::epoch::{epoch_spans, EpochPlan};
use super::seed::{self, Domain};
use super::span::{Span, SpanSet};
use crate::proto::v1;

/// The most datasets one job mixes.
pub const MAX_SOURCES: usize = 256;
/// The most samples one epoch of a mixed job plans: 2^48.
pub const MAX_EPOCH_SAMPLES: u64 = 1 << 48;
/// The most spans one epoch of a mixed job plans (each pass over a dataset
/// is a span per shard): planning allocates and shuffles them all.
pub const MAX_EPOCH_SPANS: u64 = 1 << 24;
/// A mixed epoch interleaves its datasets in pieces of this many samples
/// (more when the epoch would have over [`MAX_MIX_PIECES`]): a window of a
/// rank's shuffle buffer then holds samples of every dataset in proportion,
/// whatever the shard size.
pub const MIX_PIECE: u64 = 64;
/// The most pieces a mixed epoch is cut into, whatever its size.
pub const MAX_MIX_PIECES: u64 = 1 << 20;
/// The largest weight or repeat factor.
pub const MAX_FACTOR: f64 = 1e9;

/// How much of one dataset an epoch takes.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Take {
    /// A share of the epoch proportional to this weight.
    Weight(f64),
    /// Exactly this many samples.
    Samples(u64),
    /// This many passes over the dataset; a fraction reads part of one.
    Repeat(f64),
}

// Weights and factors are checked finite ([`Take::check`]) before a `Take`
// is stored or compared.
impl Eq for Take {}

impl Default for Take {
    /// One pass.
    fn default() -> Self {
        Self::Repeat(1.0)
    }
}

impl Take {
    /// The protocol's `take` of a `Source`: unset is one pass.
    pub fn from_proto(take: Option<v1::source::Take>) -> Self {
        match take {
            None => Self::default(),
            Some(v1::source::Take::Weight(w)) => Self::Weight(w),
            Some(v1::source::Take::Samples(n)) => Self::Samples(n),
            Some(v1::source::Take::Repeat(r)) => Self::Repeat(r),
        }
    }

    /// The `Source` naming the dataset at `manifest_url` taken so.
    pub fn to_source(self, manifest_url: &str) -> v1::Source {
        v1::Source {
            manifest_url: manifest_url.to_owned(),
            take: Some(match self {
                Self::Weight(w) => v1::source::Take::Weight(w),
                Self::Samples(n) => v1::source::Take::Samples(n),
                Self::Repeat(r) => v1::source::Take::Repeat(r),
            }),
        }
    }
}

impl std::str::FromStr for Take {
    type Err = String;

    /// Parses `weight:W`, `samples:N` or `repeat:R`, then checks bounds.
    fn from_str(text: &str) -> Result<Self, String> {
        let bad = || format!("{text:?} is not weight:W, samples:N or repeat:R");
        let (kind, value) = text.split_once(':').ok_or_else(bad)?;
        let take = match kind {
            "weight" => Self::Weight(value.parse().map_err(|_| bad())?),
            "samples" => Self::Samples(value.parse().map_err(|_| bad())?),
            "repeat" => Self::Repeat(value.parse().map_err(|_| bad())?),
            _ => return Err(bad()),
        };
        take.check()?;
        Ok(take)
    }
}

impl Take {
    /// Checks the value's bounds; the error says why.
    pub fn check(&self) -> Result<(), String> {
        let factor = |what: &str, value: f64| {
            if value.is_finite() && value > 0.0 && value <= MAX_FACTOR {
                Ok(())
            } else {
                Err(format!(
                    "{what} {value} is not a number above 0 and at most {MAX_FACTOR}"
                ))
            }
        };
        match *self {
            Self::Weight(w) => factor("weight", w),
            Self::Repeat(r) => factor("repeat", r),
            Self::Samples(0) => {
                Err("samples 0: a dataset that gives no sample is not mixed in".into())
            }
            Self::Samples(n) if n > MAX_EPOCH_SAMPLES => Err(format!(
                "samples {n} is over the limit of {MAX_EPOCH_SAMPLES} per epoch"
            )),
            Self::Samples(_) => Ok(()),
        }
    }
}

/// Why datasets cannot be mixed as asked.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {reason}")]
pub struct MixError {
    /// The offending field, e.g. `sources[2].weight` or `epoch_samples`.
    pub field: String,
    pub reason: String,
}

fn mix_error(field: impl Into<String>, reason: impl Into<String>) -> MixError {
    MixError {
        field: field.into(),
        reason: reason.into(),
    }
}

/// One dataset of a mix: its shards' sample counts and what an epoch takes.
#[derive(Debug, Clone, PartialEq)]
pub struct SourceShape {
    pub shard_samples: Vec<u32>,
    pub take: Take,
}

/// Where a dataset's shards sit in the concatenation, and what it gives.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Part {
    /// Its first concatenated shard.
    first_shard: u32,
    shards: u32,
    samples: u64,
    /// Samples each epoch takes from it.
    per_epoch: u64,
}

/// The plan's view of a job's data: one dataset's shards, or several
/// datasets mixed (see the module docs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    /// Sample counts of the concatenated shards.
    shard_samples: Vec<u32>,
    /// First sample id of each concatenated shard, plus the total.
    starts: Vec<u64>,
    /// Empty for one dataset read once per epoch.
    parts: Vec<Part>,
    /// How many times the concatenation repeats in the virtual space.
    copies: u32,
}

impl Layout {
    /// One dataset, read once per epoch in the seeded shard order
    /// ([`epoch_spans`]): the layout of a job without mixing.
    pub fn single(shard_samples: Vec<u32>) -> Self {
        let starts = starts(&shard_samples);
        Self {
            shard_samples,
            starts,
            parts: Vec::new(),
            copies: 1,
        }
    }

    /// Several datasets, each epoch taking from each what its [`Take`]
    /// says; `epoch_samples` (0: all datasets' samples) is the epoch of
    /// weighted datasets. Errors name the field (`sources[i].…`).
    pub fn mixed(sources: &[SourceShape], epoch_samples: u64) -> Result<Self, MixError> {
        if sources.is_empty() {
            return Err(mix_error("sources", "lists no dataset"));
        }
        if sources.len() > MAX_SOURCES {
            return Err(mix_error(
                "sources",
                format!(
                    "lists {} datasets; the limit is {MAX_SOURCES}",
                    sources.len()
                ),
            ));
        }
        let weighted = sources
            .iter()
            .filter(|s| matches!(s.take, Take::Weight(_)))
            .count();
        if weighted != 0 && weighted != sources.len() {
            return Err(mix_error(
                "sources",
                "weights are given for some datasets but not all: weight every dataset, or none (then give samples or repeat)",
            ));
        }
        if weighted == 0 && epoch_samples != 0 {
            return Err(mix_error(
                "epoch_samples",
                "applies to weighted datasets only (the others give samples or repeat)",
            ));
        }
        if epoch_samples > MAX_EPOCH_SAMPLES {
            return Err(mix_error(
                "epoch_samples",
                format!("{epoch_samples} is over the limit of {MAX_EPOCH_SAMPLES}"),
            ));
        }
        let mut shard_samples = Vec::new();
        let mut sizes = Vec::with_capacity(sources.len());
        for (i, source) in sources.iter().enumerate() {
            source
                .take
                .check()
                .map_err(|reason| mix_error(format!("sources[{i}]"), reason))?;
            let samples: u64 = source.shard_samples.iter().map(|&n| u64::from(n)).sum();
            if samples == 0 {
                return Err(mix_error(
                    format!("sources[{i}]"),
                    "the dataset has no samples",
                ));
            }
            if shard_samples.len() + source.shard_samples.len() > u32::MAX as usize {
                return Err(mix_error(
                    "sources",
                    "the datasets hold over 2^32 shards together",
                ));
            }
            sizes.push(samples);
            shard_samples.extend_from_slice(&source.shard_samples);
        }
        let counts = if weighted > 0 {
            let total = match epoch_samples {
                0 => sizes.iter().sum::<u64>().min(MAX_EPOCH_SAMPLES),
                n => n,
            };
            let weights: Vec<f64> = sources
                .iter()
                .map(|s| match s.take {
                    Take::Weight(w) => w,
                    _ => unreachable!("every source is weighted"),
                })
                .collect();
            apportion(total, &weights)
        } else {
            sources
                .iter()
                .zip(&sizes)
                .map(|(source, &size)| match source.take {
                    Take::Samples(n) => n,
                    // Checked finite, positive and bounded: the product is
                    // below 2^64 for any dataset of under 2^34 samples, and
                    // saturates (then fails the total's check) above.
                    Take::Repeat(r) => (r * size as f64).round() as u64,
                    Take::Weight(_) => unreachable!("no source is weighted"),
                })
                .collect()
        };
        let mut parts = Vec::with_capacity(sources.len());
        let (mut first, mut total, mut spans, mut copies) = (0u32, 0u64, 0u64, 1u64);
        for (i, ((source, &samples), &per_epoch)) in
            sources.iter().zip(&sizes).zip(&counts).enumerate()
        {
            let shards = source.shard_samples.len() as u32;
            total = total.saturating_add(per_epoch);
            let passes = per_epoch.div_ceil(samples);
            copies = copies.max(passes);
            spans = spans.saturating_add(passes.saturating_mul(u64::from(shards)));
            if per_epoch == 0 {
                return Err(mix_error(
                    format!("sources[{i}]"),
                    "gives no sample to the epoch (its weight is too small for the epoch's size)",
                ));
            }
            parts.push(Part {
                first_shard: first,
                shards,
                samples,
                per_epoch,
            });
            first += shards;
        }
        if total > MAX_EPOCH_SAMPLES {
            return Err(mix_error(
                "sources",
                format!("an epoch would take {total} samples; the limit is {MAX_EPOCH_SAMPLES}"),
            ));
        }
        if spans > MAX_EPOCH_SPANS {
            return Err(mix_error(
                "sources",
                format!(
                    "an epoch would read {spans} shard passes; the limit is {MAX_EPOCH_SPANS} (fewer repeats, or larger shards)"
                ),
            ));
        }
        if copies.saturating_mul(u64::from(first)) > u64::from(u32::MAX) {
            return Err(mix_error(
                "sources",
                format!("{copies} passes over {first} shards exceed the 2^32 virtual shards a plan addresses"),
            ));
        }
        let starts = starts(&shard_samples);
        Ok(Self {
            shard_samples,
            starts,
            parts,
            copies: copies as u32,
        })
    }

    /// Whether this layout mixes datasets (or repeats one).
    pub fn is_mixed(&self) -> bool {
        !self.parts.is_empty()
    }

    /// Datasets in the layout.
    pub fn sources(&self) -> usize {
        self.parts.len().max(1)
    }

    /// Samples each epoch takes from dataset `source`.
    pub fn source_samples(&self, source: usize) -> u64 {
        match self.parts.get(source) {
            Some(part) => part.per_epoch,
            None => self.starts[self.shard_samples.len()],
        }
    }

    /// Samples in one epoch.
    pub fn epoch_samples(&self) -> u64 {
        if self.parts.is_empty() {
            self.starts[self.shard_samples.len()]
        } else {
            self.parts.iter().map(|p| p.per_epoch).sum()
        }
    }

    /// At most how many spans [`Self::epoch_spans`] returns, computed
    /// without building them: what a caller bounds before it materialises
    /// an epoch (the coordinator's units per epoch).
    pub fn max_epoch_spans(&self) -> u64 {
        if self.parts.is_empty() {
            return self.shard_samples.len() as u64;
        }
        let total = self.epoch_samples();
        let piece = MIX_PIECE.max(total.div_ceil(MAX_MIX_PIECES));
        // Each shard of each pass is one span, plus one more per piece
        // cut from it.
        let passes: u64 = self
            .parts
            .iter()
            .map(|p| (p.per_epoch / p.samples + 1).saturating_mul(u64::from(p.shards)))
            .fold(0, u64::saturating_add);
        passes.saturating_add(total / piece)
    }

    /// The datasets' shards together: virtual shards `0..` this are each
    /// dataset's shards once, in mix order.
    pub fn concatenated_shards(&self) -> u32 {
        self.shard_samples.len() as u32
    }

    /// Virtual shards: the concatenated shards times the copies.
    pub fn shards(&self) -> u64 {
        self.shard_samples.len() as u64 * u64::from(self.copies)
    }

    /// Samples of virtual shard `shard`; `None` outside the layout.
    pub fn shard_samples(&self, shard: u32) -> Option<u32> {
        if u64::from(shard) >= self.shards() {
            return None;
        }
        Some(self.shard_samples[shard as usize % self.shard_samples.len()])
    }

    /// `(dataset, shard of that dataset)` of virtual shard `shard`, which
    /// must be inside the layout.
    pub fn resolve(&self, shard: u32) -> (usize, u32) {
        let concatenated = shard % self.shard_samples.len() as u32;
        if self.parts.is_empty() {
            return (0, concatenated);
        }
        let source = self
            .parts
            .partition_point(|p| p.first_shard <= concatenated)
            - 1;
        (source, concatenated - self.parts[source].first_shard)
    }

    /// The id of sample 0 of virtual shard `shard` (inside the layout):
    /// copies follow each other, each the datasets' samples in order.
    pub fn shard_start(&self, shard: u32) -> u64 {
        let n = self.shard_samples.len();
        let copy = shard as usize / n;
        let total = self.starts[n];
        copy as u64 * total + self.starts[shard as usize % n]
    }

    /// `(virtual shard, index)` of sample id `id`; `None` outside.
    pub fn locate(&self, id: u64) -> Option<(u32, u32)> {
        let n = self.shard_samples.len();
        let total = self.starts[n];
        let copy = id / total;
        if total == 0 || copy >= u64::from(self.copies) {
            return None;
        }
        let rest = id % total;
        let shard = self.starts.partition_point(|&start| start <= rest) - 1;
        Some((
            (copy as usize * n + shard) as u32,
            (rest - self.starts[shard]) as u32,
        ))
    }

    /// Every sample of epoch `epoch` (see the module docs).
    pub fn epoch_spans(&self, seed: u64, epoch: u64) -> SpanSet {
        if self.parts.is_empty() {
            return epoch_spans(&self.shard_samples, seed, epoch);
        }
        let total: u64 = self.parts.iter().map(|p| p.per_epoch).sum();
        let piece = MIX_PIECE.max(total.div_ceil(MAX_MIX_PIECES));
        // Each dataset's pieces spread evenly over the epoch: piece k of
        // dataset d's m sits at (k + jitter_d) / m.
        let mut placed: Vec<(f64, u32, Span)> = Vec::new();
        for (d, part) in self.parts.iter().enumerate() {
            let pieces = self.pieces(part, d as u64, seed, epoch, piece);
            let m = pieces.len() as f64;
            let jitter = seed::unit_f64(&mut seed::rng(Domain::MixOrder, &[seed, epoch, d as u64]));
            placed.extend(
                pieces
                    .into_iter()
                    .enumerate()
                    .map(|(k, span)| ((k as f64 + jitter) / m, d as u32, span)),
            );
        }
        placed.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
        SpanSet::new(placed.into_iter().map(|(_, _, span)| span))
    }

    /// Dataset `d`'s spans of an epoch in its reading order, cut into
    /// pieces of at most `piece` samples: `per_epoch / samples` whole passes,
    /// then the rest in whole shards of a seeded order, the last one cut
    /// short. Each pass reads the shards in its own seeded order.
    fn pieces(&self, part: &Part, d: u64, seed: u64, epoch: u64, piece: u64) -> Vec<Span> {
        let n = self.shard_samples.len() as u32;
        let passes = part.per_epoch / part.samples;
        let mut rest = part.per_epoch % part.samples;
        let mut out = Vec::new();
        for pass in 0..=passes {
            if pass == passes && rest == 0 {
                break;
            }
            let mut order: Vec<u32> = (0..part.shards).collect();
            seed::shuffle(
                &mut seed::rng(Domain::MixShards, &[seed, epoch, d, pass]),
                &mut order,
            );
            for shard in order {
                let concatenated = part.first_shard + shard;
                let samples = self.shard_samples[concatenated as usize];
                let take = if pass < passes {
                    samples
                } else {
                    let take = rest.min(u64::from(samples)) as u32;
                    rest -= u64::from(take);
                    take
                };
                let virtual_shard = pass as u32 * n + concatenated;
                // `piece` is below 2^32: MAX_EPOCH_SAMPLES / MAX_MIX_PIECES.
                let mut start = 0;
                while start < take {
                    let end = take.min(start.saturating_add(piece as u32));
                    out.push(Span::new(virtual_shard, start, end));
                    start = end;
                }
                if pass == passes && rest == 0 {
                    break;
                }
            }
        }
        out
    }
}

fn starts(shard_samples: &[u32]) -> Vec<u64> {
    let mut starts = Vec::with_capacity(shard_samples.len() + 1);
    let mut sum = 0u64;
    for &n in shard_samples {
        starts.push(sum);
        sum += u64::from(n);
    }
    starts.push(sum);
    starts
}

/// Splits `total` by `weights` (finite, positive) with the largest
/// remainder method: each share is the floor or the ceiling of its exact
/// quota, the shares sum to `total`, and ties go to the earlier dataset.
pub fn apportion(total: u64, weights: &[f64]) -> Vec<u64> {
    let sum: f64 = weights.iter().sum();
    let quotas: Vec<f64> = weights.iter().map(|w| total as f64 * (w / sum)).collect();
    let mut shares: Vec<u64> = quotas
        .iter()
        .map(|q| (q.floor() as u64).min(total))
        .collect();
    let given: u64 = shares.iter().sum();
    let mut left = total.saturating_sub(given);
    let mut order: Vec<usize> = (0..weights.len()).collect();
    order.sort_by(|&a, &b| {
        let (fa, fb) = (quotas[a] - quotas[a].floor(), quotas[b] - quotas[b].floor());
        fb.total_cmp(&fa).then(a.cmp(&b))
    });
    for &i in order.iter().cycle() {
        if left == 0 {
            break;
        }
        shares[i] += 1;
        left -= 1;
    }
    shares
}

impl EpochPlan for Layout {
    fn epoch_spans(&self, seed: u64, epoch: u64) -> SpanSet {
        Layout::epoch_spans(self, seed, epoch)
    }
}

#[cfg(test)]
mod tests;
