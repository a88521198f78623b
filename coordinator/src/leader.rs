//! The leader's state: every job's model, loaded from the store when this
//! replica wins the election, and the group-commit writer fenced by that win.
//! It keeps its fields: the service calls one method per call
//! (`create_job`, `join`, `keep_alive`, ... in `calls` and `lifecycle`),
//! with the model's types in and out.
//!
//! Each job loads on its own, in the background: the leader serves as soon
//! as the store is read, and a call for a job still loading waits for that
//! job alone. One whose stored config is bad, whose manifest cannot be
//! read, or whose manifest changed since the job was created is marked
//! failed with the reason (GetStatus shows it) while the others are
//! served. A failed manifest read is retried in the background.
//!
//! Every change of a job goes through `Leader::change`: the model method
//! runs under the job's lock and returns its effects, which
//! `Leader::apply` carries out after the lock is released. No lock is
//! held across I/O: room in the writer's queue is reserved before the lock
//! is taken, the writes are handed over under it (so the store sees each
//! job's changes in the model's order), and their durability is awaited
//! after it. So a job whose store writes are slow holds up its own callers
//! only, through the writer's queue they share like every job's.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{broadcast, watch, Mutex, Notify};
use tokio::task::JoinHandle;
use tributary_common::ids::JobId;
use tributary_io::StoreOptions;

use crate::datasets::{check_stored, Manifests};
use crate::error::{CoordError, Result};
use crate::keys;
use crate::limits::{Fleet, Limits};
use crate::metrics::Metrics;
use crate::model::{Effects, Event, Job, Outcome, Tally};
use crate::store::{KeyValue, Leadership, LeaseId, MetaStore};
use crate::writer::{Pending, Reserved, Writer};
use tasks::{load_job, watch_members};

pub use lifecycle::{housekeeping, unix_ms, CreatedJob, DeleteReason, JobLine};
pub use tasks::{liveness, EXPIRY_TICK};

/// How often a job whose manifest could not be read is tried again.
const RETRY_INTERVAL: Duration = Duration::from_secs(5);

/// What a leader needs of its replica's configuration.
#[derive(Debug, Clone)]
pub struct LeaderConfig {
    /// The address clients reach this replica at (ListJobs and GetStatus
    /// name it).
    pub address: String,
    /// Group-commit window: the most one write waits for others to join it.
    pub flush_interval: Duration,
    /// How the leader reads manifests.
    pub store_options: StoreOptions,
    /// What the leader agrees to hold.
    pub limits: Limits,
    /// The replica's metrics.
    pub metrics: Metrics,
    /// How long a finished job is kept before it is deleted.
    pub finished_job_ttl: Duration,
}

/// One job and what waits on it.
#[derive(Debug)]
struct JobHandle {
    job: Mutex<Job>,
    /// Woken when units return to the pool or an epoch opens.
    notify: Notify,
    /// What the job's watchers are told, once it is durable.
    events: broadcast::Sender<Event>,
    /// Set when a write of this job was rejected by the store: the model
    /// may be ahead of the store, so it is reloaded before the next request.
    stale: AtomicBool,
    /// How many writes of this job were handed to the writer: a reload
    /// that read the store while one was handed over reads again.
    staged: AtomicU64,
    /// One reload of this job at a time (its callers wait for it; other
    /// jobs' never do).
    reloading: Mutex<()>,
    watcher: std::sync::Mutex<Option<JoinHandle<()>>>,
    /// When a rank's other manifest digest last made this leader read the
    /// job's manifests again (`manifest_check`), at most once per
    /// [`manifest_check::RECHECK_EVERY`].
    manifest_checked: Mutex<Option<std::time::Instant>>,
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
enum Slot {
    /// Being loaded; turns true once the slot holds the outcome.
    Loading(watch::Receiver<bool>),
    Ready(Arc<JobHandle>),
    /// The job cannot be served; why.
    Failed(String),
}

/// State held while this replica leads.
#[derive(Debug)]
pub struct Leader {
    store: Arc<dyn MetaStore>,
    writer: Writer,
    address: String,
    manifests: Manifests,
    /// The members of every job, counted against `--max-members` and
    /// `--max-lease-renewals`.
    fleet: Fleet,
    jobs: Mutex<HashMap<JobId, Slot>>,
    /// True once a write failed: the replica must step down.
    failed: watch::Receiver<bool>,
    metrics: Metrics,
    /// How long a finished job is kept before it is deleted.
    finished_job_ttl: Duration,
    /// Jobs deleted lately, for "was deleted" answers.
    deleted: deleted::DeletedJobs,
    _leadership: Leadership,
}

impl Leader {
    /// Reads every job from the store and starts loading each (see
    /// `tasks::load_job`); returns without waiting for them.
    pub async fn load(
        store: Arc<dyn MetaStore>,
        leadership: Leadership,
        config: LeaderConfig,
    ) -> Result<Arc<Self>> {
        let fence = (leadership.revision != 0).then(|| leadership.fence());
        let (failed_tx, failed) = watch::channel(false);
        let writer = Writer::spawn(
            Arc::clone(&store),
            fence,
            config.flush_interval,
            failed_tx,
            config.metrics.clone(),
        );
        let leader = Arc::new(Self {
            store: Arc::clone(&store),
            writer,
            address: config.address,
            fleet: Fleet::new(&config.limits),
            manifests: Manifests::new(config.store_options, config.limits),
            jobs: Mutex::new(HashMap::new()),
            failed,
            metrics: config.metrics,
            finished_job_ttl: config.finished_job_ttl,
            deleted: deleted::DeletedJobs::default(),
            _leadership: leadership,
        });
        let (kvs, revision) = store.range(keys::ROOT).await?;
        let mut by_job: HashMap<JobId, Vec<KeyValue>> = HashMap::new();
        for kv in kvs {
            if let Some(job) = keys::job_of(&kv.key) {
                by_job.entry(job).or_default().push(kv);
            }
        }
        let mut jobs = leader.jobs.lock().await;
        for (name, kvs) in by_job {
            let (done, loading) = watch::channel(false);
            jobs.insert(name.clone(), Slot::Loading(loading));
            tokio::spawn(load_job(Arc::clone(&leader), name, kvs, revision, done));
        }
        drop(jobs);
        Ok(leader)
    }

    /// Builds one job from every key under its prefix (`kvs`, read at
    /// `revision`); None when it has no stored record.
    async fn open_job(
        self: &Arc<Self>,
        name: &JobId,
        kvs: &[KeyValue],
        revision: i64,
    ) -> Result<Option<Arc<JobHandle>>> {
        let Some(stored) = Job::stored_of(name, kvs)? else {
            return Ok(None);
        };
        let opened = self.manifests.open(name, &stored.config).await?;
        check_stored(name, &stored, &opened)?;
        let (owned, kvs) = (name.clone(), kvs.to_vec());
        let (cap, fleet) = (self.manifests.limits().members_per_job, self.fleet.clone());
        let job = off_runtime(name, move || {
            let mut job = Job::load(&owned, stored, opened.dataset, &kvs)?;
            job.attach(&fleet, cap);
            Ok(job)
        })
        .await?;
        tracing::info!(
            job = name.as_str(),
            members = job.members.len(),
            "loaded job"
        );
        Ok(Some(self.start_job(job, revision + 1)))
    }

    /// The address clients reach this replica at.
    pub fn address(&self) -> &str {
        &self.address
    }

    /// Turns true once a write failed: the replica must step down.
    pub fn failed(&self) -> watch::Receiver<bool> {
        self.failed.clone()
    }

    /// Whether a write failed ([`Self::failed`]).
    pub fn has_failed(&self) -> bool {
        *self.failed.borrow()
    }

    /// Wraps a job, and watches its members' keys while some are under an
    /// earlier coordinator's store lease (`tasks::watch_members`): this one
    /// puts none under a lease, so a job without such members needs no
    /// watch.
    fn start_job(&self, job: Job, from_revision: i64) -> Arc<JobHandle> {
        let name = job.name.clone();
        let leased = job.has_leased_members();
        let handle = Arc::new(JobHandle {
            job: Mutex::new(job),
            notify: Notify::new(),
            events: broadcast::channel(256).0,
            stale: AtomicBool::new(false),
            staged: AtomicU64::new(0),
            reloading: Mutex::new(()),
            watcher: std::sync::Mutex::new(None),
            manifest_checked: Mutex::new(None),
        });
        if !leased {
            return handle;
        }
        let task = tokio::spawn(watch_members(
            Arc::clone(&self.store),
            self.metrics.clone(),
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
    /// Waits while the job loads.
    async fn job(&self, name: &JobId) -> Result<Arc<JobHandle>> {
        loop {
            let slot = self.jobs.lock().await.get(name).cloned();
            return match slot {
                Some(Slot::Loading(mut loading)) => {
                    if loading.wait_for(|done| *done).await.is_err() {
                        return Err(CoordError::JobFailed {
                            job: name.clone(),
                            reason: "its load stopped".into(),
                        });
                    }
                    continue;
                }
                Some(Slot::Ready(handle)) => {
                    if handle.stale.load(Ordering::SeqCst) {
                        self.reload(&handle).await?;
                    }
                    Ok(handle)
                }
                Some(Slot::Failed(reason)) => Err(CoordError::JobFailed {
                    job: name.clone(),
                    reason,
                }),
                None => Err(self.deleted.unknown(name)),
            };
        }
    }

    /// Rebuilds a job's model from the store, in place: a write of it was
    /// rejected, so the model may hold what the store does not. The store
    /// is read without the job's lock; the lock is taken only to swap the
    /// model in, and if a write of the job was handed to the writer since
    /// the read began (a call that held the job before it went stale), the
    /// read may miss it: read again.
    async fn reload(&self, handle: &JobHandle) -> Result<()> {
        let _turn = handle.reloading.lock().await;
        if !handle.stale.load(Ordering::SeqCst) {
            return Ok(());
        }
        let (name, dataset) = {
            let job = handle.job.lock().await;
            (job.name.clone(), job.dataset.clone())
        };
        loop {
            let seen = handle.staged.load(Ordering::SeqCst);
            let read = async {
                self.flush().await?;
                let (kvs, _) = self.store.range(&keys::job(&name)).await?;
                let stored = Job::stored_of(&name, &kvs)?
                    .ok_or_else(|| CoordError::UnknownJob(name.clone()))?;
                Job::load(&name, stored, dataset.clone(), &kvs)
            };
            let fresh = read.await?;
            let mut job = handle.job.lock().await;
            if handle.staged.load(Ordering::SeqCst) != seen {
                continue;
            }
            *job = fresh;
            handle.stale.store(false, Ordering::SeqCst);
            drop(job);
            tracing::warn!(
                job = name.as_str(),
                "reloaded the job from the store after a rejected write"
            );
            handle.notify.notify_waiters();
            return Ok(());
        }
    }

    /// Changes a job: runs `change` on its model under the job's lock and
    /// applies the effects it returns after the lock is released (see the
    /// module's docs); answers with what `change` answered, or with why
    /// its writes did not become durable.
    async fn change<T>(
        &self,
        handle: &Arc<JobHandle>,
        change: impl FnOnce(&mut Job) -> Outcome<T>,
    ) -> Result<T> {
        let room = self.writer.reserve().await?;
        let mut job = handle.job.lock().await;
        if job.deleted {
            return Err(self.deleted.unknown(&job.name));
        }
        let (answer, mut effects) = change(&mut job);
        if let Some(op) = job.mark_finished(unix_ms()) {
            tracing::info!(job = job.name.as_str(), "job finished");
            effects.ops.push(op);
        }
        let staged = self.stage(handle, room, effects);
        drop(job);
        self.apply(staged).await?;
        answer
    }

    /// Hands a change's writes to the writer, without waiting: call it
    /// under the lock that made the change, with room reserved before.
    fn stage(&self, handle: &Arc<JobHandle>, room: Reserved<'_>, effects: Effects) -> Staged {
        if !effects.ops.is_empty() {
            handle.staged.fetch_add(1, Ordering::SeqCst);
        }
        Staged {
            write: JobWrite {
                pending: room.send(effects.ops),
                handle: Arc::clone(handle),
            },
            revoke: effects.revoke,
            events: effects.events,
            wake: effects.wake,
            tally: effects.tally,
        }
    }

    /// Applies a change's effects (see [`apply`]) in a task of its own:
    /// a handler cancelled while it waits (its client went away) leaves
    /// the change in the model and its write queued, so the rest of the
    /// change (leases revoked, watchers told, waiting Acquires woken, the
    /// metrics counted) must happen all the same.
    async fn apply(&self, staged: Staged) -> Result<()> {
        let (store, metrics) = (Arc::clone(&self.store), self.metrics.clone());
        tokio::spawn(async move { apply(store.as_ref(), &metrics, staged).await })
            .await
            .map_err(|e| {
                CoordError::Store(crate::store::StoreError::Other(format!(
                    "a change's effects were not applied: {e}"
                )))
            })?
    }

    /// Waits until every write submitted so far is durable.
    async fn flush(&self) -> Result<()> {
        Ok(self.writer.flush().await?)
    }
}

/// Applies a change's effects, the one place that does: waits for its
/// writes to be durable, then revokes the leases it gave up and tells the
/// job's watchers; wakes waiting Acquires either way. A lease that cannot
/// be revoked expires by itself: logged, not an error. What the change
/// did is counted once it is durable.
async fn apply(store: &dyn MetaStore, metrics: &Metrics, staged: Staged) -> Result<()> {
    let Staged {
        write,
        revoke,
        events,
        wake,
        tally,
    } = staged;
    let handle = Arc::clone(&write.handle);
    let written = write.wait().await;
    if written.is_ok() {
        metrics.count(&tally);
        for lease in revoke {
            if let Err(error) = store.revoke(lease).await {
                tracing::warn!(lease, %error, "cannot revoke a lease; it will expire");
            }
        }
        for event in events {
            // No receiver is no error: nobody watches.
            let _ = handle.events.send(event);
        }
    }
    if wake {
        handle.notify.notify_waiters();
    }
    written
}

/// A change's effects with its writes handed to the writer:
/// [`Leader::apply`] them.
#[derive(Debug)]
#[must_use]
struct Staged {
    write: JobWrite,
    revoke: Vec<LeaseId>,
    events: Vec<Event>,
    wake: bool,
    tally: Tally,
}

impl Staged {
    /// Effects that need no write: an earlier coordinator's store lease
    /// expired, and the store deleted the member's keys with it.
    fn unwritten(handle: &Arc<JobHandle>, effects: Effects) -> Self {
        debug_assert!(effects.ops.is_empty(), "{effects:?}");
        Staged {
            write: JobWrite {
                pending: Pending::nothing(),
                handle: Arc::clone(handle),
            },
            revoke: effects.revoke,
            events: effects.events,
            wake: effects.wake,
            tally: effects.tally,
        }
    }
}

/// A job's write on its way to the store.
#[derive(Debug)]
struct JobWrite {
    pending: Pending,
    handle: Arc<JobHandle>,
}

impl JobWrite {
    /// Returns once the write is durable. When the store rejected it (not
    /// a lost leadership: that deposes the replica), the job's model is
    /// marked for reloading and the request fails with the store's reason.
    async fn wait(self) -> Result<()> {
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

mod calls;
mod deleted;
mod lifecycle;
mod manifest_check;
mod tasks;
#[cfg(test)]
mod tests;

/// Runs `build`, which builds a job's model (planning its open epoch: CPU
/// work), off the async runtime.
async fn off_runtime<T: Send + 'static>(
    name: &JobId,
    build: impl FnOnce() -> Result<T> + Send + 'static,
) -> Result<T> {
    tokio::task::spawn_blocking(build)
        .await
        .map_err(|e| CoordError::Corrupt(format!("building job {:?} failed: {e}", name.as_str())))?
}
