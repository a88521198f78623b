//! The per-rank loader: fetch -> parse -> shuffle -> decode/augment -> batch.
//!
//! ```text
//!  object store ──range GETs (bounded count + bytes)──▶ parse (blocking pool)
//!     ──▶ shuffle buffer (seeded, bounded) ──▶ sample batches (bounded channel)
//!     ──▶ decode + augment (rayon pool, batches in flight bounded)
//!     ──▶ ready batches (bounded prefetch queue) ──▶ Loader::next()
//! ```
//!
//! Every queue has a bound, so memory is bounded whatever the consumer does;
//! a slow consumer back-pressures all the way to the GETs. Batches come out in
//! a deterministic order: a pure function of (seed, epoch, spans).

use std::pin::pin;
use std::sync::Arc;
use std::time::Instant;

use futures::stream::{self, BoxStream, StreamExt};
use rayon::ThreadPool;
use tokio::sync::{mpsc, oneshot};
use tokio_stream::wrappers::ReceiverStream;
use tributary_common::manifest::Manifest;
use tributary_common::plan::{epoch_spans, split_equal, Remainder};
use tributary_common::sample::Sample;
use tributary_common::span::SpanSet;

use crate::augment::{AugmentConfig, Layout};
use crate::bad_samples::{self, BadTally, OnError};
use crate::batch::{Batch, BatchDecoder, DecodeSetup};
use crate::error::{Result, WorkerError};
use crate::fetch::{fetch_input, FetchConfig, Input, Output};
use crate::metrics::{Metrics, MetricsSnapshot};
use crate::pixels::{DecodeLimits, PixelBudget};
use crate::shuffle::ShuffleBuffer;
use tributary_io::Dataset;

/// Everything that shapes a loader's output and its resource bounds.
#[derive(Debug, Clone)]
pub struct LoaderConfig {
    pub seed: u64,
    pub epoch: u64,
    /// Membership generation (0 without a coordinator); seeds the shuffle.
    pub generation: u64,
    /// This rank, and the number of ranks sharing the epoch.
    pub rank: usize,
    pub world: usize,
    pub batch_size: usize,
    /// Drop the last batch of the epoch when it is short.
    pub drop_last: bool,
    /// Samples held by the shuffle buffer (0: no shuffling within shards).
    pub shuffle_buffer: usize,
    /// Ready batches queued ahead of the consumer.
    pub prefetch_batches: usize,
    /// Batches being decoded at once (keeps every core busy at batch ends).
    pub decode_batches_in_flight: usize,
    /// Threads of the decode pool, when the loader builds its own.
    pub decode_threads: usize,
    /// Which of the epoch's batches this loader decodes and yields.
    pub stripe: Stripe,
    pub augment: AugmentConfig,
    pub fetch: FetchConfig,
    /// Per-image pixel limit and the pixels all decode threads hold at once.
    pub decode_limits: DecodeLimits,
    /// What a bad sample does: end the epoch (the default) or get skipped;
    /// see [`crate::bad_samples`] for batch sizes and determinism.
    pub on_error: OnError,
    /// With `on_error = Skip`, the largest fraction of the epoch's samples
    /// that may be skipped before the loader fails (default 0.01).
    pub max_bad_fraction: f64,
}

/// The largest values [`LoaderConfig::validate`] accepts: beyond them a
/// setting is a typo, and it would size an allocation the machine does not
/// have (the command line and the Python binding check against these too).
pub mod limits {
    /// Ranks in a world.
    pub const MAX_WORLD: usize = 1 << 16;
    /// Samples in a batch.
    pub const MAX_BATCH_SIZE: usize = 1 << 16;
    /// Output side length.
    pub const MAX_IMAGE_SIZE: u32 = 4096;
    /// Bytes of one batch's image buffer (batch x 3 x size^2 x element).
    pub const MAX_BATCH_BYTES: u64 = 16 << 30;
    /// Samples in the shuffle buffer.
    pub const MAX_SHUFFLE_BUFFER: usize = 1 << 24;
    /// Prefetched batches, batches in flight, decode threads, stripes.
    pub const MAX_QUEUE: usize = 1024;
    /// Range requests in flight.
    pub const MAX_REQUESTS: usize = 4096;
    /// Bytes fetched and in flight (1 TiB).
    pub const MAX_BYTES_IN_FLIGHT: u64 = 1 << 40;
    /// Bytes of one range request (4 GiB).
    pub const MAX_READ_BYTES: u64 = 1 << 32;
}

impl Default for LoaderConfig {
    fn default() -> Self {
        Self {
            seed: 0,
            epoch: 0,
            generation: 0,
            rank: 0,
            world: 1,
            batch_size: 64,
            drop_last: false,
            shuffle_buffer: 1024,
            prefetch_batches: 4,
            decode_batches_in_flight: 2,
            decode_threads: std::thread::available_parallelism().map_or(1, usize::from),
            stripe: Stripe::default(),
            augment: AugmentConfig::default(),
            fetch: FetchConfig::default(),
            decode_limits: DecodeLimits::default(),
            on_error: OnError::Raise,
            max_bad_fraction: 0.01,
        }
    }
}

impl LoaderConfig {
    /// Checks the settings, naming the bad one and its bounds.
    pub fn validate(&self) -> Result<()> {
        use limits::*;
        let bad = |m: String| Err(WorkerError::Config(m));
        let ranged = |name: &str, value: u64, max: u64| {
            if (1..=max).contains(&value) {
                Ok(())
            } else {
                bad(format!("{name} is {value}; it must be between 1 and {max}"))
            }
        };
        ranged("batch_size", self.batch_size as u64, MAX_BATCH_SIZE as u64)?;
        ranged("world", self.world as u64, MAX_WORLD as u64)?;
        if self.rank >= self.world {
            return bad(format!(
                "rank {} is outside a world of {} ranks",
                self.rank, self.world
            ));
        }
        if self.shuffle_buffer > MAX_SHUFFLE_BUFFER {
            return bad(format!(
                "shuffle_buffer is {}; it must be at most {MAX_SHUFFLE_BUFFER}",
                self.shuffle_buffer
            ));
        }
        for (name, value) in [
            ("prefetch_batches", self.prefetch_batches),
            ("decode_batches_in_flight", self.decode_batches_in_flight),
            ("decode_threads", self.decode_threads),
            ("stripe count", self.stripe.count),
        ] {
            ranged(name, value as u64, MAX_QUEUE as u64)?;
        }
        if self.stripe.index >= self.stripe.count {
            return bad(format!(
                "stripe {} of {} does not exist (stripes are numbered from 0)",
                self.stripe.index, self.stripe.count
            ));
        }
        ranged(
            "fetch.max_requests",
            self.fetch.max_requests as u64,
            MAX_REQUESTS as u64,
        )?;
        ranged(
            "fetch.max_bytes_in_flight",
            self.fetch.max_bytes_in_flight,
            MAX_BYTES_IN_FLIGHT,
        )?;
        ranged(
            "fetch.max_read_bytes",
            self.fetch.max_read_bytes,
            MAX_READ_BYTES,
        )?;
        ranged(
            "fetch.first_read_bytes",
            self.fetch.first_read_bytes,
            MAX_READ_BYTES,
        )?;
        ranged(
            "image size",
            u64::from(self.augment.size),
            u64::from(MAX_IMAGE_SIZE),
        )?;
        let element = match self.augment.layout {
            Layout::NchwF32 => 4,
            Layout::NhwcU8 => 1,
        };
        let batch_bytes = self.batch_size as u64 * self.augment.image_len() as u64 * element;
        if batch_bytes > MAX_BATCH_BYTES {
            return bad(format!(
                "a batch of {} images of {}x{} takes {batch_bytes} bytes, over the limit of {MAX_BATCH_BYTES}",
                self.batch_size, self.augment.size, self.augment.size
            ));
        }
        self.decode_limits.validate().map_err(WorkerError::Config)?;
        bad_samples::validate_fraction(self.max_bad_fraction).map_err(WorkerError::Config)?;
        self.augment.validate().map_err(WorkerError::Config)
    }
}

/// Every `count`-th batch of the epoch, starting at batch `index`.
///
/// The loaders of a rank's `count` DataLoader worker processes each read the
/// rank's whole part but decode only their stripe (the others are dropped
/// before decoding); taking one batch from each stripe in turn gives the
/// unstriped order, which is what PyTorch's DataLoader does with its workers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stripe {
    pub index: usize,
    pub count: usize,
}

impl Default for Stripe {
    /// Every batch.
    fn default() -> Self {
        Self { index: 0, count: 1 }
    }
}

impl Stripe {
    /// Whether batch `batch` of the epoch is in this stripe.
    pub fn keeps(self, batch: u64) -> bool {
        batch % self.count as u64 == self.index as u64
    }
}

/// Builds a [`Loader`].
#[derive(Debug)]
pub struct LoaderBuilder {
    dataset: Dataset,
    spans: Option<SpanSet>,
    input: Option<mpsc::Receiver<Input>>,
    config: LoaderConfig,
    pool: Option<Arc<ThreadPool>>,
    budget: Option<Arc<PixelBudget>>,
}

impl LoaderBuilder {
    /// Replaces the whole configuration.
    pub fn config(mut self, config: LoaderConfig) -> Self {
        self.config = config;
        self
    }

    /// Reads exactly these spans instead of rank `rank`'s static share.
    pub fn spans(mut self, spans: SpanSet) -> Self {
        self.spans = Some(spans);
        self
    }

    /// Reads spans as they arrive on `input` (dynamic mode) instead of a
    /// fixed span set; the epoch ends when the sender is dropped. A
    /// [`Input::Flush`] empties the shuffle buffer and sends the partial
    /// batch, so that every sample read so far reaches the consumer.
    pub fn input(mut self, input: mpsc::Receiver<Input>) -> Self {
        self.input = Some(input);
        self
    }

    /// Decodes on this pool (shared between loaders) instead of a new one.
    pub fn decode_pool(mut self, pool: Arc<ThreadPool>) -> Self {
        self.pool = Some(pool);
        self
    }

    /// Takes decode pixels from this budget (shared with other loaders
    /// decoding on the same pool at the same time) instead of a new one of
    /// `decode_limits.max_pixels_in_flight` pixels.
    pub fn pixel_budget(mut self, budget: Arc<PixelBudget>) -> Self {
        self.budget = Some(budget);
        self
    }

    /// Starts the pipeline. Must be called within a tokio runtime.
    pub async fn build(self) -> Result<Loader> {
        let config = self.config;
        config.validate()?;
        let manifest = &self.dataset.manifest;
        let spans = self.spans.unwrap_or_else(|| {
            static_assignment(
                manifest,
                config.seed,
                config.epoch,
                config.rank,
                config.world,
            )
        });
        if let Some(span) = spans.spans().iter().find(|s| {
            s.shard as usize >= manifest.shards.len()
                || s.end > manifest.shards[s.shard as usize].samples
        }) {
            return Err(WorkerError::Config(format!(
                "span {}:{}..{} is outside the dataset ({} shards)",
                span.shard,
                span.start,
                span.end,
                manifest.shards.len()
            )));
        }
        let pool = match self.pool {
            Some(pool) => pool,
            None => decode_pool(config.decode_threads)?,
        };
        let budget = self.budget.unwrap_or_else(|| {
            Arc::new(PixelBudget::new(config.decode_limits.max_pixels_in_flight))
        });
        let metrics = Arc::new(Metrics::default());
        let samples = if self.input.is_some() { 0 } else { spans.len() };
        let setup = DecodeSetup {
            seed: config.seed,
            epoch: config.epoch,
            // Steady state needs a free buffer for each batch being decoded
            // and one more; buffers beyond that (a start-up peak) are freed
            // as they return.
            keep_buffers: config.decode_batches_in_flight + 1,
            limits: config.decode_limits,
            budget,
            on_error: config.on_error,
            manifest: Arc::clone(&self.dataset.manifest),
        };
        // A striped loader decodes only its stripe of the samples it reads.
        let tally = BadTally::new(
            config.max_bad_fraction,
            samples / config.stripe.count as u64,
        );
        let input = match self.input {
            Some(rx) => ReceiverStream::new(rx).boxed(),
            None => stream::iter(spans.spans().to_vec())
                .map(Input::Span)
                .boxed(),
        };
        let (sample_tx, sample_rx) = mpsc::channel(config.decode_batches_in_flight);
        let (batch_tx, batch_rx) = mpsc::channel(config.prefetch_batches);
        tokio::spawn(produce(
            self.dataset,
            input,
            config.clone(),
            Arc::clone(&metrics),
            sample_tx,
        ));
        tokio::spawn(decode(
            pool,
            config.clone(),
            setup,
            tally,
            Arc::clone(&metrics),
            sample_rx,
            batch_tx,
        ));
        Ok(Loader {
            batches: batch_rx,
            metrics,
            samples,
            batch_size: config.batch_size,
            drop_last: config.drop_last,
            done: false,
        })
    }
}

/// A pool of `threads` decode threads. Readers of several epochs share one:
/// new threads each epoch would grow the allocator's per-thread arenas.
pub fn decode_pool(threads: usize) -> Result<Arc<ThreadPool>> {
    rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .thread_name(|i| format!("tributary-decode-{i}"))
        .build()
        .map(Arc::new)
        .map_err(|e| WorkerError::Config(format!("cannot start the decode pool: {e}")))
}

/// Rank `rank`'s spans of epoch `epoch` when `world` ranks share the dataset
/// without a coordinator: the epoch's seeded shard order, split into equal
/// parts (the last `samples % world` samples dropped).
pub fn static_assignment(
    manifest: &Manifest,
    seed: u64,
    epoch: u64,
    rank: usize,
    world: usize,
) -> SpanSet {
    let counts: Vec<u32> = manifest.shards.iter().map(|s| s.samples).collect();
    let cut = epoch_spans(&counts, seed, epoch);
    split_equal(&cut, world, Remainder::Drop).swap_remove(rank)
}

/// One rank's stream of batches for one epoch.
#[derive(Debug)]
pub struct Loader {
    batches: mpsc::Receiver<Result<Batch>>,
    metrics: Arc<Metrics>,
    samples: u64,
    batch_size: usize,
    drop_last: bool,
    done: bool,
}

impl Loader {
    /// A builder reading `dataset`.
    pub fn builder(dataset: Dataset) -> LoaderBuilder {
        LoaderBuilder {
            dataset,
            spans: None,
            input: None,
            config: LoaderConfig::default(),
            pool: None,
            budget: None,
        }
    }

    /// The next batch; `None` at the end of the epoch. After an error the
    /// loader is finished.
    pub async fn next(&mut self) -> Option<Result<Batch>> {
        if self.done {
            return None;
        }
        let waiting = Instant::now();
        let item = self.batches.recv().await;
        match &item {
            Some(Ok(batch)) => self.metrics.record_delivery(batch.len(), waiting.elapsed()),
            Some(Err(_)) | None => self.done = true,
        }
        item
    }

    /// Samples this loader reads in the epoch.
    pub fn samples(&self) -> u64 {
        self.samples
    }

    /// Batches this loader yields in the epoch.
    pub fn batches(&self) -> u64 {
        let b = self.batch_size as u64;
        if self.drop_last {
            self.samples / b
        } else {
            self.samples.div_ceil(b)
        }
    }

    pub fn metrics(&self) -> MetricsSnapshot {
        self.metrics.snapshot()
    }
}

/// Fetch, parse and shuffle, sending batches of samples downstream.
async fn produce(
    dataset: Dataset,
    input: BoxStream<'static, Input>,
    config: LoaderConfig,
    metrics: Arc<Metrics>,
    tx: mpsc::Sender<Result<(u64, Vec<Sample>)>>,
) {
    let mut shuffle = ShuffleBuffer::new(
        config.shuffle_buffer,
        config.seed,
        config.epoch,
        config.generation,
        config.rank as u64,
    );
    let mut batcher = Batcher {
        pending: Vec::with_capacity(config.batch_size),
        size: config.batch_size,
        index: 0,
        stripe: config.stripe,
        tx: &tx,
    };
    let mut fetched = pin!(fetch_input(dataset, input, &config.fetch, metrics));
    while let Some(item) = fetched.next().await {
        let read = match item {
            Ok(Output::Samples(read)) => read,
            Ok(Output::Flush) => {
                for sample in shuffle.drain().collect::<Vec<_>>() {
                    if !batcher.push(sample).await {
                        return;
                    }
                }
                if !batcher.flush().await {
                    return;
                }
                continue;
            }
            Err(error) => {
                let _ = tx.send(Err(error)).await;
                return;
            }
        };
        for sample in read.samples {
            if let Some(out) = shuffle.push(sample) {
                if !batcher.push(out).await {
                    return;
                }
            }
        }
    }
    for sample in shuffle.drain().collect::<Vec<_>>() {
        if !batcher.push(sample).await {
            return;
        }
    }
    if !config.drop_last {
        batcher.flush().await;
    }
}

struct Batcher<'a> {
    pending: Vec<Sample>,
    size: usize,
    index: u64,
    stripe: Stripe,
    tx: &'a mpsc::Sender<Result<(u64, Vec<Sample>)>>,
}

impl Batcher<'_> {
    /// Sends the partial batch, if any; false once the consumer is gone.
    async fn flush(&mut self) -> bool {
        if self.pending.is_empty() {
            return true;
        }
        let part = std::mem::replace(&mut self.pending, Vec::with_capacity(self.size));
        let index = self.index;
        self.index += 1;
        // Batches of other stripes are dropped here, before decoding.
        !self.stripe.keeps(index) || self.tx.send(Ok((index, part))).await.is_ok()
    }

    /// Adds a sample, sending a full batch; false once the consumer is gone.
    async fn push(&mut self, sample: Sample) -> bool {
        self.pending.push(sample);
        self.pending.len() < self.size || self.flush().await
    }
}

/// Decode sample batches on the rayon pool, in order, into ready batches.
/// Skipped samples are counted, logged and checked against the bad-sample
/// cap here, in batch order, so a run fails at the same batch every time.
async fn decode(
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
    let mut count = |decoded: Result<(crate::batch::Decoded, u64)>| -> Result<Batch> {
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
