//! Token datasets: packing a text corpus into one (`pack --tokenizer`) and
//! indexing token files already in a store (`index --tokens`), both
//! writing shards that are Megatron `.bin`/`.idx` pairs and a
//! `tributary-tokens` manifest
//! ([`tributary_common::tokens::manifest`]).
//!
//! - [`corpus`]: JSONL and `.txt` documents, read in order in batches.
//! - [`tokenizer`]: `bytes` and Hugging Face `tokenizer.json`.
//! - `pack`: [`pack_tokens`].
//! - `index`: [`index_tokens`] over Megatron pairs, `.npy` and raw files.
//! - `inspect`: [`inspect_tokens`], every shard's index checked.
//! - `npy`: the `.npy` header.

pub mod corpus;
mod index;
mod inspect;
mod npy;
mod pack;
pub mod parquet_rows;
pub mod tokenizer;

pub use index::{index_tokens, IndexTokensOptions, IndexTokensSummary};
pub use inspect::{inspect_tokens, TokenReport};
pub use npy::{parse_npy_header, NpyHeader};
pub use pack::{pack_tokens, TokenPackOptions, TokenPackSummary};

use tributary_common::manifest::{Manifest, MANIFEST_NAME};
use tributary_common::tokens::manifest::{is_token_manifest, TokenManifest};
use tributary_io::publish::objects_named;
use tributary_io::Location;

use crate::error::{Result, ToolsError};

/// Shard `index`'s data and index object names: `shard-000042.bin` and
/// `shard-000042.idx`, or with the run's version when replacing a dataset.
pub(crate) fn shard_names(version: Option<&str>, index: usize) -> (String, String) {
    let stem = match version {
        None => format!("shard-{index:06}"),
        Some(version) => format!("shard-{version}-{index:06}"),
    };
    (format!("{stem}.bin"), format!("{stem}.idx"))
}

/// The dataset already at `dest`: `None` when there is none, the names of
/// its objects when there is one (tar or token) and `force` allows
/// replacing it.
pub(crate) async fn existing_objects(dest: &Location, force: bool) -> Result<Option<Vec<String>>> {
    let url = dest.url_of(MANIFEST_NAME);
    let bytes = match dest.get(MANIFEST_NAME).await {
        Ok(bytes) => bytes,
        Err(error) if error.is_not_found() => return Ok(None),
        Err(error) => return Err(error.into()),
    };
    if !force {
        return Err(ToolsError::AlreadyExists { url });
    }
    let names = if is_token_manifest(&bytes) {
        TokenManifest::from_json(&bytes).map(|m| {
            m.shards
                .iter()
                .flat_map(|s| [s.name.clone(), s.index.name.clone()])
                .collect()
        })
    } else {
        Manifest::from_json(&bytes).map(|m| objects_named(&m))
    };
    Ok(Some(names.unwrap_or_else(|error| {
        tracing::warn!(%url, %error, "the dataset being replaced has an unreadable manifest; its objects are left in place");
        Vec::new()
    })))
}
