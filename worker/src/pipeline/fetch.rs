//! Reading a span set's bytes out of an object store.
//!
//! Each span becomes one or more range reads covering whole chunks, at most
//! [`FetchConfig::max_read_bytes`] each. Up to [`FetchConfig::max_requests`]
//! reads are in flight, and together they hold at most
//! [`FetchConfig::max_bytes_in_flight`] bytes: a read waits for budget before
//! its GET is sent and returns it once its samples are handed on. Results
//! come out in span order, whatever order the GETs complete in, so that what
//! follows (parsing, then the shuffle buffer) sees a deterministic sequence.
//! This stage moves bytes only: [`super::parse`] turns them into samples.

use std::ops::Range;
use std::sync::Arc;

use bytes::Bytes;
use futures::stream::{self, Stream, StreamExt};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tributary_common::format::shard::{chunk_range, ChunkRange};
use tributary_common::manifest::ShardMeta;
use tributary_common::plan::span::{Span, SpanSet};

use super::datasets::{Datasets, Planned};
use super::metrics::Metrics;
use super::table::RowsRead;
use crate::error::{Result, WorkerError};

/// Bounds of the fetch stage.
#[derive(Debug, Clone)]
pub struct FetchConfig {
    /// Range requests in flight at once.
    pub max_requests: usize,
    /// Bytes fetched but not yet handed to the shuffle buffer.
    pub max_bytes_in_flight: u64,
    /// Largest single range request (whole chunks; a chunk larger than this
    /// is still read in one request).
    pub max_read_bytes: u64,
    /// Size of the first range request of a stream; each next one doubles,
    /// up to `max_read_bytes`. Small first reads bring the first samples
    /// after a round trip and a little transfer, instead of after a whole
    /// large read that shares the link with every other read in flight.
    pub first_read_bytes: u64,
}

impl Default for FetchConfig {
    fn default() -> Self {
        Self {
            max_requests: 16,
            max_bytes_in_flight: 128 << 20,
            max_read_bytes: 4 << 20,
            first_read_bytes: 256 << 10,
        }
    }
}

/// The size limits of a stream's successive reads: `first_read_bytes`,
/// doubling up to `max_read_bytes`.
#[derive(Debug, Clone)]
struct ReadSizes {
    next: u64,
    max: u64,
}

impl ReadSizes {
    fn new(config: &FetchConfig) -> Self {
        Self {
            next: config
                .first_read_bytes
                .clamp(1, config.max_read_bytes.max(1)),
            max: config.max_read_bytes,
        }
    }

    fn take(&mut self) -> u64 {
        let size = self.next;
        self.next = size.saturating_mul(2).min(self.max.max(size));
        size
    }
}

/// One planned read: whole chunks of one tar shard, or the projected
/// columns of one row group of a Parquet shard; and the samples (rows) of
/// the span wanted from them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Read {
    /// The virtual shard ([`Datasets::shard`]).
    pub shard: u32,
    pub of: ReadOf,
    pub want: Range<u32>,
}

/// What a read fetches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReadOf {
    /// One range of whole chunks of a tar shard, planned from the shard's
    /// chunk columns (loaded once per shard:
    /// [`tributary_io::Dataset::shard_meta`]).
    Chunks {
        meta: Arc<ShardMeta>,
        range: ChunkRange,
    },
    /// Pages (or column chunks) of one row group of a Parquet file.
    Rows(RowsRead),
}

impl Read {
    /// The byte ranges this read fetches.
    pub fn ranges(&self) -> Vec<Range<u64>> {
        match &self.of {
            ReadOf::Chunks { range, .. } => std::iter::once(range.bytes.clone()).collect(),
            ReadOf::Rows(rows) => rows.ranges.clone(),
        }
    }
}

/// Plans the range reads for `spans`, in order, loading the index of each
/// shard they touch.
pub async fn plan_reads(
    dataset: &Datasets,
    spans: &SpanSet,
    config: &FetchConfig,
) -> Result<Vec<Read>> {
    let mut reads = Vec::new();
    let mut sizes = ReadSizes::new(config);
    for span in spans.spans() {
        match dataset.plan(span, config.max_read_bytes).await? {
            Planned::Chunks(meta) => plan_span(&meta, span, &mut sizes, &mut reads),
            Planned::Rows(rows) => reads.extend(rows_reads(span, rows)),
        }
    }
    Ok(reads)
}

/// The reads of a Parquet span's row groups.
fn rows_reads(span: &Span, rows: Vec<(Range<u32>, RowsRead)>) -> impl Iterator<Item = Read> + '_ {
    rows.into_iter().map(|(want, rows)| Read {
        shard: span.shard,
        of: ReadOf::Rows(rows),
        want,
    })
}

/// Appends the range reads for one span of the shard `meta` describes.
fn plan_span(meta: &Arc<ShardMeta>, span: &Span, sizes: &mut ReadSizes, reads: &mut Vec<Read>) {
    let whole = chunk_range(meta, span.start..span.end);
    let mut chunk = whole.chunks.start;
    let mut first_sample = whole.first_sample;
    while chunk < whole.chunks.end {
        let start_chunk = chunk;
        let start_sample = first_sample;
        let start_byte = meta.chunk_offsets[chunk];
        let max_read_bytes = sizes.take();
        while chunk < whole.chunks.end
            && (chunk == start_chunk
                || meta.chunk_offsets[chunk + 1] - start_byte <= max_read_bytes)
        {
            first_sample += meta.samples_in_chunk(chunk);
            chunk += 1;
        }
        let want = span.start.max(start_sample)..span.end.min(first_sample);
        reads.push(Read {
            shard: span.shard,
            of: ReadOf::Chunks {
                meta: Arc::clone(meta),
                range: ChunkRange {
                    chunks: start_chunk..chunk,
                    bytes: start_byte..meta.chunk_offsets[chunk],
                    first_sample: start_sample,
                },
            },
            want,
        });
    }
}

/// Budget is counted in KiB so that a `u32` permit count covers 4 TiB.
fn budget_units(bytes: u64) -> u32 {
    bytes.div_ceil(1024).min(u64::from(u32::MAX)) as u32
}

/// What the fetch stage reads: spans, and flush markers that pass through
/// in order (a dynamic loader uses them to empty its shuffle buffer when no
/// more work is coming for now).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Input {
    Span(Span),
    Flush,
}

/// The bytes of one read (one part per range of [`Read::ranges`], with
/// its first byte), with the byte budget they hold until dropped.
#[derive(Debug)]
pub struct Raw {
    pub read: Read,
    pub parts: Vec<(u64, Bytes)>,
    pub budget: OwnedSemaphorePermit,
}

/// What the fetch stage yields, in input order.
#[derive(Debug)]
pub enum Fetch {
    Read(Raw),
    Flush,
}

/// The fetch stage: the bytes of the spans of `input` as they arrive, in
/// input order, flush markers passed through in their place; each read
/// holds its share of the byte budget until its samples are dropped.
pub fn fetch(
    dataset: Datasets,
    input: impl Stream<Item = Input> + Send + 'static,
    config: &FetchConfig,
    metrics: Arc<Metrics>,
) -> impl Stream<Item = Result<Fetch>> + Send + 'static {
    let total_units = budget_units(config.max_bytes_in_flight).max(1);
    let budget = Arc::new(Semaphore::new(total_units as usize));
    let mut sizes = ReadSizes::new(config);
    let planner = dataset.clone();
    let max_read_bytes = config.max_read_bytes;
    input
        // The shard indexes of the next spans load while earlier reads run
        // (once per shard: `Dataset::shard_meta`).
        .map(move |input| {
            let planner = planner.clone();
            async move {
                match input {
                    Input::Span(span) => {
                        Ok(Some((span, planner.plan(&span, max_read_bytes).await?)))
                    }
                    Input::Flush => Ok(None),
                }
            }
        })
        .buffered(config.max_requests.max(1))
        .flat_map(move |planned: Result<Option<(Span, Planned)>>| {
            let mut work = Vec::new();
            match planned {
                Ok(Some((span, Planned::Chunks(meta)))) => {
                    let mut reads = Vec::new();
                    plan_span(&meta, &span, &mut sizes, &mut reads);
                    work.extend(reads.into_iter().map(|read| Ok(Some(read))));
                }
                Ok(Some((span, Planned::Rows(rows)))) => {
                    work.extend(rows_reads(&span, rows).map(|read| Ok(Some(read))));
                }
                Ok(None) => work.push(Ok(None)),
                Err(error) => work.push(Err(error)),
            }
            stream::iter(work)
        })
        .map(move |read: Result<Option<Read>>| {
            let dataset = dataset.clone();
            let budget = Arc::clone(&budget);
            let metrics = Arc::clone(&metrics);
            async move {
                let Some(read) = read? else {
                    return Ok(Fetch::Flush);
                };
                let ranges = read.ranges();
                let len: u64 = ranges.iter().map(|r| r.end - r.start).sum();
                let permit = budget
                    .acquire_many_owned(budget_units(len).min(total_units))
                    .await
                    .map_err(|_| WorkerError::Stopped("fetch budget closed".into()))?;
                let shard = dataset
                    .shard(read.shard)
                    .expect("reads are planned for shards inside the layout");
                // In flight until dropped: done, failed or cancelled.
                let in_flight = metrics.fetch_started();
                // The shard cache, or the store with retries, resumption and
                // errors that name the object and range: `Dataset::read_range`.
                let parts = futures::future::try_join_all(ranges.into_iter().map(|range| {
                    let start = range.start;
                    let read = shard.dataset.read_range(shard.index, range);
                    async move { Ok::<_, tributary_io::IoError>((start, read.await?)) }
                }))
                .await?;
                in_flight.done(len);
                Ok(Fetch::Read(Raw {
                    read,
                    parts,
                    budget: permit,
                }))
            }
        })
        .buffered(config.max_requests.max(1))
}
