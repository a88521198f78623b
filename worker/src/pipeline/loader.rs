//! The loader: a builder that wires the stages together and the handle the
//! consumer reads batches from.
//!
//! ```text
//!  input (spans, or spans as they arrive)
//!     ──▶ fetch: range GETs (bounded count + bytes)     [fetch]
//!     ──▶ parse: verify + split into samples (blocking pool)     [parse]
//!     ──▶ shuffle buffer (seeded, bounded) ──▶ sample batches   [batch]
//!     ──▶ decode + augment (rayon pool, batches in flight bounded)   [decode]
//!     ──▶ ready batches (bounded prefetch queue) ──▶ Loader::next()
//! ```

use std::sync::Arc;

use futures::stream::{self, StreamExt};
use rayon::ThreadPool;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tributary_common::plan::assign::{ordered_assignment, static_assignment};
use tributary_common::plan::span::SpanSet;

use super::batch::{assemble, Batch};
use super::config::{LoaderConfig, Tail};
use super::datasets::Datasets;
use super::decode::bad_samples::BadTally;
use super::decode::pixels::PixelBudget;
use super::decode::{decode_stage, DecodeSetup};
use super::fetch::Input;
use super::metrics::{Metrics, MetricsSnapshot};
use crate::error::{Result, WorkerError};

/// Builds a [`Loader`].
#[derive(Debug)]
pub struct LoaderBuilder {
    dataset: Datasets,
    spans: Option<SpanSet>,
    input: Option<mpsc::Receiver<Input>>,
    config: LoaderConfig,
    pool: Option<Arc<ThreadPool>>,
    budget: Option<Arc<PixelBudget>>,
    metrics: Option<Arc<Metrics>>,
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

    /// Counts into these metrics (a rank's, shared by the loaders of its
    /// epochs) instead of new ones.
    pub fn metrics(mut self, metrics: Arc<Metrics>) -> Self {
        self.metrics = Some(metrics);
        self
    }

    /// Starts the pipeline. Must be called within a tokio runtime.
    pub async fn build(self) -> Result<Loader> {
        let config = self.config;
        config.validate()?;
        let layout = self.dataset.layout();
        let mut padding = None;
        let spans = match self.spans {
            Some(spans) => {
                if config.tail == Tail::Pad {
                    return Err(WorkerError::Config(
                        "tail=\"pad\" is for a loader that splits the dataset itself (shuffle=False without given spans)".into(),
                    ));
                }
                spans
            }
            None if !config.shuffle => {
                let (spans, pad) =
                    ordered_assignment(layout, config.rank, config.world, config.tail);
                padding = pad;
                spans
            }
            None => static_assignment(layout, config.seed, config.epoch, config.rank, config.world),
        };
        for span in spans.spans() {
            self.dataset.check_span(span)?;
        }
        let pool = match self.pool {
            Some(pool) => pool,
            None => decode_pool(config.decode_threads)?,
        };
        let budget = self.budget.unwrap_or_else(|| {
            Arc::new(PixelBudget::new(config.decode_limits.max_pixels_in_flight))
        });
        let metrics = self.metrics.unwrap_or_default();
        // The datasets of a rank share its one cache.
        if let Some(cache) = self
            .dataset
            .datasets()
            .iter()
            .find_map(|d| d.cache.as_ref())
        {
            metrics.watch_cache(cache);
        }
        let samples = match (&self.input, padding) {
            (Some(_), _) => 0,
            (None, Some(padding)) => padding.total,
            (None, None) => spans.len(),
        };
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
            datasets: self.dataset.clone(),
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
        let mut assembled = config.clone();
        if !config.shuffle {
            assembled.shuffle_buffer = 0;
        }
        tokio::spawn(assemble(
            self.dataset,
            input,
            assembled,
            Arc::clone(&metrics),
            padding,
            sample_tx,
        ));
        tokio::spawn(decode_stage(
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
    /// A builder reading `dataset` (one [`tributary_io::Dataset`], or
    /// several mixed: [`Datasets`]).
    pub fn builder(dataset: impl Into<Datasets>) -> LoaderBuilder {
        LoaderBuilder {
            dataset: dataset.into(),
            spans: None,
            input: None,
            config: LoaderConfig::default(),
            pool: None,
            budget: None,
            metrics: None,
        }
    }

    /// The next batch; `None` at the end of the epoch. After an error the
    /// loader is finished.
    pub async fn next(&mut self) -> Option<Result<Batch>> {
        if self.done {
            return None;
        }
        let waiting = self.metrics.wait_started();
        let item = self.batches.recv().await;
        drop(waiting);
        match &item {
            Some(Ok(batch)) => self.metrics.record_delivery(batch.len()),
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

    /// What this loader counted (with [`LoaderBuilder::metrics`], what
    /// every loader sharing its metrics counted).
    pub fn metrics(&self) -> MetricsSnapshot {
        self.metrics.snapshot()
    }
}
