//! Planning: the first pass over a source checks every sample and cuts the
//! stream into shards by the samples' sizes alone (so the result is
//! deterministic, and known before a byte is uploaded); the second pass
//! ([`Replay`]) cuts the same stream where the plan says, and refuses a
//! source that changed in between.

use std::collections::BTreeSet;
use std::hash::{DefaultHasher, Hasher};
use std::path::Path;

use super::source::{check_sample, Checker, Samples, Source, SourceSample};
use crate::error::{Result, ToolsError};

/// Where shards are cut in a stream of samples: before a sample that would
/// take its shard over `max_bytes` (as tar entries) or `max_samples`; a
/// sample larger than `max_bytes` gets a shard of its own.
#[derive(Debug, Clone)]
pub struct Cutter {
    max_bytes: u64,
    max_samples: u32,
    /// Samples and bytes of the shard being filled.
    samples: u64,
    bytes: u64,
}

impl Cutter {
    pub fn new(max_bytes: u64, max_samples: u32) -> Self {
        Self {
            max_bytes,
            max_samples,
            samples: 0,
            bytes: 0,
        }
    }

    /// Adds a sample of `tar_bytes`; true where it begins a new shard.
    pub fn push(&mut self, tar_bytes: u64) -> bool {
        let cut = self.samples > 0
            && (self.bytes.saturating_add(tar_bytes) > self.max_bytes
                || self.samples >= u64::from(self.max_samples));
        if cut {
            self.samples = 0;
            self.bytes = 0;
        }
        self.samples += 1;
        self.bytes = self.bytes.saturating_add(tar_bytes);
        cut
    }
}

/// One shard of the plan: how many samples, and a digest of their keys in
/// order (to see that the second pass yields the same samples).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PlannedShard {
    pub samples: usize,
    pub keys: u64,
}

/// What the first pass found.
#[derive(Debug, Clone)]
pub struct Plan {
    pub shards: Vec<PlannedShard>,
    /// Samples, and their payload bytes, as scanned.
    pub samples: u64,
    pub bytes: u64,
    /// Files the source left out.
    pub skipped: usize,
}

/// The digest of a shard's keys, in order.
#[derive(Debug, Default)]
struct Keys {
    hasher: DefaultHasher,
    samples: usize,
}

impl Keys {
    fn add(&mut self, key: &str) {
        self.hasher.write(key.as_bytes());
        self.hasher.write_u8(0xFF);
        self.samples += 1;
    }

    fn finish(self) -> PlannedShard {
        PlannedShard {
            samples: self.samples,
            keys: self.hasher.finish(),
        }
    }
}

/// The first pass over `source` (read from `src`): every sample checked,
/// shards cut by [`Cutter`].
pub fn plan(source: &dyn Source, src: &Path, max_bytes: u64, max_samples: u32) -> Result<Plan> {
    let mut checker = Checker::new(src, source.format());
    let mut cutter = Cutter::new(max_bytes, max_samples);
    let mut shards = Vec::new();
    let mut keys = Keys::default();
    let (mut samples, mut bytes) = (0u64, 0u64);
    for sample in source.samples() {
        let sample = sample?;
        checker.sample(&sample)?;
        if cutter.push(sample.tar_bytes()) {
            shards.push(std::mem::take(&mut keys).finish());
        }
        keys.add(&sample.key);
        samples += 1;
        bytes += sample.bytes();
    }
    checker.finish()?;
    shards.push(keys.finish());
    Ok(Plan {
        shards,
        samples,
        bytes,
        skipped: source.skipped(),
    })
}

/// The second pass: the samples of a source cut into the shards of its
/// plan, each checked again, with the fields they have.
pub struct Replay<'a> {
    samples: Samples<'a>,
    plan: &'a [PlannedShard],
    src: &'a Path,
    next: usize,
    /// The extensions of every field yielded so far.
    pub fields: BTreeSet<String>,
}

impl<'a> Replay<'a> {
    pub fn new(source: &'a dyn Source, plan: &'a [PlannedShard], src: &'a Path) -> Self {
        Self {
            samples: source.samples(),
            plan,
            src,
            next: 0,
            fields: BTreeSet::new(),
        }
    }

    fn changed(&self, what: &str) -> ToolsError {
        ToolsError::Changed {
            path: self.src.display().to_string(),
            what: what.to_owned(),
        }
    }

    /// The next shard's index and samples; `None` after the last.
    pub fn next_shard(&mut self) -> Result<Option<(usize, Vec<SourceSample>)>> {
        let Some(planned) = self.plan.get(self.next).copied() else {
            return match self.samples.next() {
                None => Ok(None),
                Some(Err(error)) => Err(error),
                Some(Ok(_)) => Err(self.changed("more samples than planned")),
            };
        };
        let mut keys = Keys::default();
        let mut samples = Vec::with_capacity(planned.samples);
        for _ in 0..planned.samples {
            let sample = self
                .samples
                .next()
                .ok_or_else(|| self.changed("fewer samples than planned"))??;
            check_sample(self.src, &sample)?;
            keys.add(&sample.key);
            for field in &sample.fields {
                if !self.fields.contains(&field.ext) {
                    self.fields.insert(field.ext.clone());
                }
            }
            samples.push(sample);
        }
        if keys.finish() != planned {
            return Err(self.changed("other samples than planned"));
        }
        let index = self.next;
        self.next += 1;
        Ok(Some((index, samples)))
    }
}

impl std::fmt::Debug for Replay<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Replay")
            .field("src", &self.src)
            .field("next", &self.next)
            .finish_non_exhaustive()
    }
}

/// Splits samples into shards by their size as tar entries (every
/// field's) and by sample count, as a pack of them would.
pub fn plan_shards(
    samples: &[SourceSample],
    max_bytes: u64,
    max_samples: u32,
) -> Vec<std::ops::Range<usize>> {
    let mut cutter = Cutter::new(max_bytes, max_samples);
    let mut shards = Vec::new();
    let mut start = 0;
    for (i, sample) in samples.iter().enumerate() {
        if cutter.push(sample.tar_bytes()) {
            shards.push(start..i);
            start = i;
        }
    }
    shards.push(start..samples.len());
    shards
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pack::source::{SourceField, SourceFormat, VecSource};

    fn source(keys: &[&str]) -> VecSource {
        let samples = keys
            .iter()
            .map(|key| SourceSample {
                key: (*key).to_owned(),
                fields: vec![SourceField::inline("txt", vec![b'x'; 600])],
            })
            .collect();
        VecSource {
            format: SourceFormat::WebDataset,
            classes: Vec::new(),
            samples,
            skipped: 0,
        }
    }

    #[test]
    fn the_plan_cuts_where_plan_shards_does_and_replays_the_same_shards() {
        let planned = source(&["a", "b", "c", "d", "e"]);
        let src = Path::new("src");
        // Two samples of 512 + 1024 bytes as tar entries fit in 3 KiB.
        let plan = plan(&planned, src, 3 << 10, 10).expect("plan");
        let ranges = plan_shards(&planned.samples, 3 << 10, 10);
        let counts: Vec<usize> = plan.shards.iter().map(|s| s.samples).collect();
        assert_eq!(counts, ranges.iter().map(|r| r.len()).collect::<Vec<_>>());
        assert_eq!(counts, [2, 2, 1]);
        assert_eq!((plan.samples, plan.bytes), (5, 3000));
        let mut replay = Replay::new(&planned, &plan.shards, src);
        let mut shards = Vec::new();
        while let Some((index, samples)) = replay.next_shard().expect("replay") {
            shards.push((index, samples.len()));
        }
        assert_eq!(shards, [(0, 2), (1, 2), (2, 1)]);
        assert_eq!(replay.fields.into_iter().collect::<Vec<_>>(), ["txt"]);
    }

    #[test]
    fn a_source_that_changed_since_it_was_planned_is_refused() {
        let src = Path::new("src");
        let plan = plan(&source(&["a", "b", "c"]), src, 3 << 10, 10).expect("plan");
        for (changed, words) in [
            (source(&["a", "x", "c"]), "other samples than planned"),
            (source(&["a", "b"]), "fewer samples than planned"),
            (source(&["a", "b", "c", "d"]), "more samples than planned"),
        ] {
            let mut replay = Replay::new(&changed, &plan.shards, src);
            let error = loop {
                match replay.next_shard() {
                    Ok(Some(_)) => {}
                    Ok(None) => panic!("{words}: replayed"),
                    Err(error) => break error.to_string(),
                }
            };
            assert!(error.contains(words), "{error}");
        }
    }
}
