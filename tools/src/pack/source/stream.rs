//! The [`Source`] trait: what `pack` reads, as a stream of samples, and
//! [`VecSource`], samples already in memory.

use std::path::Path;

use super::check::Checker;
use super::format::SourceFormat;
use super::sample::SourceSample;
use crate::error::Result;

/// One pass over the samples of a source, in packing order.
pub type Samples<'a> = Box<dyn Iterator<Item = Result<SourceSample>> + Send + 'a>;

/// A source of samples to pack. `pack` reads it in two passes: the first
/// checks every sample and plans the shards from their sizes, the second
/// builds the shards; so a pass streams its samples (a source holds no
/// list of them all), and every pass yields the same samples while the
/// files stay the same.
///
/// An implementation decides what it reads and in which order (the order
/// is the dataset's); [`pack`](crate::pack::pack) checks what every source
/// must give (see [`Source::check`]). A new kind of source (Parquet rows, a
/// text corpus) is one more implementation and one more arm of
/// [`open`](super::open).
pub trait Source: Send + Sync {
    /// The format the samples are read as (never [`SourceFormat::Auto`]).
    fn format(&self) -> SourceFormat;

    /// Class names, index = `cls` value; empty where the source names none.
    /// Known before the first sample.
    fn classes(&self) -> &[String];

    /// A pass over the samples, from the first. An error ends the pass.
    fn samples(&self) -> Samples<'_>;

    /// Files left out by the last complete pass (see each source for which).
    fn skipped(&self) -> usize {
        0
    }

    /// Reads a whole pass, checking what every format must give: at least
    /// one sample, valid and unique keys, at most
    /// [`MAX_FIELDS`](super::MAX_FIELDS) fields per sample with distinct
    /// extensions, and samples that fit a shard chunk. Errors name `src`.
    fn check(&self, src: &Path) -> Result<()> {
        let mut checker = Checker::new(src, self.format());
        for sample in self.samples() {
            checker.sample(&sample?)?;
        }
        checker.finish()
    }
}

/// Samples held in memory: a source for tests, and for samples made by a
/// program rather than found in files.
#[derive(Debug, Clone)]
pub struct VecSource {
    /// The format reported (never `Auto`).
    pub format: SourceFormat,
    /// Class names, index = `cls` value.
    pub classes: Vec<String>,
    pub samples: Vec<SourceSample>,
    /// Files left out (reported as [`Source::skipped`]).
    pub skipped: usize,
}

impl Source for VecSource {
    fn format(&self) -> SourceFormat {
        self.format
    }

    fn classes(&self) -> &[String] {
        &self.classes
    }

    fn samples(&self) -> Samples<'_> {
        Box::new(self.samples.iter().cloned().map(Ok))
    }

    fn skipped(&self) -> usize {
        self.skipped
    }
}
