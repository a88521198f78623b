//! Local directories as the sources read them: non-hidden entries in name
//! order, and which file names are ImageFolder images.

use std::path::{Path, PathBuf};

use crate::error::{Result, ToolsError};

pub(crate) fn io_err(path: &Path, error: std::io::Error) -> ToolsError {
    ToolsError::File {
        path: path.display().to_string(),
        error,
    }
}

/// Non-hidden entries of `dir`, sorted by name, with their metadata
/// (symbolic links followed).
pub(crate) fn sorted_entries(dir: &Path) -> Result<Vec<(String, PathBuf, std::fs::Metadata)>> {
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
pub(crate) fn file_names(dir: &Path) -> Result<Vec<String>> {
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
pub(crate) fn image_ext(file_name: &str) -> Option<&'static str> {
    let (_, extension) = file_name.rsplit_once('.')?;
    match extension.to_ascii_lowercase().as_str() {
        "jpg" | "jpeg" => Some("jpg"),
        "png" => Some("png"),
        _ => None,
    }
}
