//! `tributary inspect` of a token dataset: every shard's index object read
//! and checked (size, CRC32C, Megatron layout, the manifest's dtype, token
//! and document counts) and its data object's size compared with the
//! manifest's. The tokens themselves are not read.

use std::sync::Arc;

use futures::stream::{self, StreamExt};
use tributary_common::tokens::manifest::{TokenManifest, TokenShard};
use tributary_common::tokens::megatron::{decode_idx, Expected};
use tributary_common::tokens::DocIndex;
use tributary_io::Location;

use crate::progress::Progress;

/// What inspecting a token dataset found.
#[derive(Debug, Clone, Default)]
pub struct TokenReport {
    pub shards: usize,
    pub verified_shards: usize,
    /// The shortest and longest document, over the verified shards.
    pub shortest: Option<u64>,
    pub longest: Option<u64>,
    /// One line per problem, naming the object.
    pub problems: Vec<String>,
}

/// Checks every shard of `manifest` at `location`.
pub async fn inspect_tokens(
    location: &Location,
    manifest: &TokenManifest,
    progress: Arc<dyn Progress>,
) -> TokenReport {
    let sizes: std::collections::HashMap<String, u64> = match location.list().await {
        Ok(list) => list.into_iter().collect(),
        Err(error) => {
            return TokenReport {
                shards: manifest.shards.len(),
                problems: vec![format!("cannot list {}: {error}", location.url)],
                ..TokenReport::default()
            }
        }
    };
    let results: Vec<Result<DocIndex, String>> = stream::iter(&manifest.shards)
        .map(|shard| {
            let (sizes, progress) = (&sizes, Arc::clone(&progress));
            async move {
                let checked = check_shard(location, manifest, shard, sizes).await;
                if let Ok(index) = &checked {
                    progress.advance(index.documents(), shard.bytes);
                    progress.tokens(index.tokens());
                }
                checked
            }
        })
        .buffered(8)
        .collect()
        .await;
    let mut report = TokenReport {
        shards: manifest.shards.len(),
        ..TokenReport::default()
    };
    for result in results {
        match result {
            Ok(index) => {
                report.verified_shards += 1;
                let lengths = (0..index.documents()).map(|d| index.doc_len(d));
                for len in lengths {
                    report.shortest = Some(report.shortest.map_or(len, |s| s.min(len)));
                    report.longest = Some(report.longest.map_or(len, |l| l.max(len)));
                }
            }
            Err(problem) => report.problems.push(problem),
        }
    }
    report
}

async fn check_shard(
    location: &Location,
    manifest: &TokenManifest,
    shard: &TokenShard,
    sizes: &std::collections::HashMap<String, u64>,
) -> Result<DocIndex, String> {
    let data_url = location.url_of(&shard.name);
    match sizes.get(&shard.name) {
        None => return Err(format!("{data_url}: missing")),
        Some(&size) if size != shard.bytes => {
            return Err(format!(
                "{data_url}: {size} bytes, the manifest says {}",
                shard.bytes
            ))
        }
        Some(_) => {}
    }
    let idx_url = location.url_of(&shard.index.name);
    let bytes = location
        .get_at_most(&shard.index.name, shard.index.bytes)
        .await
        .map_err(|error| format!("{idx_url}: {error}"))?;
    if bytes.len() as u64 != shard.index.bytes {
        return Err(format!(
            "{idx_url}: {} bytes, the manifest says {}",
            bytes.len(),
            shard.index.bytes
        ));
    }
    let crc = crc32c::crc32c(&bytes);
    if crc != shard.index.crc32c {
        return Err(format!(
            "{idx_url}: crc32c {crc:#010x}, the manifest says {:#010x}",
            shard.index.crc32c
        ));
    }
    let expected = Expected {
        dtype: manifest.dtype,
        data_offset: shard.offset,
        tokens: shard.tokens,
        documents: shard.documents,
    };
    decode_idx(&idx_url, &bytes, &expected).map_err(|error| error.to_string())
}
