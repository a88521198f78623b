//! What the cache trusts on disk, and how it opens what it finds there.
//!
//! Another user of the machine must not be able to turn the cache against
//! its readers: make them delete or evict files elsewhere (a `tmp/` or
//! `entries/` that is a symbolic link), hang (a FIFO where a file should
//! be) or train on bytes of their choosing (an entry with a forged
//! crc32c). So:
//!
//! - every part of the directory (itself, `tmp/`, `entries/`, `lock`,
//!   `key`) must be the kind it should be, not a symbolic link, owned by
//!   the user running the cache and writable by no one else; missing
//!   directories are created with mode 0700 ([`own_dir`], [`own_file`]);
//! - files inside are opened with `O_NOFOLLOW | O_NONBLOCK` and used only
//!   if `fstat` says they are regular ([`open_regular`]);
//! - an entry ends with an HMAC-SHA256 tag of its name and bytes under a
//!   random key kept in `key` (mode 0600); a reader checks it as well as
//!   the manifest's crc32c, so an entry this user's fills did not write is
//!   refused ([`Seal`]);
//! - the directory lock is waited for with a deadline ([`lock`]).

use std::fs::{self, DirBuilder, File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::unix::fs::{DirBuilderExt, FileTypeExt, MetadataExt, OpenOptionsExt};
use std::path::Path;
use std::time::{Duration, Instant};

use ring::hmac;
use ring::rand::{SecureRandom, SystemRandom};

/// Bytes of the tag at the end of an entry.
pub(super) const TAG: u64 = 32;

/// What to tell someone whose directory the cache refuses.
const REMEDY: &str = "remove it or choose another cache directory (--cache-dir, cache_dir)";

/// The effective user id of this process.
#[allow(unsafe_code)]
pub(super) fn current_user() -> u32 {
    // SAFETY: geteuid takes no arguments, touches no memory and cannot fail.
    unsafe { libc::geteuid() }
}

/// Why a part of the cache whose metadata (not following links) is `meta`
/// cannot be trusted by user `uid`, if it cannot.
fn distrust(meta: &fs::Metadata, uid: u32, dir: bool) -> Option<String> {
    let kind = meta.file_type();
    if kind.is_symlink() {
        return Some("it is a symbolic link".into());
    }
    if dir && !kind.is_dir() {
        return Some(format!("it is {}, not a directory", what(kind)));
    }
    if !dir && !kind.is_file() {
        return Some(format!("it is {}, not a regular file", what(kind)));
    }
    if meta.uid() != uid {
        return Some(format!(
            "it is owned by user {}, not by user {uid} who runs the cache",
            meta.uid()
        ));
    }
    let mode = meta.mode() & 0o7777;
    (mode & 0o022 != 0).then(|| format!("its mode {mode:o} lets other users write to it"))
}

fn what(kind: fs::FileType) -> &'static str {
    if kind.is_dir() {
        "a directory"
    } else if kind.is_symlink() {
        "a symbolic link"
    } else if kind.is_fifo() {
        "a FIFO"
    } else if kind.is_socket() {
        "a socket"
    } else if kind.is_block_device() || kind.is_char_device() {
        "a device"
    } else {
        "a regular file"
    }
}

fn refused(reason: &str) -> String {
    format!("{reason}: {REMEDY}")
}

/// Why [`own_dir`] refused a directory.
#[derive(Debug)]
pub(super) enum DirError {
    /// It is missing and cannot be made (the system's error).
    Create(io::Error),
    /// It exists and is not to be trusted: why, and what to do.
    Untrusted(String),
}

/// Creates the directory `path` (mode 0700, parents too) if it is missing,
/// then checks that `uid` owns it, it is not a symbolic link and no one
/// else can write to it. The error says why and what to do.
pub(super) fn own_dir(path: &Path, uid: u32) -> Result<(), DirError> {
    match DirBuilder::new().recursive(true).mode(0o700).create(path) {
        Ok(()) => {}
        // A symbolic link to something else, a file: said below.
        Err(_) if fs::symlink_metadata(path).is_ok() => {}
        Err(error) => return Err(DirError::Create(error)),
    }
    let meta = fs::symlink_metadata(path).map_err(DirError::Create)?;
    match distrust(&meta, uid, true) {
        Some(reason) => Err(DirError::Untrusted(refused(&reason))),
        None => Ok(()),
    }
}

/// Checks again, without creating it, a directory [`own_dir`] accepted;
/// the error names it.
pub(super) fn still_own_dir(path: &Path, uid: u32) -> io::Result<()> {
    let meta = fs::symlink_metadata(path)?;
    match distrust(&meta, uid, true) {
        Some(reason) => Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!("{}: {}", path.display(), refused(&reason)),
        )),
        None => Ok(()),
    }
}

/// Checks an opened file of the cache's own (its lock, its key) as
/// [`own_dir`] checks a directory; `private` also refuses one other users
/// can read.
pub(super) fn own_file(file: &File, uid: u32, private: bool) -> Result<(), String> {
    let meta = file.metadata().map_err(|e| e.to_string())?;
    if let Some(reason) = distrust(&meta, uid, false) {
        return Err(refused(&reason));
    }
    let mode = meta.mode() & 0o777;
    if private && mode & 0o077 != 0 {
        return Err(refused(&format!(
            "its mode {mode:o} lets other users read it"
        )));
    }
    Ok(())
}

/// Opens (creating it, mode 0600, if missing) a file of the cache's own
/// that others must not write, as [`own_file`] checks it.
pub(super) fn open_own_file(path: &Path, uid: u32) -> Result<File, String> {
    let file = match create_options().create(true).truncate(false).open(path) {
        Ok(file) => file,
        Err(error) if error.raw_os_error() == Some(libc::ELOOP) => {
            return Err(refused("it is a symbolic link"))
        }
        Err(error) => return Err(error.to_string()),
    };
    own_file(&file, uid, false)?;
    Ok(file)
}

/// What [`open_regular`] found at a path.
#[derive(Debug)]
pub(super) enum Found {
    Missing,
    Regular(File),
    /// Something else (a symbolic link, a FIFO, a directory...): never read.
    Other(&'static str),
}

/// Opens `path` for reading without following a symbolic link or blocking
/// on a FIFO, and keeps it only if it is a regular file.
pub(super) fn open_regular(path: &Path) -> io::Result<Found> {
    let opened = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path);
    let file = match opened {
        Ok(file) => file,
        Err(error) if error.kind() == io::ErrorKind::NotFound => return Ok(Found::Missing),
        Err(error) if error.raw_os_error() == Some(libc::ELOOP) => {
            return Ok(Found::Other("a symbolic link"))
        }
        Err(error) if error.raw_os_error() == Some(libc::ENXIO) => {
            return Ok(Found::Other("a socket or device"))
        }
        Err(error) => return Err(error),
    };
    let kind = file.metadata()?.file_type();
    Ok(if kind.is_file() {
        Found::Regular(file)
    } else {
        Found::Other(what(kind))
    })
}

/// Options that create a new file of the cache: mode 0600, never through
/// a symbolic link.
pub(super) fn create_options() -> OpenOptions {
    let mut options = OpenOptions::new();
    options
        .read(true)
        .write(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK);
    options
}

/// Takes `file`'s exclusive flock, waiting at most `timeout`; the error
/// names the lock's `path`.
pub(super) fn lock(file: &File, path: &Path, timeout: Duration) -> io::Result<()> {
    let deadline = Instant::now() + timeout;
    let mut pause = Duration::from_millis(1);
    loop {
        match file.try_lock() {
            Ok(()) => return Ok(()),
            Err(fs::TryLockError::Error(error)) => return Err(error),
            Err(fs::TryLockError::WouldBlock) => {}
        }
        let now = Instant::now();
        if now >= deadline {
            return Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!(
                    "waited {timeout:?} for the cache lock {}, held by another process \
                     (a cache process that hangs, or another program locking it)",
                    path.display()
                ),
            ));
        }
        // flock has no timeout: poll it, backing off, until the deadline.
        std::thread::sleep(pause.min(deadline - now));
        pause = (pause * 2).min(Duration::from_millis(50));
    }
}

/// The key that tags entries, private to the user who owns the cache.
#[derive(Debug)]
pub(super) struct Seal(hmac::Key);

impl Seal {
    /// The key in `path` (owned by `uid`, mode 0600, 32 bytes), created if
    /// missing. Call it holding the directory lock: two processes creating
    /// it at once would tag entries with different keys.
    pub(super) fn load(path: &Path, uid: u32) -> Result<Self, String> {
        let file = match open_regular(path).map_err(|e| e.to_string())? {
            Found::Regular(file) => file,
            Found::Other(what) => {
                return Err(refused(&format!("it is {what}, not a regular file")))
            }
            Found::Missing => return Self::create(path),
        };
        own_file(&file, uid, true)?;
        let mut key = Vec::with_capacity(TAG as usize + 1);
        file.take(TAG + 1)
            .read_to_end(&mut key)
            .map_err(|e| e.to_string())?;
        if key.len() as u64 != TAG {
            return Err(refused(&format!(
                "it holds {} bytes, a key has {TAG}",
                key.len()
            )));
        }
        Ok(Self(hmac::Key::new(hmac::HMAC_SHA256, &key)))
    }

    /// A new random key, written to a file beside `path` and renamed onto
    /// it, so a crash never leaves a partial key.
    fn create(path: &Path) -> Result<Self, String> {
        let mut key = [0; TAG as usize];
        SystemRandom::new()
            .fill(&mut key)
            .map_err(|_| "no random bytes for a new key".to_owned())?;
        let new = path.with_extension("new");
        let write = || -> io::Result<()> {
            match fs::remove_file(&new) {
                Err(error) if error.kind() != io::ErrorKind::NotFound => return Err(error),
                _ => {}
            }
            let mut file = create_options().create_new(true).open(&new)?;
            file.write_all(&key)?;
            file.sync_all()?;
            fs::rename(&new, path)
        };
        write().map_err(|e| format!("cannot create a key: {e}"))?;
        Ok(Self(hmac::Key::new(hmac::HMAC_SHA256, &key)))
    }

    /// A digest of entry `name`'s bytes, to be fed them in order.
    pub(super) fn start(&self, name: &str) -> hmac::Context {
        let mut digest = hmac::Context::with_key(&self.0);
        digest.update(name.as_bytes());
        digest.update(&[0]);
        digest
    }
}

/// Whether `digest` ends as `tag` (in time independent of where they differ).
pub(super) fn tag_matches(digest: hmac::Context, tag: &[u8]) -> bool {
    let want = digest.sign();
    let want = want.as_ref();
    want.len() == tag.len() && want.iter().zip(tag).fold(0, |acc, (a, b)| acc | (a ^ b)) == 0
}
