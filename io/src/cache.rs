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
//! (`<fnv64 of URL>-<bytes>-<crc32c>-<name>`). An entry file is immutable
//! once in `entries/`. Before its first use in a process (after a restart,
//! or when another rank wrote it) its length and crc32c are checked against
//! the manifest; a mismatch deletes it, and the shard is fetched again.
//! Use refreshes the file's modification time (at most once a second per
//! entry), which is the LRU order, so recency survives a restart.
//!
//! ## Sharing a directory between processes
//!
//! ```text
//! DIR/lock            flock'ed, exclusively, around admission, eviction,
//!                     commit and the removal of a corrupt entry
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
//! cache: do not put other files in it.

use std::collections::HashMap;
use std::fs::{self, File, OpenOptions, TryLockError};
use std::io;
use std::ops::Range;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant, SystemTime};

use bytes::Bytes;
use tokio::sync::{watch, Semaphore};

use crate::error::{IoError, Result};
use crate::location::Location;

mod config;
mod files;
mod fill;

use config::fnv64;
pub use config::{entry_name, parse_bytes, CacheConfig, ShardObject};
use files::{check, remove, Admit, DirLock, Progress, Scan, Victim};

/// Background fills at once per process, by default.
pub const DEFAULT_FILLS: usize = 4;
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

/// The counters of a cache, since it was opened in this process.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CacheStats {
    /// Range reads served from a cached file, and their bytes.
    pub hits: u64,
    pub hit_bytes: u64,
    /// Range reads sent to the store (shards not cached, or too large).
    pub misses: u64,
    pub miss_bytes: u64,
    /// Whole shards written into the cache, and their bytes.
    pub fills: u64,
    pub fill_bytes: u64,
    /// Entries evicted by this process, and their bytes.
    pub evictions: u64,
    pub evicted_bytes: u64,
    /// Cached files that did not match their manifest (deleted).
    pub corrupt: u64,
    /// Fills or local reads that failed (logged; the store served instead).
    pub errors: u64,
}

#[derive(Debug, Default)]
struct Counters([AtomicU64; 10]);

#[derive(Clone, Copy)]
enum Counter {
    Hits,
    HitBytes,
    Misses,
    MissBytes,
    Fills,
    FillBytes,
    Evictions,
    EvictedBytes,
    Corrupt,
    Errors,
}

impl Counters {
    fn add(&self, counter: Counter, n: u64) {
        self.0[counter as usize].fetch_add(n, Ordering::Relaxed);
    }

    fn get(&self, counter: Counter) -> u64 {
        self.0[counter as usize].load(Ordering::Relaxed)
    }
}

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

/// A bounded cache of whole shard files in a directory that processes on
/// one node may share; see the [module docs](self) for the protocol.
#[derive(Debug)]
pub struct ShardCache {
    dir: PathBuf,
    entries: PathBuf,
    tmp: PathBuf,
    limit: u64,
    lock: Mutex<File>,
    open: Mutex<HashMap<String, Arc<Open>>>,
    /// Entries queued or being filled by this process.
    filling: Mutex<std::collections::HashSet<String>>,
    pending: Mutex<std::collections::VecDeque<(Location, Shard)>>,
    /// The progress of the fills running in this process, by entry.
    running: Mutex<HashMap<String, watch::Receiver<Progress>>>,
    fills: Arc<Semaphore>,
    fill_slots: usize,
    checks: Vec<Mutex<()>>,
    counters: Counters,
}

fn locked<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl ShardCache {
    /// Opens (creating it if needed) the cache in `dir`, holding at most
    /// `limit` bytes.
    pub fn open(dir: impl Into<PathBuf>, limit: u64) -> Result<Self> {
        let dir = dir.into();
        let bad = |reason: String| IoError::Cache {
            path: dir.display().to_string(),
            reason,
        };
        if limit == 0 {
            return Err(bad("the cache limit must be at least 1 byte".into()));
        }
        let local = |path: &Path, error| IoError::Local {
            path: path.display().to_string(),
            error,
        };
        let (entries, tmp) = (dir.join("entries"), dir.join("tmp"));
        for path in [&entries, &tmp] {
            fs::create_dir_all(path).map_err(|e| local(path, e))?;
        }
        let lock_path = dir.join("lock");
        let lock = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&lock_path)
            .map_err(|e| local(&lock_path, e))?;
        Ok(Self {
            dir,
            entries,
            tmp,
            limit,
            lock: Mutex::new(lock),
            open: Mutex::default(),
            filling: Mutex::default(),
            pending: Mutex::default(),
            running: Mutex::default(),
            fills: Arc::new(Semaphore::new(DEFAULT_FILLS)),
            fill_slots: DEFAULT_FILLS,
            checks: (0..CHECK_LOCKS).map(|_| Mutex::new(())).collect(),
            counters: Counters::default(),
        })
    }

    /// The same cache with at most `fills` (at least 1) background fills at
    /// once in this process.
    pub fn with_fills(mut self, fills: usize) -> Self {
        self.fill_slots = fills.max(1);
        self.fills = Arc::new(Semaphore::new(self.fill_slots));
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
        use Counter::*;
        let c = &self.counters;
        CacheStats {
            hits: c.get(Hits),
            hit_bytes: c.get(HitBytes),
            misses: c.get(Misses),
            miss_bytes: c.get(MissBytes),
            fills: c.get(Fills),
            fill_bytes: c.get(FillBytes),
            evictions: c.get(Evictions),
            evicted_bytes: c.get(EvictedBytes),
            corrupt: c.get(Corrupt),
            errors: c.get(Errors),
        }
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
        let all = u32::try_from(self.fill_slots).unwrap_or(u32::MAX);
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
        if meta.bytes <= self.limit && range.end <= meta.bytes {
            let shard = Shard {
                name: meta.name.to_owned(),
                bytes: meta.bytes,
                crc32c: meta.crc32c,
                checked_from: meta.checked_from,
                entry: entry_name(&location.url_of(meta.name), meta.bytes, meta.crc32c),
            };
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
            self.spawn_fill(location, shard.clone());
            if let Some(bytes) = self.from_fill(&shard, range.clone()).await {
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
        let mut buf = vec![0; (range.end - range.start) as usize];
        open.file.read_exact_at(&mut buf, range.start)?;
        self.touch(&shard.entry, &open);
        Ok(Some(Bytes::from(buf)))
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
        let file = match File::open(&path) {
            Ok(file) => file,
            Err(error) if error.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(error) => return Err(error),
        };
        if let Some(reason) = check(&file, shard)? {
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

    fn lock_dir(&self) -> io::Result<DirLock<'_>> {
        let file = locked(&self.lock);
        file.lock()?;
        Ok(DirLock(file))
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
            remove(&self.entries.join(&victim.name))?;
            locked(&self.open).remove(&victim.name);
            used -= victim.len;
            self.counters.add(Counter::Evictions, 1);
            self.counters.add(Counter::EvictedBytes, victim.len);
        }
        let path = self.tmp.join(name);
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(&path)?;
        file.lock()?;
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
            let file = match File::open(&path) {
                Ok(file) => file,
                Err(error) if error.kind() == io::ErrorKind::NotFound => continue,
                Err(error) => return Err(error),
            };
            match file.try_lock() {
                Ok(()) => {
                    tracing::info!(path = %path.display(), "deleting a cache file its writer left");
                    remove(&path)?;
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
