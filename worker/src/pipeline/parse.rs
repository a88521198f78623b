//! Parsing: the bytes of a read, verified against the manifest and split
//! into samples (zstd blocks decompressed within their recorded sizes,
//! labels checked against the classes), on the blocking pool, as many at
//! once as reads are in flight, in input order.

use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use futures::stream::{Stream, StreamExt};
use tokio::sync::OwnedSemaphorePermit;
use tributary_common::format::shard::decode_chunks;
use tributary_common::sample::{check_labels, Field, Sample};

use super::datasets::Datasets;
use super::fetch::{Fetch, FetchConfig, Raw, Read};
use super::metrics::Metrics;
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
    metrics: Arc<Metrics>,
) -> impl Stream<Item = Result<Output>> + Send + 'static {
    reads
        .map(move |fetched| {
            let dataset = dataset.clone();
            let metrics = Arc::clone(&metrics);
            async move {
                let Raw { read, data, budget } = match fetched? {
                    Fetch::Read(raw) => raw,
                    Fetch::Flush => return Ok(Output::Flush),
                };
                let started = Instant::now();
                let samples =
                    tokio::task::spawn_blocking(move || parse_read(&dataset, &read, &data))
                        .await
                        .map_err(|e| WorkerError::Stopped(format!("parser panicked: {e}")))??;
                metrics.record_parse(started.elapsed(), samples.len());
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
fn parse_read(datasets: &Datasets, read: &Read, data: &Bytes) -> Result<Vec<Sample>> {
    let shard = datasets
        .shard(read.shard)
        .expect("reads are planned for shards inside the layout");
    let (meta, first_id, manifest) = (&read.meta, shard.first_id, shard.manifest());
    // A hint only: the samples a read holds are bounded by its bytes (the
    // manifest was validated), not by a number that sizes memory up front.
    let mut samples = Vec::with_capacity(read.want.len().min(4096));
    decode_chunks(
        meta,
        manifest.compression,
        &read.range,
        data,
        first_id,
        read.want.clone(),
        &mut samples,
    )?;
    check_labels(&meta.name, &samples, manifest.classes.len())?;
    Ok(samples.into_iter().map(compact).collect())
}

fn compact(sample: Sample) -> Sample {
    let mut buf = Vec::with_capacity(sample.payload_bytes());
    for field in &sample.fields {
        buf.extend_from_slice(&field.data);
    }
    let buf = Bytes::from(buf);
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
