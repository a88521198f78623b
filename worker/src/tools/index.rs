//! The indexer: builds a manifest for WebDataset tar shards that have none,
//! by reading each shard once, as a stream of range reads of at most
//! [`INDEX_READ_BYTES`]: a shard of any size is indexed in bounded memory.

use std::sync::Arc;

use bytes::Bytes;
use futures::stream::{self, StreamExt, TryStreamExt};
use tributary_common::manifest::{CompressionKind, Manifest, ShardMeta, MANIFEST_NAME};
use tributary_common::shard::TarIndexer;

use crate::error::{Result, WorkerError};
use crate::tools::progress::Progress;
use tributary_io::{IoError, Location};

/// The size of each range read of a shard being indexed (8 MiB); four
/// shards are read at once.
pub const INDEX_READ_BYTES: u64 = 8 << 20;

/// What an index run found.
#[derive(Debug, Clone)]
pub struct IndexSummary {
    pub shards: usize,
    pub samples: u64,
    pub bytes: u64,
    pub fields: Vec<String>,
}

/// Indexes every `*.tar` object under `location` (in name order) and writes
/// `manifest.json` beside them. Refuses to replace a manifest unless `force`.
pub async fn index(
    location: &Location,
    force: bool,
    progress: Arc<dyn Progress>,
) -> Result<IndexSummary> {
    let objects = location.list().await?;
    if !force && objects.iter().any(|(name, _)| name == MANIFEST_NAME) {
        return Err(WorkerError::Config(format!(
            "{} already exists (pass --force to replace it)",
            location.url_of(MANIFEST_NAME)
        )));
    }
    let unsupported: Vec<&str> = objects
        .iter()
        .map(|(name, _)| name.as_str())
        .filter(|n| n.ends_with(".tar.gz") || n.ends_with(".tgz") || n.ends_with(".tar.zst"))
        .collect();
    if !unsupported.is_empty() {
        return Err(WorkerError::Config(format!(
            "{}: compressed foreign shards ({}) cannot be read from an offset; decompress them to .tar first",
            location.url,
            unsupported.join(", ")
        )));
    }
    let shards: Vec<(String, u64)> = objects
        .into_iter()
        .filter(|(name, _)| name.ends_with(".tar"))
        .collect();
    if shards.is_empty() {
        return Err(IoError::NotFound {
            url: format!("{}/*.tar", location.url),
            hint: " (no tar shards to index)",
        }
        .into());
    }
    progress.total(0, shards.iter().map(|(_, size)| size).sum());
    let metas: Vec<(ShardMeta, std::collections::BTreeSet<String>)> = stream::iter(shards)
        .map(|(name, size)| {
            let progress = Arc::clone(&progress);
            async move {
                let indexed = index_shard(location, name, size, progress.as_ref()).await?;
                progress.advance(u64::from(indexed.0.samples), 0);
                Ok::<_, WorkerError>(indexed)
            }
        })
        .buffered(4)
        .try_collect()
        .await?;
    let fields: std::collections::BTreeSet<String> =
        metas.iter().flat_map(|(_, f)| f.iter().cloned()).collect();
    let shards: Vec<ShardMeta> = metas.into_iter().map(|(meta, _)| meta).collect();
    let manifest = Manifest::new(
        CompressionKind::None,
        fields.into_iter().collect(),
        Vec::new(),
        shards,
    )
    .map_err(|error| WorkerError::manifest(location.url_of(MANIFEST_NAME), error))?;
    location
        .put(MANIFEST_NAME, Bytes::from(manifest.to_json()))
        .await?;
    Ok(IndexSummary {
        shards: manifest.shards.len(),
        samples: manifest.samples,
        bytes: manifest.bytes,
        fields: manifest.fields.clone(),
    })
}

/// Indexes the shard object `name` of `size` bytes (as listed) read by read.
async fn index_shard(
    location: &Location,
    name: String,
    size: u64,
    progress: &dyn Progress,
) -> Result<(ShardMeta, std::collections::BTreeSet<String>)> {
    let mut indexer = TarIndexer::new(name.clone());
    while indexer.offset() < size {
        let start = indexer.offset();
        let range = start..size.min(start + INDEX_READ_BYTES);
        let data: Bytes = location.get_range(&name, range.clone()).await?;
        if data.len() as u64 != range.end - range.start {
            return Err(tributary_common::FormatError::ShortRead {
                shard: name,
                offset: start,
                expected: range.end - range.start,
                actual: data.len() as u64,
            }
            .into());
        }
        indexer = tokio::task::spawn_blocking(move || indexer.feed(&data).map(|()| indexer))
            .await
            .map_err(|e| WorkerError::Stopped(format!("indexer panicked: {e}")))??;
        progress.advance(0, range.end - range.start);
    }
    Ok(indexer.finish()?)
}
