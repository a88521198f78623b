//! The indexer: builds a manifest for WebDataset tar shards that have none,
//! by reading each shard once.

use std::sync::Arc;

use bytes::Bytes;
use futures::stream::{self, StreamExt, TryStreamExt};
use tributary_common::manifest::{CompressionKind, Manifest, ShardMeta, MANIFEST_NAME};
use tributary_common::shard::index_tar;

use crate::error::{Result, WorkerError};
use crate::progress::Progress;
use crate::store::Location;

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
        return Err(WorkerError::NotFound {
            url: format!("{}/*.tar", location.url),
            hint: " (no tar shards to index)",
        });
    }
    progress.total(0, shards.iter().map(|(_, size)| size).sum());
    let metas: Vec<(ShardMeta, std::collections::BTreeSet<String>)> = stream::iter(shards)
        .map(|(name, _)| {
            let progress = Arc::clone(&progress);
            async move {
                let data: Bytes = location.get(&name).await?;
                let len = data.len() as u64;
                let indexed = tokio::task::spawn_blocking(move || index_tar(&name, &data))
                    .await
                    .map_err(|e| WorkerError::Stopped(format!("indexer panicked: {e}")))??;
                progress.advance(u64::from(indexed.0.samples), len);
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
    .map_err(|error| WorkerError::Manifest {
        url: location.url_of(MANIFEST_NAME),
        error,
    })?;
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
