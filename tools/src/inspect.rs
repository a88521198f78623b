//! The inspector: dataset statistics plus a full verification of every
//! shard against the manifest (object size and checksum, chunk checksums,
//! tar structure, sample counts, labels against the manifest's classes).
//! Each shard is read as a stream of range reads of whole chunks, at most
//! [`INSPECT_READ_BYTES`] each (a larger chunk alone; the manifest bounds
//! chunks), so a shard of any size is verified in bounded memory.

use std::ops::Range;
use std::sync::Arc;

use bytes::Bytes;
use object_store::GetOptions;

use futures::stream::{self, StreamExt};
use tributary_common::format::shard::ShardVerifier;
use tributary_common::manifest::ShardMeta;
use tributary_common::FormatError;

use crate::error::ToolsError;
use crate::progress::Progress;
use tributary_io::{retry, Dataset, Location};

/// The size of each range read of a shard being verified (8 MiB); four
/// shards are read at once.
pub const INSPECT_READ_BYTES: u64 = 8 << 20;

/// What [`inspect`] found. `problems` is empty for a healthy dataset.
#[derive(Debug, Clone, Default)]
pub struct InspectReport {
    pub shards: usize,
    pub samples: u64,
    pub bytes: u64,
    pub min_shard_samples: u32,
    pub max_shard_samples: u32,
    pub verified_shards: usize,
    pub verified_samples: u64,
    /// One line per shard that failed, naming shard, chunk and offset.
    pub problems: Vec<String>,
}

/// Reads every shard of `dataset` and verifies it.
pub async fn inspect(dataset: &Dataset, progress: Arc<dyn Progress>) -> InspectReport {
    let manifest = Arc::clone(&dataset.manifest);
    let mut report = InspectReport {
        shards: manifest.shards.len(),
        samples: manifest.samples,
        bytes: manifest.bytes,
        min_shard_samples: manifest.shards.iter().map(|s| s.samples).min().unwrap_or(0),
        max_shard_samples: manifest.shards.iter().map(|s| s.samples).max().unwrap_or(0),
        ..InspectReport::default()
    };
    progress.total(manifest.samples, manifest.bytes);
    let mut results = stream::iter(0..manifest.shards.len())
        .map(|i| {
            let manifest = Arc::clone(&manifest);
            let progress = Arc::clone(&progress);
            async move { verify(dataset, manifest, i, progress.as_ref()).await }
        })
        .buffered(4);
    while let Some(result) = results.next().await {
        match result {
            Ok(samples) => {
                report.verified_shards += 1;
                report.verified_samples += u64::from(samples);
            }
            Err(error) => report.problems.push(error.to_string()),
        }
    }
    report
}

/// Verifies shard `index` of `manifest`, read by read.
async fn verify(
    dataset: &Dataset,
    manifest: Arc<tributary_common::manifest::Manifest>,
    index: usize,
    progress: &dyn Progress,
) -> Result<u32, ToolsError> {
    let entry = &manifest.shards[index];
    if entry.row_groups().is_some() {
        // A Parquet file read in place: its tail must be the one indexed
        // (crc32c), its footer must decode within its bounds and list the
        // manifest's row groups. Its pages are checked as they are read.
        dataset.footer(index).await?;
        progress.advance(u64::from(entry.samples), entry.bytes);
        return Ok(entry.samples);
    }
    // A broken index is a problem of this shard, reported like the others.
    let meta: Arc<ShardMeta> = dataset.shard_meta(index).await?;
    let mut verifier = ShardVerifier::new(manifest.compression, INSPECT_READ_BYTES)
        .classes(manifest.classes.len());
    let mut first = true;
    while let Some(range) = verifier.next_range(&meta) {
        let data = if first {
            // The first read also says how long the object is.
            first = false;
            let (data, size) =
                get_range_and_size(&dataset.location, &meta.name, range.clone()).await?;
            if size != meta.bytes {
                return Err(FormatError::Shard {
                    shard: meta.name.clone(),
                    reason: format!(
                        "the object is {size} bytes, the manifest says {}",
                        meta.bytes
                    ),
                }
                .into());
            }
            data
        } else {
            dataset
                .location
                .get_range(&meta.name, range.clone())
                .await?
        };
        let before = verifier.samples();
        // Verifying a window is CPU work (checksums, zstd): off the runtime.
        let shard = Arc::clone(&meta);
        verifier =
            tokio::task::spawn_blocking(move || verifier.feed(&shard, &data).map(|()| verifier))
                .await
                .map_err(|e| ToolsError::Stopped(format!("verifier panicked: {e}")))??;
        progress.advance(
            u64::from(verifier.samples() - before),
            range.end - range.start,
        );
    }
    Ok(verifier.finish(&meta)?)
}

/// Reads bytes `range` of object `name` and, from the same response, the
/// object's size.
async fn get_range_and_size(
    location: &Location,
    name: &str,
    range: Range<u64>,
) -> Result<(Bytes, u64), ToolsError> {
    let path = location.path(name);
    retry(&location.url_of(name), &location.retry, || {
        let options = GetOptions {
            range: Some(range.clone().into()),
            ..GetOptions::default()
        };
        let path = &path;
        async move {
            let result = location.store.get_opts(path, options).await?;
            let size = result.meta.size;
            Ok((result.bytes().await?, size))
        }
    })
    .await
    .map_err(ToolsError::from)
}
