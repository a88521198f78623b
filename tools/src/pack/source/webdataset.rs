//! A directory of WebDataset-style files (`KEY.EXT`, in any
//! subdirectories), read one directory at a time.
//!
//! Samples come out in sorted key order without a list of them all: a
//! directory's keys are `<prefix><stem>` for its files and
//! `<prefix><dir>/...` for its subdirectories, and since neither a stem nor
//! a directory name holds a `/`, all the keys under `<dir>` sort together,
//! as `<dir>/` does among the stems. So a walk that visits each directory's
//! entries sorted that way (stems, and directory names with a `/` added)
//! yields every key in order.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

use tributary_common::sample::check_key;

use super::check::MAX_FIELDS;
use super::files::{io_err, sorted_entries};
use super::format::SourceFormat;
use super::sample::{FieldData, SourceField, SourceSample};
use super::stream::{Samples, Source};
use crate::error::{Result, ToolsError};

/// The deepest subdirectory of a WebDataset directory that is walked.
pub const MAX_DEPTH: usize = 32;
/// The largest `cls` file of a WebDataset directory, in bytes.
pub const MAX_CLS_BYTES: u64 = 32;

/// A directory of WebDataset-style files (see the [module docs](super)).
#[derive(Debug)]
pub struct WebDatasetFiles {
    src: PathBuf,
    /// Files skipped by the last complete pass.
    skipped: AtomicUsize,
}

impl WebDatasetFiles {
    /// The directory at `src` (read by a pass).
    pub fn open(src: &Path) -> Self {
        Self {
            src: src.to_owned(),
            skipped: AtomicUsize::new(0),
        }
    }
}

impl Source for WebDatasetFiles {
    fn format(&self) -> SourceFormat {
        SourceFormat::WebDataset
    }

    fn classes(&self) -> &[String] {
        &[]
    }

    fn samples(&self) -> Samples<'_> {
        let root = Entry::Dir {
            path: self.src.clone(),
            prefix: String::new(),
            depth: 0,
        };
        Box::new(Pass {
            files: self,
            stack: vec![vec![root].into_iter()],
            skipped: 0,
        })
    }

    fn skipped(&self) -> usize {
        self.skipped.load(Ordering::Relaxed)
    }
}

/// An entry of a directory: a sample (its files) or a subdirectory.
enum Entry {
    Sample(SourceSample),
    Dir {
        path: PathBuf,
        prefix: String,
        depth: usize,
    },
}

/// One pass: a stack of the directories being walked, each its entries
/// still to visit.
struct Pass<'a> {
    files: &'a WebDatasetFiles,
    stack: Vec<std::vec::IntoIter<Entry>>,
    skipped: usize,
}

impl Iterator for Pass<'_> {
    type Item = Result<SourceSample>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            let entries = self.stack.last_mut()?;
            match entries.next() {
                None => {
                    self.stack.pop();
                    if self.stack.is_empty() {
                        self.files.skipped.store(self.skipped, Ordering::Relaxed);
                    }
                }
                Some(Entry::Sample(sample)) => return Some(Ok(sample)),
                Some(Entry::Dir {
                    path,
                    prefix,
                    depth,
                }) => match entries_of(&path, &prefix, depth, &mut self.skipped) {
                    Ok(entries) => self.stack.push(entries.into_iter()),
                    Err(error) => {
                        self.stack.clear();
                        return Some(Err(error));
                    }
                },
            }
        }
    }
}

/// The entries of directory `dir` (its keys starting with `prefix`, `depth`
/// below the source) in key order: its files grouped into samples, its
/// subdirectories to walk.
fn entries_of(dir: &Path, prefix: &str, depth: usize, skipped: &mut usize) -> Result<Vec<Entry>> {
    let mut samples: BTreeMap<String, Vec<SourceField>> = BTreeMap::new();
    let mut entries: Vec<(String, Entry)> = Vec::new();
    for (_, path, meta) in sorted_entries(dir)? {
        let utf8 = || {
            ToolsError::Config(format!(
                "{}: the name is not UTF-8, so it cannot be a WebDataset key",
                path.display()
            ))
        };
        if meta.is_dir() {
            if depth + 1 >= MAX_DEPTH {
                return Err(ToolsError::Config(format!(
                    "{}: deeper than {MAX_DEPTH} directories (a symbolic link loop?)",
                    path.display()
                )));
            }
            let name = path.file_name().and_then(|n| n.to_str()).ok_or_else(utf8)?;
            let entry = Entry::Dir {
                path: path.clone(),
                prefix: format!("{prefix}{name}/"),
                depth: depth + 1,
            };
            entries.push((format!("{name}/"), entry));
            continue;
        }
        let name = path.file_name().and_then(|n| n.to_str()).ok_or_else(utf8)?;
        if !meta.is_file() {
            *skipped += 1;
            continue;
        }
        let Some((stem, ext)) = name
            .split_once('.')
            .filter(|(stem, ext)| !stem.is_empty() && !ext.is_empty())
        else {
            *skipped += 1;
            continue;
        };
        let key = format!("{prefix}{stem}");
        check_key(&key).map_err(|reason| {
            let key = tributary_common::text::printable(&key);
            ToolsError::Config(format!("{}: key `{key}` is {reason}", path.display()))
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
        let fields = samples.entry(stem.to_owned()).or_default();
        if fields.len() == MAX_FIELDS {
            return Err(ToolsError::Config(format!(
                "{}: sample `{prefix}{stem}` has more than {MAX_FIELDS} fields",
                path.display()
            )));
        }
        fields.push(field);
    }
    entries.extend(samples.into_iter().map(|(stem, mut fields)| {
        fields.sort_by(|a, b| a.ext.cmp(&b.ext));
        let key = format!("{prefix}{stem}");
        (stem, Entry::Sample(SourceSample { key, fields }))
    }));
    entries.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(entries.into_iter().map(|(_, entry)| entry).collect())
}

/// The bytes of a `cls` file, checked to be a decimal integer.
fn read_cls(path: &Path, size: u64) -> Result<Vec<u8>> {
    let not_integer = || {
        ToolsError::Config(format!(
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pass_yields_keys_in_sorted_order_across_subdirectories() {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path();
        for name in [
            "a0.txt",
            "a/x.txt",
            "a/x.json",
            "a-.txt",
            "a.txt",
            "b/c/d.txt",
            "b.txt",
        ] {
            let path = root.join(name);
            std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
            std::fs::write(&path, name).expect("write");
        }
        let files = WebDatasetFiles::open(root);
        let samples: Vec<SourceSample> = files.samples().collect::<Result<_>>().expect("a pass");
        let keys: Vec<&str> = samples.iter().map(|s| s.key.as_str()).collect();
        let mut sorted = keys.clone();
        sorted.sort_unstable();
        assert_eq!(keys, sorted);
        assert_eq!(keys, ["a", "a-", "a/x", "a0", "b", "b/c/d"]);
        let exts: Vec<&str> = samples[2].fields.iter().map(|f| f.ext.as_str()).collect();
        assert_eq!(exts, ["json", "txt"]);
    }
}
