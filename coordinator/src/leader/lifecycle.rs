//! Jobs' life: creation, the list of jobs, deletion (on request, or once
//! a finished job's retention has passed), and the housekeeping that
//! expires finished jobs and rebuilds the job-labelled metrics while this
//! replica leads.

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tributary_common::ids::JobId;

use super::{off_runtime, JobHandle, Leader, Slot};
use crate::error::{CoordError, Result};
use crate::keys;
use crate::metrics::JOB_GAUGES_INTERVAL;
use crate::model::{Effects, Job, JobSummary, StoredJob};
use crate::store::Op;
use tributary_common::job::JobSpec;

/// Milliseconds since the Unix epoch (0 on a clock before it).
pub fn unix_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// Why a job is deleted (the metric's label).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeleteReason {
    Request,
    Expired,
}

impl DeleteReason {
    /// How the job went, in words: "was deleted {how}".
    pub fn how(self) -> &'static str {
        match self {
            DeleteReason::Request => "(by `tributary job delete` or a DeleteJob call)",
            DeleteReason::Expired => "(it had finished, and finished jobs are kept a while only)",
        }
    }

    fn label(self) -> &'static str {
        match self {
            DeleteReason::Request => "request",
            DeleteReason::Expired => "expired",
        }
    }
}

/// What CreateJob answers: the job's config, whether this call created
/// the job, and the size of its dataset.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CreatedJob {
    pub config: JobSpec,
    pub created: bool,
    /// Samples per epoch.
    pub samples: u64,
    pub shards: u32,
}

/// One line of ListJobs.
#[derive(Debug, Clone, PartialEq)]
pub enum JobLine {
    /// A job served.
    Ready(JobSummary),
    /// A job whose stored state is being read.
    Loading(JobId),
    /// A job that cannot be served, and why.
    Failed { job: JobId, reason: String },
}

impl JobLine {
    pub fn job(&self) -> &JobId {
        match self {
            JobLine::Ready(summary) => &summary.job,
            JobLine::Loading(job) | JobLine::Failed { job, .. } => job,
        }
    }
}

/// The answer to a CreateJob for a job that exists: its config must be
/// the one asked for.
async fn existing(handle: &JobHandle, config: JobSpec) -> Result<CreatedJob> {
    let job = handle.job.lock().await;
    if job.stored.config != config {
        return Err(CoordError::ConflictingConfig {
            job: job.name.clone(),
            diff: job.stored.config.diff(&config),
        });
    }
    Ok(CreatedJob {
        config,
        created: false,
        samples: job.stored.samples,
        shards: job.stored.shards,
    })
}

impl Leader {
    /// Creates a job, or answers for the one that exists. No lock is held
    /// while the manifest or the store is read: a slow or hung store stalls
    /// this call only. The jobs map is locked only to check and insert.
    pub async fn create_job(&self, name: JobId, config: JobSpec) -> Result<CreatedJob> {
        let slot = self.jobs.lock().await.get(&name).cloned();
        let failed = |reason| CoordError::JobFailed {
            job: name.clone(),
            reason,
        };
        match slot {
            Some(Slot::Ready(handle)) => return existing(&handle, config).await,
            Some(Slot::Loading(_)) => {
                let handle = self.job(&name).await?;
                return existing(&handle, config).await;
            }
            Some(Slot::Failed(reason)) => return Err(failed(reason)),
            None => self
                .manifests
                .limits()
                .check_jobs(&name, self.jobs.lock().await.len())?,
        }
        let opened = self.manifests.open(&name, &config).await?;
        let stored = StoredJob {
            config: config.clone(),
            manifest_crc32c: opened.crc32c,
            manifest_sha256: Some(opened.sha256),
            source_sha256: opened.sources,
            samples: opened.samples,
            // At most 2^32 (`Layout::mixed`).
            shards: opened.dataset.layout.shards() as u32,
        };
        let (samples, shards) = (stored.samples, stored.shards);
        let (owned, cap) = (name.clone(), self.manifests.limits().members_per_job);
        let fleet = self.fleet.clone();
        let (job, effects) = off_runtime(&name, move || {
            let (mut job, effects) = Job::create(owned, stored, opened.dataset)?;
            job.attach(&fleet, cap);
            Ok((job, effects))
        })
        .await?;
        let (_, revision) = self.store.range(&keys::members(&name)).await?;
        let room = self.writer.reserve().await?;
        let mut jobs = self.jobs.lock().await;
        match jobs.get(&name).cloned() {
            Some(Slot::Ready(handle)) => {
                drop((jobs, room));
                return existing(&handle, config).await;
            }
            Some(Slot::Loading(_)) => {
                drop((jobs, room));
                let handle = self.job(&name).await?;
                return existing(&handle, config).await;
            }
            Some(Slot::Failed(reason)) => return Err(failed(reason)),
            None => {}
        }
        let handle = self.start_job(job, revision + 1);
        let staged = self.stage(&handle, room, effects);
        jobs.insert(name.clone(), Slot::Ready(Arc::clone(&handle)));
        self.deleted.forget(&name);
        drop(jobs);
        if let Err(error) = self.apply(staged).await {
            let mut jobs = self.jobs.lock().await;
            if matches!(jobs.get(&name), Some(Slot::Ready(h)) if Arc::ptr_eq(h, &handle)) {
                jobs.remove(&name);
            }
            return Err(error);
        }
        tracing::info!(job = name.as_str(), samples, shards, "job created");
        Ok(CreatedJob {
            config,
            created: true,
            samples,
            shards,
        })
    }

    /// Deletes a job: its keys and its members' leases in the store, its
    /// model here. A call of the job already in progress either landed
    /// before (its writes are ordered before the delete) or is refused
    /// (the model is marked deleted under its lock); members' Watch
    /// streams end once the last call holding the job returns.
    pub async fn delete_job(&self, name: &JobId, reason: DeleteReason) -> Result<()> {
        let slot = self.jobs.lock().await.get(name).cloned();
        match slot {
            None => return Err(self.deleted.unknown(name)),
            Some(Slot::Failed(_)) => {
                self.deleted.remember(name, reason);
                // Nothing of it is served: its keys go, and its members'
                // leases expire by themselves.
                self.writer
                    .write(vec![Op::DeletePrefix {
                        prefix: keys::job(name),
                    }])
                    .await?;
                self.forget(name, None).await;
            }
            Some(Slot::Loading(_) | Slot::Ready(_)) => {
                let handle = self.job(name).await?;
                let room = self.writer.reserve().await?;
                let mut job = handle.job.lock().await;
                if job.deleted {
                    return Err(self.deleted.unknown(name));
                }
                let effects = job.delete();
                // Calls refused from now on hear why.
                self.deleted.remember(name, reason);
                let staged = self.stage(&handle, room, effects);
                drop(job);
                // Forgotten once the delete is durable: until then it is
                // listed (its calls are refused already). A delete the
                // store rejects marks the model for reloading, which
                // brings the job back as the store has it.
                self.apply(staged).await?;
                self.forget(name, Some(&handle)).await;
            }
        }
        self.metrics
            .jobs_deleted
            .with_label_values(&[reason.label()])
            .inc();
        tracing::info!(job = name.as_str(), reason = reason.label(), "job deleted");
        Ok(())
    }

    /// Removes a job's slot: any slot, or only the one holding `handle`
    /// (a job of the same name created since is another job).
    async fn forget(&self, name: &JobId, handle: Option<&Arc<JobHandle>>) {
        let mut jobs = self.jobs.lock().await;
        let ours = match (jobs.get(name), handle) {
            (Some(Slot::Ready(h)), Some(handle)) => Arc::ptr_eq(h, handle),
            (Some(_), Some(_)) => false,
            (Some(_), None) => true,
            (None, _) => false,
        };
        if ours {
            jobs.remove(name);
        }
    }

    /// One line per job, sorted by name.
    pub async fn list(&self) -> Vec<JobLine> {
        let slots: Vec<(JobId, Slot)> = self
            .jobs
            .lock()
            .await
            .iter()
            .map(|(name, slot)| (name.clone(), slot.clone()))
            .collect();
        let mut lines = Vec::with_capacity(slots.len());
        for (name, slot) in slots {
            let line = match slot {
                Slot::Ready(handle) => JobLine::Ready(handle.job.lock().await.summary()),
                Slot::Loading(_) => JobLine::Loading(name),
                Slot::Failed(reason) => JobLine::Failed { job: name, reason },
            };
            lines.push(line);
        }
        lines.sort_by(|a, b| a.job().as_str().cmp(b.job().as_str()));
        lines
    }

    /// One round of housekeeping: records jobs that finished unseen (they
    /// finished before this replica led), deletes those whose retention
    /// has passed, and rebuilds the job-labelled gauges.
    async fn tidy(&self) {
        let jobs = self.list().await;
        let now = unix_ms();
        let ttl = self.finished_job_ttl.as_millis() as u64;
        let m = &self.metrics;
        for gauge in [&m.job_members, &m.job_epoch, &m.job_leased_units] {
            gauge.reset();
        }
        m.job_member_rate.reset();
        let mut states = [
            ("loading", 0),
            ("running", 0),
            ("finished", 0),
            ("failed", 0),
        ];
        for line in &jobs {
            let state = match line {
                JobLine::Loading(_) => 0,
                JobLine::Failed { .. } => 3,
                JobLine::Ready(summary) if summary.finished => 2,
                JobLine::Ready(_) => 1,
            };
            states[state].1 += 1;
            let JobLine::Ready(line) = line else {
                continue;
            };
            let name = &line.job;
            if line.finished && line.finished_at_ms == 0 {
                if let Ok(handle) = self.job(name).await {
                    let noop = |_: &mut Job| (Ok(()), Effects::default());
                    if let Err(error) = self.change(&handle, noop).await {
                        tracing::warn!(job = name.as_str(), %error, "cannot record that the job finished");
                    }
                }
            } else if line.finished && now.saturating_sub(line.finished_at_ms) >= ttl {
                match self.delete_job(name, DeleteReason::Expired).await {
                    Ok(()) | Err(CoordError::UnknownJob(_)) => {}
                    Err(error) => {
                        tracing::warn!(job = name.as_str(), %error, "cannot delete an expired job")
                    }
                }
                continue;
            }
            let labels = [name.as_str()];
            m.job_members
                .with_label_values(&labels)
                .set(i64::from(line.members));
            m.job_epoch
                .with_label_values(&labels)
                .set(line.epoch as i64);
            m.job_leased_units
                .with_label_values(&labels)
                .set(line.leased_units as i64);
            if let Some((_, fastest)) = &line.rates.fastest {
                let rate = |stat| m.job_member_rate.with_label_values(&[name.as_str(), stat]);
                rate("fastest").set(*fastest);
                rate("median").set(line.rates.median);
            }
        }
        for (state, count) in states {
            m.jobs.with_label_values(&[state]).set(count);
        }
    }
}

/// Runs `Leader::tidy` every [`JOB_GAUGES_INTERVAL`], or more often when
/// the retention is shorter, until this leadership ends (the caller aborts
/// it then).
pub async fn housekeeping(leader: std::sync::Weak<Leader>) {
    let interval = match leader.upgrade() {
        Some(l) => JOB_GAUGES_INTERVAL
            .min(l.finished_job_ttl / 4)
            .max(Duration::from_millis(50)),
        None => return,
    };
    loop {
        let Some(leader) = leader.upgrade() else {
            return;
        };
        if *leader.failed.borrow() {
            return;
        }
        leader.tidy().await;
        drop(leader);
        tokio::time::sleep(interval).await;
    }
}
