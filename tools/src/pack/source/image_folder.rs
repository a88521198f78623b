//! ImageFolder trees: `SRC/<class>/<image>.jpg|png`, read one class
//! directory at a time.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

use super::files::{image_ext, sorted_entries};
use super::format::SourceFormat;
use super::sample::{FieldData, SourceField, SourceSample};
use super::stream::{Samples, Source};
use crate::error::{Result, ToolsError};

/// An ImageFolder tree: classes are the sorted subdirectories, images the
/// JPEG and PNG files in each, sorted by name. A sample's key is
/// `<class>/<stem>` with dots replaced by `_`. Files at the top and files
/// that are not JPEG or PNG images in a class directory are skipped.
#[derive(Debug)]
pub struct ImageFolder {
    src: PathBuf,
    /// Class names, sorted.
    classes: Vec<String>,
    /// Each class's directory, by class index.
    dirs: Vec<PathBuf>,
    /// Entries at the top that are not directories.
    top_skipped: usize,
    /// Files skipped by the last complete pass.
    skipped: AtomicUsize,
}

impl ImageFolder {
    /// Lists the classes of the tree at `src` (its images are read by a
    /// pass).
    pub fn open(src: &Path) -> Result<Self> {
        let mut classes = Vec::new();
        let mut dirs = Vec::new();
        let mut top_skipped = 0;
        for (name, dir, meta) in sorted_entries(src)? {
            if meta.is_dir() {
                classes.push(name);
                dirs.push(dir);
            } else {
                top_skipped += 1;
            }
        }
        Ok(Self {
            src: src.to_owned(),
            classes,
            dirs,
            top_skipped,
            skipped: AtomicUsize::new(top_skipped),
        })
    }

    /// The samples of class `class`, in file name order, checked not to
    /// share a key; counts the files skipped into `skipped`.
    fn class(&self, class: usize, skipped: &mut usize) -> Result<Vec<SourceSample>> {
        let samples = self.images(class, skipped)?;
        // Keys are `<class>/<stem>` with dots replaced: two files of a class
        // (`x.y.jpg`, `x_y.png`), or of two classes whose names differ in
        // dots and underscores alone, can meet.
        let prefix = self.classes[class].replace('.', "_");
        let mut earlier = Vec::new();
        for other in (0..class).filter(|&i| self.classes[i].replace('.', "_") == prefix) {
            earlier.extend(self.images(other, &mut 0)?);
        }
        let mut seen: HashMap<&str, &FieldData> = HashMap::new();
        for sample in earlier.iter().chain(&samples) {
            let image = &sample.fields[1].data;
            if let Some(first) = seen.insert(&sample.key, image) {
                let path = |data: &FieldData| match data {
                    FieldData::File(path) => path.display().to_string(),
                    FieldData::Inline(_) => String::new(),
                };
                return Err(ToolsError::Config(format!(
                    "{} and {} would both be sample `{}`: rename one",
                    path(first),
                    path(image),
                    tributary_common::text::printable(&sample.key)
                )));
            }
        }
        Ok(samples)
    }

    /// The images of class `class` as samples.
    fn images(&self, class: usize, skipped: &mut usize) -> Result<Vec<SourceSample>> {
        let class_name = &self.classes[class];
        let cls = class.to_string();
        let mut samples = Vec::new();
        for (file_name, path, meta) in sorted_entries(&self.dirs[class])? {
            let Some(ext) = image_ext(&file_name).filter(|_| meta.is_file()) else {
                *skipped += 1;
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
                fields: vec![SourceField::inline("cls", cls.clone().into_bytes()), image],
            });
        }
        Ok(samples)
    }
}

impl Source for ImageFolder {
    fn format(&self) -> SourceFormat {
        SourceFormat::ImageFolder
    }

    fn classes(&self) -> &[String] {
        &self.classes
    }

    fn samples(&self) -> Samples<'_> {
        Box::new(Pass {
            folder: self,
            next_class: 0,
            pending: Vec::new().into_iter(),
            yielded: false,
            skipped: self.top_skipped,
            done: false,
        })
    }

    fn skipped(&self) -> usize {
        self.skipped.load(Ordering::Relaxed)
    }
}

/// One pass over an ImageFolder tree, a class directory at a time.
struct Pass<'a> {
    folder: &'a ImageFolder,
    next_class: usize,
    /// The samples of the class being read.
    pending: std::vec::IntoIter<SourceSample>,
    yielded: bool,
    skipped: usize,
    done: bool,
}

impl Iterator for Pass<'_> {
    type Item = Result<SourceSample>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if let Some(sample) = self.pending.next() {
                self.yielded = true;
                return Some(Ok(sample));
            }
            if self.done {
                return None;
            }
            if self.next_class == self.folder.dirs.len() {
                self.done = true;
                self.folder.skipped.store(self.skipped, Ordering::Relaxed);
                if !self.yielded {
                    return Some(Err(ToolsError::Config(format!(
                        "{}: no JPEG or PNG images in class subdirectories (expected SRC/<class>/<image>.jpg)",
                        self.folder.src.display()
                    ))));
                }
                return None;
            }
            match self.folder.class(self.next_class, &mut self.skipped) {
                Ok(samples) => {
                    self.pending = samples.into_iter();
                    self.next_class += 1;
                }
                Err(error) => {
                    self.done = true;
                    return Some(Err(error));
                }
            }
        }
    }
}
