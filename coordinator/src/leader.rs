//! The leader's state: every job's model, loaded from the store when this
//! replica wins the election, and the group-commit writer fenced by that win.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use tokio::sync::{watch, Mutex, Notify};
use tokio::task::JoinHandle;
use tributary_worker::{Dataset as WorkerDataset, StoreOptions};

use crate::error::{CoordError, Result};
use crate::keys;
use crate::model::{Dataset, Job, StoredJob};
use crate::store::{Leadership, MetaStore, Op, WatchEvent};
use crate::writer::Writer;

/// One job and what waits on it.
#[derive(Debug)]
pub struct JobHandle {
    pub job: Mutex<Job>,
    /// Woken when units return to the pool or an epoch opens.
    pub notify: Notify,
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

/// State held while this replica leads.
#[derive(Debug)]
pub struct Leader {
    pub store: Arc<dyn MetaStore>,
    pub writer: Writer,
    pub address: String,
    pub options: StoreOptions,
    pub jobs: Mutex<HashMap<String, Arc<JobHandle>>>,
    /// True once a write failed: the replica must step down.
    pub failed: watch::Receiver<bool>,
    pub _leadership: Leadership,
}

/// Opens a job's dataset and returns what planning needs plus the manifest
/// checksum.
pub async fn open_dataset(
    job: &str,
    url: &str,
    options: &StoreOptions,
) -> Result<(Dataset, u32, u64)> {
    let opened = WorkerDataset::open(url, options)
        .await
        .map_err(|e| CoordError::Dataset {
            job: job.to_owned(),
            error: e.to_string(),
        })?;
    let manifest = &opened.manifest;
    let crc = crc32c_of(&manifest.to_json());
    let shard_samples = manifest.shards.iter().map(|s| s.samples).collect();
    Ok((
        Dataset {
            shard_samples: Arc::new(shard_samples),
        },
        crc,
        manifest.samples,
    ))
}

fn crc32c_of(bytes: &[u8]) -> u32 {
    crc32c::crc32c(bytes)
}

impl Leader {
    /// Loads every job from the store.
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
        let mut by_job: HashMap<&str, Vec<_>> = HashMap::new();
        for kv in &kvs {
            if let Some((job, _)) = keys::split(&kv.key) {
                by_job.entry(job).or_default().push(kv.clone());
            }
        }
        let mut jobs = leader.jobs.lock().await;
        for (name, kvs) in by_job {
            let Some(stored) = Job::stored_of(name, &kvs)? else {
                continue;
            };
            let (dataset, crc, _) =
                open_dataset(name, &stored.config.manifest_url, &leader.options).await?;
            if crc != stored.manifest_crc32c {
                tracing::warn!(job = name, "the manifest changed since the job was created");
            }
            let job = Job::load(name, stored, dataset, &kvs)?;
            tracing::info!(job = name, members = job.members.len(), "loaded job");
            jobs.insert(name.to_owned(), leader.start_job(job, revision + 1));
        }
        drop(jobs);
        Ok(leader)
    }

    /// Wraps a job and starts watching its members for expiry.
    pub fn start_job(self: &Arc<Self>, job: Job, from_revision: i64) -> Arc<JobHandle> {
        let name = job.name.clone();
        let handle = Arc::new(JobHandle {
            job: Mutex::new(job),
            notify: Notify::new(),
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

    pub async fn job(&self, name: &str) -> Result<Arc<JobHandle>> {
        self.jobs
            .lock()
            .await
            .get(name)
            .cloned()
            .ok_or_else(|| CoordError::UnknownJob(name.to_owned()))
    }

    /// Writes ops durably (group commit).
    pub async fn write(&self, ops: Vec<Op>) -> Result<()> {
        Ok(self.writer.write(ops).await?)
    }

    /// Waits until every write submitted so far is durable.
    pub async fn flush(&self) -> Result<()> {
        Ok(self.writer.flush().await?)
    }

    pub async fn create_stored(
        &self,
        name: &str,
        stored: StoredJob,
        dataset: Dataset,
    ) -> Result<Job> {
        let (job, ops) = Job::create(name, stored, dataset);
        self.write(ops).await?;
        Ok(job)
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
