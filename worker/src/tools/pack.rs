//! The packer: an ImageFolder tree (`SRC/<class>/<image>`) to shards plus a
//! manifest in any object store.
//!
//! Shards are planned from file sizes alone (so planning is instant and the
//! result deterministic), built in parallel on rayon, and uploaded with
//! several uploads in flight, each retried on transient errors. The manifest
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
//! deleted. A reader opening the dataset sees the old version or the new
//! one, never a mix, and a run that fails midway leaves the old dataset
//! whole (and removes the new shards it had written). A reader that opened
//! the old version and is still reading when the old shards are deleted
//! fails with "not found": finish (or stop) jobs on a dataset before
//! repacking it in place.

use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use bytes::Bytes;
use futures::stream::{self, StreamExt, TryStreamExt};
use tokio::sync::mpsc;
use tributary_common::manifest::{Compression, Manifest, ShardMeta, MANIFEST_NAME};
use tributary_common::shard::{ShardWriter, DEFAULT_BLOCK_BYTES};
use tributary_common::tar;

use crate::error::{Result, WorkerError};
use crate::tools::progress::Progress;
use tributary_io::Location;

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
        }
    }
}

/// One image found in the source tree.
#[derive(Debug, Clone)]
pub struct SourceImage {
    pub path: PathBuf,
    pub class: u32,
    pub key: String,
    /// Field extension: `jpg` or `png`.
    pub ext: &'static str,
    pub size: u64,
}

/// What [`scan_image_folder`] found.
#[derive(Debug, Clone)]
pub struct ImageFolder {
    pub classes: Vec<String>,
    pub images: Vec<SourceImage>,
    /// Files skipped because they are not JPEG or PNG.
    pub skipped: usize,
}

/// What a pack run wrote.
#[derive(Debug, Clone)]
pub struct PackSummary {
    pub shards: usize,
    pub samples: u64,
    pub bytes: u64,
    pub classes: usize,
}

fn io_err(path: &Path, error: std::io::Error) -> WorkerError {
    WorkerError::File {
        path: path.display().to_string(),
        error,
    }
}

fn sorted_entries(dir: &Path) -> Result<Vec<(String, PathBuf, std::fs::Metadata)>> {
    let mut entries = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(|e| io_err(dir, e))? {
        let entry = entry.map_err(|e| io_err(dir, e))?;
        let path = entry.path();
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with('.') {
            continue;
        }
        let meta = std::fs::metadata(&path).map_err(|e| io_err(&path, e))?;
        entries.push((name, path, meta));
    }
    entries.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(entries)
}

/// Lists an ImageFolder tree: classes are the sorted subdirectories, images
/// the JPEG and PNG files in each, sorted by name.
pub fn scan_image_folder(src: &Path) -> Result<ImageFolder> {
    let mut classes = Vec::new();
    let mut images = Vec::new();
    let mut skipped = 0;
    for (class_name, class_dir, meta) in sorted_entries(src)? {
        if !meta.is_dir() {
            skipped += 1;
            continue;
        }
        let class = classes.len() as u32;
        for (file_name, path, meta) in sorted_entries(&class_dir)? {
            let (stem, extension) = file_name.rsplit_once('.').unwrap_or((&file_name, ""));
            let ext = match extension.to_ascii_lowercase().as_str() {
                "jpg" | "jpeg" => "jpg",
                "png" => "png",
                _ => {
                    skipped += 1;
                    continue;
                }
            };
            if !meta.is_file() {
                skipped += 1;
                continue;
            }
            // WebDataset keys must not contain dots in their file name part.
            let key = format!(
                "{}/{}",
                class_name.replace('.', "_"),
                stem.replace('.', "_")
            );
            images.push(SourceImage {
                path,
                class,
                key,
                ext,
                size: meta.len(),
            });
        }
        classes.push(class_name);
    }
    if images.is_empty() {
        return Err(WorkerError::Config(format!(
            "{}: no JPEG or PNG images in class subdirectories (expected SRC/<class>/<image>.jpg)",
            src.display()
        )));
    }
    let mut keys: Vec<(&str, &Path)> = images
        .iter()
        .map(|i| (i.key.as_str(), i.path.as_path()))
        .collect();
    keys.sort_unstable();
    if let Some(pair) = keys.windows(2).find(|w| w[0].0 == w[1].0) {
        return Err(WorkerError::Config(format!(
            "{} and {} would both be sample `{}`: rename one",
            pair[0].1.display(),
            pair[1].1.display(),
            pair[0].0
        )));
    }
    Ok(ImageFolder {
        classes,
        images,
        skipped,
    })
}

/// Splits images into shards by estimated tar size and sample count.
pub fn plan_shards(images: &[SourceImage], options: &PackOptions) -> Vec<Range<usize>> {
    let mut shards = Vec::new();
    let (mut start, mut bytes) = (0, 0u64);
    for (i, image) in images.iter().enumerate() {
        let sample = (tar::entry_len(image.size as usize) + tar::entry_len(8)) as u64;
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
    shards.push(start..images.len());
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
fn new_version() -> String {
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
/// its shards when there is one (and `force` allows replacing it).
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
        Ok(manifest) => Ok(Some(manifest.shards.into_iter().map(|s| s.name).collect())),
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
    images: &[SourceImage],
    options: &PackOptions,
    progress: &dyn Progress,
) -> Result<(Vec<u8>, ShardMeta)> {
    let mut writer = ShardWriter::new(
        shard_name(version, index, options.compression),
        options.compression,
    )
    .block_bytes(options.block_bytes);
    for image in images {
        let data = std::fs::read(&image.path).map_err(|e| io_err(&image.path, e))?;
        let class = image.class.to_string();
        writer.push(&image.key, &[("cls", class.as_bytes()), (image.ext, &data)])?;
        progress.advance(1, data.len() as u64);
    }
    let shard = writer.finish()?;
    Ok((shard.data, shard.meta))
}

/// Packs the ImageFolder tree `src` into `dest`.
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
    let folder = {
        let src = src.to_owned();
        tokio::task::spawn_blocking(move || scan_image_folder(&src))
            .await
            .map_err(|e| WorkerError::Stopped(format!("scan panicked: {e}")))??
    };
    let old_shards = existing(dest, options.force).await?;
    let version = old_shards.as_ref().map(|_| new_version());
    let total_bytes: u64 = folder.images.iter().map(|i| i.size).sum();
    progress.total(folder.images.len() as u64, total_bytes);
    if folder.skipped > 0 {
        tracing::warn!(
            skipped = folder.skipped,
            "skipped files that are not JPEG or PNG images"
        );
    }
    let plan = plan_shards(&folder.images, options);
    let images = Arc::new(folder.images);
    let (tx, rx) = mpsc::channel::<Result<(usize, Vec<u8>, ShardMeta)>>(options.uploads_in_flight);
    let builder = {
        let (images, options, progress, plan, version) = (
            Arc::clone(&images),
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
                    &images[range.clone()],
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
    let fields: std::collections::BTreeSet<&str> =
        images.iter().map(|i| i.ext).chain(["cls"]).collect();
    let fields = fields.into_iter().map(str::to_owned).collect();
    let manifest = Manifest::new(options.compression.kind, fields, folder.classes, shards)
        .map_err(|error| WorkerError::manifest(dest.url_of(MANIFEST_NAME), error))?;
    // The switch from the old version to the new one: a single PUT.
    dest.put(MANIFEST_NAME, Bytes::from(manifest.to_json()))
        .await?;
    if let Some(old) = old_shards {
        let new: std::collections::HashSet<&str> =
            manifest.shards.iter().map(|s| s.name.as_str()).collect();
        let stale: Vec<String> = old
            .into_iter()
            .filter(|name| !new.contains(name.as_str()))
            .collect();
        delete_all(dest, &stale, "a shard of the replaced dataset").await;
    }
    Ok(PackSummary {
        shards: manifest.shards.len(),
        samples: manifest.samples,
        bytes: manifest.bytes,
        classes: manifest.classes.len(),
    })
}
