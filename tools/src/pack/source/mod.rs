//! What `pack` packs: a [`Source`] streams samples described by where each
//! field's bytes come from. Three kinds of source (see [`SourceFormat`]),
//! told apart here, in [`detect`] and [`open`], and nowhere else:
//!
//! - **ImageFolder** (`SRC/<class>/<image>.jpg|png`, [`ImageFolder`]):
//!   classes are the sorted subdirectories; each image is a sample with a
//!   `cls` and a `jpg` or `png` field. Other files are skipped (and
//!   counted).
//! - **WebDataset files** (a directory of `KEY.EXT` files, in any
//!   subdirectories, [`WebDatasetFiles`]): the key is the path relative to
//!   SRC up to the first `.` of the file name, the rest of the name the
//!   field (`0001.seg.png` is field `seg.png` of sample `0001`); files
//!   sharing a key form one sample, its fields in sorted extension order,
//!   samples in sorted key order. A `cls` field must hold a decimal integer.
//!   The manifest lists no classes. Files without an extension are skipped
//!   (and counted).
//! - **A listing** (`.csv` or `.jsonl` of `path,label[,caption]`,
//!   [`Listing`]): see [`listing`].
//! - **Parquet files** (a `.parquet` file or a directory of them,
//!   [`ParquetFiles`]): a row a sample, its columns fields by kind.
//!
//! Hidden files and directories (a name starting with `.`) are never packed.
//!
//! ## Layout
//!
//! - `stream.rs`: the [`Source`] trait and [`VecSource`].
//! - `sample.rs`: [`SourceSample`] and its fields, read with [`read_field`].
//! - `check.rs`: what every source must give, checked as it streams.
//! - `format.rs`: [`SourceFormat`], the `--format` value.
//! - `image_folder.rs`, `webdataset.rs`, [`listing`]: the sources.
//! - `files.rs`: local directories as the sources read them.

mod check;
mod files;
mod format;
mod image_folder;
pub mod listing;
mod parquet;
mod sample;
mod stream;
mod webdataset;

use std::collections::HashSet;
use std::path::Path;

use crate::error::{Result, ToolsError};

pub use check::{check_sample, Checker, MAX_FIELDS};
pub use format::SourceFormat;
pub use image_folder::ImageFolder;
pub use listing::Listing;
pub use parquet::ParquetFiles;
pub use sample::{read_field, FieldData, SourceField, SourceSample};
pub use stream::{Samples, Source, VecSource};
pub use webdataset::{WebDatasetFiles, MAX_CLS_BYTES, MAX_DEPTH};

/// Opens `src` as `format` (`Auto`: as [`detect`] decides). Nothing is
/// packed yet: a pass over the source reads its samples.
pub fn open(src: &Path, format: SourceFormat) -> Result<Box<dyn Source>> {
    let format = match format {
        SourceFormat::Auto => detect(src)?,
        format => format,
    };
    Ok(match format {
        SourceFormat::ImageFolder => Box::new(ImageFolder::open(src)?),
        SourceFormat::WebDataset => Box::new(WebDatasetFiles::open(src)),
        SourceFormat::Parquet => Box::new(ParquetFiles::open(src)?),
        SourceFormat::Listing | SourceFormat::Auto => Box::new(Listing::open(src)?),
    })
}

/// The format of `src` under the [`SourceFormat::Auto`] rule.
pub fn detect(src: &Path) -> Result<SourceFormat> {
    let meta = std::fs::metadata(src).map_err(|e| files::io_err(src, e))?;
    if meta.is_file() {
        let name = src.to_string_lossy().to_ascii_lowercase();
        if name.ends_with(".parquet") {
            return Ok(SourceFormat::Parquet);
        }
        if [".csv", ".jsonl", ".ndjson"]
            .iter()
            .any(|ext| name.ends_with(ext))
        {
            return Ok(SourceFormat::Listing);
        }
        return Err(ToolsError::Config(format!(
            "{}: a file, but not a .csv or .jsonl listing (pack a directory, or pass --format listing)",
            src.display()
        )));
    }
    let entries = files::sorted_entries(src)?;
    if entries.is_empty() {
        return Err(ToolsError::Config(format!(
            "{}: an empty directory, nothing to pack",
            src.display()
        )));
    }
    let (dirs, files): (Vec<_>, Vec<_>) = entries.iter().partition(|(_, _, meta)| meta.is_dir());
    // Parquet files (and perhaps the manifest `tributary index` wrote).
    if files.iter().any(|(name, _, _)| name.ends_with(".parquet"))
        && files
            .iter()
            .all(|(name, _, _)| name.ends_with(".parquet") || name == "manifest.json")
    {
        return Ok(SourceFormat::Parquet);
    }
    let mut images = false;
    for (_, dir, _) in &dirs {
        let mut image_keys = HashSet::new();
        let mut other_keys = Vec::new();
        for name in files::file_names(dir)? {
            let key = name.split('.').next().unwrap_or("").to_owned();
            if files::image_ext(&name).is_some() {
                image_keys.insert(key);
            } else {
                other_keys.push(key);
            }
        }
        // An image sharing its key with another file: a WebDataset sample.
        if other_keys.iter().any(|key| image_keys.contains(key)) {
            return Ok(SourceFormat::WebDataset);
        }
        images |= !image_keys.is_empty();
    }
    match (images, files.first()) {
        (false, _) => Ok(SourceFormat::WebDataset),
        (true, None) => Ok(SourceFormat::ImageFolder),
        (true, Some((_, file, _))) => Err(ToolsError::Config(format!(
            "{}: ambiguous: it holds subdirectories of images (an ImageFolder tree?) and files such as {} \
             (WebDataset files?); pass --format imagefolder (files at the top are skipped) or --format webdataset",
            src.display(),
            file.display()
        ))),
    }
}
