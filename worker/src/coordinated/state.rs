//! A rank's loader state: what a checkpoint saves, what a restart hands
//! back to [`super::SyncLoader::load_state_dict`], and the digest that ties
//! it to the plan it was saved under.

use serde::{Deserialize, Serialize};
use tributary_common::job::JobSpec;
use tributary_common::plan::generation::GenerationRecord;
use tributary_common::plan::mix::Layout;
use tributary_common::proto::v1;

use crate::error::{Result, WorkerError};

/// Where a rank stands: saved with a checkpoint, committed once durable.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct LoaderState {
    pub epoch: u64,
    pub generation: u64,
    /// Samples this rank's loader has handed to the trainer in the
    /// generation (equal on every rank in sync mode).
    pub samples: u64,
    /// The plan records of the epoch, from its first generation to
    /// `generation`: with them a job that has no commit (a fresh in-process
    /// coordinator) resumes from this state alone. Empty in states saved
    /// before they were recorded.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub history: Vec<GenerationRecord>,
    /// [`plan_digest`] of the job the state was saved under: a state of
    /// another job, or of this one with another seed, shuffle buffer,
    /// batch size, mix or dataset layout, is refused instead of resumed
    /// against a plan it does not belong to. `None` in states saved before
    /// it was recorded (not checked).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plan: Option<u32>,
}

/// The most plan records a state may carry (the coordinator's bound).
pub const MAX_HISTORY: usize = 4096;

impl LoaderState {
    /// Checks what a checkpoint's state claims before it reaches the
    /// coordinator: a bounded history, ordered, of one epoch (the state's),
    /// ending at the state's generation.
    pub fn validate(&self) -> Result<()> {
        let bad = |why: String| Err(WorkerError::Config(format!("loader state: {why}")));
        if self.history.len() > MAX_HISTORY {
            return bad(format!(
                "`history` has {} records (at most {MAX_HISTORY})",
                self.history.len()
            ));
        }
        if let Some(pair) = self
            .history
            .windows(2)
            .find(|p| p[0].generation >= p[1].generation)
        {
            return bad(format!(
                "`history` is out of order at generation {}",
                pair[1].generation
            ));
        }
        if let Some(record) = self.history.iter().find(|r| r.epoch.get() != self.epoch) {
            return bad(format!(
                "`history` generation {} is of epoch {}, the state's `epoch` is {}",
                record.generation, record.epoch, self.epoch
            ));
        }
        match self.history.last() {
            Some(last) if last.generation.get() != self.generation => bad(format!(
                "`history` ends at generation {}, the state's `generation` is {}",
                last.generation, self.generation
            )),
            _ => Ok(()),
        }
    }

    /// The state as a Join's resume point.
    pub(super) fn to_resume(&self) -> v1::Resume {
        v1::Resume {
            generation: self.generation,
            samples: self.samples,
            history: self.history.iter().map(v1::PlanRecord::from).collect(),
        }
    }
}

/// CRC-32C of what a job's plan is made of: the spec's planning fields
/// (seed, batch size, shuffle buffer, remainder, mode, the mix's takes,
/// epoch samples and a token job's sequence) and the dataset layout (samples per shard, in order).
/// Two jobs with one digest plan every epoch alike, so a state's counts
/// mean the same samples in both.
pub fn plan_digest(spec: &JobSpec, layout: &Layout) -> u32 {
    let mut crc = 0;
    let mut add = |bytes: &[u8]| crc = crc32c::crc32c_append(crc, bytes);
    add(&spec.seed.to_le_bytes());
    add(&spec.batch_size.to_le_bytes());
    add(&spec.shuffle_buffer.to_le_bytes());
    add(format!(
        "{:?} {:?} {}",
        spec.remainder, spec.mode, spec.epoch_samples
    )
    .as_bytes());
    for source in &spec.sources {
        add(format!("{:?}", source.take).as_bytes());
    }
    if let Some(sequence) = spec.sequence {
        // Only token jobs: the digests of sample jobs stay what they were.
        add(format!("{} {}", sequence.length, sequence.packing).as_bytes());
    }
    add(&layout.epoch_samples().to_le_bytes());
    for shard in 0..layout.concatenated_shards() {
        add(&layout.shard_samples(shard).unwrap_or(0).to_le_bytes());
    }
    crc
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_state_of_another_plan_has_another_digest() {
        let spec = JobSpec::new("/data/ds");
        let layout = Layout::single(vec![100, 100, 50]);
        let digest = plan_digest(&spec, &layout);
        // The same job and dataset: the same digest, whatever the URL.
        let moved = JobSpec::new("s3://bucket/ds");
        assert_eq!(plan_digest(&moved, &layout), digest);
        let seeded = JobSpec {
            seed: 1,
            ..spec.clone()
        };
        assert_ne!(plan_digest(&seeded, &layout), digest);
        let batched = JobSpec {
            batch_size: 32,
            ..spec.clone()
        };
        assert_ne!(plan_digest(&batched, &layout), digest);
        let repacked = Layout::single(vec![100, 50, 100]);
        assert_ne!(plan_digest(&spec, &repacked), digest);
    }
}
