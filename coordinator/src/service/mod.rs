//! The gRPC service: thin handlers that check what they were sent, find the
//! leader's job, check that the caller speaks for the member it names, call
//! the model, write what it returns, and answer.

mod requests;

use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use futures::{Stream, StreamExt};
use tokio::sync::RwLock;
use tokio::time::Instant;
use tokio_stream::wrappers::BroadcastStream;
use tonic::{Request, Response, Status};
use tributary_common::proto::v1::{self, coordinator_server::Coordinator};

use crate::auth::{new_secret, secret_digest, DatasetPolicy};
use crate::config::JobConfig;
use crate::error::{CoordError, Result};
use crate::keys;
use crate::leader::{open_dataset, JobHandle, Leader, Slot};
use crate::model::sync::Rank;
use crate::model::{Identity, Job, MemberRecord, State, StoredJob};
use crate::store::Election;

pub use requests::{MAX_ACKS_PER_REPORT, MAX_UNITS_PER_ACQUIRE};

/// What a replica is right now.
#[derive(Debug, Clone, Default)]
pub enum Role {
    #[default]
    Follower,
    Leader(Arc<Leader>),
}

/// The tonic service of one replica.
#[derive(Debug, Clone)]
pub struct Service {
    pub role: Arc<RwLock<Role>>,
    pub election: Arc<dyn Election>,
    /// Which manifests CreateJob may name.
    pub datasets: DatasetPolicy,
}

/// The longest an `Acquire` waits for units.
const MAX_WAIT: Duration = Duration::from_secs(30);

impl Service {
    async fn leader(&self) -> Result<Arc<Leader>> {
        if let Role::Leader(leader) = &*self.role.read().await {
            if !*leader.failed.borrow() {
                return Ok(Arc::clone(leader));
            }
        }
        let address = self.election.leader().await.ok().flatten();
        Err(CoordError::NotLeader(address))
    }

    async fn job(&self, name: &str) -> Result<(Arc<Leader>, Arc<JobHandle>)> {
        let leader = self.leader().await?;
        let job = leader.job(name).await?;
        Ok((leader, job))
    }

    /// The answer to a CreateJob for a job that exists.
    async fn existing(
        handle: &JobHandle,
        config: &JobConfig,
    ) -> Result<Response<v1::CreateJobResponse>> {
        let job = handle.job.lock().await;
        if job.stored.config != *config {
            return Err(CoordError::ConflictingConfig {
                job: job.name.clone(),
                diff: job.stored.config.diff(config),
            });
        }
        Ok(Response::new(v1::CreateJobResponse {
            config: Some(config.to_proto()),
            created: false,
            samples: job.stored.samples,
            shards: job.stored.shards,
        }))
    }

    async fn create(
        &self,
        request: v1::CreateJobRequest,
    ) -> Result<Response<v1::CreateJobResponse>> {
        let name = request.job;
        requests::name("job name", &name)?;
        let config = JobConfig::from_proto(request.config)?;
        self.datasets.check(&config.manifest_url)?;
        let leader = self.leader().await?;
        let slot = leader.jobs.lock().await.get(&name).cloned();
        match slot {
            Some(Slot::Ready(handle)) => return Self::existing(&handle, &config).await,
            Some(Slot::Failed(reason)) => return Err(CoordError::JobFailed { job: name, reason }),
            None => {}
        }
        // No lock is held while the manifest is read: a slow or hung store
        // stalls this call only.
        let opened = open_dataset(&name, &config.manifest_url, &leader.options).await?;
        let stored = StoredJob {
            config: config.clone(),
            manifest_crc32c: opened.crc32c,
            manifest_sha256: Some(opened.sha256),
            samples: opened.samples,
            shards: opened.dataset.shard_samples.len() as u32,
        };
        let (samples, shards) = (stored.samples, stored.shards);
        let (job, ops) = Job::create(&name, stored, opened.dataset);
        let (_, revision) = leader.store.range(&keys::members(&name)).await?;
        let mut jobs = leader.jobs.lock().await;
        match jobs.get(&name).cloned() {
            Some(Slot::Ready(handle)) => {
                drop(jobs);
                return Self::existing(&handle, &config).await;
            }
            Some(Slot::Failed(reason)) => return Err(CoordError::JobFailed { job: name, reason }),
            None => {}
        }
        let handle = leader.start_job(job, revision + 1);
        let write = leader.enqueue(&handle, ops).await?;
        jobs.insert(name.clone(), Slot::Ready(Arc::clone(&handle)));
        drop(jobs);
        if let Err(error) = write.wait().await {
            let mut jobs = leader.jobs.lock().await;
            if matches!(jobs.get(&name), Some(Slot::Ready(h)) if Arc::ptr_eq(h, &handle)) {
                jobs.remove(&name);
            }
            return Err(error);
        }
        tracing::info!(job = name, samples, shards, "created job");
        Ok(Response::new(v1::CreateJobResponse {
            config: Some(config.to_proto()),
            created: true,
            samples,
            shards,
        }))
    }
}

fn rank_of(identity: &Identity) -> Result<Rank<'_>> {
    match identity {
        Identity::Torchrun {
            rank,
            world,
            run_id,
            restart,
        } => Ok(Rank {
            rank: *rank,
            world: *world,
            run_id,
            restart: *restart,
        }),
        Identity::Name(name) => Err(CoordError::Invalid(format!(
            "member {name:?} joined by name; sync jobs need a torchrun identity (RANK, WORLD_SIZE)"
        ))),
    }
}

fn dynamic_only(job: &str) -> CoordError {
    CoordError::Precondition(format!(
        "job {job:?} is a sync job; Acquire is for dynamic jobs"
    ))
}

fn sync_only(job: &str) -> CoordError {
    CoordError::Precondition(format!(
        "job {job:?} is a dynamic job; use Acquire and acks instead of assignments and commits"
    ))
}

type EventStream = Pin<Box<dyn Stream<Item = std::result::Result<v1::JobEvent, Status>> + Send>>;

#[tonic::async_trait]
impl Coordinator for Service {
    async fn create_job(
        &self,
        request: Request<v1::CreateJobRequest>,
    ) -> std::result::Result<Response<v1::CreateJobResponse>, Status> {
        Ok(self.create(request.into_inner()).await?)
    }

    async fn join(
        &self,
        request: Request<v1::JoinRequest>,
    ) -> std::result::Result<Response<v1::JoinResponse>, Status> {
        let request = request.into_inner();
        requests::name("job", &request.job)?;
        requests::bounded_secret(&request.secret)?;
        let (identity, member) = requests::identity(request.identity)?;
        let (leader, handle) = self.job(&request.job).await?;
        let mut job = handle.job.lock().await;
        let ttl = Duration::from_secs(u64::from(job.stored.config.member_ttl_s));
        let mut ops = Vec::new();
        let mut response = v1::JoinResponse {
            member: member.clone(),
            config: Some(job.stored.config.to_proto()),
            ttl_ms: ttl.as_millis() as u32,
            ..v1::JoinResponse::default()
        };
        let mut new_generation = false;
        let Job {
            name,
            stored,
            dataset,
            state,
            ..
        } = &mut *job;
        match state {
            State::Sync(model) => {
                let rank = rank_of(&identity)?;
                let (gen, gen_ops) = model.join(name, &stored.config, dataset, rank)?;
                new_generation = !gen_ops.is_empty();
                ops.extend(gen_ops);
                response.generation = gen.record.generation.0;
                response.epoch = gen.record.epoch.0;
                response.rank = rank.rank;
                response.world = gen.record.world;
            }
            State::Dynamic(model) => response.epoch = model.epoch(),
        }
        // Checked after the model: an existing member has the same identity,
        // so its join changed nothing there (or was refused as stale).
        let old_lease = match job.members.get(&member) {
            None => None,
            Some(_) => match job.authorize(&member, &request.secret) {
                Ok(old) => Some(old.lease),
                Err(_) => {
                    return Err(CoordError::AlreadyJoined {
                        job: request.job,
                        member,
                        ttl_s: job.stored.config.member_ttl_s,
                    }
                    .into())
                }
            },
        };
        // A Join proving the member's secret keeps it, and a new member may
        // bring a random secret of its own: processes that share one
        // identity (a rank's DataLoader workers) share one secret.
        let secret = match old_lease {
            Some(_) => request.secret.clone(),
            None if requests::chosen_secret(&request.secret) => request.secret.clone(),
            None => new_secret()?,
        };
        response.secret = secret.clone();
        if old_lease.is_some() {
            let (removed, _) = job.remove_member(&member);
            ops.extend(removed);
            handle.notify.notify_waiters();
        }
        let lease = leader.store.grant(ttl).await.map_err(CoordError::from)?;
        let record = MemberRecord {
            identity,
            lease,
            secret_sha256: secret_digest(&secret),
        };
        ops.push(job.add_member(&member, record));
        leader.write(&handle, ops).await?;
        drop(job);
        if let Some(old) = old_lease {
            let _ = leader.store.revoke(old).await;
        }
        if new_generation {
            let _ = handle.job.lock().await.events.send(v1::JobEvent {
                event: Some(v1::job_event::Event::Generation(response.generation)),
            });
        }
        tracing::info!(
            job = request.job,
            member,
            generation = response.generation,
            "joined"
        );
        Ok(Response::new(response))
    }

    async fn keep_alive(
        &self,
        request: Request<v1::MemberRequest>,
    ) -> std::result::Result<Response<v1::KeepAliveResponse>, Status> {
        let request = request.into_inner();
        requests::member_call(&request.job, &request.member, &request.secret)?;
        let (leader, handle) = self.job(&request.job).await?;
        let lease = handle
            .job
            .lock()
            .await
            .authorize(&request.member, &request.secret)?
            .lease;
        match leader.store.keep_alive(lease).await {
            Ok(ttl) => Ok(Response::new(v1::KeepAliveResponse {
                ttl_ms: ttl.as_millis() as u32,
            })),
            Err(crate::store::StoreError::LeaseNotFound(_)) => {
                let mut job = handle.job.lock().await;
                job.remove_member(&request.member);
                drop(job);
                handle.notify.notify_waiters();
                Err(CoordError::UnknownMember {
                    job: request.job,
                    member: request.member,
                }
                .into())
            }
            Err(e) => Err(CoordError::from(e).into()),
        }
    }

    async fn get_assignment(
        &self,
        request: Request<v1::AssignmentRequest>,
    ) -> std::result::Result<Response<v1::Assignment>, Status> {
        let request = request.into_inner();
        requests::member_call(&request.job, &request.member, &request.secret)?;
        let (leader, handle) = self.job(&request.job).await?;
        let mut job = handle.job.lock().await;
        let identity = job
            .authorize(&request.member, &request.secret)?
            .identity
            .clone();
        let Job {
            name,
            stored,
            dataset,
            state,
            events,
            ..
        } = &mut *job;
        let State::Sync(model) = state else {
            return Err(sync_only(&request.job).into());
        };
        let (assignment, ops) = model.assignment(
            name,
            &stored.config,
            dataset,
            rank_of(&identity)?,
            request.epoch,
        )?;
        let new_generation = !ops.is_empty();
        leader.write(&handle, ops).await?;
        if new_generation {
            let _ = events.send(v1::JobEvent {
                event: Some(v1::job_event::Event::Generation(assignment.generation)),
            });
        }
        Ok(Response::new(assignment))
    }

    type WatchStream = EventStream;

    async fn watch(
        &self,
        request: Request<v1::MemberRequest>,
    ) -> std::result::Result<Response<Self::WatchStream>, Status> {
        let request = request.into_inner();
        requests::member_call(&request.job, &request.member, &request.secret)?;
        let (_, handle) = self.job(&request.job).await?;
        let job = handle.job.lock().await;
        job.authorize(&request.member, &request.secret)?;
        let events = BroadcastStream::new(job.events.subscribe())
            .filter_map(|e| async move { e.ok().map(Ok) });
        Ok(Response::new(Box::pin(events)))
    }

    async fn acquire(
        &self,
        request: Request<v1::AcquireRequest>,
    ) -> std::result::Result<Response<v1::AcquireResponse>, Status> {
        let request = request.into_inner();
        requests::member_call(&request.job, &request.member, &request.secret)?;
        let (leader, handle) = self.job(&request.job).await?;
        let deadline =
            Instant::now() + Duration::from_millis(u64::from(request.wait_ms)).min(MAX_WAIT);
        let max = request.max_units.clamp(1, MAX_UNITS_PER_ACQUIRE) as usize;
        loop {
            let notified = handle.notify.notified();
            let mut job = handle.job.lock().await;
            let lease = job.authorize(&request.member, &request.secret)?.lease;
            let (name, dataset) = (job.name.clone(), job.dataset.clone());
            let State::Dynamic(model) = &mut job.state else {
                return Err(dynamic_only(&request.job).into());
            };
            if model.finished() {
                return Ok(Response::new(v1::AcquireResponse {
                    finished: true,
                    epoch: model.epoch(),
                    ..v1::AcquireResponse::default()
                }));
            }
            if let Some(ops) = model.advance(&name, &dataset) {
                let epoch = model.epoch();
                leader.write(&handle, ops).await?;
                let _ = job.events.send(v1::JobEvent {
                    event: Some(v1::job_event::Event::PoolChanged(epoch)),
                });
                handle.notify.notify_waiters();
                continue;
            }
            let epoch = model.epoch();
            let (units, ops) = model.acquire(&name, &request.member, lease, max);
            if !units.is_empty() {
                leader.write(&handle, ops).await?;
                return Ok(Response::new(v1::AcquireResponse {
                    units,
                    epoch,
                    ..v1::AcquireResponse::default()
                }));
            }
            drop(job);
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                return Ok(Response::new(v1::AcquireResponse {
                    drained: true,
                    epoch,
                    ..v1::AcquireResponse::default()
                }));
            }
        }
    }

    async fn report(
        &self,
        request: Request<v1::ReportRequest>,
    ) -> std::result::Result<Response<v1::ReportResponse>, Status> {
        let request = request.into_inner();
        requests::member_call(&request.job, &request.member, &request.secret)?;
        requests::acks(&request.acked)?;
        let (leader, handle) = self.job(&request.job).await?;
        let mut job = handle.job.lock().await;
        let identity = job
            .authorize(&request.member, &request.secret)?
            .identity
            .clone();
        let (name, dataset) = (job.name.clone(), job.dataset.clone());
        let (ops, error) = match &mut job.state {
            State::Sync(model) => (
                model.report(
                    &name,
                    rank_of(&identity)?,
                    request.generation,
                    request.samples,
                )?,
                None,
            ),
            State::Dynamic(model) => {
                let (mut ops, error) = model.ack(&name, &request.member, &request.acked);
                let advanced = model.advance(&name, &dataset);
                if let Some(more) = advanced {
                    ops.extend(more);
                    let _ = job.events.send(v1::JobEvent {
                        event: Some(v1::job_event::Event::PoolChanged(match &job.state {
                            State::Dynamic(m) => m.epoch(),
                            State::Sync(_) => 0,
                        })),
                    });
                    handle.notify.notify_waiters();
                }
                (ops, error)
            }
        };
        // Handed to the writer before the lock goes, so the store sees the
        // job's changes in the model's order; waited for after, so reports
        // of many ranks share one flush.
        let write = leader.enqueue(&handle, ops).await?;
        drop(job);
        write.wait().await?;
        match error {
            Some(error) => Err(error.into()),
            None => Ok(Response::new(v1::ReportResponse {})),
        }
    }

    async fn commit(
        &self,
        request: Request<v1::CommitRequest>,
    ) -> std::result::Result<Response<v1::CommitResponse>, Status> {
        let request = request.into_inner();
        requests::member_call(&request.job, &request.member, &request.secret)?;
        let (leader, handle) = self.job(&request.job).await?;
        let mut job = handle.job.lock().await;
        let identity = job
            .authorize(&request.member, &request.secret)?
            .identity
            .clone();
        let Job {
            name,
            stored,
            dataset,
            state,
            ..
        } = &mut *job;
        let State::Sync(model) = state else {
            return Err(sync_only(&request.job).into());
        };
        let ops = model.commit(
            name,
            &stored.config,
            dataset,
            rank_of(&identity)?,
            request.generation,
            request.samples,
        )?;
        leader.write(&handle, ops).await?;
        tracing::info!(
            job = name,
            generation = request.generation,
            samples = request.samples,
            "commit"
        );
        Ok(Response::new(v1::CommitResponse {}))
    }

    async fn leave(
        &self,
        request: Request<v1::MemberRequest>,
    ) -> std::result::Result<Response<v1::LeaveResponse>, Status> {
        let request = request.into_inner();
        requests::member_call(&request.job, &request.member, &request.secret)?;
        let (leader, handle) = self.job(&request.job).await?;
        let mut job = handle.job.lock().await;
        let lease = job.authorize(&request.member, &request.secret)?.lease;
        let (ops, _) = job.remove_member(&request.member);
        let write = leader.enqueue(&handle, ops).await?;
        drop(job);
        write.wait().await?;
        let _ = leader.store.revoke(lease).await;
        handle.notify.notify_waiters();
        Ok(Response::new(v1::LeaveResponse {}))
    }

    async fn get_status(
        &self,
        request: Request<v1::JobRequest>,
    ) -> std::result::Result<Response<v1::JobStatus>, Status> {
        let request = request.into_inner();
        requests::name("job", &request.job)?;
        let leader = self.leader().await?;
        let handle = match leader.job(&request.job).await {
            Ok(handle) => handle,
            Err(CoordError::JobFailed { reason, .. }) => {
                return Ok(Response::new(v1::JobStatus {
                    failed: reason,
                    leader: leader.address.clone(),
                    ..v1::JobStatus::default()
                }))
            }
            Err(error) => return Err(error.into()),
        };
        let status = handle.job.lock().await.status(&leader.address);
        // A handler cancelled mid-write (its client died) leaves its change
        // in memory with the write still queued: answer only once it is
        // durable, so a status never shows what a crash could lose.
        leader.flush().await?;
        Ok(Response::new(status))
    }
}
