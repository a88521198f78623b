//! The token path of the pipeline: spans of rows become rows read from
//! token shards (the fetch and parse stages of a token job), and batches
//! of rows become their columns (its decode stage).
//!
//! ```text
//!  spans of rows ──▶ row pieces (tributary_common::tokens::layout)
//!     ──▶ ranged GETs of the token ranges they need, many in flight
//!     ──▶ rows as samples (`tokens`, `segments`) ──▶ shuffle ──▶ cut
//!     ──▶ rows::build on the decode pool ──▶ Batch (input_ids, labels, ...)
//! ```
//!
//! A row is the plan's sample, so the shuffle buffer, the cut into
//! `batch_size` rows, stripes, commits and acks are the sample path's,
//! unchanged.

use std::ops::Range;
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use futures::stream::{self, BoxStream, Stream, StreamExt};
use rayon::ThreadPool;
use tokio::sync::oneshot;
use tributary_common::plan::span::Span;
use tributary_common::sample::{Field, Sample};
use tributary_common::tokens::layout::{reads, try_row_pieces};
use tributary_common::tokens::rows::{build, row_from_reads, IdType, Row, RowsSpec, SequenceBatch};

use super::cut::SampleBatch;
use super::datasets::{Datasets, TokenSources};
use super::decode::fields::{Arrays, Fields};
use super::decode::npy::DType;
use super::fetch::{FetchConfig, Input};
use super::metrics::Metrics;
use super::output::{Batch, Column};
use super::parse::{Fetched, Output};
use crate::error::{Result, WorkerError};

/// Tokens of one read job: a span is read in pieces of about this many
/// tokens, so that memory stays bounded and reads run in parallel.
const TOKENS_PER_JOB: u64 = 1 << 20;
/// Pieces closer than this many tokens are read in one request.
const MAX_GAP_TOKENS: u64 = 4096;

/// The columns a token batch can have, by name.
pub const TOKEN_COLUMNS: [&str; 6] = [
    "input_ids",
    "labels",
    "position_ids",
    "document_ids",
    "attention_mask",
    "cu_seqlens",
];

/// The columns a token job yields unless `fields` names others.
pub const DEFAULT_TOKEN_COLUMNS: [&str; 4] =
    ["input_ids", "labels", "position_ids", "document_ids"];

/// One column of a token batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TokenColumn {
    InputIds,
    Labels,
    PositionIds,
    DocumentIds,
    AttentionMask,
    CuSeqlens,
}

/// What a token loader hands out: its columns, in order, and their type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenOutput {
    pub columns: Vec<TokenColumn>,
    pub ids: IdType,
}

impl TokenOutput {
    /// The columns `fields` names; the image default (`image,cls?`) means
    /// [`DEFAULT_TOKEN_COLUMNS`]. An unknown name is an error naming it and
    /// the names there are.
    pub fn from_fields(fields: &Fields, ids: IdType) -> Result<Self> {
        let names: Vec<&str> = if *fields == Fields::default() {
            DEFAULT_TOKEN_COLUMNS.to_vec()
        } else {
            fields.0.iter().map(|f| f.name.as_str()).collect()
        };
        let columns = names
            .iter()
            .map(|name| match *name {
                "input_ids" => Ok(TokenColumn::InputIds),
                "labels" => Ok(TokenColumn::Labels),
                "position_ids" => Ok(TokenColumn::PositionIds),
                "document_ids" => Ok(TokenColumn::DocumentIds),
                "attention_mask" => Ok(TokenColumn::AttentionMask),
                "cu_seqlens" => Ok(TokenColumn::CuSeqlens),
                other => Err(WorkerError::Config(format!(
                    "fields: `{other}` is not a column of a token batch (the columns are {})",
                    TOKEN_COLUMNS.join(", ")
                ))),
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Self { columns, ids })
    }

    fn wants(&self, column: TokenColumn) -> bool {
        self.columns.contains(&column)
    }
}

/// What one read job covers: rows `rows` of virtual shard `shard`.
enum Job {
    Rows(Span),
    Flush,
}

/// The fetch and parse stages of a token job: each span's rows, in span
/// order, as samples (fields `tokens` and `segments`,
/// [`tributary_common::tokens::rows::Row`]), read `in flight` jobs at a
/// time; flush markers pass through in their place.
pub(super) fn token_rows(
    datasets: Datasets,
    input: BoxStream<'static, Input>,
    seed: u64,
    epoch: u64,
    fetch: &FetchConfig,
    metrics: Arc<Metrics>,
) -> impl Stream<Item = Result<Output>> + Send + 'static {
    let sources = Arc::clone(datasets.token_sources().expect("a token job's datasets"));
    let per_job = (TOKENS_PER_JOB / u64::from(sources.sequence.length)).max(1);
    // Bytes in flight bound the jobs in flight (each about 4 MiB of u32).
    let job_bytes = TOKENS_PER_JOB * 4;
    let in_flight =
        (fetch.max_bytes_in_flight / job_bytes).clamp(1, fetch.max_requests.max(1) as u64);
    input
        .flat_map(move |item| match item {
            Input::Flush => stream::iter(vec![Job::Flush]),
            Input::Span(span) => {
                let jobs: Vec<Job> = (u64::from(span.start)..u64::from(span.end))
                    .step_by(per_job as usize)
                    .map(|start| {
                        let end = (start + per_job).min(u64::from(span.end));
                        Job::Rows(Span::new(span.shard, start as u32, end as u32))
                    })
                    .collect();
                stream::iter(jobs)
            }
        })
        .map(move |job| {
            let (datasets, sources, metrics) =
                (datasets.clone(), Arc::clone(&sources), Arc::clone(&metrics));
            async move {
                match job {
                    Job::Flush => Ok(Output::Flush),
                    Job::Rows(span) => {
                        let samples =
                            read_rows(&datasets, &sources, span, seed, epoch, &metrics).await?;
                        Ok(Output::Samples(Fetched {
                            samples,
                            budget: None,
                        }))
                    }
                }
            }
        })
        .buffered(in_flight as usize)
}

/// Rows `span` of a virtual shard, read and assembled.
async fn read_rows(
    datasets: &Datasets,
    sources: &TokenSources,
    span: Span,
    seed: u64,
    epoch: u64,
    metrics: &Arc<Metrics>,
) -> Result<Vec<Sample>> {
    let layout = datasets.layout();
    let (source, shard) = layout.resolve(span.shard);
    let first_id = layout.shard_start(span.shard);
    let dataset = &sources.datasets[source];
    let index = dataset.doc_index(shard as usize).await?;
    let sequence = sources.sequence;
    let rows = u64::from(span.start)..u64::from(span.end);
    let pieces = {
        let (index, rows) = (Arc::clone(&index), rows.clone());
        tokio::task::spawn_blocking(move || {
            try_row_pieces(sequence, &index, seed, epoch, u64::from(shard), rows)
        })
        .await
        .unwrap_or_else(|e| std::panic::resume_unwind(e.into_panic()))
        .map_err(|e| {
            WorkerError::Config(format!(
                "{}: {e}",
                dataset
                    .location
                    .url_of(&dataset.manifest.shards[shard as usize].name)
            ))
        })?
    };
    let ranges = reads(&pieces.pieces, MAX_GAP_TOKENS);
    let data: Vec<Bytes> = futures::future::try_join_all(ranges.iter().map(|range| async {
        let read = metrics.fetch_started();
        let bytes = dataset.read_tokens(shard as usize, range.clone()).await?;
        read.done(bytes.len() as u64);
        Ok::<_, WorkerError>(bytes)
    }))
    .await?;
    let entry = &dataset.manifest.shards[shard as usize];
    let width = dataset.manifest.dtype.width();
    for (range, bytes) in ranges.iter().zip(&data) {
        let want = (range.end - range.start) * width;
        if bytes.len() as u64 != want {
            return Err(WorkerError::Config(format!(
                "token shard {}: tokens {}..{} read {} bytes, not {want} (the file is shorter \
                 than its manifest says: index the dataset again)",
                dataset.location.url_of(&entry.name),
                range.start,
                range.end,
                bytes.len()
            )));
        }
    }
    let (dtype, vocab) = (dataset.manifest.dtype, dataset.manifest.vocab_size);
    let name = entry.name.clone();
    let url = dataset.location.url_of(&entry.name);
    let metrics = Arc::clone(metrics);
    tokio::task::spawn_blocking(move || {
        let started = Instant::now();
        let reads: Vec<(Range<u64>, &[u8])> = ranges
            .iter()
            .cloned()
            .zip(data.iter().map(|d| &d[..]))
            .collect();
        let mut samples = Vec::with_capacity((rows.end - rows.start) as usize);
        for (i, row) in rows.enumerate() {
            let (tokens, segments) = row_from_reads(pieces.row(i), &reads, dtype)
                .map_err(|e| WorkerError::Config(format!("token shard {url}: row {row}: {e}")))?;
            if let Some(vocab) = vocab {
                let ids = tokens
                    .chunks_exact(4)
                    .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]));
                if let Some(bad) = ids.into_iter().find(|&t| u64::from(t) >= vocab) {
                    return Err(WorkerError::Config(format!(
                        "token shard {url}: row {row} holds token id {bad}, outside the \
                         vocabulary of {vocab} the manifest states"
                    )));
                }
            }
            samples.push(Sample {
                id: first_id + row,
                key: format!("{name}#{row}"),
                fields: vec![
                    Field {
                        ext: "tokens".into(),
                        data: Bytes::from(tokens),
                    },
                    Field {
                        ext: "segments".into(),
                        data: Bytes::from(segments),
                    },
                ],
            });
        }
        metrics.record_parse(started.elapsed(), samples.len());
        Ok(samples)
    })
    .await
    .unwrap_or_else(|e| std::panic::resume_unwind(e.into_panic()))
}

/// The decode stage of a token job: each batch of rows built into its
/// columns on `pool`, `in_flight` batches at a time, in order.
pub(super) fn build_batches(
    batches: impl Stream<Item = Result<SampleBatch>> + Send + 'static,
    pool: Arc<ThreadPool>,
    datasets: &Datasets,
    output: TokenOutput,
    in_flight: usize,
    metrics: Arc<Metrics>,
) -> impl Stream<Item = Result<Batch>> + Send + 'static {
    let sources = Arc::clone(datasets.token_sources().expect("a token job's datasets"));
    let spec = RowsSpec {
        sequence: sources.sequence,
        ids: output.ids,
        cu_seqlens: output.wants(TokenColumn::CuSeqlens),
        pad_id: sources
            .datasets
            .first()
            .and_then(|d| d.manifest.eos_id)
            .unwrap_or(0),
    };
    let (spec, output) = (Arc::new(spec), Arc::new(output));
    let datasets = datasets.clone();
    batches
        .map(move |item| {
            let (pool, spec, output, metrics, datasets) = (
                Arc::clone(&pool),
                Arc::clone(&spec),
                Arc::clone(&output),
                Arc::clone(&metrics),
                datasets.clone(),
            );
            async move {
                let batch = item?;
                let (tx, rx) = oneshot::channel();
                pool.spawn(move || {
                    let started = Instant::now();
                    let built = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                        build_one(&batch, &spec, &output, &datasets)
                    }))
                    .unwrap_or_else(|_| {
                        Err(WorkerError::Config(format!(
                            "building token batch {} panicked",
                            batch.index
                        )))
                    });
                    metrics.record_decode(started.elapsed(), batch.samples.len());
                    let _ = tx.send(built);
                });
                rx.await
                    .unwrap_or_else(|_| Err(WorkerError::Config("the decode pool is gone".into())))
            }
        })
        .buffered(in_flight.max(1))
}

fn build_one(
    batch: &SampleBatch,
    spec: &RowsSpec,
    output: &TokenOutput,
    datasets: &Datasets,
) -> Result<Batch> {
    let rows: Vec<Row<'_>> = batch
        .samples
        .iter()
        .map(|s| Row {
            tokens: s.field("tokens").map_or(&[][..], |b| &b[..]),
            segments: s.field("segments").map_or(&[][..], |b| &b[..]),
        })
        .collect();
    let built = build(&rows, spec)
        .map_err(|e| WorkerError::Config(format!("token batch {}: {e}", batch.index)))?;
    let SequenceBatch {
        rows: n,
        length,
        input_ids,
        labels,
        position_ids,
        document_ids,
        attention_mask,
        cu_seqlens,
        ..
    } = built;
    let ids_dtype = match spec.ids {
        IdType::I64 => DType::I64,
        IdType::I32 => DType::I32,
    };
    let stacked = |dtype: DType, data: Vec<u8>| {
        Column::Arrays(Arrays::Stacked {
            dtype,
            shape: vec![length],
            count: n,
            data,
        })
    };
    let (mut input_ids, mut labels, mut position_ids, mut document_ids) = (
        Some(input_ids),
        Some(labels),
        Some(position_ids),
        Some(document_ids),
    );
    let (mut attention_mask, mut cu_seqlens) = (attention_mask, cu_seqlens);
    let mut columns = Vec::with_capacity(output.columns.len());
    for column in &output.columns {
        let col = match column {
            TokenColumn::InputIds => input_ids.take().map(|d| stacked(ids_dtype, d)),
            TokenColumn::Labels => labels.take().map(|d| stacked(ids_dtype, d)),
            TokenColumn::PositionIds => position_ids.take().map(|d| stacked(ids_dtype, d)),
            TokenColumn::DocumentIds => document_ids.take().map(|d| stacked(ids_dtype, d)),
            TokenColumn::AttentionMask => Some(match attention_mask.take() {
                Some(mask) => stacked(DType::U8, mask),
                // concat rows have no padding: every position attends.
                None => stacked(DType::U8, vec![1; n * length]),
            }),
            TokenColumn::CuSeqlens => cu_seqlens.take().map(|data| {
                Column::Arrays(Arrays::Stacked {
                    dtype: DType::I32,
                    shape: Vec::new(),
                    count: data.len() / 4,
                    data,
                })
            }),
        };
        columns.push(
            col.ok_or_else(|| WorkerError::Config(format!("fields: {column:?} is named twice")))?,
        );
    }
    let ids: Vec<u64> = batch.samples.iter().map(|s| s.id).collect();
    Ok(Batch {
        index: batch.index,
        columns,
        keys: batch.samples.iter().map(|s| s.key.clone()).collect(),
        sources: ids.iter().map(|&id| datasets.source_of(id)).collect(),
        ids,
        skipped_ids: Vec::new(),
        padded: batch.padded,
    })
}

#[cfg(test)]
mod tests;
