//! Batches: one contiguous image buffer plus labels, keys and sample ids,
//! and the function that decodes a batch's samples into it on a rayon pool.

use std::sync::Arc;

use rayon::prelude::*;
use tributary_common::manifest::Manifest;
use tributary_common::sample::Sample;

use crate::augment::{self, AugmentConfig, Layout, NormLut, Slot};
use crate::bad_samples::{self, OnError};
use crate::buffers::{Buffer, BufferPool};
use crate::error::{Result, WorkerError};
use crate::jpeg;
use crate::pixels::{DecodeLimits, ImageKind, PixelBudget};

/// A batch's image buffer; it goes back to its loader's pool when dropped.
#[derive(Debug, Clone, PartialEq)]
pub enum Images {
    /// `N x 3 x S x S`, normalised.
    F32(Buffer<f32>),
    /// `N x S x S x 3`.
    U8(Buffer<u8>),
}

/// A batch ready for the trainer.
#[derive(Debug, Clone, PartialEq)]
pub struct Batch {
    /// Position of the batch in this rank's epoch, from 0.
    pub index: u64,
    pub images: Images,
    /// `[N, 3, S, S]` for `F32`, `[N, S, S, 3]` for `U8`.
    pub shape: [usize; 4],
    /// Class index from the `cls` field, or -1 where a sample has none.
    pub labels: Vec<i64>,
    pub keys: Vec<String>,
    /// Dataset-wide sample ids.
    pub ids: Vec<u64>,
    /// Ids of the samples of this batch that were bad and skipped
    /// (`on_error = skip`): read, so counted as done by progress tracking
    /// (commits, acks), but not in the batch.
    pub skipped_ids: Vec<u64>,
}

impl Batch {
    /// Number of samples.
    pub fn len(&self) -> usize {
        self.ids.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }

    /// Samples this batch consumed from the epoch: those in it plus those
    /// skipped.
    pub fn consumed(&self) -> usize {
        self.ids.len() + self.skipped_ids.len()
    }
}

/// Field extensions tried, in order, for a sample's image.
pub const IMAGE_FIELDS: [&str; 3] = ["jpg", "jpeg", "png"];

/// The image field of a sample: `(extension, bytes)`.
pub fn image_field(sample: &Sample) -> Result<(&str, &[u8])> {
    sample
        .fields
        .iter()
        .find(|f| IMAGE_FIELDS.contains(&f.ext.as_str()))
        .map(|f| (f.ext.as_str(), &f.data[..]))
        .ok_or_else(|| WorkerError::Sample {
            key: sample.key.clone(),
            id: sample.id,
            reason: format!(
                "has no image field ({}); its fields are: {}",
                IMAGE_FIELDS.join(", "),
                sample
                    .fields
                    .iter()
                    .map(|f| f.ext.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        })
}

/// The label of a sample: its `cls` field as an integer, or -1 without one.
/// (The fetch stage has checked it against the manifest's classes.)
pub fn label(sample: &Sample) -> Result<i64> {
    tributary_common::sample::parse_label(sample, 0)
        .map(|label| label.unwrap_or(-1))
        .map_err(|reason| WorkerError::Sample {
            key: sample.key.clone(),
            id: sample.id,
            reason,
        })
}

/// Everything a [`BatchDecoder`] needs besides the augmentation.
#[derive(Debug, Clone)]
pub struct DecodeSetup {
    pub seed: u64,
    pub epoch: u64,
    /// Buffers of dropped batches kept for reuse.
    pub keep_buffers: usize,
    pub limits: DecodeLimits,
    /// Shared by every thread decoding for this loader.
    pub budget: Arc<PixelBudget>,
    pub on_error: OnError,
    /// Locates bad samples (shard, byte offset) for their errors.
    pub manifest: Arc<Manifest>,
}

/// A decoded batch and the samples left out of it (`on_error = skip`).
#[derive(Debug)]
pub struct Decoded {
    pub batch: Batch,
    /// One [`WorkerError::BadSample`] per skipped sample, in sample order.
    pub skipped: Vec<WorkerError>,
}

/// Decodes sample batches of one epoch into image batches.
#[derive(Debug)]
pub struct BatchDecoder {
    config: AugmentConfig,
    lut: NormLut,
    setup: DecodeSetup,
    f32_buffers: BufferPool<f32>,
    u8_buffers: BufferPool<u8>,
}

/// A sample whose key makes the decoder panic, in this crate's tests: the
/// hook that proves a panic in a decode thread becomes an error.
#[cfg(test)]
pub(crate) const PANIC_KEY: &str = "test/panic-in-decode";

impl BatchDecoder {
    pub fn new(config: &AugmentConfig, setup: DecodeSetup) -> Self {
        Self {
            config: config.clone(),
            lut: NormLut::new(config),
            f32_buffers: BufferPool::new(setup.keep_buffers),
            u8_buffers: BufferPool::new(setup.keep_buffers),
            setup,
        }
    }

    /// Decodes and augments one sample into `slot`: the format from the
    /// magic bytes, the size from the header (checked against the limit),
    /// then pixels from the shared budget, then the decode.
    fn one(&self, sample: &Sample, mut slot: Slot<'_>) -> Result<(), String> {
        #[cfg(test)]
        if sample.key == PANIC_KEY {
            panic!("injected decode panic");
        }
        let (config, lut, setup) = (&self.config, &self.lut, &self.setup);
        let (_, bytes) = image_field(sample).map_err(|e| match e {
            WorkerError::Sample { reason, .. } => reason,
            other => other.to_string(),
        })?;
        let kind = ImageKind::of(bytes)?;
        let pixels = setup.limits.check(kind, kind.dimensions(bytes)?)?;
        let _permit = setup.budget.acquire(pixels);
        if kind == ImageKind::Jpeg
            && jpeg::augment_jpeg(
                bytes,
                config,
                lut,
                (setup.seed, setup.epoch, sample.id),
                slot.reborrow(),
            )
            .is_ok()
        {
            return Ok(());
        }
        // PNG, and JPEGs libjpeg-turbo does not take (CMYK): the image crate.
        let image = augment::decode(bytes)?;
        let crop = augment::crop_params(
            config,
            setup.seed,
            setup.epoch,
            sample.id,
            image.width,
            image.height,
        );
        augment::augment_into(&image, crop, config, lut, slot)
    }

    /// [`Self::one`] with a panic caught and turned into the sample's error,
    /// so that a decoder bug fails one sample, not the trainer's process.
    fn one_caught(&self, sample: &Sample, slot: Slot<'_>) -> Result<(), WorkerError> {
        let outcome =
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| self.one(sample, slot)))
                .unwrap_or_else(|panic| {
                    Err(format!("the decoder panicked: {}", panic_message(&*panic)))
                });
        outcome.map_err(|reason| {
            bad_samples::bad_sample(&self.setup.manifest, sample.id, &sample.key, reason)
        })
    }

    /// Decodes and augments `samples` into batch `index`. Runs on the
    /// current rayon pool; every sample's randomness comes from
    /// `(seed, epoch, id)`, so the result does not depend on the number of
    /// threads. A bad sample fails the batch (`OnError::Raise`: the first
    /// bad one in sample order) or is left out of it (`OnError::Skip`).
    pub fn decode(&self, index: u64, samples: &[Sample]) -> Result<Decoded> {
        let per = self.config.image_len();
        let s = self.config.size as usize;
        let labels: Vec<Result<i64>> = samples.iter().map(label).collect();
        let one = |i: usize, slot: Slot<'_>| -> Result<(), WorkerError> {
            let sample = &samples[i];
            match &labels[i] {
                Err(WorkerError::Sample { reason, .. }) => Err(bad_samples::bad_sample(
                    &self.setup.manifest,
                    sample.id,
                    &sample.key,
                    reason.clone(),
                )),
                _ => self.one_caught(sample, slot),
            }
        };
        let (images, outcomes) = match self.config.layout {
            Layout::NchwF32 => {
                let (buf, outcomes) = fill(
                    &self.f32_buffers,
                    per,
                    samples.len(),
                    |out| Slot::F32(out),
                    &one,
                );
                (Images::F32(buf), outcomes)
            }
            Layout::NhwcU8 => {
                let (buf, outcomes) = fill(
                    &self.u8_buffers,
                    per,
                    samples.len(),
                    |out| Slot::U8(out),
                    &one,
                );
                (Images::U8(buf), outcomes)
            }
        };
        let mut keep = Vec::with_capacity(samples.len());
        let mut skipped = Vec::new();
        let mut skipped_ids = Vec::new();
        for (i, outcome) in outcomes.into_iter().enumerate() {
            match outcome {
                Ok(()) => keep.push(i),
                Err(error) if self.setup.on_error == OnError::Skip => {
                    skipped.push(error);
                    skipped_ids.push(samples[i].id);
                }
                Err(error) => return Err(error),
            }
        }
        let images = match images {
            Images::F32(mut buf) => {
                compact(&mut buf, per, &keep);
                Images::F32(buf)
            }
            Images::U8(mut buf) => {
                compact(&mut buf, per, &keep);
                Images::U8(buf)
            }
        };
        let n = keep.len();
        let shape = match self.config.layout {
            Layout::NchwF32 => [n, 3, s, s],
            Layout::NhwcU8 => [n, s, s, 3],
        };
        let batch = Batch {
            index,
            images,
            shape,
            labels: keep
                .iter()
                .map(|&i| *labels[i].as_ref().unwrap_or(&-1))
                .collect(),
            keys: keep.iter().map(|&i| samples[i].key.clone()).collect(),
            ids: keep.iter().map(|&i| samples[i].id).collect(),
            skipped_ids,
        };
        Ok(Decoded { batch, skipped })
    }
}

/// The text of a caught panic.
fn panic_message(panic: &(dyn std::any::Any + Send)) -> &str {
    panic
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| panic.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("(no message)")
}

/// Moves the `per`-element slots listed in `keep` (ascending) to the front
/// of `buf`, in order, and cuts off the rest.
fn compact<T: Copy>(buf: &mut Buffer<T>, per: usize, keep: &[usize]) {
    for (to, &from) in keep.iter().enumerate() {
        if to != from {
            buf.copy_within(from * per..(from + 1) * per, to * per);
        }
    }
    buf.truncate(keep.len() * per);
}

/// A buffer from `pool` with each of `n` samples written into its
/// `per`-element slot by `one`, the samples spread over the current rayon
/// pool one per task; and each sample's outcome.
fn fill<T: Copy + Default + Send>(
    pool: &BufferPool<T>,
    per: usize,
    n: usize,
    slot: fn(&mut [T]) -> Slot<'_>,
    one: &(impl Fn(usize, Slot<'_>) -> Result<(), WorkerError> + Sync),
) -> (Buffer<T>, Vec<Result<(), WorkerError>>) {
    let mut buf = pool.take(n * per);
    let outcomes = buf
        .par_chunks_mut(per)
        .enumerate()
        .with_max_len(1)
        .map(|(i, out)| one(i, slot(out)))
        .collect();
    (buf, outcomes)
}
