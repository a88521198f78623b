//! Decoding: a batch's samples into one image buffer on the rayon pool,
//! each image decoded (JPEG via libjpeg-turbo, PNG), checked against the
//! pixel limits, augmented and written into its slot; bad samples raise or
//! are skipped; and the stage that runs it batch after batch.
//!
//! - [`augment`]: RandomResizedCrop, flip, resize, normalise into a slot.
//! - [`jpeg`]: libjpeg-turbo decoding with DCT scaling.
//! - [`pixels`]: formats by magic bytes, header dimensions, pixel limits
//!   and the pixel budget decode threads share.
//! - [`bad_samples`]: what a bad sample does and where it is.

pub mod augment;
pub mod bad_samples;
pub mod jpeg;
pub mod npy;
pub mod pixels;

use std::pin::pin;
use std::sync::Arc;
use std::time::Instant;

use futures::stream::{self, StreamExt};
use rayon::prelude::*;
use rayon::ThreadPool;
use tokio::sync::{mpsc, oneshot};
use tributary_common::manifest::Manifest;
use tributary_common::sample::Sample;

use self::augment::{AugmentConfig, Layout, NormLut, Slot};
use self::bad_samples::{BadTally, OnError};
use self::pixels::{DecodeLimits, ImageKind, PixelBudget};
use super::batch::{Batch, Images};
use super::buffers::{Buffer, BufferPool};
use super::config::LoaderConfig;
use super::metrics::Metrics;
use crate::error::{Result, WorkerError};

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

/// Decode sample batches on the rayon pool, in order, into ready batches.
/// Skipped samples are counted, logged and checked against the bad-sample
/// cap here, in batch order, so a run fails at the same batch every time.
pub(super) async fn decode_stage(
    pool: Arc<ThreadPool>,
    config: LoaderConfig,
    setup: DecodeSetup,
    mut tally: BadTally,
    metrics: Arc<Metrics>,
    rx: mpsc::Receiver<Result<(u64, Vec<Sample>)>>,
    tx: mpsc::Sender<Result<Batch>>,
) {
    let decoder = Arc::new(BatchDecoder::new(&config.augment, setup));
    let decode_one = |item: Result<(u64, Vec<Sample>)>| {
        let pool = Arc::clone(&pool);
        let (decoder, metrics) = (Arc::clone(&decoder), Arc::clone(&metrics));
        async move {
            let (index, samples) = item?;
            let (done_tx, done_rx) = oneshot::channel();
            pool.spawn(move || {
                let started = Instant::now();
                // Samples' panics are caught one by one; this catches the
                // rest, since a panic escaping a rayon `spawn` aborts.
                let decoded = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    decoder.decode(index, &samples)
                }))
                .unwrap_or_else(|_| {
                    Err(WorkerError::Stopped(format!(
                        "decoding batch {index} panicked"
                    )))
                })
                .map(|decoded| (decoded, samples.len() as u64));
                metrics.record_decode(started.elapsed());
                let _ = done_tx.send(decoded);
            });
            done_rx
                .await
                .map_err(|_| WorkerError::Stopped("a decode task was lost".into()))?
        }
    };
    let mut count = |decoded: Result<(Decoded, u64)>| -> Result<Batch> {
        let (decoded, samples) = decoded?;
        for skipped in &decoded.skipped {
            if let WorkerError::BadSample {
                shard,
                offset,
                key,
                id,
                reason,
            } = skipped
            {
                tracing::warn!(%shard, offset, %key, id, %reason, "skipped a bad sample");
            }
        }
        metrics.record_bad(decoded.skipped.len() as u64);
        tally.record(samples, &decoded.skipped)?;
        Ok(decoded.batch)
    };
    // The first batch is decoded alone, on every thread: with a second one
    // beside it, the threads would share out both and the first would come
    // out only when both are nearly done.
    let mut rx = rx;
    let Some(first) = rx.recv().await else {
        return;
    };
    let batch = count(decode_one(first).await);
    let failed = batch.is_err();
    if tx.send(batch).await.is_err() || failed {
        return;
    }
    let incoming = stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|item| (item, rx))
    });
    let mut ready = pin!(incoming
        .map(decode_one)
        .buffered(config.decode_batches_in_flight));
    while let Some(decoded) = ready.next().await {
        let batch = count(decoded);
        let failed = batch.is_err();
        if tx.send(batch).await.is_err() || failed {
            return;
        }
    }
}
