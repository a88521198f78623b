//! The indexer: builds a manifest for WebDataset tar shards that have none,
//! by reading each shard once, as a stream of range reads of at most
//! [`INDEX_READ_BYTES`]: a shard of any size is indexed in bounded memory.

use std::sync::Arc;

use bytes::Bytes;
use futures::stream::{self, StreamExt, TryStreamExt};
use tributary_common::format::shard::TarIndexer;
use tributary_common::manifest::{CompressionKind, Manifest, ShardMeta, MANIFEST_NAME};

use crate::error::{Result, ToolsError};
use crate::pack::new_version;
use crate::progress::Progress;
use tributary_io::dataset::MAX_MANIFEST_BYTES;
use tributary_io::publish::objects_named;
use tributary_io::{write_manifest, IoError, Location, ManifestDraft, ManifestVersion};

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
/// `manifest.json` beside them, as `version` (for version 2, with an index
/// object `<shard>.idx` per shard, written first). Refuses to replace a
/// manifest unless `force`; replacing one, the new index objects get names
/// of their own (`<shard>.<version>.idx`, so that a reader of the old
/// manifest never sees its index change) and the old ones are deleted once
/// the new manifest is in place.
pub async fn index(
    location: &Location,
    force: bool,
    version: ManifestVersion,
    progress: Arc<dyn Progress>,
) -> Result<IndexSummary> {
    let objects = location.list().await?;
    let replacing = objects.iter().any(|(name, _)| name == MANIFEST_NAME);
    if !force && replacing {
        return Err(ToolsError::Config(format!(
            "{} already exists (pass --force to replace it)",
            location.url_of(MANIFEST_NAME)
        )));
    }
    // The index objects the manifest being replaced names, to delete after
    // the switch (an unreadable one names none we can trust).
    let old_indexes: Vec<String> = if replacing {
        match location
            .get_at_most(MANIFEST_NAME, MAX_MANIFEST_BYTES)
            .await
        {
            Ok(bytes) => Manifest::from_json(&bytes)
                .map(|m| {
                    m.shards
                        .iter()
                        .filter_map(|s| s.index())
                        .map(|i| i.name.clone())
                        .collect()
                })
                .unwrap_or_default(),
            Err(error) if error.is_not_found() => Vec::new(),
            Err(error) => return Err(error.into()),
        }
    } else {
        Vec::new()
    };
    let unsupported: Vec<&str> = objects
        .iter()
        .map(|(name, _)| name.as_str())
        .filter(|n| n.ends_with(".tar.gz") || n.ends_with(".tgz") || n.ends_with(".tar.zst"))
        .collect();
    if !unsupported.is_empty() {
        return Err(ToolsError::Config(format!(
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
                Ok::<_, ToolsError>(indexed)
            }
        })
        .buffered(4)
        .try_collect()
        .await?;
    let fields: std::collections::BTreeSet<String> =
        metas.iter().flat_map(|(_, f)| f.iter().cloned()).collect();
    let shards: Vec<ShardMeta> = metas.into_iter().map(|(meta, _)| meta).collect();
    let draft = ManifestDraft {
        compression: CompressionKind::None,
        fields: fields.into_iter().collect(),
        classes: Vec::new(),
        shards,
    };
    let tag = replacing.then(new_version);
    let manifest = write_manifest(location, draft, version, tag.as_deref()).await?;
    let new: std::collections::HashSet<String> = objects_named(&manifest).into_iter().collect();
    for name in old_indexes.iter().filter(|name| !new.contains(*name)) {
        if let Err(error) = location.delete(name).await {
            tracing::warn!(url = %location.url_of(name), %error, "cannot delete an index of the replaced manifest; it is left behind");
        }
    }
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
            .map_err(|e| ToolsError::Stopped(format!("indexer panicked: {e}")))??;
        progress.advance(0, range.end - range.start);
    }
    Ok(indexer.finish()?)
}
