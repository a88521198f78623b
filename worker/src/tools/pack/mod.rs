//! The packer: an ImageFolder tree (`SRC/<class>/<image>`), a directory of
//! WebDataset-style files (`KEY.EXT`) or a CSV/JSONL listing of
//! `path,label[,caption]` to shards plus a manifest in any object store.
//! [`source`] and [`listing`] say how each is read into samples; this module
//! packs them, whatever their fields.
//!
//! Shards are planned from the fields' sizes alone (so planning is instant
//! and the result deterministic), built in parallel on rayon, and uploaded
//! with several uploads in flight, each retried on transient errors. The manifest
//! is written last: a run that fails leaves no manifest pointing at missing
//! shards.
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

mod csv;
pub mod listing;
pub mod source;

use std::ops::Range;
use std::path::Path;
use std::sync::Arc;

use bytes::Bytes;
use futures::stream::{self, StreamExt, TryStreamExt};
use tokio::sync::mpsc;
use tributary_common::manifest::{Compression, Manifest, ShardMeta, MANIFEST_NAME};
use tributary_common::shard::{ShardWriter, DEFAULT_BLOCK_BYTES};

use crate::error::{Result, WorkerError};
use crate::tools::progress::Progress;
use tributary_io::publish::objects_named;
use tributary_io::{write_manifest, Location, ManifestDraft, ManifestVersion};

pub use source::{
    detect, scan, scan_image_folder, scan_webdataset, FieldData, Source, SourceField, SourceFormat,
    SourceSample,
};

/// Packer settings.
#[derive(Debug, Clone)]
pub struct PackOptions {
    /// A shard is closed before it would exceed this many bytes (a single
    /// larger sample still gets a shard of its own).
    pub max_bytes: u64,
    /// A shard holds at most this many samples.
    pub max_samples: u32,
    pub compression: Compression,
    /// Uncompressed size of one zstd block.
    pub block_bytes: usize,
    /// Shard uploads in flight at once.
    pub uploads_in_flight: usize,
    /// Replace a dataset already at the destination (see the module docs).
    pub force: bool,
    /// What the source is (`Auto`: decided from it, see [`SourceFormat`]).
    pub format: SourceFormat,
    /// The manifest version to write (2: an index object per shard; 1:
    /// every chunk inline, for readers older than version 2).
    pub manifest_version: ManifestVersion,
}

impl Default for PackOptions {
    fn default() -> Self {
        Self {
            max_bytes: 64 << 20,
            max_samples: u32::MAX,
            compression: Compression::NONE,
            block_bytes: DEFAULT_BLOCK_BYTES,
            uploads_in_flight: 4,
            force: false,
            format: SourceFormat::Auto,
            manifest_version: ManifestVersion::default(),
        }
    }
}

/// What a pack run wrote.
#[derive(Debug, Clone)]
pub struct PackSummary {
    /// The format the source was read as (never `Auto`).
    pub format: SourceFormat,
    pub shards: usize,
    pub samples: u64,
    pub bytes: u64,
    pub classes: usize,
}

/// Splits samples into shards by their size as tar entries (every field's)
/// and by sample count.
pub fn plan_shards(samples: &[SourceSample], options: &PackOptions) -> Vec<Range<usize>> {
    let mut shards = Vec::new();
    let (mut start, mut bytes) = (0, 0u64);
    for (i, sample) in samples.iter().enumerate() {
        let sample = sample.tar_bytes();
        let count = (i - start) as u64;
        if count > 0
            && (bytes + sample > options.max_bytes || count >= u64::from(options.max_samples))
        {
            shards.push(start..i);
            start = i;
            bytes = 0;
        }
        bytes += sample;
    }
    shards.push(start..samples.len());
    shards
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
        return Err(WorkerError::AlreadyExists { url });
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
async fn delete_all(dest: &Location, names: &[String], what: &str) {
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

fn build_shard(
    version: Option<&str>,
    index: usize,
    samples: &[SourceSample],
    options: &PackOptions,
    progress: &dyn Progress,
) -> Result<(Vec<u8>, ShardMeta)> {
    let mut writer = ShardWriter::new(
        shard_name(version, index, options.compression),
        options.compression,
    )
    .block_bytes(options.block_bytes);
    for sample in samples {
        let data = sample
            .fields
            .iter()
            .map(source::read_field)
            .collect::<Result<Vec<_>>>()?;
        let fields: Vec<(&str, &[u8])> = sample
            .fields
            .iter()
            .zip(&data)
            .map(|(field, data)| (field.ext.as_str(), &data[..]))
            .collect();
        writer.push(&sample.key, &fields)?;
        progress.advance(1, data.iter().map(|d| d.len() as u64).sum());
    }
    let shard = writer.finish()?;
    Ok((shard.data, shard.meta))
}

/// Packs `src` (read as [`PackOptions::format`]) into `dest`.
pub async fn pack(
    src: &Path,
    dest: &Location,
    options: &PackOptions,
    progress: Arc<dyn Progress>,
) -> Result<PackSummary> {
    if options.max_bytes == 0 || options.max_samples == 0 || options.uploads_in_flight == 0 {
        return Err(WorkerError::Config(
            "max_bytes, max_samples and uploads_in_flight must be at least 1".into(),
        ));
    }
    let source = {
        let (src, format) = (src.to_owned(), options.format);
        tokio::task::spawn_blocking(move || scan(&src, format))
            .await
            .map_err(|e| WorkerError::Stopped(format!("scan panicked: {e}")))??
    };
    let old_shards = existing(dest, options.force).await?;
    let version = old_shards.as_ref().map(|_| new_version());
    let total_bytes: u64 = source.samples.iter().map(SourceSample::bytes).sum();
    progress.total(source.samples.len() as u64, total_bytes);
    if source.skipped > 0 {
        let what = match source.format {
            SourceFormat::ImageFolder => {
                "files that are not JPEG or PNG images in class directories"
            }
            _ => "files without an extension",
        };
        tracing::warn!(skipped = source.skipped, src = %src.display(), "skipped {what}");
    }
    let plan = plan_shards(&source.samples, options);
    let samples = Arc::new(source.samples);
    let (tx, rx) = mpsc::channel::<Result<(usize, Vec<u8>, ShardMeta)>>(options.uploads_in_flight);
    let builder = {
        let (samples, options, progress, plan, version) = (
            Arc::clone(&samples),
            options.clone(),
            Arc::clone(&progress),
            plan.clone(),
            version.clone(),
        );
        tokio::task::spawn_blocking(move || {
            use rayon::prelude::*;
            plan.par_iter().enumerate().try_for_each(|(index, range)| {
                let built = build_shard(
                    version.as_deref(),
                    index,
                    &samples[range.clone()],
                    &options,
                    progress.as_ref(),
                );
                let failed = built.is_err();
                let sent = tx.blocking_send(built.map(|(data, meta)| (index, data, meta)));
                // Stop early when the uploader is gone or this shard failed.
                if sent.is_err() || failed {
                    Err(())
                } else {
                    Ok(())
                }
            })
        })
    };
    let incoming = stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|item| (item, rx))
    });
    // Names of this run's shards whose upload started, to remove them if
    // the run fails while replacing a dataset.
    let started = std::sync::Mutex::new(Vec::new());
    let uploaded: Result<Vec<(usize, ShardMeta)>> = incoming
        .map(|built| {
            let started = &started;
            async move {
                let (index, data, meta) = built?;
                if let Ok(mut started) = started.lock() {
                    started.push(meta.name.clone());
                }
                dest.put(&meta.name, Bytes::from(data)).await?;
                Ok((index, meta))
            }
        })
        .buffer_unordered(options.uploads_in_flight)
        .try_collect()
        .await;
    let built = builder
        .await
        .map_err(|e| WorkerError::Stopped(format!("shard builder panicked: {e}")))
        .and_then(|b| b.map_err(|()| WorkerError::Stopped("shard building stopped early".into())));
    let mut uploaded = match (uploaded, built) {
        (Ok(uploaded), Ok(())) => uploaded,
        (Err(error), _) | (Ok(_), Err(error)) => {
            if version.is_some() {
                let started = started.into_inner().unwrap_or_default();
                delete_all(dest, &started, "a shard of the failed pack").await;
            }
            return Err(error);
        }
    };
    uploaded.sort_by_key(|(index, _)| *index);
    let shards: Vec<ShardMeta> = uploaded.into_iter().map(|(_, meta)| meta).collect();
    let fields: std::collections::BTreeSet<&str> = samples
        .iter()
        .flat_map(|s| s.fields.iter().map(|f| f.ext.as_str()))
        .collect();
    let fields = fields.into_iter().map(str::to_owned).collect();
    let draft = ManifestDraft {
        compression: options.compression.kind,
        fields,
        classes: source.classes,
        shards,
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
        format: source.format,
        shards: manifest.shards.len(),
        samples: manifest.samples,
        bytes: manifest.bytes,
        classes: manifest.classes.len(),
    })
}
