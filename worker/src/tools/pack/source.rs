//! What `pack` packs: samples described by where each field's bytes come
//! from, found in one of three kinds of source (see [`SourceFormat`]).
//!
//! - **ImageFolder** (`SRC/<class>/<image>.jpg|png`): classes are the sorted
//!   subdirectories; each image is a sample with a `cls` and a `jpg` or
//!   `png` field. Other files are skipped (and counted).
//! - **WebDataset files** (a directory of `KEY.EXT` files, in any
//!   subdirectories): the key is the path relative to SRC up to the first `.`
//!   of the file name, the rest of the name the field (`0001.seg.png` is
//!   field `seg.png` of sample `0001`); files sharing a key form one sample,
//!   its fields in sorted extension order, samples in sorted key order. A
//!   `cls` field must hold a decimal integer. The manifest lists no classes.
//!   Files without an extension are skipped (and counted).
//! - **A listing** (`.csv` or `.jsonl` of `path,label[,caption]`): see
//!   [`super::listing`].
//!
//! Hidden files and directories (a name starting with `.`) are never packed.

use std::collections::BTreeMap;
use std::fmt;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use tributary_common::format::tar;
use tributary_common::manifest::MAX_CHUNK_BYTES;
use tributary_common::sample::check_key;

use crate::error::{Result, WorkerError};

/// The most fields one sample may have.
pub const MAX_FIELDS: usize = 1024;
/// The deepest subdirectory of a WebDataset directory that is walked.
pub const MAX_DEPTH: usize = 32;
/// The largest `cls` file of a WebDataset directory, in bytes.
pub const MAX_CLS_BYTES: u64 = 32;

/// Which kind of source `pack` reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SourceFormat {
    /// A `.csv` or `.jsonl` file is a listing; a directory whose top level
    /// holds only subdirectories with images (and no image sharing its key
    /// with another file, the mark of WebDataset files) is an ImageFolder;
    /// any other directory holds WebDataset files. A directory mixing
    /// ImageFolder-like subdirectories with files is refused as ambiguous.
    #[default]
    Auto,
    ImageFolder,
    WebDataset,
    /// A listing: JSONL where the file ends in `.jsonl` or `.ndjson`, CSV
    /// otherwise.
    Listing,
}

impl SourceFormat {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Auto => "auto",
            Self::ImageFolder => "imagefolder",
            Self::WebDataset => "webdataset",
            Self::Listing => "listing",
        }
    }
}

impl FromStr for SourceFormat {
    type Err = String;

    fn from_str(text: &str) -> std::result::Result<Self, String> {
        match text {
            "auto" => Ok(Self::Auto),
            "imagefolder" => Ok(Self::ImageFolder),
            "webdataset" => Ok(Self::WebDataset),
            "listing" => Ok(Self::Listing),
            _ => Err(format!(
                "unknown source format `{text}` (expected auto, imagefolder, webdataset or listing)"
            )),
        }
    }
}

impl fmt::Display for SourceFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Where a field's bytes come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FieldData {
    /// A file, read when its shard is built.
    File(PathBuf),
    /// Bytes known at scan time (a class index, a caption).
    Inline(Vec<u8>),
}

/// One field of a sample to pack.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceField {
    /// The WebDataset extension, e.g. `jpg`, `cls`, `seg.png`.
    pub ext: String,
    pub data: FieldData,
    /// The size of the bytes, as scanned.
    pub size: u64,
}

impl SourceField {
    pub fn inline(ext: &str, bytes: Vec<u8>) -> Self {
        Self {
            ext: ext.to_owned(),
            size: bytes.len() as u64,
            data: FieldData::Inline(bytes),
        }
    }

    /// Where the field comes from, for errors.
    pub fn origin(&self) -> String {
        match &self.data {
            FieldData::File(path) => path.display().to_string(),
            FieldData::Inline(_) => format!("field `{}`", self.ext),
        }
    }
}

/// One sample to pack: its key and its fields in sorted extension order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceSample {
    pub key: String,
    pub fields: Vec<SourceField>,
}

impl SourceSample {
    /// Payload bytes of all fields, as scanned.
    pub fn bytes(&self) -> u64 {
        self.fields.iter().map(|f| f.size).sum()
    }

    /// Bytes the sample takes as tar entries, as scanned.
    pub fn tar_bytes(&self) -> u64 {
        self.fields
            .iter()
            .map(|f| tar::entry_len(usize::try_from(f.size).unwrap_or(usize::MAX)) as u64)
            .fold(0, u64::saturating_add)
    }
}

/// What a scan found.
#[derive(Debug, Clone)]
pub struct Source {
    /// The format the samples were read as (never `Auto`).
    pub format: SourceFormat,
    /// Class names, index = `cls` value; empty where the source names none.
    pub classes: Vec<String>,
    pub samples: Vec<SourceSample>,
    /// Files left out (see the module docs for which, per format).
    pub skipped: usize,
}

impl Source {
    /// Checks what every format must give: at least one sample, valid and
    /// unique keys, at most [`MAX_FIELDS`] fields per sample with distinct
    /// extensions, and samples that fit a shard chunk.
    pub fn check(&self, src: &Path) -> Result<()> {
        if self.samples.is_empty() {
            return Err(WorkerError::Config(format!(
                "{}: no samples to pack ({} source)",
                src.display(),
                self.format
            )));
        }
        let mut keys: Vec<&str> = self.samples.iter().map(|s| s.key.as_str()).collect();
        keys.sort_unstable();
        if let Some(pair) = keys.windows(2).find(|w| w[0] == w[1]) {
            return Err(WorkerError::Config(format!(
                "{}: two samples have key `{}`",
                src.display(),
                pair[0]
            )));
        }
        let limit = MAX_CHUNK_BYTES - 2 * tar::BLOCK as u64;
        for sample in &self.samples {
            let bad = |reason: String| {
                WorkerError::Config(format!(
                    "{}: sample `{}` {reason}",
                    src.display(),
                    sample.key
                ))
            };
            check_key(&sample.key).map_err(|reason| bad(format!("has a key that is {reason}")))?;
            if sample.fields.is_empty() || sample.fields.len() > MAX_FIELDS {
                return Err(bad(format!(
                    "has {} fields (1 to {MAX_FIELDS} allowed)",
                    sample.fields.len()
                )));
            }
            if let Some(field) = sample.fields.iter().find(|f| {
                f.ext.is_empty() || f.ext.contains('/') || f.ext.chars().any(char::is_control)
            }) {
                return Err(bad(format!(
                    "has field `{}` ({}): an extension must be non-empty, without `/` or control characters",
                    field.ext.escape_debug(),
                    field.origin()
                )));
            }
            if let Some(pair) = sample.fields.windows(2).find(|w| w[0].ext >= w[1].ext) {
                return Err(bad(format!(
                    "has fields `{}` and `{}` out of order or twice",
                    pair[0].ext, pair[1].ext
                )));
            }
            if sample.tar_bytes() > limit {
                return Err(bad(format!(
                    "is {} bytes as tar entries, over the {limit}-byte limit of one sample",
                    sample.tar_bytes()
                )));
            }
        }
        Ok(())
    }
}

pub(super) fn io_err(path: &Path, error: std::io::Error) -> WorkerError {
    WorkerError::File {
        path: path.display().to_string(),
        error,
    }
}

/// Reads field `field` whole, refusing more than [`MAX_CHUNK_BYTES`] (a
/// file that grew since it was scanned cannot size an allocation).
pub fn read_field(field: &SourceField) -> Result<std::borrow::Cow<'_, [u8]>> {
    match &field.data {
        FieldData::Inline(bytes) => Ok(std::borrow::Cow::Borrowed(bytes)),
        FieldData::File(path) => {
            let file = std::fs::File::open(path).map_err(|e| io_err(path, e))?;
            let mut data =
                Vec::with_capacity(usize::try_from(field.size.min(MAX_CHUNK_BYTES)).unwrap_or(0));
            file.take(MAX_CHUNK_BYTES + 1)
                .read_to_end(&mut data)
                .map_err(|e| io_err(path, e))?;
            if data.len() as u64 > MAX_CHUNK_BYTES {
                return Err(WorkerError::Config(format!(
                    "{}: over the {MAX_CHUNK_BYTES}-byte limit of one sample",
                    path.display()
                )));
            }
            Ok(std::borrow::Cow::Owned(data))
        }
    }
}

/// Non-hidden entries of `dir`, sorted by name, with their metadata
/// (symbolic links followed).
pub(super) fn sorted_entries(dir: &Path) -> Result<Vec<(String, PathBuf, std::fs::Metadata)>> {
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

/// The names of the non-hidden files in `dir`, unsorted, from the directory
/// listing alone where it gives the type (no `stat` per file).
fn file_names(dir: &Path) -> Result<Vec<String>> {
    let mut names = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(|e| io_err(dir, e))? {
        let entry = entry.map_err(|e| io_err(dir, e))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with('.') {
            continue;
        }
        let kind = entry.file_type().map_err(|e| io_err(&entry.path(), e))?;
        let is_file = if kind.is_symlink() {
            std::fs::metadata(entry.path()).is_ok_and(|meta| meta.is_file())
        } else {
            kind.is_file()
        };
        if is_file {
            names.push(name);
        }
    }
    Ok(names)
}

/// `jpg` or `png` for a file name with an ImageFolder image extension.
fn image_ext(file_name: &str) -> Option<&'static str> {
    let (_, extension) = file_name.rsplit_once('.')?;
    match extension.to_ascii_lowercase().as_str() {
        "jpg" | "jpeg" => Some("jpg"),
        "png" => Some("png"),
        _ => None,
    }
}

/// Scans `src` as `format` (`Auto`: as [`detect`] decides).
pub fn scan(src: &Path, format: SourceFormat) -> Result<Source> {
    let format = match format {
        SourceFormat::Auto => detect(src)?,
        format => format,
    };
    let source = match format {
        SourceFormat::ImageFolder => scan_image_folder(src)?,
        SourceFormat::WebDataset => scan_webdataset(src)?,
        SourceFormat::Listing | SourceFormat::Auto => super::listing::scan_listing(src)?,
    };
    source.check(src)?;
    Ok(source)
}

/// The format of `src` under the [`SourceFormat::Auto`] rule.
pub fn detect(src: &Path) -> Result<SourceFormat> {
    let meta = std::fs::metadata(src).map_err(|e| io_err(src, e))?;
    if meta.is_file() {
        let name = src.to_string_lossy().to_ascii_lowercase();
        if [".csv", ".jsonl", ".ndjson"]
            .iter()
            .any(|ext| name.ends_with(ext))
        {
            return Ok(SourceFormat::Listing);
        }
        return Err(WorkerError::Config(format!(
            "{}: a file, but not a .csv or .jsonl listing (pack a directory, or pass --format listing)",
            src.display()
        )));
    }
    let entries = sorted_entries(src)?;
    if entries.is_empty() {
        return Err(WorkerError::Config(format!(
            "{}: an empty directory, nothing to pack",
            src.display()
        )));
    }
    let (dirs, files): (Vec<_>, Vec<_>) = entries.iter().partition(|(_, _, meta)| meta.is_dir());
    let mut images = false;
    for (_, dir, _) in &dirs {
        let mut image_keys = std::collections::HashSet::new();
        let mut other_keys = Vec::new();
        for name in file_names(dir)? {
            let key = name.split('.').next().unwrap_or("").to_owned();
            if image_ext(&name).is_some() {
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
        (true, Some((_, file, _))) => Err(WorkerError::Config(format!(
            "{}: ambiguous: it holds subdirectories of images (an ImageFolder tree?) and files such as {} \
             (WebDataset files?); pass --format imagefolder (files at the top are skipped) or --format webdataset",
            src.display(),
            file.display()
        ))),
    }
}

/// Lists an ImageFolder tree: classes are the sorted subdirectories, images
/// the JPEG and PNG files in each, sorted by name. A sample's key is
/// `<class>/<stem>` with dots replaced by `_`.
pub fn scan_image_folder(src: &Path) -> Result<Source> {
    let mut classes = Vec::new();
    let mut samples = Vec::new();
    let mut skipped = 0;
    for (class_name, class_dir, meta) in sorted_entries(src)? {
        if !meta.is_dir() {
            skipped += 1;
            continue;
        }
        let class = classes.len().to_string();
        for (file_name, path, meta) in sorted_entries(&class_dir)? {
            let Some(ext) = image_ext(&file_name).filter(|_| meta.is_file()) else {
                skipped += 1;
                continue;
            };
            let stem = file_name
                .rsplit_once('.')
                .map_or(file_name.as_str(), |(stem, _)| stem);
            // WebDataset keys must not contain dots in their file name part.
            let key = format!(
                "{}/{}",
                class_name.replace('.', "_"),
                stem.replace('.', "_")
            );
            let image = SourceField {
                ext: ext.to_owned(),
                data: FieldData::File(path),
                size: meta.len(),
            };
            samples.push(SourceSample {
                key,
                fields: vec![
                    SourceField::inline("cls", class.clone().into_bytes()),
                    image,
                ],
            });
        }
        classes.push(class_name);
    }
    if samples.is_empty() {
        return Err(WorkerError::Config(format!(
            "{}: no JPEG or PNG images in class subdirectories (expected SRC/<class>/<image>.jpg)",
            src.display()
        )));
    }
    let mut keys: Vec<(&str, &FieldData)> = samples
        .iter()
        .map(|s| (s.key.as_str(), &s.fields[1].data))
        .collect();
    keys.sort_unstable_by(|a, b| a.0.cmp(b.0));
    if let Some(pair) = keys.windows(2).find(|w| w[0].0 == w[1].0) {
        let path = |data: &FieldData| match data {
            FieldData::File(path) => path.display().to_string(),
            FieldData::Inline(_) => String::new(),
        };
        return Err(WorkerError::Config(format!(
            "{} and {} would both be sample `{}`: rename one",
            path(pair[0].1),
            path(pair[1].1),
            pair[0].0
        )));
    }
    Ok(Source {
        format: SourceFormat::ImageFolder,
        classes,
        samples,
        skipped,
    })
}

/// Lists a directory of WebDataset-style files (see the module docs).
pub fn scan_webdataset(src: &Path) -> Result<Source> {
    let mut samples: BTreeMap<String, Vec<SourceField>> = BTreeMap::new();
    let mut skipped = 0;
    let mut dirs = vec![(src.to_owned(), String::new(), 0usize)];
    while let Some((dir, prefix, depth)) = dirs.pop() {
        for (_, path, meta) in sorted_entries(&dir)? {
            let utf8 = || {
                WorkerError::Config(format!(
                    "{}: the name is not UTF-8, so it cannot be a WebDataset key",
                    path.display()
                ))
            };
            if meta.is_dir() {
                if depth + 1 >= MAX_DEPTH {
                    return Err(WorkerError::Config(format!(
                        "{}: deeper than {MAX_DEPTH} directories (a symbolic link loop?)",
                        path.display()
                    )));
                }
                let name = path.file_name().and_then(|n| n.to_str()).ok_or_else(utf8)?;
                dirs.push((path.clone(), format!("{prefix}{name}/"), depth + 1));
                continue;
            }
            let name = path.file_name().and_then(|n| n.to_str()).ok_or_else(utf8)?;
            if !meta.is_file() {
                skipped += 1;
                continue;
            }
            let Some((stem, ext)) = name
                .split_once('.')
                .filter(|(stem, ext)| !stem.is_empty() && !ext.is_empty())
            else {
                skipped += 1;
                continue;
            };
            let key = format!("{prefix}{stem}");
            check_key(&key).map_err(|reason| {
                WorkerError::Config(format!("{}: key `{key}` is {reason}", path.display()))
            })?;
            let field = if ext == "cls" {
                SourceField::inline("cls", read_cls(&path, meta.len())?)
            } else {
                SourceField {
                    ext: ext.to_owned(),
                    data: FieldData::File(path.clone()),
                    size: meta.len(),
                }
            };
            let fields = samples.entry(key).or_default();
            if fields.len() == MAX_FIELDS {
                return Err(WorkerError::Config(format!(
                    "{}: sample `{prefix}{stem}` has more than {MAX_FIELDS} fields",
                    path.display()
                )));
            }
            fields.push(field);
        }
    }
    let samples = samples
        .into_iter()
        .map(|(key, mut fields)| {
            fields.sort_by(|a, b| a.ext.cmp(&b.ext));
            SourceSample { key, fields }
        })
        .collect();
    Ok(Source {
        format: SourceFormat::WebDataset,
        classes: Vec::new(),
        samples,
        skipped,
    })
}

/// The bytes of a `cls` file, checked to be a decimal integer.
fn read_cls(path: &Path, size: u64) -> Result<Vec<u8>> {
    let not_integer = || {
        WorkerError::Config(format!(
            "{}: a `cls` field must hold a decimal integer",
            path.display()
        ))
    };
    if size > MAX_CLS_BYTES {
        return Err(not_integer());
    }
    let file = std::fs::File::open(path).map_err(|e| io_err(path, e))?;
    let mut bytes = Vec::new();
    file.take(MAX_CLS_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| io_err(path, e))?;
    std::str::from_utf8(&bytes)
        .ok()
        .and_then(|text| text.trim().parse::<i64>().ok())
        .ok_or_else(not_integer)?;
    Ok(bytes)
}
