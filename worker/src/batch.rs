//! Batches: one contiguous image buffer plus labels, keys and sample ids,
//! and the function that decodes a batch's samples into it on a rayon pool.

use rayon::prelude::*;
use tributary_common::sample::Sample;

use crate::augment::{self, AugmentConfig, Layout, NormLut, Slot};
use crate::buffers::{Buffer, BufferPool};
use crate::error::{Result, WorkerError};
use crate::jpeg;

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
}

impl Batch {
    /// Number of samples.
    pub fn len(&self) -> usize {
        self.ids.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
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

/// Decodes sample batches of one epoch into image batches.
#[derive(Debug)]
pub struct BatchDecoder {
    config: AugmentConfig,
    lut: NormLut,
    seed: u64,
    epoch: u64,
    f32_buffers: BufferPool<f32>,
    u8_buffers: BufferPool<u8>,
}

impl BatchDecoder {
    /// A decoder for epoch `epoch` of a job seeded with `seed`, keeping up to
    /// `keep_buffers` buffers of dropped batches for reuse.
    pub fn new(config: &AugmentConfig, seed: u64, epoch: u64, keep_buffers: usize) -> Self {
        Self {
            config: config.clone(),
            lut: NormLut::new(config),
            seed,
            epoch,
            f32_buffers: BufferPool::new(keep_buffers),
            u8_buffers: BufferPool::new(keep_buffers),
        }
    }

    /// Decodes and augments `samples` into batch `index`. Runs on the
    /// current rayon pool; every sample's randomness comes from
    /// `(seed, epoch, id)`, so the result does not depend on the number of
    /// threads.
    pub fn decode(&self, index: u64, samples: &[Sample]) -> Result<Batch> {
        let Self {
            ref config,
            ref lut,
            seed,
            epoch,
            ..
        } = *self;
        let n = samples.len();
        let per = config.image_len();
        let s = config.size as usize;
        let one = |sample: &Sample, mut slot: Slot<'_>| -> Result<()> {
            let fail = |reason: String| WorkerError::Sample {
                key: sample.key.clone(),
                id: sample.id,
                reason,
            };
            let (ext, bytes) = image_field(sample)?;
            if matches!(ext, "jpg" | "jpeg")
                && jpeg::augment_jpeg(
                    bytes,
                    config,
                    lut,
                    (seed, epoch, sample.id),
                    slot.reborrow(),
                )
                .is_ok()
            {
                return Ok(());
            }
            // PNG, and JPEGs libjpeg-turbo does not take (CMYK): the image crate.
            let image = augment::decode(bytes, ext).map_err(fail)?;
            let crop =
                augment::crop_params(config, seed, epoch, sample.id, image.width, image.height);
            augment::augment_into(&image, crop, config, lut, slot).map_err(fail)
        };
        let (images, shape) = match config.layout {
            Layout::NchwF32 => (
                Images::F32(fill(
                    &self.f32_buffers,
                    per,
                    samples,
                    |out| Slot::F32(out),
                    &one,
                )?),
                [n, 3, s, s],
            ),
            Layout::NhwcU8 => (
                Images::U8(fill(
                    &self.u8_buffers,
                    per,
                    samples,
                    |out| Slot::U8(out),
                    &one,
                )?),
                [n, s, s, 3],
            ),
        };
        Ok(Batch {
            index,
            images,
            shape,
            labels: samples.iter().map(label).collect::<Result<_>>()?,
            keys: samples.iter().map(|s| s.key.clone()).collect(),
            ids: samples.iter().map(|s| s.id).collect(),
        })
    }
}

/// A buffer from `pool` with each sample written into its `per`-element slot
/// by `one`, the samples spread over the current rayon pool one per task.
fn fill<T: Copy + Default + Send>(
    pool: &BufferPool<T>,
    per: usize,
    samples: &[Sample],
    slot: fn(&mut [T]) -> Slot<'_>,
    one: &(impl Fn(&Sample, Slot<'_>) -> Result<()> + Sync),
) -> Result<Buffer<T>> {
    let mut buf = pool.take(samples.len() * per);
    buf.par_chunks_mut(per)
        .zip(samples.par_iter())
        .with_max_len(1)
        .try_for_each(|(out, sample)| one(sample, slot(out)))?;
    Ok(buf)
}
