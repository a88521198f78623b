//! Decoding: a batch's samples into its columns on the rayon pool. Each
//! field of [`Fields`] is decoded by its kind: images (JPEG via
//! libjpeg-turbo, PNG, WebP) checked against the pixel limits and rendered
//! through the [`Transform`] into their slot of one buffer; labels, text,
//! JSON, arrays and raw bytes into values. Bad samples raise or are
//! skipped; and the stage that runs it batch after batch ([`decode()`]).
//!
//! - [`transform`]: the presets (`train`, `eval`, `resize`, `none`), output
//!   size, dtype, layout and normalisation; where each image goes.
//! - [`render`]: resampling, flipping, padding, normalising into a slot;
//!   `resample`: the resampling's two passes, in the cheaper order.
//! - [`jpeg`]: libjpeg-turbo decoding of the region a plan needs, with DCT
//!   scaling.
//! - [`fields`]: field names, their decoders, and how their values become
//!   the batch's columns.
//! - [`npy`]: `.npy` arrays.
//! - [`pixels`]: formats by magic bytes, header dimensions, pixel limits
//!   and the pixel budget decode threads share.
//! - [`bad_samples`]: what a bad sample does and where it is.

pub mod bad_samples;
pub mod fields;
pub mod jpeg;
pub mod npy;
pub mod pixels;
mod place;
pub mod render;
mod resample;
pub mod restart_markers;
pub mod restarts;
pub mod transform;

use std::sync::Arc;
use std::time::Instant;

use futures::stream::{self, Stream, StreamExt};
use rayon::prelude::*;
use rayon::ThreadPool;
use tokio::sync::oneshot;
use tributary_common::sample::Sample;

use self::bad_samples::{BadTally, OnError};
use self::fields::{column, decode_value, Decoder, Fields, Value};
use self::pixels::{DecodeLimits, ImageKind, PixelBudget};
use self::render::{NormLut, Slot};
use self::transform::{Dtype, Layout, Plan, Transform};
use super::buffers::{Buffer, BufferPool};
use super::config::LoaderConfig;
use super::cut::SampleBatch;
use super::datasets::Datasets;
use super::metrics::Metrics;
use super::output::{Batch, Images};
use crate::error::{Result, WorkerError};

/// What is done with a decoded view `(width, height, RGB8 pixels)` and
/// the plan within it.
type Renderer<'a, T> = dyn FnMut((u32, u32, &[u8]), &Plan) -> Result<T, String> + 'a;

/// Everything a [`BatchDecoder`] needs besides the transform and fields.
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
    /// The most bytes one batch's samples may carry into decoding
    /// (`DecodeConfig::max_batch_bytes`): what its byte, text, JSON and
    /// array fields are made from, which no image size bounds.
    pub max_batch_bytes: u64,
    /// Locates bad samples (shard, byte offset) for their errors, and tells
    /// which dataset each sample comes from.
    pub datasets: Datasets,
}

/// A decoded batch and the samples left out of it (`on_error = skip`).
#[derive(Debug)]
pub struct Decoded {
    pub batch: Batch,
    /// One [`WorkerError::BadSample`] per skipped sample, in sample order.
    pub skipped: Vec<WorkerError>,
}

/// Decodes sample batches of one epoch into batches of columns.
#[derive(Debug)]
pub struct BatchDecoder {
    transform: Transform,
    fields: Fields,
    lut: NormLut,
    setup: DecodeSetup,
    f32_buffers: BufferPool<f32>,
    u8_buffers: BufferPool<u8>,
}

/// A sample whose key makes the decoder panic, in this crate's tests: the
/// hook that proves a panic in a decode thread becomes an error.
#[cfg(test)]
pub(crate) const PANIC_KEY: &str = "test/panic-in-decode";

/// The largest output image at its own size (preset `none`), in bytes:
/// float32 makes 12 bytes of a pixel, so without it an image within
/// [`DecodeLimits::max_image_pixels`] could ask for gigabytes. Every other
/// preset renders to a bounded target size.
pub const MAX_OWN_IMAGE_BYTES: usize = 1 << 30;

impl BatchDecoder {
    pub fn new(transform: &Transform, fields: &Fields, setup: DecodeSetup) -> Self {
        let images = fields.images().max(1);
        Self {
            transform: transform.clone(),
            fields: fields.clone(),
            lut: NormLut::new(transform),
            f32_buffers: BufferPool::new(setup.keep_buffers * images),
            u8_buffers: BufferPool::new(setup.keep_buffers * images),
            setup,
        }
    }

    /// Decodes image `bytes` of sample `id`: the format from the magic
    /// bytes, the size from the header (checked against the limit), then
    /// pixels from the shared budget, then the decode of what the plan
    /// needs, rendered by `then` into the slot it is given.
    fn image<T>(&self, id: u64, bytes: &[u8], then: &mut Renderer<'_, T>) -> Result<T, String> {
        let (config, setup) = (&self.transform, &self.setup);
        let kind = ImageKind::of(bytes)?;
        let pixels = setup.limits.check(kind, kind.dimensions(bytes)?)?;
        let _permit = setup.budget.acquire(pixels);
        let plan_for = |w, h| config.plan(setup.seed, setup.epoch, id, w, h);
        if kind == ImageKind::Jpeg {
            // Reduced-DCT decoding for random training crops, and where
            // asked for: eval and resize match a full decode by default, as
            // torchvision's pipelines see it.
            let dct_scaling = config.preset == transform::Preset::Train || config.reduced_dct;
            match jpeg::decode_for(bytes, dct_scaling, plan_for, &mut *then) {
                Ok(done) => return Ok(done),
                // A damaged JPEG is a bad sample: the image crate would
                // fill in what is missing and say nothing.
                Err(jpeg::Failure::Corrupt(reason)) => return Err(reason),
                Err(jpeg::Failure::Unsupported(_)) => {}
            }
        }
        // PNG, WebP, and JPEGs libjpeg-turbo does not take (CMYK): the
        // image crate.
        let image = render::decode(bytes)?;
        let plan = plan_for(image.width, image.height);
        then((image.width, image.height, &image.pixels), &plan)
    }

    /// An image of its own size (preset `none`).
    fn own_image(&self, id: u64, bytes: &[u8]) -> Result<Value, String> {
        let (config, lut) = (&self.transform, &self.lut);
        self.image(id, bytes, &mut |view, plan| {
            let (w, h) = plan.out;
            let shape = config.image_shape(h as usize, w as usize);
            let len = 3 * w as usize * h as usize;
            let bytes = len.saturating_mul(match config.dtype {
                Dtype::U8 => 1,
                Dtype::F32 => 4,
            });
            if bytes > MAX_OWN_IMAGE_BYTES {
                return Err(format!(
                    "the image is {w}x{h}: at its own size (preset none) as {:?} it would take \
                     {bytes} bytes, over the limit of {MAX_OWN_IMAGE_BYTES} bytes per image; pass \
                     dtype=uint8 or resize it (preset resize, image_size=...)",
                    config.dtype
                ));
            }
            let images = match config.dtype {
                Dtype::U8 => {
                    let mut out = vec![0u8; len];
                    render::render(view, plan, config, lut, Slot::U8(&mut out))?;
                    Images::U8(Buffer::unpooled(out))
                }
                Dtype::F32 => {
                    let mut out = vec![0f32; len];
                    render::render(view, plan, config, lut, Slot::F32(&mut out))?;
                    Images::F32(Buffer::unpooled(out))
                }
            };
            Ok(Value::Image(images, shape))
        })
    }

    /// Decodes one sample's fields: images into `slots` (one per image
    /// field, in order; none for preset `none`), the rest into values.
    fn one(&self, sample: &Sample, mut slots: Vec<Slot<'_>>) -> Result<Vec<Value>, String> {
        #[cfg(test)]
        if sample.key == PANIC_KEY {
            panic!("injected decode panic");
        }
        // A damaged chunk's placeholder (see `parse`): its reason.
        if let Some(reason) = sample.field(crate::pipeline::parse::DAMAGED_FIELD) {
            return Err(String::from_utf8_lossy(reason).into_owned());
        }
        let mut slots = slots.iter_mut();
        let mut values = Vec::with_capacity(self.fields.0.len());
        for spec in &self.fields.0 {
            let field = spec.find(sample);
            if field.is_none() && !spec.optional {
                let has: Vec<&str> = sample.fields.iter().map(|f| f.ext.as_str()).collect();
                return Err(format!(
                    "has no `{}` field ({}); its fields are: {}",
                    spec.name,
                    spec.extensions.join(", "),
                    has.join(", ")
                ));
            }
            let value = match (spec.decoder, field) {
                (Decoder::Image, Some(field)) if self.transform.fixed_size() => {
                    let slot = slots.next().ok_or("an image field without a slot")?;
                    let (config, lut) = (&self.transform, &self.lut);
                    self.image(sample.id, &field.data, &mut |view, plan| {
                        render::render(view, plan, config, lut, slot.reborrow())
                    })
                    .map(|()| Value::InSlot)
                }
                (Decoder::Image, Some(field)) => self.own_image(sample.id, &field.data),
                (decoder, field) => decode_value(decoder, field),
            };
            // Value errors name their extension; an image's names the field
            // only where there are several.
            values.push(value.map_err(|reason| {
                if spec.decoder == Decoder::Image && self.fields.images() > 1 {
                    format!("field `{}`: {reason}", spec.name)
                } else {
                    reason
                }
            })?);
        }
        Ok(values)
    }

    /// Refuses a batch whose samples carry more bytes than a batch may
    /// hold: its fields' columns are made from them (byte fields as they
    /// are, text, JSON and arrays copied), so decoding it would hold them
    /// all, and a loader holds several batches.
    fn check_carried(&self, batch: &SampleBatch) -> Result<()> {
        let carried: u64 = batch.samples.iter().map(|s| s.payload_bytes() as u64).sum();
        if carried <= self.setup.max_batch_bytes {
            return Ok(());
        }
        let largest = batch.samples.iter().max_by_key(|s| s.payload_bytes());
        Err(WorkerError::Config(format!(
            "batch {} of {} samples carries {carried} bytes of fields (the largest, {:?}, {} \
             bytes), over the budget of {} bytes per batch (max_batch_bytes: --max-batch-mib, \
             max_batch_mib= in Python): \
             lower the batch size, or raise the budget where the machine has the memory",
            batch.index,
            batch.samples.len(),
            largest.map_or("", |s| s.key.as_str()),
            largest.map_or(0, |s| s.payload_bytes()),
            self.setup.max_batch_bytes,
        )))
    }

    /// [`Self::one`] with a panic caught and turned into the sample's error,
    /// so that a decoder bug fails one sample, not the trainer's process.
    fn one_caught(&self, sample: &Sample, slots: Vec<Slot<'_>>) -> Result<Vec<Value>, WorkerError> {
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| self.one(sample, slots)))
            .unwrap_or_else(|panic| {
                Err(format!("the decoder panicked: {}", panic_message(&*panic)))
            })
            .map_err(|reason| {
                bad_samples::bad_sample(&self.setup.datasets, sample.id, &sample.key, reason)
            })
    }

    /// Decodes `batch` into batch `batch.index`. Runs on the current rayon
    /// pool; every sample's randomness comes from `(seed, epoch, id)`, so
    /// the result does not depend on the number of threads. A bad sample
    /// fails the batch (`OnError::Raise`: the first bad one in sample order)
    /// or is left out of it (`OnError::Skip`).
    pub fn decode(&self, batch: &SampleBatch) -> Result<Decoded> {
        let samples = &batch.samples;
        let n = samples.len();
        self.check_carried(batch)?;
        let dense = self.transform.fixed_size();
        let per = if dense { self.transform.image_len() } else { 0 };
        let image_fields = if dense { self.fields.images() } else { 0 };
        let mut buffers: Vec<Images> = (0..image_fields)
            .map(|_| match self.transform.dtype {
                Dtype::F32 => Images::F32(self.f32_buffers.take(n * per)),
                Dtype::U8 => Images::U8(self.u8_buffers.take(n * per)),
            })
            .collect();
        // Each sample's slots: its part of every image buffer.
        let mut slots: Vec<Vec<Slot<'_>>> =
            (0..n).map(|_| Vec::with_capacity(image_fields)).collect();
        for buffer in &mut buffers {
            match buffer {
                Images::F32(buf) => buf
                    .chunks_mut(per.max(1))
                    .zip(&mut slots)
                    .for_each(|(out, s)| s.push(Slot::F32(out))),
                Images::U8(buf) => buf
                    .chunks_mut(per.max(1))
                    .zip(&mut slots)
                    .for_each(|(out, s)| s.push(Slot::U8(out))),
            }
        }
        let outcomes: Vec<Result<Vec<Value>, WorkerError>> = slots
            .into_par_iter()
            .enumerate()
            .with_max_len(1)
            .map(|(i, slots)| self.one_caught(&samples[i], slots))
            .collect();
        let mut keep = Vec::with_capacity(n);
        let mut rows = Vec::with_capacity(n);
        let mut skipped = Vec::new();
        let mut skipped_ids = Vec::new();
        for (i, outcome) in outcomes.into_iter().enumerate() {
            match outcome {
                Ok(values) => {
                    keep.push(i);
                    rows.push(values);
                }
                Err(error) if self.setup.on_error == OnError::Skip => {
                    skipped.push(error);
                    skipped_ids.push(samples[i].id);
                }
                Err(error) => return Err(error),
            }
        }
        let kept = keep.len();
        let (h, w) = (
            self.transform.size.height as usize,
            self.transform.size.width as usize,
        );
        let shape = match self.transform.layout {
            Layout::Nchw => [kept, 3, h, w],
            Layout::Nhwc => [kept, h, w, 3],
        };
        let mut dense_columns = buffers.into_iter().map(|images| {
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
            (images, shape)
        });
        // Transpose the kept samples' values into one column per field.
        let fields = self.fields.0.len();
        let mut by_field: Vec<Vec<Value>> = (0..fields).map(|_| Vec::with_capacity(kept)).collect();
        for row in rows {
            for (f, value) in row.into_iter().enumerate() {
                by_field[f].push(value);
            }
        }
        let columns = by_field
            .into_iter()
            .zip(&self.fields.0)
            .map(|(values, spec)| {
                let dense = (dense && spec.decoder == Decoder::Image)
                    .then(|| dense_columns.next())
                    .flatten();
                column(values, dense)
            })
            .collect();
        let first_pad = n - batch.padded.min(n);
        let batch = Batch {
            index: batch.index,
            columns,
            padded: keep.iter().filter(|&&i| i >= first_pad).count(),
            keys: keep.iter().map(|&i| samples[i].key.clone()).collect(),
            ids: keep.iter().map(|&i| samples[i].id).collect(),
            sources: keep
                .iter()
                .map(|&i| self.setup.datasets.source_of(samples[i].id))
                .collect(),
            skipped_ids,
        };
        Ok(Decoded { batch, skipped })
    }
}

/// The image field of a sample (`jpg`, `jpeg`, `png` or `webp`):
/// `(extension, bytes)`.
pub fn image_field(sample: &Sample) -> Result<(&str, &[u8])> {
    fields::IMAGE_EXTENSIONS
        .iter()
        .find_map(|ext| {
            sample
                .fields
                .iter()
                .find(|f| f.ext.eq_ignore_ascii_case(ext))
        })
        .map(|f| (f.ext.as_str(), &f.data[..]))
        .ok_or_else(|| WorkerError::Sample {
            key: sample.key.clone(),
            id: sample.id,
            reason: "has no image field (jpg, jpeg, png, webp)".into(),
        })
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

/// The decode stage: the sample batches of `batches` decoded on the rayon
/// pool, `decode_batches_in_flight` at once, into ready batches, in order.
/// Skipped samples are counted, logged and checked against the bad-sample
/// cap here, in batch order, so a run fails at the same batch every time.
/// Errors pass through in their place.
pub fn decode(
    batches: impl Stream<Item = Result<SampleBatch>> + Send + 'static,
    pool: Arc<ThreadPool>,
    config: &LoaderConfig,
    setup: DecodeSetup,
    mut tally: BadTally,
    metrics: Arc<Metrics>,
) -> impl Stream<Item = Result<Batch>> + Send + 'static {
    let in_flight = config.decode.decode_batches_in_flight;
    let decoder = Arc::new(BatchDecoder::new(
        &config.decode.transform,
        &config.decode.fields,
        setup,
    ));
    let counter = Arc::clone(&metrics);
    let decode_one = move |item: Result<SampleBatch>| {
        let pool = Arc::clone(&pool);
        let (decoder, metrics) = (Arc::clone(&decoder), Arc::clone(&metrics));
        async move {
            let batch = item?;
            let index = batch.index;
            let (done_tx, done_rx) = oneshot::channel();
            pool.spawn(move || {
                let samples = batch.samples.len();
                let started = Instant::now();
                // Samples' panics are caught one by one; this catches the
                // rest, since a panic escaping a rayon `spawn` aborts.
                let decoded = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    decoder.decode(&batch)
                }))
                .unwrap_or_else(|_| {
                    Err(WorkerError::Stopped(format!(
                        "decoding batch {index} panicked"
                    )))
                })
                .map(|decoded| (decoded, samples as u64));
                metrics.record_decode(started.elapsed(), samples);
                let _ = done_tx.send(decoded);
            });
            done_rx
                .await
                .map_err(|_| WorkerError::Stopped("a decode task was lost".into()))?
        }
    };
    let count = move |decoded: Result<(Decoded, u64)>| -> Result<Batch> {
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
        counter.record_bad(decoded.skipped.len() as u64);
        tally.record(samples, &decoded.skipped)?;
        Ok(decoded.batch)
    };
    // The first batch is decoded alone, on every thread: with a second one
    // beside it, the threads would share out both and the first would come
    // out only when both are nearly done. The next ones start once it is
    // handed on.
    stream::once(Box::pin(batches).into_future())
        .flat_map(move |(first, rest)| {
            let first = stream::iter(first).then(decode_one.clone());
            first.chain(rest.map(decode_one.clone()).buffered(in_flight))
        })
        .map(count)
}
