//! The loader: a builder that wires the stages together, and the handle the
//! consumer reads batches from.
//!
//! ```text
//!  input (spans, or spans as they arrive)
//!     ──▶ fetch: range GETs (bounded count + bytes)              [fetch]
//!     ──▶ parse: verify + split into samples (blocking pool)     [parse]
//!     ──▶ shuffle: the seeded, bounded shuffle buffer            [shuffle]
//!     ──▶ cut: samples into batches (a Cut strategy)             [cut]
//!     ──▶ sample batches (bounded channel)
//!     ──▶ decode + augment (rayon pool, batches in flight bounded)   [decode]
//!     ──▶ ready batches (bounded prefetch queue) ──▶ Loader::next()
//! ```
//!
//! Each stage is a stream transformer, and `chain` strings them together
//! in this order; no stage calls the one before it.

use std::pin::pin;
use std::sync::Arc;

use futures::stream::{self, BoxStream, Stream, StreamExt};
use rayon::ThreadPool;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tributary_common::plan::assign::{ordered_assignment, static_assignment};
use tributary_common::plan::span::SpanSet;

use super::config::{LoaderConfig, Tail};
use super::cut::{cut, WholeSamples};
use super::datasets::Datasets;
use super::decode::bad_samples::BadTally;
use super::decode::bad_samples::OnError;
use super::decode::pixels::PixelBudget;
use super::decode::{decode, DecodeSetup};
use super::fetch::{fetch, FetchConfig, Input};
use super::metrics::{Metrics, MetricsSnapshot};
use super::output::Batch;
use super::parse::{parse, Fetched, Output};
use super::shuffle::{shuffle, ShuffleBuffer};
use super::tokens::{build_batches, token_rows, TokenOutput};
use crate::error::{Result, WorkerError};
use tributary_common::plan::assign::Padding;

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
    pub async fn build(mut self) -> Result<Loader> {
        let mut config = self.config;
        config.validate()?;
        // Fields over Parquet datasets name columns, and take their kinds.
        let (dataset, fields) = self.dataset.with_fields(&config.decode.fields)?;
        self.dataset = dataset;
        config.decode.fields = fields;
        let layout = self.dataset.layout();
        let mut padding = None;
        let spans = match self.spans {
            Some(spans) => {
                if config.plan.tail == Tail::Pad {
                    return Err(WorkerError::Config(
                        "tail=\"pad\" is for a loader that splits the dataset itself (shuffle=False without given spans)".into(),
                    ));
                }
                spans
            }
            None if !config.plan.shuffle => {
                let (spans, pad) = ordered_assignment(
                    layout,
                    config.plan.rank,
                    config.plan.world,
                    config.plan.tail,
                );
                padding = pad;
                spans
            }
            None => static_assignment(
                layout,
                config.plan.seed,
                config.plan.epoch,
                config.plan.rank,
                config.plan.world,
            ),
        };
        for span in spans.spans() {
            self.dataset.check_span(span)?;
        }
        let pool = match self.pool {
            Some(pool) => pool,
            None => decode_pool(config.decode.decode_threads)?,
        };
        // Enough images in flight for every thread of the pool (token rows
        // are built, not decoded: they keep the setting).
        if self.dataset.token_sources().is_none() {
            config.decode.decode_batches_in_flight = config
                .decode
                .batches_in_flight(config.plan.batch_size, pool.current_num_threads());
        }
        let budget = self.budget.unwrap_or_else(|| {
            Arc::new(PixelBudget::new(
                config.decode.decode_limits.max_pixels_in_flight,
            ))
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
            // As many shards may fill as the fetcher reads at once.
            cache.fill_at_least(config.decode.fetch.max_requests);
        }
        let samples = match (&self.input, padding) {
            (Some(_), _) => 0,
            (None, Some(padding)) => padding.total,
            (None, None) => spans.len(),
        };
        let setup = DecodeSetup {
            seed: config.plan.seed,
            epoch: config.plan.epoch,
            // Steady state needs a free buffer for each batch being decoded
            // and one more; buffers beyond that (a start-up peak) are freed
            // as they return.
            keep_buffers: config.decode.decode_batches_in_flight + 1,
            limits: config.decode.decode_limits,
            budget,
            on_error: config.decode.on_error,
            max_batch_bytes: config.decode.max_batch_bytes,
            datasets: self.dataset.clone(),
        };
        // A striped loader decodes only its stripe of the samples it reads.
        let tally = BadTally::new(
            config.decode.max_bad_fraction,
            samples / config.plan.stripe.count as u64,
        );
        let tokens = match self.dataset.token_sources() {
            Some(_) => Some(TokenOutput::from_fields(
                &config.decode.fields,
                config.decode.token_ids,
            )?),
            None => None,
        };
        let input = match self.input {
            Some(rx) => ReceiverStream::new(rx).boxed(),
            None => stream::iter(spans.spans().to_vec())
                .map(Input::Span)
                .boxed(),
        };
        let batches = chain(
            &self.dataset,
            input,
            &config,
            padding,
            Decoding {
                pool,
                setup,
                tally,
                tokens,
            },
            &metrics,
        );
        Ok(Loader {
            batches,
            metrics,
            samples,
            batch_size: config.plan.batch_size,
            drop_last: config.plan.drop_last,
            done: false,
        })
    }
}

/// What the decode stage needs besides the configuration.
struct Decoding {
    pool: Arc<ThreadPool>,
    setup: DecodeSetup,
    tally: BadTally,
    /// A token job's columns (then rows are built, not decoded).
    tokens: Option<TokenOutput>,
}

/// The pipeline of one loader, stage after stage as the data flows; the
/// receiver of its ready batches.
///
/// Errors flow down as items, in their place: the chain ends at the first
/// one, which reaches the consumer after every batch before it. A stage
/// stops when its consumer is gone, cancelling what is upstream of it.
fn chain(
    dataset: &Datasets,
    input: BoxStream<'static, Input>,
    config: &LoaderConfig,
    padding: Option<Padding>,
    decoding: Decoding,
    metrics: &Arc<Metrics>,
) -> mpsc::Receiver<Result<Batch>> {
    let tokens = dataset.token_sources().is_some();
    let samples = if tokens {
        token_rows(
            dataset.clone(),
            input,
            config.plan.seed,
            config.plan.epoch,
            &config.decode.fetch,
            Arc::clone(metrics),
        )
        .boxed()
    } else {
        let reads = fetch(
            dataset.clone(),
            input,
            &config.decode.fetch,
            Arc::clone(metrics),
        );
        parse(
            dataset.clone(),
            reads,
            &config.decode.fetch,
            config.decode.on_error,
            Arc::clone(metrics),
        )
        .boxed()
    };
    // Unshuffled (evaluation) reading: no shuffle buffer either.
    let capacity = if config.plan.shuffle {
        config.plan.shuffle_buffer
    } else {
        0
    };
    let (seed, epoch, generation) = (config.plan.seed, config.plan.epoch, config.plan.generation);
    let buffer = ShuffleBuffer::new(capacity, seed, epoch, generation, config.plan.rank as u64);
    let shuffled = shuffle(samples, buffer, config.plan.shuffle_bytes);
    let strategy = WholeSamples::new(config.plan.batch_size, config.plan.drop_last, padding);
    let batches = cut(shuffled, strategy, config.plan.stripe);
    // Everything up to here runs on a task of its own, a few sample
    // batches ahead of the decoder.
    let batches = queue(batches, config.decode.decode_batches_in_flight);
    let Decoding {
        pool,
        setup,
        tally,
        tokens,
    } = decoding;
    if let Some(output) = tokens {
        let built = build_batches(
            ReceiverStream::new(batches),
            pool,
            dataset,
            output,
            config.decode.decode_batches_in_flight,
            Arc::clone(metrics),
        );
        return queue(built, config.decode.prefetch_batches);
    }
    let decoded = decode(
        ReceiverStream::new(batches),
        pool,
        config,
        setup,
        tally,
        Arc::clone(metrics),
    );
    // The ready batches: the prefetch queue `Loader::next` reads.
    queue(decoded, config.decode.prefetch_batches)
}

/// Runs `stream` on a task of its own, up to `bound` items ahead of the
/// receiver. It stops after passing on an error, or when the receiver is
/// gone, dropping (cancelling) the stream.
fn queue<T: Send + 'static>(
    stream: impl Stream<Item = Result<T>> + Send + 'static,
    bound: usize,
) -> mpsc::Receiver<Result<T>> {
    let (tx, rx) = mpsc::channel(bound);
    tokio::spawn(async move {
        let mut stream = pin!(stream);
        while let Some(item) = stream.next().await {
            let failed = item.is_err();
            if tx.send(item).await.is_err() || failed {
                return;
            }
        }
    });
    rx
}

/// The samples of a fixed span set, in span order: the fetch and parse
/// stages alone (the decode-ceiling benchmark, and tests that compare what
/// reads give under faults).
pub fn span_samples(
    dataset: impl Into<Datasets>,
    spans: &SpanSet,
    config: &FetchConfig,
    metrics: Arc<Metrics>,
) -> impl Stream<Item = Result<Fetched>> + Send + 'static {
    span_samples_with(dataset, spans, config, OnError::Raise, metrics)
}

/// [`span_samples`], a damaged chunk handled as `on_error` says (under
/// [`OnError::Skip`] its samples come out as placeholders the decode stage
/// skips: see [`super::parse`]).
pub fn span_samples_with(
    dataset: impl Into<Datasets>,
    spans: &SpanSet,
    config: &FetchConfig,
    on_error: OnError,
    metrics: Arc<Metrics>,
) -> impl Stream<Item = Result<Fetched>> + Send + 'static {
    let dataset = dataset.into();
    let input = stream::iter(spans.spans().to_vec()).map(Input::Span);
    let reads = fetch(dataset.clone(), input, config, Arc::clone(&metrics));
    parse(dataset, reads, config, on_error, metrics).filter_map(|out| async move {
        match out {
            Ok(Output::Samples(fetched)) => Some(Ok(fetched)),
            Ok(Output::Flush) => None,
            Err(e) => Some(Err(e)),
        }
    })
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
