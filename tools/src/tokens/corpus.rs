//! A corpus of text documents: JSONL files (one object a line, the text in
//! one field) and `.txt` files (one document each), given as files,
//! directories of them (walked in name order) or several of both, read in
//! a fixed order as batches of documents.

use std::fmt;
use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};

use serde::de::{DeserializeSeed, IgnoredAny, MapAccess, Visitor};

use crate::error::{Result, ToolsError};
use crate::tokens::parquet_rows::ParquetRows;

/// The longest document (a `.txt` file or a JSONL line): 1 GiB.
pub const MAX_DOCUMENT_BYTES: u64 = 1 << 30;

/// What a corpus file holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileKind {
    /// One JSON object a line (`.jsonl`, `.ndjson`, `.json`).
    Jsonl,
    /// One document (`.txt`).
    Text,
    /// A Parquet file: one document a row, the text in one string column.
    Parquet,
}

impl FileKind {
    fn of(path: &Path) -> Option<Self> {
        match path.extension()?.to_str()? {
            "jsonl" | "ndjson" | "json" => Some(Self::Jsonl),
            "txt" => Some(Self::Text),
            "parquet" => Some(Self::Parquet),
            _ => None,
        }
    }
}

/// The corpus files of `paths`, in order: a file as given, a directory's
/// `.jsonl`/`.ndjson`/`.json`/`.txt` files walked in name order (other
/// files skipped, and counted in the second value).
pub fn files(paths: &[PathBuf]) -> Result<(Vec<(PathBuf, FileKind)>, u64)> {
    let mut out = Vec::new();
    let mut skipped = 0;
    for path in paths {
        let meta = std::fs::metadata(path).map_err(|error| file_error(path, error))?;
        if meta.is_dir() {
            let before = out.len();
            walk(path, &mut out, &mut skipped)?;
            if out.len() == before {
                return Err(ToolsError::Config(format!(
                    "{}: no .jsonl, .ndjson, .json, .txt or .parquet files in this directory",
                    path.display()
                )));
            }
        } else {
            let kind = FileKind::of(path).ok_or_else(|| {
                ToolsError::Config(format!(
                    "{}: not a corpus file (expected .jsonl, .ndjson, .json, .txt or .parquet, or a directory of them)",
                    path.display()
                ))
            })?;
            out.push((path.clone(), kind));
        }
    }
    Ok((out, skipped))
}

fn walk(dir: &Path, out: &mut Vec<(PathBuf, FileKind)>, skipped: &mut u64) -> Result<()> {
    let mut entries = std::fs::read_dir(dir)
        .map_err(|error| file_error(dir, error))?
        .map(|entry| entry.map(|e| e.path()))
        .collect::<std::io::Result<Vec<_>>>()
        .map_err(|error| file_error(dir, error))?;
    entries.sort();
    for path in entries {
        if path.is_dir() {
            walk(&path, out, skipped)?;
        } else if path.file_name().is_some_and(|n| n == "manifest.json") {
            // A dataset's manifest beside its Parquet files is no document.
            *skipped += 1;
        } else if let Some(kind) = FileKind::of(&path) {
            out.push((path, kind));
        } else {
            *skipped += 1;
        }
    }
    Ok(())
}

fn file_error(path: &Path, error: std::io::Error) -> ToolsError {
    ToolsError::File {
        path: path.display().to_string(),
        error,
    }
}

/// One document and where it came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Document {
    /// Index of its file in the corpus.
    pub file: usize,
    /// Its line (1-based) in a JSONL file; 0 for a `.txt` file.
    pub line: u64,
    pub text: String,
}

/// Reads the documents of `files` in order, as batches of about
/// `batch_bytes` of text.
#[derive(Debug)]
pub struct Reader {
    files: Vec<(PathBuf, FileKind)>,
    field: String,
    batch_bytes: usize,
    next_file: usize,
    open: Option<(usize, BufReader<File>, u64)>,
    /// The Parquet file being read: its index and rows.
    rows: Option<(usize, ParquetRows)>,
    line: Vec<u8>,
}

impl Reader {
    pub fn new(files: Vec<(PathBuf, FileKind)>, field: &str, batch_bytes: usize) -> Self {
        Self {
            files,
            field: field.to_owned(),
            batch_bytes: batch_bytes.max(1),
            next_file: 0,
            open: None,
            rows: None,
            line: Vec::new(),
        }
    }

    /// The corpus file `file`.
    pub fn path(&self, file: usize) -> &Path {
        &self.files[file].0
    }

    /// The next batch of documents; an empty one at the end.
    pub fn batch(&mut self) -> Result<Vec<Document>> {
        let mut batch = Vec::new();
        let mut bytes = 0;
        while bytes < self.batch_bytes {
            match self.next_document()? {
                Some(doc) => {
                    bytes += doc.text.len() + 1;
                    batch.push(doc);
                }
                None => break,
            }
        }
        Ok(batch)
    }

    fn next_document(&mut self) -> Result<Option<Document>> {
        loop {
            if let Some((file, rows)) = self.rows.as_mut() {
                let path = &self.files[*file].0;
                match rows.next(path)? {
                    Some((line, text)) => {
                        return Ok(Some(Document {
                            file: *file,
                            line,
                            text,
                        }))
                    }
                    None => {
                        self.rows = None;
                        continue;
                    }
                }
            }
            if self.open.is_none() {
                let Some((path, kind)) = self.files.get(self.next_file) else {
                    return Ok(None);
                };
                let file = self.next_file;
                self.next_file += 1;
                let handle = File::open(path).map_err(|error| file_error(path, error))?;
                if *kind == FileKind::Parquet {
                    self.rows = Some((file, ParquetRows::open(path, handle, &self.field)?));
                    continue;
                }
                if *kind == FileKind::Text {
                    return read_text(path, handle).map(|text| {
                        Some(Document {
                            file,
                            line: 0,
                            text,
                        })
                    });
                }
                self.open = Some((file, BufReader::with_capacity(1 << 20, handle), 0));
            }
            let Some((file, reader, line)) = self.open.as_mut() else {
                continue;
            };
            let path = &self.files[*file].0;
            self.line.clear();
            let n = reader
                .by_ref()
                .take(MAX_DOCUMENT_BYTES + 1)
                .read_until(b'\n', &mut self.line)
                .map_err(|error| file_error(path, error))?;
            if n == 0 {
                self.open = None;
                continue;
            }
            *line += 1;
            if n as u64 > MAX_DOCUMENT_BYTES {
                return Err(ToolsError::Config(format!(
                    "{}:{line}: a line of more than {MAX_DOCUMENT_BYTES} bytes; split the document",
                    path.display()
                )));
            }
            if self.line.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            let text = field_of(&self.line, &self.field).map_err(|reason| {
                ToolsError::Config(format!("{}:{line}: {reason}", path.display()))
            })?;
            return Ok(Some(Document {
                file: *file,
                line: *line,
                text,
            }));
        }
    }
}

/// A `.txt` file as one document.
fn read_text(path: &Path, file: File) -> Result<String> {
    let mut bytes = Vec::new();
    file.take(MAX_DOCUMENT_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|error| file_error(path, error))?;
    if bytes.len() as u64 > MAX_DOCUMENT_BYTES {
        return Err(ToolsError::Config(format!(
            "{}: over {MAX_DOCUMENT_BYTES} bytes; split it into several .txt files",
            path.display()
        )));
    }
    String::from_utf8(bytes).map_err(|error| {
        ToolsError::Config(format!(
            "{}: not UTF-8 text (invalid byte at offset {}); convert it to UTF-8 (e.g. iconv) or leave it out",
            path.display(),
            error.utf8_error().valid_up_to()
        ))
    })
}

/// The string field `field` of the JSON object `line`; errors say what is
/// wrong and what to do.
pub fn field_of(line: &[u8], field: &str) -> Result<String, String> {
    let mut de = serde_json::Deserializer::from_slice(line);
    let found = FieldSeed { field }
        .deserialize(&mut de)
        .and_then(|found| de.end().map(|()| found))
        .map_err(|error| {
            format!("not a JSON object ({error}); each line of a JSONL file holds one object")
        })?;
    match found {
        Found::Text(text) => Ok(text),
        Found::Other(kind) => Err(format!(
            "field {field:?} is {kind}, not a string; pass --text-field to name the text field"
        )),
        Found::Missing(keys) => Err(format!(
            "no {field:?} field (the line has {}); pass --text-field NAME to name the text field",
            if keys.is_empty() {
                "no fields".to_owned()
            } else {
                keys.join(", ")
            }
        )),
    }
}

/// What the field was.
enum Found {
    Text(String),
    /// Present, not a string: what it is.
    Other(&'static str),
    /// Absent: the first keys of the object.
    Missing(Vec<String>),
}

struct FieldSeed<'f> {
    field: &'f str,
}

impl<'de> DeserializeSeed<'de> for FieldSeed<'_> {
    type Value = Found;

    fn deserialize<D: serde::Deserializer<'de>>(self, de: D) -> Result<Found, D::Error> {
        de.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for FieldSeed<'_> {
    type Value = Found;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Found, A::Error> {
        let mut found = None;
        let mut keys = Vec::new();
        while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
            if found.is_none() && key == self.field {
                let value: serde_json::Value = map.next_value()?;
                found = Some(match value {
                    serde_json::Value::String(text) => Found::Text(text),
                    serde_json::Value::Null => Found::Other("null"),
                    serde_json::Value::Bool(_) => Found::Other("a boolean"),
                    serde_json::Value::Number(_) => Found::Other("a number"),
                    serde_json::Value::Array(_) => Found::Other("an array"),
                    serde_json::Value::Object(_) => Found::Other("an object"),
                });
            } else {
                if keys.len() < 8 {
                    keys.push(format!("{key:?}"));
                }
                map.next_value::<IgnoredAny>()?;
            }
        }
        Ok(found.unwrap_or(Found::Missing(keys)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn corpus_field_of_reads_only_the_named_string() {
        let line = br#"{"meta": {"text": "nested", "n": [1, {"a": 2}]}, "text": "caf\u00e9 \"q\"\n", "z": null}"#;
        assert_eq!(field_of(line, "text"), Ok("café \"q\"\n".to_owned()));
        assert_eq!(field_of(br#"{"body": "x"}"#, "body"), Ok("x".to_owned()));
        // The first occurrence counts; a duplicate is ignored like any key.
        assert_eq!(
            field_of(br#"{"text": "a", "text": 5}"#, "text"),
            Ok("a".to_owned())
        );
    }

    #[test]
    fn corpus_field_of_says_what_is_wrong_and_what_to_do() {
        let missing = field_of(br#"{"body": "x", "id": 3}"#, "text").expect_err("missing");
        assert!(
            missing.contains("\"body\", \"id\"") && missing.contains("--text-field"),
            "{missing}"
        );
        let null = field_of(br#"{"text": null}"#, "text").expect_err("null");
        assert!(null.contains("null, not a string"), "{null}");
        for bad in [
            &b"[1]"[..],
            b"\"text\"",
            b"{\"text\": \"a\"} trailing",
            b"{\"text\": ",
        ] {
            let error = field_of(bad, "text").expect_err("not an object");
            assert!(error.contains("not a JSON object"), "{error}");
        }
    }

    #[test]
    fn corpus_files_walks_directories_in_name_order() {
        let dir = tempfile::tempdir().expect("tempdir");
        let d = dir.path();
        std::fs::create_dir_all(d.join("b")).expect("mkdir");
        for name in ["z.txt", "a.jsonl", "b/c.ndjson", "notes.md", "b/x.bin"] {
            std::fs::write(d.join(name), "{}").expect("write");
        }
        let (files, skipped) = files(&[d.to_owned(), d.join("z.txt")]).expect("files");
        let names: Vec<String> = files
            .iter()
            .map(|(p, _)| p.strip_prefix(d).expect("inside").display().to_string())
            .collect();
        assert_eq!(names, ["a.jsonl", "b/c.ndjson", "z.txt", "z.txt"]);
        assert_eq!(files[2].1, FileKind::Text);
        assert_eq!(skipped, 2);
        let empty = tempfile::tempdir().expect("tempdir");
        let error = super::files(&[empty.path().to_owned()])
            .expect_err("empty")
            .to_string();
        assert!(error.contains("no .jsonl"), "{error}");
    }
}
