//! Parsing: the bytes of a read, verified against the manifest and split
//! into samples (zstd blocks decompressed within their recorded sizes,
//! labels checked against the classes), on the blocking pool, as many at
//! once as reads are in flight, in input order.
//!
//! A damaged chunk (its checksum fails, its tar or zstd block does not
//! parse, it holds other than its samples) ends the epoch, unless the
//! loader skips bad samples ([`OnError::Skip`]): then each wanted sample of
//! that chunk comes out as a placeholder holding only a [`DAMAGED_FIELD`]
//! with the reason, which the decode stage skips as a bad sample naming
//! its shard, chunk offset and URL. The placeholders take their samples'
//! places, so batches, progress and the bad-fraction cap count them as
//! any other bad sample (a rank's batch count does not change).

use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use futures::stream::{Stream, StreamExt};
use tokio::sync::OwnedSemaphorePermit;
use tributary_common::format::shard::{decode_chunks, ChunkRange};
use tributary_common::manifest::ShardMeta;
use tributary_common::sample::{check_labels, Field, Sample};
use tributary_common::FormatError;

use super::datasets::Datasets;
use super::decode::bad_samples::OnError;
use super::fetch::{Fetch, FetchConfig, Raw, Read, ReadOf};
use super::metrics::Metrics;
use super::table::read_rows;
use crate::error::{Result, WorkerError};

/// Samples of one read, with the byte budget they hold until dropped (none
/// for those the shuffle buffer gives out when it is emptied).
#[derive(Debug)]
pub struct Fetched {
    pub samples: Vec<Sample>,
    pub(super) budget: Option<OwnedSemaphorePermit>,
}

/// What the parse stage yields, in input order (and the shuffle stage, in
/// shuffled order).
#[derive(Debug)]
pub enum Output {
    Samples(Fetched),
    Flush,
}

/// The parse stage: the samples of each read of `reads`, in input order;
/// reads are parsed on the blocking pool, as many at once as reads are in
/// flight. Flush markers and errors pass through in their place.
pub fn parse(
    dataset: Datasets,
    reads: impl Stream<Item = Result<Fetch>> + Send + 'static,
    config: &FetchConfig,
    on_error: OnError,
    metrics: Arc<Metrics>,
) -> impl Stream<Item = Result<Output>> + Send + 'static {
    reads
        .map(move |fetched| {
            let dataset = dataset.clone();
            let metrics = Arc::clone(&metrics);
            async move {
                let Raw {
                    read,
                    parts,
                    budget,
                } = match fetched? {
                    Fetch::Read(raw) => raw,
                    Fetch::Flush => return Ok(Output::Flush),
                };
                // Timed on the blocking thread: the parse's own work, not
                // its wait for a thread or for this stream to be polled
                // again (downstream's backpressure).
                let (samples, took) = tokio::task::spawn_blocking(move || {
                    let started = Instant::now();
                    let samples = parse_read(&dataset, &read, parts, on_error);
                    (samples, started.elapsed())
                })
                .await
                .map_err(|e| WorkerError::Stopped(format!("parser panicked: {e}")))?;
                let samples = samples?;
                metrics.record_parse(took, samples.len());
                Ok(Output::Samples(Fetched {
                    samples,
                    budget: Some(budget),
                }))
            }
        })
        .buffered(config.max_requests.max(1))
}

/// Verifies and parses one read, then copies each sample into one compact
/// allocation of its own, so a sample waiting in the shuffle buffer does not
/// pin the whole read (or decompressed block) it came from.
fn parse_read(
    datasets: &Datasets,
    read: &Read,
    parts: Vec<(u64, Bytes)>,
    on_error: OnError,
) -> Result<Vec<Sample>> {
    let shard = datasets
        .shard(read.shard)
        .expect("reads are planned for shards inside the layout");
    let (meta, range) = match &read.of {
        ReadOf::Chunks { meta, range } => (meta, range),
        ReadOf::Rows(rows) => {
            let name = &shard.entry.name;
            return match read_rows(rows, parts, read.want.clone(), shard.first_id, name) {
                Ok(samples) => Ok(samples),
                Err(reason) => {
                    let url = shard.dataset.location.url_of(name);
                    let error = tributary_io::IoError::Parquet {
                        url: url.clone(),
                        reason,
                    };
                    if on_error != OnError::Skip {
                        return Err(error.into());
                    }
                    tracing::warn!(shard = url, %error, "a damaged row group: its rows are skipped");
                    let reason = error.to_string();
                    Ok(read
                        .want
                        .clone()
                        .map(|row| placeholder(shard.first_id, name, row, &reason))
                        .collect())
                }
            };
        }
    };
    let data = &parts[0].1;
    let (first_id, manifest) = (shard.first_id, shard.manifest());
    // A hint only: the samples a read holds are bounded by its bytes (the
    // manifest was validated), not by a number that sizes memory up front.
    let mut samples = Vec::with_capacity(read.want.len().min(4096));
    let parsed = decode_chunks(
        meta,
        manifest.compression,
        range,
        data,
        first_id,
        read.want.clone(),
        &mut samples,
    );
    match parsed {
        Ok(()) => {}
        Err(error) if on_error == OnError::Skip && damaged(&error) => {
            samples.clear();
            let url = shard.dataset.location.url_of(&meta.name);
            chunk_by_chunk(
                read,
                range,
                meta,
                data,
                first_id,
                &url,
                manifest.compression,
                &mut samples,
            )?;
        }
        Err(error) => return Err(error.into()),
    }
    check_labels(&meta.name, &samples, manifest.classes.len())?;
    Ok(samples.into_iter().map(compact).collect())
}

/// The field a damaged chunk's placeholder samples hold: the reason, in
/// UTF-8. Not a WebDataset extension (it has a space), so no shard's
/// sample holds one.
pub const DAMAGED_FIELD: &str = "damaged chunk";

/// Whether `error` is about one chunk's bytes (its checksum, its tar or
/// zstd block, its samples), so that the chunk's samples may be skipped.
fn damaged(error: &FormatError) -> bool {
    matches!(
        error,
        FormatError::Checksum { .. }
            | FormatError::Tar { .. }
            | FormatError::SampleCount { .. }
            | FormatError::Decompress { .. }
    )
}

/// [`parse_read`] of a read with a damaged chunk: each chunk alone, the
/// damaged ones' wanted samples as placeholders (see the module docs).
#[allow(clippy::too_many_arguments)]
fn chunk_by_chunk(
    read: &Read,
    range: &ChunkRange,
    meta: &ShardMeta,
    data: &Bytes,
    first_id: u64,
    url: &str,
    compression: tributary_common::manifest::CompressionKind,
    out: &mut Vec<Sample>,
) -> Result<()> {
    let start = range.bytes.start;
    let mut first_sample = range.first_sample;
    for chunk in range.chunks.clone() {
        let bytes = meta.chunk_offsets[chunk]..meta.chunk_offsets[chunk + 1];
        let count = meta.samples_in_chunk(chunk);
        let range = ChunkRange {
            chunks: chunk..chunk + 1,
            bytes: bytes.clone(),
            first_sample,
        };
        let slice = data.slice((bytes.start - start) as usize..(bytes.end - start) as usize);
        let before = out.len();
        match decode_chunks(
            meta,
            compression,
            &range,
            &slice,
            first_id,
            read.want.clone(),
            out,
        ) {
            Ok(()) => {}
            Err(error) if damaged(&error) => {
                out.truncate(before);
                let reason = format!("{error} (shard {url}, chunk at byte {})", bytes.start);
                tracing::warn!(
                    shard = url,
                    offset = bytes.start,
                    %error,
                    "a damaged chunk: its samples are skipped"
                );
                let wanted =
                    (first_sample..first_sample + count).filter(|index| read.want.contains(index));
                out.extend(wanted.map(|index| placeholder(first_id, &meta.name, index, &reason)));
            }
            Err(error) => return Err(error.into()),
        }
        first_sample += count;
    }
    Ok(())
}

/// The placeholder of sample `index` of shard `name` in a damaged chunk
/// or row group: its [`DAMAGED_FIELD`] holds `reason`.
fn placeholder(first_id: u64, name: &str, index: u32, reason: &str) -> Sample {
    Sample {
        id: first_id + u64::from(index),
        key: format!("{name}#{index}"),
        fields: vec![Field {
            ext: DAMAGED_FIELD.to_owned(),
            data: Bytes::from(reason.to_owned()),
        }],
    }
}

fn compact(sample: Sample) -> Sample {
    let buf = tributary_io::bufpool::concat(sample.fields.iter().map(|field| &field.data[..]));
    let mut at = 0;
    let fields = sample
        .fields
        .into_iter()
        .map(|field| {
            let len = field.data.len();
            at += len;
            Field {
                ext: field.ext,
                data: buf.slice(at - len..at),
            }
        })
        .collect();
    Sample { fields, ..sample }
}
