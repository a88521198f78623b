//! A bounded cache of whole shard objects on local disk, shared by the
//! ranks (processes) of a node.
//!
//! A rank reads different shards every epoch, so a cache per rank would
//! rarely hit; one directory shared by every rank of the node does. Its
//! size never exceeds a limit, files being written included, and the least
//! recently used whole files make room for new ones. Entries survive a
//! restart, and are checked before a process first reuses one.
//!
//! ## Reads
//!
//! [`ShardCache::read_range`] serves a range of a shard from its cached
//! file when there is one (`pread`, off the async runtime). On a miss it
//! starts filling the whole shard: one streaming GET written to a file as
//! it arrives (never held whole in memory), its crc32c computed on the way;
//! at most [`DEFAULT_FILLS`] fills at once per process (a miss while all are
//! busy queues its shard, up to [`MAX_PENDING`]). While this process fills
//! a shard, its reads wait for the bytes they want to reach the file and
//! read them there, so a shard read whole comes from the store once, not
//! twice; a read of a shard whose fill is queued, refused or failed reads
//! the store, as without a cache. A shard larger than the limit is never
//! cached: its reads go straight to the store.
//!
//! ## Entries
//!
//! An entry is the whole object, named so that different datasets and
//! versions never share a name: a hash of the object's URL, the size and
//! crc32c the manifest gives it, and its base name
//! (`<fnv64 of URL>-<bytes>-<crc32c>-<name>`). Its file holds the object's
//! bytes followed by a 32-byte tag: an HMAC-SHA256, under the key in
//! `DIR/key`, of the entry's name and the bytes, computed by the fill as it
//! writes them. An entry file is immutable once in `entries/`. Before its
//! first use in a process (after a restart, or when another rank wrote it)
//! its length and crc32c are checked against the manifest and its tag
//! against the key; a mismatch deletes it, and the shard is fetched again.
//! The crc32c catches damage; the tag, bytes that no fill of this user
//! wrote (a crc32c is easy to forge).
//! Use refreshes the file's modification time (at most once a second per
//! entry), which is the LRU order, so recency survives a restart.
//!
//! ## Sharing a directory between processes
//!
//! ```text
//! DIR/lock            flock'ed, exclusively, around admission, eviction,
//!                     commit, the removal of a corrupt entry and the
//!                     creation of the key
//! DIR/key             32 random bytes (mode 0600) that tag entries
//! DIR/tmp/<entry>     a file being written; flock'ed by its writer
//! DIR/entries/<entry> a complete entry, immutable
//! ```
//!
//! The directory's size is the sum of the lengths of the files under
//! `tmp/` and `entries/`; the protocol keeps it within the limit:
//!
//! 1. Admission (under `lock`): if the entry exists, or `tmp/<entry>` is
//!    locked (another writer), nothing to do. A `tmp/` file whose lock can
//!    be taken belongs to a writer that died: it is deleted. Entries are
//!    evicted, oldest modification time first, until the new file fits
//!    (if files being written leave no room, the shard is not cached now).
//!    Then `tmp/<entry>` is created, locked and set to its full length: the
//!    bytes are reserved before the download starts.
//! 2. Download, without the directory lock: the body is written into the
//!    reserved file; nothing grows it past its length.
//! 3. Commit (under `lock`): once its crc32c matches the manifest, the file
//!    is renamed into `entries/`, so a scan never misses or double counts
//!    it. A failed download deletes its file.
//!
//! Readers open entries without the lock: they never see a partial file
//! (only complete files are renamed into `entries/`). Evicting an entry
//! another process has open is safe on POSIX: the unlink removes the name,
//! the open file stays readable; that process notices the unlink (link
//! count 0) when it next refreshes the entry's time and closes it, which
//! frees its blocks. All processes sharing a directory should use the same
//! limit (each enforces its own at admission). The directory belongs to the
//! cache: do not put other files in it. A process waits at most 30 s for
//! `lock`; then the operation fails (a read goes to the store) with an
//! error naming the lock.
//!
//! ## Trusting the directory
//!
//! The directory is shared by one user's processes, never between users:
//! another local user who could write in it could make the cache delete
//! or evict files elsewhere, hang its readers or serve them bytes of their
//! choosing. [`ShardCache::open`] refuses a directory, `tmp/`, `entries/`,
//! `lock` or `key` that is a symbolic link, is owned by another user or
//! that group or others can write (and a `key` they can read); it creates
//! missing directories with mode 0700. Files found inside are opened
//! without following links or blocking on FIFOs and used only if they are
//! regular files; eviction and the cleanup of `tmp/` delete only regular
//! files directly in those directories. An entry's tag (above) refuses
//! bytes this user's fills did not write.

use std::collections::HashMap;
use std::fs::{self, File, TryLockError};
use std::io;
use std::ops::Range;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicUsize;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant, SystemTime};

use bytes::Bytes;
use tokio::sync::{watch, Semaphore};

use crate::error::{IoError, Result};
use crate::location::Location;

mod config;
mod files;
mod fill;
mod guard;
mod stats;

use config::fnv64;
pub use config::{entry_name, parse_bytes, CacheConfig, ShardObject};
use files::{check, remove, remove_regular, Admit, DirLock, Progress, Scan, Victim};
use guard::{create_options, open_own_file, open_regular, own_dir, DirError, Found, Seal};
pub use stats::CacheStats;
use stats::{Counter, Counters};

/// Bytes an entry's file holds beyond its object's: the tag that shows
/// this user's cache wrote it. The limit counts them.
pub const ENTRY_OVERHEAD: u64 = guard::TAG;
/// Background fills at once per process, by default (a loader raises it to
/// its reads in flight: [`ShardCache::fill_at_least`]).
pub const DEFAULT_FILLS: usize = 4;

/// The most fills at once: each holds a connection and a file open.
pub const MAX_FILLS: usize = 64;
/// Shards waiting for a fill slot, at most.
pub const MAX_PENDING: usize = 4096;
/// Entry files a process keeps open; beyond it the least recently used is
/// closed (and checked again when next opened).
const MAX_OPEN: usize = 256;
/// A used entry's modification time is refreshed at most this often.
const TOUCH_EVERY: Duration = Duration::from_secs(1);
/// Blocks of the crc32c check of an entry.
const CHECK_BLOCK: usize = 1 << 20;
/// Locks serialising the checks of entries in a process (by entry name).
const CHECK_LOCKS: usize = 64;
/// How long a process waits for the directory lock before giving up.
const LOCK_TIMEOUT: Duration = Duration::from_secs(30);

/// An entry file this process opened and checked (or wrote).
#[derive(Debug)]
struct Open {
    file: File,
    touched: Mutex<Instant>,
}

/// The shard a read is about, as the cache names it.
#[derive(Debug, Clone)]
struct Shard {
    /// The object's name under the dataset's location.
    name: String,
    bytes: u64,
    crc32c: u32,
    /// The first byte `crc32c` covers ([`ShardObject::checked_from`]).
    checked_from: u64,
    /// Its entry's file name.
    entry: String,
}

impl Shard {
    fn of(location: &Location, meta: &ShardObject<'_>) -> Self {
        Self {
            name: meta.name.to_owned(),
            bytes: meta.bytes,
            crc32c: meta.crc32c,
            checked_from: meta.checked_from,
            entry: entry_name(&location.url_of(meta.name), meta.bytes, meta.crc32c),
        }
    }
}

/// A bounded cache of whole shard files in a directory that processes on
/// one node may share; see the [module docs](self) for the protocol.
#[derive(Debug)]
pub struct ShardCache {
    dir: PathBuf,
    entries: PathBuf,
    tmp: PathBuf,
    limit: u64,
    lock: Mutex<File>,
    lock_path: PathBuf,
    lock_timeout: Duration,
    /// The user the directory's parts must belong to.
    uid: u32,
    /// Tags the entries this user's fills write.
    seal: Seal,
    open: Mutex<HashMap<String, Arc<Open>>>,
    /// Entries queued or being filled by this process.
    filling: Mutex<std::collections::HashSet<String>>,
    pending: Mutex<std::collections::VecDeque<(Location, Shard)>>,
    /// The progress of the fills running in this process, by entry.
    running: Mutex<HashMap<String, watch::Receiver<Progress>>>,
    fills: Arc<Semaphore>,
    /// The fills' permits in all (only grows).
    fill_slots: AtomicUsize,
    checks: Vec<Mutex<()>>,
    counters: Counters,
}

fn locked<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl ShardCache {
    /// Opens (creating it if needed) the cache in `dir`, holding at most
    /// `limit` bytes. The directory and its parts must belong to the user
    /// running this process and be writable by no one else (see the
    /// [module docs](self#trusting-the-directory)); new ones are created
    /// with mode 0700.
    pub fn open(dir: impl Into<PathBuf>, limit: u64) -> Result<Self> {
        Self::open_as(dir.into(), limit, guard::current_user())
    }

    /// [`ShardCache::open`] trusting files owned by user `uid`.
    fn open_as(dir: PathBuf, limit: u64, uid: u32) -> Result<Self> {
        let bad = |path: &Path, reason: String| IoError::Cache {
            path: path.display().to_string(),
            reason,
        };
        if limit == 0 {
            return Err(bad(&dir, "the cache limit must be at least 1 byte".into()));
        }
        let (entries, tmp) = (dir.join("entries"), dir.join("tmp"));
        for path in [&dir, &entries, &tmp] {
            own_dir(path, uid).map_err(|error| match error {
                // The system's error (an OSError in Python), not a bad setting.
                DirError::Create(error) => IoError::Local {
                    path: path.display().to_string(),
                    error,
                },
                DirError::Untrusted(reason) => bad(path, reason),
            })?;
        }
        let lock_path = dir.join("lock");
        let lock = open_own_file(&lock_path, uid).map_err(|reason| bad(&lock_path, reason))?;
        guard::lock(&lock, &lock_path, LOCK_TIMEOUT).map_err(|e| bad(&lock_path, e.to_string()))?;
        let key_path = dir.join("key");
        let seal = Seal::load(&key_path, uid);
        if let Err(error) = lock.unlock() {
            tracing::warn!(path = %lock_path.display(), %error, "cannot unlock the shard cache");
        }
        let seal = seal.map_err(|reason| bad(&key_path, reason))?;
        Ok(Self {
            dir,
            entries,
            tmp,
            limit,
            lock: Mutex::new(lock),
            lock_path,
            lock_timeout: LOCK_TIMEOUT,
            uid,
            seal,
            open: Mutex::default(),
            filling: Mutex::default(),
            pending: Mutex::default(),
            running: Mutex::default(),
            fills: Arc::new(Semaphore::new(DEFAULT_FILLS)),
            fill_slots: AtomicUsize::new(DEFAULT_FILLS),
            checks: (0..CHECK_LOCKS).map(|_| Mutex::new(())).collect(),
            counters: Counters::default(),
        })
    }

    /// The same cache with at most `fills` (at least 1) background fills at
    /// once in this process.
    pub fn with_fills(mut self, fills: usize) -> Self {
        let fills = fills.clamp(1, MAX_FILLS);
        self.fill_slots = AtomicUsize::new(fills);
        self.fills = Arc::new(Semaphore::new(fills));
        self
    }

    /// Its directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Its limit in bytes.
    pub fn limit(&self) -> u64 {
        self.limit
    }

    /// The counters since it was opened in this process.
    pub fn stats(&self) -> CacheStats {
        self.counters.snapshot()
    }

    /// Bytes of the files in the directory now (entries and files being
    /// written, whoever writes them), counted under the directory lock so
    /// that an eviction and an admission are seen both or neither. Blocks.
    pub fn used_bytes(&self) -> io::Result<u64> {
        let _dir = self.lock_dir()?;
        let mut used = 0;
        for dir in [&self.entries, &self.tmp] {
            for entry in fs::read_dir(dir)? {
                let meta = entry?.metadata()?;
                if meta.is_file() {
                    used += meta.len();
                }
            }
        }
        Ok(used)
    }

    /// Waits until this process's background fills (queued ones included)
    /// are done.
    pub async fn idle(&self) {
        let all = u32::try_from(self.fill_slots()).unwrap_or(u32::MAX);
        // The semaphore is never closed.
        drop(self.fills.acquire_many(all).await);
    }

    /// Bytes `range` of shard `meta` of the dataset at `location`: from its
    /// cached file, or from the store (then the whole shard is cached in the
    /// background).
    pub async fn read_range<'a>(
        self: &Arc<Self>,
        location: &Location,
        meta: impl Into<ShardObject<'a>>,
        range: Range<u64>,
    ) -> Result<Bytes> {
        let meta = meta.into();
        let len = range.end.saturating_sub(range.start);
        if meta.bytes.saturating_add(ENTRY_OVERHEAD) <= self.limit && range.end <= meta.bytes {
            let shard = Shard::of(location, &meta);
            let this = Arc::clone(self);
            let (local_shard, local_range) = (shard.clone(), range.clone());
            let local =
                tokio::task::spawn_blocking(move || this.read_local(&local_shard, local_range))
                    .await;
            match local {
                Ok(Ok(Some(bytes))) => {
                    self.counters.add(Counter::Hits, 1);
                    self.counters.add(Counter::HitBytes, len);
                    return Ok(bytes);
                }
                Ok(Ok(None)) => {}
                Ok(Err(error)) => {
                    self.counters.add(Counter::Errors, 1);
                    let path = self.entries.join(&shard.entry);
                    tracing::warn!(path = %path.display(), %error, "cannot read a cached shard; reading the store");
                }
                Err(error) => {
                    return Err(IoError::Cache {
                        path: self.dir.display().to_string(),
                        reason: format!("a cache read task failed: {error}"),
                    })
                }
            }
            let filled = match self.spawn_fill(location, shard.clone()) {
                Some(progress) => self.from_fill(&shard, range.clone(), progress).await,
                None => None,
            };
            if let Some(bytes) = filled {
                self.counters.add(Counter::Hits, 1);
                self.counters.add(Counter::HitBytes, len);
                return Ok(bytes);
            }
        }
        self.counters.add(Counter::Misses, 1);
        self.counters.add(Counter::MissBytes, len);
        location.get_range(meta.name, range).await
    }

    /// The range from the shard's entry, if this process has it open or it
    /// is on disk and matches the manifest.
    fn read_local(&self, shard: &Shard, range: Range<u64>) -> io::Result<Option<Bytes>> {
        let Some(open) = self.entry(shard)? else {
            return Ok(None);
        };
        let bytes = crate::bufpool::read_exact_at(&open.file, range)?;
        self.touch(&shard.entry, &open);
        Ok(Some(bytes))
    }

    fn entry(&self, shard: &Shard) -> io::Result<Option<Arc<Open>>> {
        if let Some(open) = locked(&self.open).get(&shard.entry) {
            return Ok(Some(Arc::clone(open)));
        }
        // One check per entry at a time: reads of the same shard wait for it.
        let stripe = fnv64(shard.entry.as_bytes()) as usize % self.checks.len();
        let _checking = locked(&self.checks[stripe]);
        if let Some(open) = locked(&self.open).get(&shard.entry) {
            return Ok(Some(Arc::clone(open)));
        }
        let path = self.entries.join(&shard.entry);
        let file = match open_regular(&path)? {
            Found::Regular(file) => file,
            Found::Missing => return Ok(None),
            Found::Other(what) => {
                self.discard_other(&path)?;
                self.counters.add(Counter::Corrupt, 1);
                tracing::warn!(
                    path = %path.display(), what,
                    "a cache entry is not a regular file: not read, its name removed; the shard will be fetched again"
                );
                return Ok(None);
            }
        };
        if let Some(reason) = check(&file, shard, &self.seal)? {
            self.discard(&path, &file)?;
            self.counters.add(Counter::Corrupt, 1);
            tracing::warn!(
                path = %path.display(), %reason,
                "a cached shard does not match its manifest: deleted, it will be fetched again"
            );
            return Ok(None);
        }
        let open = self.keep(&shard.entry, file);
        self.touch_now(&open);
        Ok(Some(open))
    }

    /// Keeps `file` open as the entry `name`, closing the least recently
    /// used one beyond [`MAX_OPEN`].
    fn keep(&self, name: &str, file: File) -> Arc<Open> {
        let open = Arc::new(Open {
            file,
            touched: Mutex::new(Instant::now()),
        });
        let mut map = locked(&self.open);
        if map.len() >= MAX_OPEN {
            let oldest = map
                .iter()
                .min_by_key(|(_, open)| *locked(&open.touched))
                .map(|(name, _)| name.clone());
            if let Some(oldest) = oldest {
                map.remove(&oldest);
            }
        }
        map.insert(name.to_owned(), Arc::clone(&open));
        open
    }

    /// Refreshes the entry's time (its LRU position) at most once per
    /// [`TOUCH_EVERY`], and closes it if another process evicted it.
    fn touch(&self, name: &str, open: &Open) {
        if locked(&open.touched).elapsed() < TOUCH_EVERY {
            return;
        }
        self.touch_now(open);
        if open.file.metadata().is_ok_and(|m| m.nlink() == 0) {
            locked(&self.open).remove(name);
        }
    }

    fn touch_now(&self, open: &Open) {
        *locked(&open.touched) = Instant::now();
        if let Err(error) = open.file.set_modified(SystemTime::now()) {
            tracing::debug!(dir = %self.dir.display(), %error, "cannot refresh a cached shard's time");
        }
    }

    /// Deletes the corrupt entry at `path` if it is still `file` (another
    /// process may have replaced it with a good one).
    fn discard(&self, path: &Path, file: &File) -> io::Result<()> {
        let _dir = self.lock_dir()?;
        let ours = file.metadata()?;
        match fs::symlink_metadata(path) {
            Ok(now) if now.ino() == ours.ino() && now.dev() == ours.dev() => remove(path),
            _ => Ok(()),
        }
    }

    /// Removes the name `path` in `entries/` if it is still neither a
    /// regular file nor a directory: a symbolic link goes, not what it
    /// points to.
    fn discard_other(&self, path: &Path) -> io::Result<()> {
        let _dir = self.lock_dir()?;
        match fs::symlink_metadata(path) {
            Ok(now) if !now.is_file() && !now.is_dir() => remove(path),
            _ => Ok(()),
        }
    }

    /// The directory lock, waited for at most `lock_timeout`; then the
    /// directories are checked again (nothing is done in one replaced
    /// since the cache was opened).
    fn lock_dir(&self) -> io::Result<DirLock<'_>> {
        let file = locked(&self.lock);
        guard::lock(&file, &self.lock_path, self.lock_timeout)?;
        let held = DirLock(file);
        for path in [&self.dir, &self.entries, &self.tmp] {
            guard::still_own_dir(path, self.uid)?;
        }
        Ok(held)
    }

    /// Step 1 of the protocol: reserves `size` bytes for entry `name`.
    fn admit(&self, name: &str, size: u64) -> io::Result<Admit> {
        let _dir = self.lock_dir()?;
        if fs::symlink_metadata(self.entries.join(name)).is_ok() {
            return Ok(Admit::Exists);
        }
        let scan = self.scan()?;
        if scan.writing.iter().any(|w| w == name) {
            return Ok(Admit::Busy);
        }
        let evictable: u64 = scan.entries.iter().map(|e| e.len).sum();
        if scan.used - evictable + size > self.limit {
            return Ok(Admit::NoRoom);
        }
        let mut used = scan.used;
        let mut lru = scan.entries;
        lru.sort_by(|a, b| (a.modified, &a.name).cmp(&(b.modified, &b.name)));
        for victim in lru {
            if used + size <= self.limit {
                break;
            }
            remove_regular(&self.entries.join(&victim.name))?;
            locked(&self.open).remove(&victim.name);
            used -= victim.len;
            self.counters.add(Counter::Evictions, 1);
            self.counters.add(Counter::EvictedBytes, victim.len);
        }
        let path = self.tmp.join(name);
        let file = create_options().create_new(true).open(&path)?;
        // New, and scans (the only other lockers) wait for the directory
        // lock held here: free.
        file.try_lock().map_err(io::Error::from)?;
        file.set_len(size)?;
        Ok(Admit::Write(file))
    }

    /// What the directory holds, under its lock; deletes files whose writer
    /// died.
    fn scan(&self) -> io::Result<Scan> {
        let mut scan = Scan::default();
        for item in fs::read_dir(&self.tmp)? {
            let item = item?;
            let path = item.path();
            let file = match open_regular(&path)? {
                Found::Regular(file) => file,
                Found::Missing => continue,
                Found::Other(what) => {
                    tracing::warn!(path = %path.display(), what, "ignoring a cache file that is not a regular file");
                    continue;
                }
            };
            match file.try_lock() {
                Ok(()) => {
                    tracing::info!(path = %path.display(), "deleting a cache file its writer left");
                    remove_regular(&path)?;
                }
                Err(TryLockError::WouldBlock) => {
                    scan.used += file.metadata()?.len();
                    scan.writing
                        .push(item.file_name().to_string_lossy().into_owned());
                }
                Err(TryLockError::Error(error)) => return Err(error),
            }
        }
        for item in fs::read_dir(&self.entries)? {
            let item = item?;
            let meta = item.metadata()?;
            if meta.is_file() {
                scan.used += meta.len();
                scan.entries.push(Victim {
                    name: item.file_name().to_string_lossy().into_owned(),
                    len: meta.len(),
                    modified: meta.modified()?,
                });
            }
        }
        Ok(scan)
    }

    /// Step 3 of the protocol: the written file becomes entry `name`.
    fn commit(&self, name: &str, file: File) -> io::Result<File> {
        let _dir = self.lock_dir()?;
        fs::rename(self.tmp.join(name), self.entries.join(name))?;
        file.set_modified(SystemTime::now())?;
        file.unlock()?;
        Ok(file)
    }
}

#[cfg(test)]
mod tests;
