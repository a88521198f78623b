//! `tributary index URL --format parquet`: a manifest for the Parquet
//! files under URL, read from each file's tail alone (its footer and
//! offset indexes: one or two ranged GETs a file, eight files at once).
//! A shard is a file and its chunks are its row groups; the manifest keeps
//! each file's size, ETag and the crc32c of its tail, so that a file
//! replaced under a job is an error naming it.

use std::sync::Arc;

use futures::stream::{self, StreamExt, TryStreamExt};
use tributary_common::manifest::{Manifest, TableColumn, MANIFEST_NAME};
use tributary_io::parquet::{index_file, schema};
use tributary_io::{IoError, Location};

use crate::error::{Result, ToolsError};
use crate::progress::Progress;

/// Files whose tails are read at once.
const FILES_AT_ONCE: usize = 8;

/// What an index run found.
#[derive(Debug, Clone)]
pub struct TableSummary {
    pub files: usize,
    pub rows: u64,
    pub bytes: u64,
    pub columns: Vec<TableColumn>,
    pub classes: usize,
    /// Files with no rows, left out.
    pub empty: Vec<String>,
}

/// Whether the objects under `location` are Parquet files (and no tar
/// shards): `tributary index` then indexes them as such.
pub fn looks_like_parquet(names: &[(String, u64)]) -> bool {
    names.iter().any(|(n, _)| n.ends_with(".parquet"))
        && !names.iter().any(|(n, _)| n.ends_with(".tar"))
}

/// Indexes every `*.parquet` object under `location` whose name matches
/// `pattern` (a glob of `*`s; all of them without one), in name order,
/// and writes `manifest.json` beside them; refuses to replace one unless
/// `force`. Every file must have the same columns as the first.
pub async fn index(
    location: &Location,
    pattern: Option<&str>,
    force: bool,
    progress: Arc<dyn Progress>,
) -> Result<TableSummary> {
    let objects = location.list_meta().await?;
    if !force && objects.iter().any(|(name, _, _)| name == MANIFEST_NAME) {
        return Err(ToolsError::Config(format!(
            "{} already exists (pass --force to replace it)",
            location.url_of(MANIFEST_NAME)
        )));
    }
    let files: Vec<(String, u64, Option<String>)> = objects
        .into_iter()
        .filter(|(name, _, _)| {
            name.ends_with(".parquet") && pattern.is_none_or(|p| glob_match(p, name))
        })
        .collect();
    if files.is_empty() {
        return Err(IoError::NotFound {
            url: format!("{}/{}", location.url, pattern.unwrap_or("*.parquet")),
            hint: " (no Parquet files to index)",
        }
        .into());
    }
    progress.total(
        files.len() as u64,
        files.iter().map(|(_, size, _)| size).sum(),
    );
    let indexed: Vec<_> = stream::iter(files)
        .map(|(name, size, etag)| {
            let progress = Arc::clone(&progress);
            async move {
                let (entry, footer) = index_file(location, &name, size, etag).await?;
                let metadata = footer.metadata.file_metadata();
                let (columns, classes) =
                    schema::columns(metadata.schema_descr(), metadata.key_value_metadata());
                progress.advance(1, size);
                Ok::<_, ToolsError>((entry, columns, classes))
            }
        })
        .buffered(FILES_AT_ONCE)
        .try_collect()
        .await?;
    let (first, columns, classes) = indexed[0].clone();
    let mut shards = Vec::with_capacity(indexed.len());
    let mut empty = Vec::new();
    for (entry, file_columns, _) in indexed {
        if file_columns != columns {
            let show = |c: &[TableColumn]| {
                c.iter()
                    .map(|c| format!("{} {}", c.name, c.parquet_type))
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            return Err(ToolsError::Config(format!(
                "{}: its columns ({}) are not those of {} ({}); index files of one schema \
                 (choose them with --match)",
                location.url_of(&entry.name),
                show(&file_columns),
                location.url_of(&first.name),
                show(&columns)
            )));
        }
        if entry.samples == 0 {
            empty.push(entry.name);
        } else {
            shards.push(entry);
        }
    }
    for name in &empty {
        tracing::warn!(url = %location.url_of(name), "a Parquet file without rows is left out");
    }
    if shards.is_empty() {
        return Err(ToolsError::Config(format!(
            "{}: the Parquet files hold no rows",
            location.url
        )));
    }
    let manifest = Manifest::new_table(columns, classes, shards).map_err(|error| {
        ToolsError::Io(IoError::Manifest {
            url: location.url_of(MANIFEST_NAME),
            error,
        })
    })?;
    location
        .put(MANIFEST_NAME, manifest.to_json().into())
        .await?;
    Ok(TableSummary {
        files: manifest.shards.len(),
        rows: manifest.samples,
        bytes: manifest.bytes,
        classes: manifest.classes.len(),
        columns: manifest.columns,
        empty,
    })
}

/// Whether `name` matches `pattern`, where `*` stands for any run of
/// characters (`/` included) and everything else for itself.
pub fn glob_match(pattern: &str, name: &str) -> bool {
    let parts: Vec<&str> = pattern.split('*').collect();
    let (first, last) = (parts[0], parts[parts.len() - 1]);
    if parts.len() == 1 {
        return name == pattern;
    }
    if !name.starts_with(first) || name.len() < first.len() + last.len() || !name.ends_with(last) {
        return false;
    }
    let mut rest = &name[first.len()..name.len() - last.len()];
    for part in &parts[1..parts.len() - 1] {
        match rest.find(part) {
            Some(at) => rest = &rest[at + part.len()..],
            None => return false,
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::glob_match;

    #[test]
    fn globs_match_runs_of_anything() {
        assert!(glob_match("train-*", "train-00000-of-00002.parquet"));
        assert!(glob_match("*/train-*.parquet", "data/train-1.parquet"));
        assert!(!glob_match("train-*", "test-0.parquet"));
        assert!(glob_match("a*b*c", "abc"));
        assert!(!glob_match("a*b*c", "acb"));
        assert!(glob_match("x.parquet", "x.parquet"));
        assert!(!glob_match("ab*ba", "aba"));
    }
}
