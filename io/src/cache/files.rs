//! The cache directory's files: the directory lock, files being written
//! (and how far, as the reads waiting on a fill see it), what a scan finds,
//! and checking a file against its manifest entry and its tag.

use std::fs::{self, File};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, MutexGuard};
use std::time::SystemTime;

use bytes::Bytes;
use ring::hmac;
use tokio::io::AsyncWriteExt;
use tokio::sync::watch;

use super::guard::{tag_matches, Seal, TAG};
use super::{Shard, CHECK_BLOCK};
use crate::error::{IoError, Result};
use crate::read::Sink;

/// The directory lock, released when dropped.
pub(super) struct DirLock<'a>(pub(super) MutexGuard<'a, File>);

impl Drop for DirLock<'_> {
    fn drop(&mut self) {
        if let Err(error) = self.0.unlock() {
            tracing::warn!(%error, "cannot unlock the shard cache");
        }
    }
}

pub(super) enum Admit {
    Exists,
    Busy,
    NoRoom,
    Write(File),
}

#[derive(Default)]
pub(super) struct Scan {
    pub(super) used: u64,
    pub(super) entries: Vec<Victim>,
    pub(super) writing: Vec<String>,
}

pub(super) struct Victim {
    pub(super) name: String,
    pub(super) len: u64,
    pub(super) modified: SystemTime,
}

/// A file being written, deleted when dropped unless committed.
pub(super) struct Tmp(pub(super) Option<PathBuf>);

impl Drop for Tmp {
    fn drop(&mut self) {
        if let Some(path) = self.0.take() {
            if let Err(error) = remove(&path) {
                tracing::warn!(path = %path.display(), %error, "cannot delete a cache file");
            }
        }
    }
}

/// A fill as the reads waiting on it see it.
#[derive(Debug, Clone)]
pub(super) enum Progress {
    /// Admission is pending.
    Starting,
    /// Bytes `..written` of the shard are in `file` (its file being written).
    Writing { written: u64, file: Arc<File> },
    /// Over: the entry is on disk (`committed`), or the store must serve.
    Ended { committed: bool },
}

/// Writes a download into its reserved file, computing its crc32c and
/// its tag, and tells the reads waiting on it how far it got.
pub(super) struct FileSink {
    pub(super) file: tokio::fs::File,
    pub(super) crc32c: u32,
    /// The entry's tag so far ([`Seal::start`]).
    pub(super) digest: hmac::Context,
    /// The first byte the crc32c covers.
    pub(super) checked_from: u64,
    pub(super) path: PathBuf,
    /// Bytes on disk (written and flushed) so far.
    pub(super) written: u64,
    /// The same file opened for reading, handed to waiting reads.
    pub(super) reader: Arc<File>,
    pub(super) progress: watch::Sender<Progress>,
}

impl Sink for FileSink {
    fn reserve(&mut self, _bytes: u64) {}

    async fn append(&mut self, bytes: Bytes) -> Result<()> {
        let skip = self
            .checked_from
            .saturating_sub(self.written)
            .min(bytes.len() as u64);
        self.crc32c = crc32c::crc32c_append(self.crc32c, &bytes[skip as usize..]);
        self.digest.update(&bytes);
        self.file
            .write_all(&bytes)
            .await
            .map_err(|e| local(&self.path, e))?;
        // Flushed, the bytes are in the page cache: a pread through
        // `reader` sees them.
        self.file.flush().await.map_err(|e| local(&self.path, e))?;
        self.written += bytes.len() as u64;
        self.progress.send_replace(Progress::Writing {
            written: self.written,
            file: Arc::clone(&self.reader),
        });
        Ok(())
    }
}

/// Why `file` is not `shard`'s entry, if it is not: its length, its
/// crc32c (the manifest's) and its tag (this user's key) must match.
pub(super) fn check(file: &File, shard: &Shard, seal: &Seal) -> io::Result<Option<String>> {
    let len = file.metadata()?.len();
    if len != shard.bytes + TAG {
        return Ok(Some(format!(
            "it is {len} bytes, the manifest says {} (and {TAG} of its tag)",
            shard.bytes
        )));
    }
    let mut buf = vec![0; CHECK_BLOCK.min(len as usize)];
    let (mut offset, mut crc) = (0, 0u32);
    let mut digest = seal.start(&shard.entry);
    while offset < shard.bytes {
        let n = (shard.bytes - offset).min(buf.len() as u64) as usize;
        file.read_exact_at(&mut buf[..n], offset)?;
        digest.update(&buf[..n]);
        let skip = shard.checked_from.saturating_sub(offset).min(n as u64) as usize;
        crc = crc32c::crc32c_append(crc, &buf[skip..n]);
        offset += n as u64;
    }
    if crc != shard.crc32c {
        return Ok(Some(format!(
            "its crc32c is {crc:08x}, the manifest says {:08x}",
            shard.crc32c
        )));
    }
    let mut tag = [0; TAG as usize];
    file.read_exact_at(&mut tag, shard.bytes)?;
    Ok((!tag_matches(digest, &tag))
        .then(|| "its tag does not match: this user's cache did not write it".to_owned()))
}

/// Deletes the name `path` (a symbolic link itself, never what it points
/// to); already gone is fine.
pub(super) fn remove(path: &Path) -> io::Result<()> {
    match fs::remove_file(path) {
        Err(error) if error.kind() != io::ErrorKind::NotFound => Err(error),
        _ => Ok(()),
    }
}

/// Deletes `path` if it is a regular file (not following a link); leaves
/// anything else, with a warning.
pub(super) fn remove_regular(path: &Path) -> io::Result<()> {
    match fs::symlink_metadata(path) {
        Ok(meta) if meta.is_file() => remove(path),
        Ok(_) => {
            tracing::warn!(path = %path.display(), "not deleting a cache file that is not a regular file");
            Ok(())
        }
        Err(error) if error.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(error) => Err(error),
    }
}

pub(super) fn local(path: &Path, error: io::Error) -> IoError {
    IoError::Local {
        path: path.display().to_string(),
        error,
    }
}

/// Runs blocking file work off the async runtime; errors name `path`.
pub(super) async fn blocking<T: Send + 'static>(
    path: &Path,
    work: impl FnOnce() -> io::Result<T> + Send + 'static,
) -> Result<T> {
    match tokio::task::spawn_blocking(work).await {
        Ok(result) => result.map_err(|e| local(path, e)),
        Err(error) => Err(local(path, io::Error::other(error))),
    }
}
