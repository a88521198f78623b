//! Samples that cannot become images: where they are, and what a loader
//! does with them.
//!
//! A sample is bad when it has no image field, an unparsable `cls`, an
//! image that is not a JPEG, PNG or WebP, over the per-image pixel limit, or
//! that fails to decode (a decoder panic included). By default
//! ([`OnError::Raise`]) the first one ends the epoch with
//! [`WorkerError::BadSample`], which names the shard, the byte offset of the
//! chunk holding the sample, its key and id. With [`OnError::Skip`] the
//! sample is left out of its batch, counted (`MetricsSnapshot::bad_samples`)
//! and logged (a `tracing` warning with the same shard, offset and key),
//! until more than `max_bad_fraction` of the samples are bad; then the
//! loader fails with [`WorkerError::TooManyBadSamples`].
//!
//! ## Batch sizes and determinism
//!
//! A skipped sample is not replaced: its batch comes out one sample short
//! (a batch whose samples are all bad comes out empty, with shape
//! `[0, ...]`), and every batch still comes out, in the same order. So a
//! rank yields the same number of batches whatever it skips, which keeps
//! ranks of a synchronous job in step (their collective calls match); only
//! the sizes of the affected batches differ. Whether a sample is bad
//! depends on its bytes alone, so the same seed gives the same batches, and
//! the bad-fraction check runs in batch order, so it fails at the same
//! batch in every run.

use std::str::FromStr;

use tributary_common::format::shard::chunk_range;

use crate::error::WorkerError;
use crate::pipeline::datasets::Datasets;

/// What a loader does with a bad sample.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OnError {
    /// End the epoch with an error naming the sample (the default).
    #[default]
    Raise,
    /// Leave the sample out of its batch, count it and log it.
    Skip,
}

impl OnError {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Raise => "raise",
            Self::Skip => "skip",
        }
    }
}

impl FromStr for OnError {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "raise" => Ok(Self::Raise),
            "skip" => Ok(Self::Skip),
            other => Err(format!(
                "on_error must be \"raise\" or \"skip\", not {other:?}"
            )),
        }
    }
}

impl std::fmt::Display for OnError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Checks a `max_bad_fraction`.
pub fn validate_fraction(fraction: f64) -> Result<(), String> {
    if (0.0..=1.0).contains(&fraction) {
        Ok(())
    } else {
        Err(format!(
            "max_bad_fraction is {fraction}; it must be between 0 and 1"
        ))
    }
}

/// The error for sample `id` (key `key`) of `datasets`: names its shard and
/// the byte offset of the chunk that holds it (from the shard's index,
/// loaded when the sample was read; the shard's start were it not).
pub fn bad_sample(datasets: &Datasets, id: u64, key: &str, reason: String) -> WorkerError {
    let (shard, offset) = match datasets.locate(id) {
        Some((shard, index)) => {
            let offset = shard
                .loaded_meta()
                .map_or(0, |meta| chunk_range(&meta, index..index + 1).bytes.start);
            (shard.display_name(datasets.layout().is_mixed()), offset)
        }
        None => (String::from("(unknown shard)"), 0),
    };
    WorkerError::BadSample {
        shard,
        offset,
        key: key.to_owned(),
        id,
        reason,
    }
}

/// A loader's running count of bad samples, checked in batch order.
#[derive(Debug, Clone)]
pub struct BadTally {
    max_fraction: f64,
    /// Samples the epoch holds, when known up front (0 when not: dynamic
    /// loaders learn their work as it comes).
    expected: u64,
    seen: u64,
    bad: u64,
}

impl BadTally {
    pub fn new(max_fraction: f64, expected: u64) -> Self {
        Self {
            max_fraction,
            expected,
            seen: 0,
            bad: 0,
        }
    }

    /// Counts a batch of `samples` samples of which `bad` were skipped
    /// (`last` the last of them). Fails once the bad samples exceed
    /// `max_fraction` of the epoch's samples (of the samples seen so far
    /// where the epoch's size is not known, or once more have been seen).
    pub fn record(&mut self, samples: u64, bad: &[WorkerError]) -> Result<(), WorkerError> {
        self.seen += samples;
        self.bad += bad.len() as u64;
        let Some(last) = bad.last() else {
            return Ok(());
        };
        let base = self.seen.max(self.expected);
        if self.bad as f64 > self.max_fraction * base as f64 {
            return Err(WorkerError::TooManyBadSamples {
                bad: self.bad,
                seen: self.seen,
                max_fraction: self.max_fraction,
                last: last.to_string(),
            });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bad() -> WorkerError {
        WorkerError::Config("x".into())
    }

    #[test]
    fn on_error_parses_its_two_values_only() {
        assert_eq!("raise".parse(), Ok(OnError::Raise));
        assert_eq!("skip".parse(), Ok(OnError::Skip));
        assert!("Skip".parse::<OnError>().is_err());
        assert!(validate_fraction(1.5).is_err());
        assert!(validate_fraction(f64::NAN).is_err());
        assert!(validate_fraction(0.0).is_ok());
    }

    #[test]
    fn the_bad_fraction_is_of_the_epoch_when_its_size_is_known() {
        // 1000 samples, at most 1% bad: 10 bad samples pass, the 11th fails,
        // even when they all come in the first batch.
        let mut tally = BadTally::new(0.01, 1000);
        let ten: Vec<_> = (0..10).map(|_| bad()).collect();
        tally.record(64, &ten).expect("10 of 1000 is 1%");
        let error = tally.record(64, &[bad()]).expect_err("11 of 1000");
        assert!(error.to_string().contains("11 of 128 samples"), "{error}");
        // Unknown size: the fraction of the samples seen so far.
        let mut tally = BadTally::new(0.1, 0);
        tally.record(10, &[bad()]).expect("1 of 10");
        assert!(tally.record(1, &[bad()]).is_err(), "2 of 11");
        // Zero: any bad sample fails.
        assert!(BadTally::new(0.0, 100).record(1, &[bad()]).is_err());
    }
}
