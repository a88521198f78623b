//! The packer: an ImageFolder tree (`SRC/<class>/<image>`), a directory of
//! WebDataset-style files (`KEY.EXT`) or a CSV/JSONL listing of
//! `path,label[,caption]` to shards plus a manifest in any object store.
//! [`source`] and [`listing`] say how each is read into samples, a
//! [`Source`] streaming them; this module packs them, whatever their fields.
//!
//! A source is read twice, and never held whole: the first pass checks every
//! sample and plans the shards from the fields' sizes alone (so the result
//! is deterministic, and a bad source is refused before a byte is
//! uploaded; `plan.rs`); the second cuts the same stream into the planned
//! shards, built in parallel, each streamed to the store as it is made
//! (`build.rs`): a shard over [`single_put_limit`] goes up as a multipart
//! upload whose parts are retried alone on transient errors, so memory stays
//! bounded whatever `max_bytes` is. The manifest is written last: a run that
//! fails leaves no manifest pointing at missing shards, and aborts the
//! uploads it had under way.
//!
//! ## Packing over a dataset
//!
//! A destination that already holds a manifest is refused unless
//! [`PackOptions::force`] is set. With it, the new version's shards get new
//! names (`shard-<version>-000000.tar`, the version unique to the run), so
//! not one object of the old dataset is touched until the new manifest
//! replaces the old one in a single PUT; only then are the old shards
//! deleted, with their index objects (a version 2 manifest names
//! `<shard>.idx` beside each shard, written before the manifest and named
//! after the new shards, so they too are new objects). A reader opening
//! the dataset sees the old version or the new one, never a mix, and a run that fails midway leaves the old dataset
//! whole (and removes the new shards it had written). A reader that opened
//! the old version and is still reading when the old shards are deleted
//! fails with "not found": finish (or stop) jobs on a dataset before
//! repacking it in place.
//!
//! [`single_put_limit`]: tributary_io::UploadOptions::single_put_limit

mod build;
mod options;
mod plan;
pub mod source;

use std::ops::Range;
use std::path::Path;
use std::sync::Arc;

use futures::stream::{self, StreamExt};
use tributary_common::manifest::{Compression, Manifest, MANIFEST_NAME};

use crate::error::{Result, ToolsError};
use crate::progress::Progress;
use tributary_io::publish::objects_named;
use tributary_io::{write_manifest, Location, ManifestDraft, UploadMeter};

pub use options::{JpegTranscode, PackOptions};
pub use source::{
    detect, listing, open, FieldData, ImageFolder, Listing, Samples, Source, SourceField,
    SourceFormat, SourceSample, VecSource, WebDatasetFiles,
};

/// What a pack run wrote.
#[derive(Debug, Clone)]
pub struct PackSummary {
    /// The format the source was read as (never `Auto`).
    pub format: SourceFormat,
    pub shards: usize,
    pub samples: u64,
    pub bytes: u64,
    pub classes: usize,
    /// Parts of multipart uploads (0: every shard was one PUT).
    pub parts: u64,
    /// The most bytes the uploads held in memory at once.
    pub peak_upload_bytes: u64,
}

/// Splits samples into shards by their size as tar entries (every field's)
/// and by sample count.
pub fn plan_shards(samples: &[SourceSample], options: &PackOptions) -> Vec<Range<usize>> {
    plan::plan_shards(samples, options.max_bytes, options.max_samples)
}

/// Shard `index`'s object name: `shard-000042.tar` in a new dataset,
/// `shard-<version>-000042.tar` when replacing one.
fn shard_name(version: Option<&str>, index: usize, compression: Compression) -> String {
    match version {
        None => format!("shard-{index:06}{}", compression.kind.suffix()),
        Some(version) => format!("shard-{version}-{index:06}{}", compression.kind.suffix()),
    }
}

/// A version tag unique to this run: the time and the process, hashed.
pub(crate) fn new_version() -> String {
    use std::hash::{BuildHasher, Hasher};
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    hasher.write_u128(now.as_nanos());
    hasher.write_u32(std::process::id());
    format!("{:016x}", hasher.finish())
}

/// The dataset already at `dest`: `None` when there is none, the names of
/// its shards and index objects when there is one (and `force` allows
/// replacing it).
async fn existing(dest: &Location, force: bool) -> Result<Option<Vec<String>>> {
    let url = dest.url_of(MANIFEST_NAME);
    let bytes = match dest.get(MANIFEST_NAME).await {
        Ok(bytes) => bytes,
        Err(error) if error.is_not_found() => return Ok(None),
        Err(error) => return Err(error.into()),
    };
    if !force {
        return Err(ToolsError::AlreadyExists { url });
    }
    match Manifest::from_json(&bytes) {
        Ok(manifest) => Ok(Some(objects_named(&manifest))),
        Err(error) => {
            tracing::warn!(%url, %error, "the dataset being replaced has an unreadable manifest; its shards are left in place");
            Ok(Some(Vec::new()))
        }
    }
}

/// Deletes `names` under `dest`, logging (not failing on) what cannot be.
pub(crate) async fn delete_all(dest: &Location, names: &[String], what: &str) {
    let deletes = stream::iter(names)
        .map(|name| async move { (name, dest.delete(name).await) })
        .buffer_unordered(8)
        .collect::<Vec<_>>()
        .await;
    for (name, result) in deletes {
        if let Err(error) = result {
            tracing::warn!(url = %dest.url_of(name), %error, "cannot delete {what}; it is left behind");
        }
    }
}

/// Packs `src` (read as [`PackOptions::format`]) into `dest`.
pub async fn pack(
    src: &Path,
    dest: &Location,
    options: &PackOptions,
    progress: Arc<dyn Progress>,
) -> Result<PackSummary> {
    if options.max_bytes == 0 || options.max_samples == 0 || options.uploads_in_flight == 0 {
        return Err(ToolsError::Config(
            "max_bytes, max_samples and uploads_in_flight must be at least 1".into(),
        ));
    }
    if options.max_bytes > options.upload.max_object_bytes() {
        return Err(ToolsError::Config(format!(
            "shards of up to {} bytes need more than {} parts of {} bytes: raise the part size",
            options.max_bytes,
            tributary_io::upload::MAX_PARTS,
            options.upload.part_bytes()
        )));
    }
    let (source, plan) = {
        let (src, options) = (src.to_owned(), options.clone());
        tokio::task::spawn_blocking(move || {
            let source = open(&src, options.format)?;
            let plan = plan::plan(
                source.as_ref(),
                &src,
                options.max_bytes,
                options.max_samples,
            )?;
            Ok::<_, ToolsError>((source, plan))
        })
        .await
        .map_err(|e| ToolsError::Stopped(format!("scan panicked: {e}")))??
    };
    let old_shards = existing(dest, options.force).await?;
    let version = old_shards.as_ref().map(|_| new_version());
    progress.total(plan.samples, plan.bytes);
    if plan.skipped > 0 {
        let what = match source.format() {
            SourceFormat::ImageFolder => {
                "files that are not JPEG or PNG images in class directories"
            }
            _ => "files without an extension",
        };
        tracing::warn!(skipped = plan.skipped, src = %src.display(), "skipped {what}");
    }
    progress.total_shards(plan.shards.len() as u64);
    let (format, classes) = (source.format(), source.classes().to_vec());
    let meter = Arc::new(UploadMeter::default());
    let started = Arc::new(std::sync::Mutex::new(Vec::new()));
    let builder = build::Builder {
        source,
        src: src.to_owned(),
        names: (0..plan.shards.len())
            .map(|index| shard_name(version.as_deref(), index, options.compression))
            .collect(),
        plan: plan.shards,
        options: options.clone(),
        dest: dest.clone(),
        progress: Arc::clone(&progress),
        meter: Arc::clone(&meter),
        started: Arc::clone(&started),
    };
    let handle = tokio::runtime::Handle::current();
    let built = tokio::task::spawn_blocking(move || builder.run(&handle))
        .await
        .map_err(|e| ToolsError::Stopped(format!("shard builder panicked: {e}")))
        .and_then(|built| built);
    let built = match built {
        Ok(built) => built,
        Err(error) => {
            if version.is_some() {
                let started = started.lock().map(|s| s.clone()).unwrap_or_default();
                delete_all(dest, &started, "a shard of the failed pack").await;
            }
            return Err(error);
        }
    };
    let draft = ManifestDraft {
        compression: options.compression.kind,
        fields: built.fields.into_iter().collect(),
        classes,
        shards: built.shards,
    };
    // The index objects (named after this version's shards), then the
    // switch from the old version to the new one: a single PUT.
    let manifest = write_manifest(dest, draft, options.manifest_version, None).await?;
    if let Some(old) = old_shards {
        let new_objects = objects_named(&manifest);
        let new: std::collections::HashSet<&str> = new_objects.iter().map(String::as_str).collect();
        let stale: Vec<String> = old
            .into_iter()
            .filter(|name| !new.contains(name.as_str()))
            .collect();
        delete_all(dest, &stale, "a shard of the replaced dataset").await;
    }
    Ok(PackSummary {
        format,
        shards: manifest.shards.len(),
        samples: manifest.samples,
        bytes: manifest.bytes,
        classes: manifest.classes.len(),
        parts: meter.parts(),
        peak_upload_bytes: meter.peak(),
    })
}
