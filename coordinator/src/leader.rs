//! The leader's state: every job's model, loaded from the store when this
//! replica wins the election, and the group-commit writer fenced by that win.
//!
//! Each job loads on its own: one whose stored config is bad, whose manifest
//! cannot be read, or whose manifest changed since the job was created is
//! marked failed with the reason (GetStatus shows it) while the others are
//! served. A failed manifest read is retried in the background.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use tokio::sync::{watch, Mutex, Notify};
use tokio::task::JoinHandle;
use tributary_io::{Dataset as StoredDataset, StoreOptions};

use crate::error::{CoordError, Result};
use crate::keys;
use crate::model::{Dataset, Job, StoredJob};
use crate::store::{KeyValue, Leadership, MetaStore, Op, WatchEvent};
use crate::writer::{Pending, Writer};

/// The longest a manifest read may take while a job loads or is created.
const MANIFEST_TIMEOUT: Duration = Duration::from_secs(20);
/// How often a job whose manifest could not be read is tried again.
const RETRY_INTERVAL: Duration = Duration::from_secs(5);

/// One job and what waits on it.
#[derive(Debug)]
pub struct JobHandle {
    pub job: Mutex<Job>,
    /// Woken when units return to the pool or an epoch opens.
    pub notify: Notify,
    /// Set when a write of this job was rejected by the store: the model
    /// may be ahead of the store, so it is reloaded before the next request.
    stale: AtomicBool,
    watcher: std::sync::Mutex<Option<JoinHandle<()>>>,
}

impl Drop for JobHandle {
    fn drop(&mut self) {
        if let Ok(mut w) = self.watcher.lock() {
            if let Some(task) = w.take() {
                task.abort();
            }
        }
    }
}

/// A job as the leader knows it.
#[derive(Debug, Clone)]
pub enum Slot {
    Ready(Arc<JobHandle>),
    /// The job cannot be served; why.
    Failed(String),
}

/// State held while this replica leads.
#[derive(Debug)]
pub struct Leader {
    pub store: Arc<dyn MetaStore>,
    pub writer: Writer,
    pub address: String,
    pub options: StoreOptions,
    pub jobs: Mutex<HashMap<String, Slot>>,
    /// True once a write failed: the replica must step down.
    pub failed: watch::Receiver<bool>,
    pub _leadership: Leadership,
}

/// A job's dataset as planning needs it, with the manifest's digests.
#[derive(Debug)]
pub struct OpenedDataset {
    pub dataset: Dataset,
    pub samples: u64,
    pub crc32c: u32,
    /// SHA-256 of the manifest's canonical JSON, hex.
    pub sha256: String,
}

/// Opens a job's dataset, within `MANIFEST_TIMEOUT` (20 s).
pub async fn open_dataset(job: &str, url: &str, options: &StoreOptions) -> Result<OpenedDataset> {
    let failed = |error: String| CoordError::Dataset {
        job: job.to_owned(),
        error,
    };
    let opened = tokio::time::timeout(MANIFEST_TIMEOUT, StoredDataset::open(url, options))
        .await
        .map_err(|_| {
            failed(format!(
                "the manifest {url} did not arrive within {MANIFEST_TIMEOUT:?}"
            ))
        })?
        .map_err(|e| failed(e.to_string()))?;
    let manifest = &opened.manifest;
    let json = manifest.to_json();
    let shard_samples = manifest.shards.iter().map(|s| s.samples).collect();
    Ok(OpenedDataset {
        dataset: Dataset {
            shard_samples: Arc::new(shard_samples),
        },
        samples: manifest.samples,
        crc32c: crc32c::crc32c(&json),
        sha256: sha256_hex(&json),
    })
}

pub fn sha256_hex(bytes: &[u8]) -> String {
    ring::digest::digest(&ring::digest::SHA256, bytes)
        .as_ref()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// A job's stored record, checked: its config within bounds, its manifest
/// the one it was created with.
fn check_stored(name: &str, stored: &StoredJob, opened: &OpenedDataset) -> Result<()> {
    let (was, now) = match &stored.manifest_sha256 {
        Some(sha) => (format!("sha256:{sha}"), format!("sha256:{}", opened.sha256)),
        None => (
            format!("crc32c:{:08x}", stored.manifest_crc32c),
            format!("crc32c:{:08x}", opened.crc32c),
        ),
    };
    if was != now {
        return Err(CoordError::Precondition(format!(
            "job {name:?}: the manifest {} changed since the job was created ({was} then, {now} now); \
             the plan would change under existing commits: create a new job for the new dataset",
            stored.config.manifest_url
        )));
    }
    Ok(())
}

impl Leader {
    /// Loads every job from the store. A job that cannot load is marked
    /// failed; the others are served.
    pub async fn load(
        store: Arc<dyn MetaStore>,
        leadership: Leadership,
        address: String,
        options: StoreOptions,
        flush_interval: Duration,
    ) -> Result<Arc<Self>> {
        let fence = (leadership.revision != 0).then(|| leadership.fence());
        let (failed_tx, failed) = watch::channel(false);
        let writer = Writer::spawn(Arc::clone(&store), fence, flush_interval, failed_tx);
        let leader = Arc::new(Self {
            store: Arc::clone(&store),
            writer,
            address,
            options,
            jobs: Mutex::new(HashMap::new()),
            failed,
            _leadership: leadership,
        });
        let (kvs, revision) = store.range(keys::ROOT).await?;
        let mut by_job: HashMap<String, Vec<KeyValue>> = HashMap::new();
        for kv in kvs {
            if let Some((job, _)) = keys::split(&kv.key) {
                by_job.entry(job.to_owned()).or_default().push(kv);
            }
        }
        let loads = by_job.into_iter().map(|(name, kvs)| {
            let leader = Arc::clone(&leader);
            async move {
                let slot = leader.open_job(&name, &kvs, revision).await;
                (name, slot)
            }
        });
        let slots: Vec<_> = futures::future::join_all(loads).await;
        let mut jobs = leader.jobs.lock().await;
        for (name, slot) in slots {
            match slot {
                Ok(Some(handle)) => {
                    jobs.insert(name, Slot::Ready(handle));
                }
                Ok(None) => {}
                Err(error) => {
                    tracing::error!(job = name, %error, "job failed to load; serving the others");
                    if matches!(error, CoordError::Dataset { .. }) {
                        tokio::spawn(retry_job(Arc::downgrade(&leader), name.clone()));
                    }
                    jobs.insert(name, Slot::Failed(error.to_string()));
                }
            }
        }
        drop(jobs);
        Ok(leader)
    }

    /// Builds one job from every key under its prefix (`kvs`, read at
    /// `revision`); None when it has no stored record.
    async fn open_job(
        self: &Arc<Self>,
        name: &str,
        kvs: &[KeyValue],
        revision: i64,
    ) -> Result<Option<Arc<JobHandle>>> {
        let Some(stored) = Job::stored_of(name, kvs)? else {
            return Ok(None);
        };
        let opened = open_dataset(name, &stored.config.manifest_url, &self.options).await?;
        check_stored(name, &stored, &opened)?;
        let job = Job::load(name, stored, opened.dataset, kvs)?;
        tracing::info!(job = name, members = job.members.len(), "loaded job");
        Ok(Some(self.start_job(job, revision + 1)))
    }

    /// Wraps a job and starts watching its members for expiry.
    pub fn start_job(self: &Arc<Self>, job: Job, from_revision: i64) -> Arc<JobHandle> {
        let name = job.name.clone();
        let handle = Arc::new(JobHandle {
            job: Mutex::new(job),
            notify: Notify::new(),
            stale: AtomicBool::new(false),
            watcher: std::sync::Mutex::new(None),
        });
        let task = tokio::spawn(watch_members(
            Arc::clone(&self.store),
            Arc::downgrade(&handle),
            name,
            from_revision,
        ));
        if let Ok(mut w) = handle.watcher.lock() {
            *w = Some(task);
        }
        handle
    }

    /// The job's handle, its model reloaded first if a write of it was
    /// rejected; `JobFailed` for a job that cannot be served.
    pub async fn job(&self, name: &str) -> Result<Arc<JobHandle>> {
        let slot = self.jobs.lock().await.get(name).cloned();
        match slot {
            Some(Slot::Ready(handle)) => {
                if handle.stale.load(Ordering::SeqCst) {
                    self.reload(&handle).await?;
                }
                Ok(handle)
            }
            Some(Slot::Failed(reason)) => Err(CoordError::JobFailed {
                job: name.to_owned(),
                reason,
            }),
            None => Err(CoordError::UnknownJob(name.to_owned())),
        }
    }

    /// Rebuilds a job's model from the store, in place: a write of it was
    /// rejected, so the model may hold what the store does not.
    async fn reload(&self, handle: &JobHandle) -> Result<()> {
        let mut job = handle.job.lock().await;
        if !handle.stale.swap(false, Ordering::SeqCst) {
            return Ok(());
        }
        let reloaded = async {
            self.flush().await?;
            let (kvs, _) = self.store.range(&keys::job(&job.name)).await?;
            let stored = Job::stored_of(&job.name, &kvs)?
                .ok_or_else(|| CoordError::UnknownJob(job.name.clone()))?;
            Job::load(&job.name, stored, job.dataset.clone(), &kvs)
        }
        .await;
        match reloaded {
            Ok(mut fresh) => {
                tracing::warn!(
                    job = job.name,
                    "reloaded the job from the store after a rejected write"
                );
                fresh.events = job.events.clone();
                *job = fresh;
                drop(job);
                handle.notify.notify_waiters();
                Ok(())
            }
            Err(error) => {
                handle.stale.store(true, Ordering::SeqCst);
                Err(error)
            }
        }
    }

    /// Hands a job's ops to the writer without waiting (call it while
    /// holding the job's lock, so the store's order is the model's), then
    /// [`JobWrite::wait`] for them.
    pub async fn enqueue(&self, handle: &Arc<JobHandle>, ops: Vec<Op>) -> Result<JobWrite> {
        Ok(JobWrite {
            pending: self.writer.enqueue(ops).await?,
            handle: Arc::clone(handle),
        })
    }

    /// Writes a job's ops durably (group commit).
    pub async fn write(&self, handle: &Arc<JobHandle>, ops: Vec<Op>) -> Result<()> {
        self.enqueue(handle, ops).await?.wait().await
    }

    /// Waits until every write submitted so far is durable.
    pub async fn flush(&self) -> Result<()> {
        Ok(self.writer.flush().await?)
    }
}

/// A job's write on its way to the store.
#[derive(Debug)]
pub struct JobWrite {
    pending: Pending,
    handle: Arc<JobHandle>,
}

impl JobWrite {
    /// Returns once the write is durable. When the store rejected it (not
    /// a lost leadership: that deposes the replica), the job's model is
    /// marked for reloading and the request fails with the store's reason.
    pub async fn wait(self) -> Result<()> {
        match self.pending.wait().await {
            Ok(()) => Ok(()),
            Err(error) => {
                if !error.is_unavailable() {
                    self.handle.stale.store(true, Ordering::SeqCst);
                }
                Err(CoordError::Store(error))
            }
        }
    }
}

/// Tries a job whose manifest could not be read again until it loads, its
/// failure becomes permanent, or this leadership ends.
async fn retry_job(leader: std::sync::Weak<Leader>, name: String) {
    loop {
        tokio::time::sleep(RETRY_INTERVAL).await;
        let Some(leader) = leader.upgrade() else {
            return;
        };
        if *leader.failed.borrow() {
            return;
        }
        let result = match leader.store.range(&keys::job(&name)).await {
            Ok((kvs, revision)) => leader.open_job(&name, &kvs, revision).await,
            Err(error) => Err(error.into()),
        };
        let mut jobs = leader.jobs.lock().await;
        match result {
            Ok(Some(handle)) => {
                tracing::info!(
                    job = name,
                    "the job's manifest is readable again; serving it"
                );
                jobs.insert(name, Slot::Ready(handle));
                return;
            }
            Ok(None) => {
                jobs.remove(&name);
                return;
            }
            Err(error) => {
                let retry = matches!(error, CoordError::Dataset { .. } | CoordError::Store(_));
                jobs.insert(name.clone(), Slot::Failed(error.to_string()));
                if !retry {
                    return;
                }
            }
        }
    }
}

/// Forgets members whose keys vanish (lease expiry), returning their units
/// to the pool at once. Re-reads and re-watches when the watch breaks.
async fn watch_members(
    store: Arc<dyn MetaStore>,
    handle: std::sync::Weak<JobHandle>,
    job: String,
    mut from_revision: i64,
) {
    let prefix = keys::members(&job);
    loop {
        let mut events = match store.watch(&prefix, from_revision).await {
            Ok(events) => events,
            Err(error) => {
                tracing::warn!(%error, job, "member watch failed; retrying");
                tokio::time::sleep(Duration::from_millis(500)).await;
                continue;
            }
        };
        while let Some(event) = events.next().await {
            let Ok(event) = event else { break };
            let WatchEvent::Delete { key, mod_revision } = event else {
                continue;
            };
            from_revision = mod_revision + 1;
            let Some(handle) = handle.upgrade() else {
                return;
            };
            let member = key.trim_start_matches(&prefix);
            let (_, changed) = handle.job.lock().await.remove_member(member);
            if changed {
                tracing::info!(
                    job,
                    member,
                    "member lease expired; its units return to the pool"
                );
                handle.notify.notify_waiters();
            }
        }
        // The watch broke: reconcile with what the store holds, then resume.
        let Some(handle) = handle.upgrade() else {
            return;
        };
        match store.range(&prefix).await {
            Ok((kvs, revision)) => {
                let live: Vec<String> = kvs
                    .iter()
                    .map(|kv| kv.key.trim_start_matches(&prefix).to_owned())
                    .collect();
                let mut model = handle.job.lock().await;
                let gone: Vec<String> = model
                    .members
                    .keys()
                    .filter(|m| !live.contains(m))
                    .cloned()
                    .collect();
                for member in gone {
                    model.remove_member(&member);
                }
                drop(model);
                handle.notify.notify_waiters();
                from_revision = revision + 1;
            }
            Err(error) => {
                tracing::warn!(%error, job, "cannot re-read members");
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
        }
    }
}
