//! Reading a span set's bytes out of an object store.
//!
//! Each span becomes one or more range reads covering whole chunks, at most
//! [`FetchConfig::max_read_bytes`] each. Up to [`FetchConfig::max_requests`]
//! reads are in flight, and together they hold at most
//! [`FetchConfig::max_bytes_in_flight`] bytes: a read waits for budget before
//! its GET is sent and returns it once its samples are handed on. A read is
//! charged the larger of the bytes it fetches and the bytes it decompresses
//! to ([`Read::charge`]: the manifest's recorded chunk sizes, or a Parquet
//! row group's column sizes), since a 64 MiB zstd chunk may be a few KiB on
//! the wire; a read larger than the whole budget takes all of it, so it
//! makes progress alone. A read also stops adding chunks once they would
//! decompress to more than a quarter of the budget, so tiny chunks that
//! decompress to GiBs are read apart and take turns. Results
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
    /// Bytes read but not yet handed on past the shuffle buffer, each read
    /// counted as the larger of what it fetches and what it decompresses
    /// to ([`Read::charge`]).
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
/// And the most a read's chunks may decompress to: a quarter of the byte
/// budget (at least `max_read_bytes`), so that a few KiB of zstd that
/// decompress to GiBs become reads that take turns, not one read that
/// holds them all at once.
#[derive(Debug, Clone)]
struct ReadSizes {
    next: u64,
    max: u64,
    max_decompressed: u64,
}

impl ReadSizes {
    fn new(config: &FetchConfig) -> Self {
        Self {
            next: config
                .first_read_bytes
                .clamp(1, config.max_read_bytes.max(1)),
            max: config.max_read_bytes,
            max_decompressed: (config.max_bytes_in_flight / 4).max(config.max_read_bytes),
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

    /// Bytes this read fetches.
    pub fn fetched_bytes(&self) -> u64 {
        self.ranges().iter().map(|r| r.end - r.start).sum()
    }

    /// The bytes this read holds at its largest, what it is charged of the
    /// byte budget: the larger of what it fetches and what it decompresses
    /// to (a compressed shard's chunks as the manifest records them; a
    /// Parquet row group's projected column chunks as its footer does).
    pub fn charge(&self) -> u64 {
        let decompressed = match &self.of {
            ReadOf::Chunks { meta, range } => range
                .chunks
                .clone()
                .filter_map(|chunk| meta.chunk_uncompressed(chunk))
                .fold(0, u64::saturating_add),
            ReadOf::Rows(rows) => rows.uncompressed_bytes(),
        };
        self.fetched_bytes().max(decompressed)
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
        let mut decompressed = 0u64;
        while chunk < whole.chunks.end {
            let then = decompressed.saturating_add(meta.chunk_uncompressed(chunk).unwrap_or(0));
            if chunk != start_chunk
                && (meta.chunk_offsets[chunk + 1] - start_byte > max_read_bytes
                    || then > sizes.max_decompressed)
            {
                break;
            }
            decompressed = then;
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

/// The byte budget of a fetch stage's reads in flight.
#[derive(Debug, Clone)]
pub struct ByteBudget {
    semaphore: Arc<Semaphore>,
    total: u32,
}

impl ByteBudget {
    /// A budget of `bytes` (at least 1 KiB).
    pub fn new(bytes: u64) -> Self {
        let total = budget_units(bytes).max(1);
        Self {
            semaphore: Arc::new(Semaphore::new(total as usize)),
            total,
        }
    }

    /// Waits for `bytes` of the budget, or all of it for a charge larger
    /// than the whole budget (so that it makes progress, alone), and holds
    /// them until the permit is dropped.
    pub async fn acquire(&self, bytes: u64) -> Result<OwnedSemaphorePermit> {
        Arc::clone(&self.semaphore)
            .acquire_many_owned(budget_units(bytes).min(self.total))
            .await
            .map_err(|_| WorkerError::Stopped("fetch budget closed".into()))
    }
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
    let budget = ByteBudget::new(config.max_bytes_in_flight);
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
            let budget = budget.clone();
            let metrics = Arc::clone(&metrics);
            async move {
                let Some(read) = read? else {
                    return Ok(Fetch::Flush);
                };
                let ranges = read.ranges();
                let len = read.fetched_bytes();
                // Held until the read's samples leave the shuffle stage:
                // what it fetched, then what that decompressed to.
                let permit = budget.acquire(read.charge()).await?;
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

#[cfg(test)]
mod tests {
    use futures::FutureExt;

    use super::*;

    const MIB: u64 = 1 << 20;

    /// A zstd shard of `chunks` chunks of 100 stored bytes, each recorded
    /// as decompressing to `uncompressed` bytes.
    fn meta(chunks: usize, uncompressed: u64) -> Arc<ShardMeta> {
        Arc::new(ShardMeta {
            name: "shard-000000.tar.zst".into(),
            samples: chunks as u32,
            bytes: 100 * chunks as u64,
            crc32c: 0,
            chunk_offsets: (0..=chunks as u64).map(|c| c * 100).collect(),
            chunk_samples: vec![1; chunks],
            chunk_crc32c: vec![0; chunks],
            chunk_uncompressed_bytes: vec![uncompressed; chunks],
        })
    }

    fn reads(meta: &Arc<ShardMeta>, max_read_bytes: u64) -> Vec<Read> {
        let config = FetchConfig {
            max_read_bytes,
            first_read_bytes: max_read_bytes,
            ..FetchConfig::default()
        };
        let mut out = Vec::new();
        let span = Span::new(0, 0, meta.samples);
        plan_span(meta, &span, &mut ReadSizes::new(&config), &mut out);
        out
    }

    #[tokio::test]
    async fn a_read_is_charged_its_decompressed_bytes() {
        let meta = meta(3, 64 * MIB);
        let reads = reads(&meta, 100);
        assert_eq!(reads.len(), 3, "one chunk per read");
        assert_eq!(reads[0].fetched_bytes(), 100);
        assert_eq!(reads[0].charge(), 64 * MIB);
        // Two fit a budget of 150 MiB, by what they decompress to, not the
        // 300 bytes all three fetch: the third waits for one to be done.
        let budget = ByteBudget::new(150 * MIB);
        let first = budget.acquire(reads[0].charge()).now_or_never();
        let first = first.expect("the budget is free").expect("open");
        let second = budget.acquire(reads[1].charge()).now_or_never();
        let _second = second.expect("room for two").expect("open");
        let mut third = Box::pin(budget.acquire(reads[2].charge()));
        assert!((&mut third).now_or_never().is_none(), "a third must wait");
        drop(first);
        assert!(
            third.now_or_never().is_some(),
            "the first's budget came back"
        );
    }

    #[tokio::test]
    async fn a_read_larger_than_the_budget_runs_alone() {
        let meta = meta(2, 64 * MIB);
        let reads = reads(&meta, 100);
        let budget = ByteBudget::new(16 * MIB);
        let first = budget.acquire(reads[0].charge()).now_or_never();
        let first = first
            .expect("a huge read still makes progress")
            .expect("open");
        let mut second = Box::pin(budget.acquire(reads[1].charge()));
        assert!((&mut second).now_or_never().is_none(), "never two at once");
        drop(first);
        assert!(second.now_or_never().is_some());
    }

    #[test]
    fn chunks_that_decompress_past_a_quarter_of_the_budget_are_read_apart() {
        // The reproduction: tiny zstd chunks recording 64 MiB each all fit
        // one 4 MiB read; they would decompress to 4 GiB at once.
        let meta = meta(64, 64 * MIB);
        let reads = reads(&meta, 4 * MIB);
        assert_eq!(reads.len(), 64, "each chunk alone: 64 MiB > 32 MiB");
        assert!(reads.iter().all(|r| r.charge() == 64 * MIB));
        let small = self::meta(64, 8 * MIB);
        let reads = self::reads(&small, 4 * MIB);
        assert_eq!(reads.len(), 16, "four 8 MiB chunks to a 32 MiB read");
        assert!(reads.iter().all(|r| r.charge() == 32 * MIB));
    }

    #[test]
    fn an_uncompressed_or_unrecorded_read_is_charged_what_it_fetches() {
        let mut unrecorded = (*meta(2, 0)).clone();
        unrecorded.chunk_uncompressed_bytes.clear();
        let reads = reads(&Arc::new(unrecorded), 1000);
        assert_eq!(reads.len(), 1, "both chunks in one read");
        assert_eq!(reads[0].charge(), 200);
        // A chunk recorded smaller than its stored bytes: the fetch counts.
        assert_eq!(self::reads(&meta(1, 10), 1000)[0].charge(), 100);
    }
}
