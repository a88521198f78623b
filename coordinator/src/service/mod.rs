//! The gRPC service: thin handlers. Each converts its request (see
//! `convert`: names, identities and counts checked, ids typed), finds the
//! leader's job, and has [`Leader::change`] run one model method, which
//! checks that the caller speaks for the member it names and returns its
//! effects; `change` applies them (store writes, leases, events) after the
//! job's lock is released. Then the handler answers.

mod convert;

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Instant as StdInstant;

use futures::{Stream, StreamExt};
use tokio::sync::RwLock;
use tokio::time::Instant;
use tokio_stream::wrappers::BroadcastStream;
use tonic::{Request, Response, Status};
use tracing::Instrument;
use tributary_common::ids::{Epoch, JobId};
use tributary_common::job::JobSpec;
use tributary_common::proto::v1::{self, coordinator_server::Coordinator};

use crate::auth::{new_secret, DatasetPolicy};
use crate::error::{CoordError, Result};
use crate::keys;
use crate::leader::DeleteReason;
use crate::leader::{open_dataset, JobHandle, Leader, Slot};
use crate::metrics::Metrics;
use crate::model::{outcome, Acquired, Caller, Effects, Job, Outcome, Progress, State, StoredJob};
use crate::store::{Election, StoreError};
use convert::{Acquire, Call, Commit, CreateJob, Join, Report};

pub use convert::{MAX_ACKS_PER_REPORT, MAX_UNITS_PER_ACQUIRE, MAX_WAIT};

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
    pub metrics: Metrics,
}

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

    async fn job(&self, name: &JobId) -> Result<(Arc<Leader>, Arc<JobHandle>)> {
        let leader = self.leader().await?;
        let job = leader.job(name).await?;
        Ok((leader, job))
    }

    /// A member-scoped request, converted, with the leader and the job it
    /// names: every member call's preamble.
    async fn call<R, T>(
        &self,
        request: Request<R>,
    ) -> Result<(Call<T>, Arc<Leader>, Arc<JobHandle>)>
    where
        Call<T>: TryFrom<R, Error = CoordError>,
    {
        let call = Call::<T>::try_from(request.into_inner())?;
        let span = tracing::Span::current();
        span.record("job", call.job.as_str());
        span.record("member", call.caller.member.as_str());
        let (leader, handle) = self.job(&call.job).await?;
        Ok((call, leader, handle))
    }

    /// The answer to a CreateJob for a job that exists.
    async fn existing(handle: &JobHandle, config: &JobSpec) -> Result<v1::CreateJobResponse> {
        let job = handle.job.lock().await;
        if job.stored.config != *config {
            return Err(CoordError::ConflictingConfig {
                job: job.name.clone(),
                diff: job.stored.config.diff(config),
            });
        }
        Ok(v1::CreateJobResponse {
            config: Some(v1::JobConfig::from(config)),
            created: false,
            samples: job.stored.samples,
            shards: job.stored.shards,
        })
    }

    /// Creates a job, or answers for the one that exists. No lock is held
    /// while the manifest or the store is read: a slow or hung store stalls
    /// this call only. The jobs map is locked only to check and insert.
    async fn create(&self, create: CreateJob) -> Result<v1::CreateJobResponse> {
        let CreateJob { job: name, config } = create;
        if config.sources.is_empty() {
            self.datasets.check(&config.manifest_url)?;
        }
        for (i, source) in config.sources.iter().enumerate() {
            self.datasets
                .check_field(&format!("sources[{i}].manifest_url"), &source.manifest_url)?;
        }
        let leader = self.leader().await?;
        let slot = leader.jobs.lock().await.get(&name).cloned();
        let failed = |reason| CoordError::JobFailed {
            job: name.clone(),
            reason,
        };
        match slot {
            Some(Slot::Ready(handle)) => return Self::existing(&handle, &config).await,
            Some(Slot::Loading(_)) => {
                let handle = leader.job(&name).await?;
                return Self::existing(&handle, &config).await;
            }
            Some(Slot::Failed(reason)) => return Err(failed(reason)),
            None => {}
        }
        let opened = open_dataset(&name, &config, &leader.options).await?;
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
        let (job, effects) = Job::create(name.clone(), stored, opened.dataset)?;
        let (_, revision) = leader.store.range(&keys::members(&name)).await?;
        let room = leader.writer.reserve().await?;
        let mut jobs = leader.jobs.lock().await;
        match jobs.get(&name).cloned() {
            Some(Slot::Ready(handle)) => {
                drop((jobs, room));
                return Self::existing(&handle, &config).await;
            }
            Some(Slot::Loading(_)) => {
                drop((jobs, room));
                let handle = leader.job(&name).await?;
                return Self::existing(&handle, &config).await;
            }
            Some(Slot::Failed(reason)) => return Err(failed(reason)),
            None => {}
        }
        let handle = leader.start_job(job, revision + 1);
        let staged = leader.stage(&handle, room, effects);
        jobs.insert(name.clone(), Slot::Ready(Arc::clone(&handle)));
        drop(jobs);
        if let Err(error) = leader.apply(staged).await {
            let mut jobs = leader.jobs.lock().await;
            if matches!(jobs.get(&name), Some(Slot::Ready(h)) if Arc::ptr_eq(h, &handle)) {
                jobs.remove(&name);
            }
            return Err(error);
        }
        tracing::info!(job = name.as_str(), samples, shards, "created job");
        Ok(v1::CreateJobResponse {
            config: Some(v1::JobConfig::from(&config)),
            created: true,
            samples,
            shards,
        })
    }
}

/// `answer`, having recorded the call as the member's when it was
/// answered (a caller refused, for another member's secret or any other
/// reason, is not seen: its call changed nothing).
fn seen<T>(
    job: &mut Job,
    caller: &Caller,
    (answer, effects): Outcome<T>,
    progress: impl FnOnce(&Effects) -> Progress,
) -> Outcome<T> {
    if answer.is_ok() || effects.tally.units_acked > 0 {
        job.touch(&caller.member, StdInstant::now(), progress(&effects));
    }
    (answer, effects)
}

type EventStream = Pin<Box<dyn Stream<Item = std::result::Result<v1::JobEvent, Status>> + Send>>;

type Answer<T> = std::result::Result<Response<T>, Status>;

/// The calls, each answered by the method of the same name in
/// `impl Coordinator for Service`, which times and counts it.
impl Service {
    async fn answer_create_job(
        &self,
        request: Request<v1::CreateJobRequest>,
    ) -> Answer<v1::CreateJobResponse> {
        let create = CreateJob::try_from(request.into_inner())?;
        Ok(Response::new(self.create(create).await?))
    }

    async fn answer_join(&self, request: Request<v1::JoinRequest>) -> Answer<v1::JoinResponse> {
        let Join { job, joiner } = Join::try_from(request.into_inner())?;
        let span = tracing::Span::current();
        span.record("job", job.as_str());
        span.record("member", joiner.member.as_str());
        let (leader, handle) = self.job(&job).await?;
        let fresh_secret = new_secret()?;
        // The member's record names its lease, and granting it is I/O: so
        // it is granted first, outside the job's lock, once the job sees no
        // reason to refuse; a Join refused after all (the job changed
        // meanwhile) revokes it through its effects.
        let grant = handle.job.lock().await.prepare_join(&joiner)?;
        let lease = leader.grant(grant).await?;
        let response = leader
            .change(&handle, |model| model.join(joiner, fresh_secret, lease))
            .await?;
        span.record("rank", response.rank);
        span.record("generation", response.generation);
        tracing::info!(
            job = job.as_str(),
            member = response.member,
            generation = response.generation,
            "joined"
        );
        Ok(Response::new(response))
    }

    async fn answer_keep_alive(
        &self,
        request: Request<v1::MemberRequest>,
    ) -> Answer<v1::KeepAliveResponse> {
        let (call, leader, handle) = self.call::<_, ()>(request).await?;
        let lease = {
            let mut job = handle.job.lock().await;
            let lease = job.lease_of(&call.caller)?;
            job.touch(&call.caller.member, StdInstant::now(), Progress::None);
            lease
        };
        match leader.store.keep_alive(lease).await {
            Ok(ttl) => Ok(Response::new(v1::KeepAliveResponse {
                ttl_ms: ttl.as_millis() as u32,
            })),
            Err(StoreError::LeaseNotFound(_)) => {
                let member = &call.caller.member;
                let expired = |job: &mut Job| (Ok(()), job.lease_expired(member, Some(lease)));
                leader.change(&handle, expired).await?;
                Err(CoordError::UnknownMember {
                    job: call.job.clone(),
                    member: member.clone(),
                }
                .into())
            }
            Err(e) => Err(CoordError::from(e).into()),
        }
    }

    async fn answer_get_assignment(
        &self,
        request: Request<v1::AssignmentRequest>,
    ) -> Answer<v1::Assignment> {
        let (call, leader, handle) = self.call::<_, Epoch>(request).await?;
        let assignment = leader
            .change(&handle, |job| {
                let answer = outcome(job.assignment(&call.caller, call.args));
                seen(job, &call.caller, answer, |_| Progress::None)
            })
            .await?;
        let span = tracing::Span::current();
        span.record("rank", assignment.rank);
        span.record("generation", assignment.generation);
        Ok(Response::new(assignment))
    }

    async fn answer_watch(&self, request: Request<v1::MemberRequest>) -> Answer<EventStream> {
        let (call, _, handle) = self.call::<_, ()>(request).await?;
        handle.job.lock().await.lease_of(&call.caller)?;
        let events = BroadcastStream::new(handle.events.subscribe())
            .filter_map(|e| async move { e.ok().map(Ok) });
        Ok(Response::new(Box::pin(events)))
    }

    async fn answer_acquire(
        &self,
        request: Request<v1::AcquireRequest>,
    ) -> Answer<v1::AcquireResponse> {
        let (call, leader, handle) = self.call::<_, Acquire>(request).await?;
        let deadline = Instant::now() + call.args.wait;
        loop {
            let notified = handle.notify.notified();
            let look = |job: &mut Job| {
                let answer = outcome(job.acquire(&call.caller, call.args.max));
                seen(job, &call.caller, answer, |_| Progress::None)
            };
            let epoch = match leader.change(&handle, look).await? {
                Acquired::Advanced => continue,
                Acquired::Units { units, epoch } => {
                    return Ok(Response::new(v1::AcquireResponse {
                        units,
                        epoch: epoch.get(),
                        ..v1::AcquireResponse::default()
                    }))
                }
                Acquired::Finished(epoch) => {
                    return Ok(Response::new(v1::AcquireResponse {
                        finished: true,
                        epoch: epoch.get(),
                        ..v1::AcquireResponse::default()
                    }))
                }
                Acquired::Empty(epoch) => epoch,
            };
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                return Ok(Response::new(v1::AcquireResponse {
                    drained: true,
                    epoch: epoch.get(),
                    ..v1::AcquireResponse::default()
                }));
            }
        }
    }

    async fn answer_report(
        &self,
        request: Request<v1::ReportRequest>,
    ) -> Answer<v1::ReportResponse> {
        let (call, leader, handle) = self.call::<_, Report>(request).await?;
        let Report {
            generation,
            samples,
            acked,
        } = &call.args;
        if acked.is_empty() {
            tracing::Span::current().record("generation", generation.get());
        }
        // Reports of many ranks share one flush: each waits for its write
        // after its lock is released.
        leader
            .change(&handle, |job| {
                let answer = job.report(&call.caller, *generation, *samples, acked);
                let sync = acked.is_empty() && matches!(job.state, State::Sync(_));
                seen(job, &call.caller, answer, |effects| match sync {
                    true => Progress::Consumed(*samples),
                    false => Progress::Acked(effects.tally.samples_acked),
                })
            })
            .await?;
        Ok(Response::new(v1::ReportResponse {}))
    }

    async fn answer_commit(
        &self,
        request: Request<v1::CommitRequest>,
    ) -> Answer<v1::CommitResponse> {
        let (call, leader, handle) = self.call::<_, Commit>(request).await?;
        let Commit {
            generation,
            samples,
        } = call.args;
        tracing::Span::current().record("generation", generation.get());
        leader
            .change(&handle, |job| {
                let answer = outcome(job.commit(&call.caller, generation, samples));
                seen(job, &call.caller, answer, |_| Progress::None)
            })
            .await?;
        tracing::info!(
            job = call.job.as_str(),
            generation = generation.get(),
            samples,
            "commit"
        );
        Ok(Response::new(v1::CommitResponse {}))
    }

    async fn answer_leave(&self, request: Request<v1::MemberRequest>) -> Answer<v1::LeaveResponse> {
        let (call, leader, handle) = self.call::<_, ()>(request).await?;
        leader
            .change(&handle, |job| outcome(job.leave(&call.caller)))
            .await?;
        Ok(Response::new(v1::LeaveResponse {}))
    }

    async fn answer_list_jobs(
        &self,
        _request: Request<v1::ListJobsRequest>,
    ) -> Answer<v1::ListJobsResponse> {
        let leader = self.leader().await?;
        let jobs = leader.list().await;
        Ok(Response::new(v1::ListJobsResponse {
            jobs,
            leader: leader.address.clone(),
        }))
    }

    async fn answer_delete_job(
        &self,
        request: Request<v1::JobRequest>,
    ) -> Answer<v1::DeleteJobResponse> {
        let job = convert::job("job", request.into_inner().job)?;
        let leader = self.leader().await?;
        leader.delete_job(&job, DeleteReason::Request).await?;
        Ok(Response::new(v1::DeleteJobResponse {}))
    }

    /// Runs one call's answer, counting it by method and status code.
    async fn timed<T>(
        &self,
        method: &'static str,
        answer: impl Future<Output = Answer<T>>,
    ) -> Answer<T> {
        let started = StdInstant::now();
        let span = tracing::info_span!(
            "rpc",
            method,
            job = tracing::field::Empty,
            member = tracing::field::Empty,
            rank = tracing::field::Empty,
            generation = tracing::field::Empty,
        );
        let answer = answer.instrument(span).await;
        let code = answer
            .as_ref()
            .map_or_else(Status::code, |_| tonic::Code::Ok);
        self.metrics.rpc(method, code, started.elapsed());
        answer
    }

    async fn answer_get_status(&self, request: Request<v1::JobRequest>) -> Answer<v1::JobStatus> {
        let job = convert::job("job", request.into_inner().job)?;
        let leader = self.leader().await?;
        let handle = match leader.job(&job).await {
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

#[tonic::async_trait]
impl Coordinator for Service {
    type WatchStream = EventStream;

    async fn create_job(
        &self,
        request: Request<v1::CreateJobRequest>,
    ) -> Answer<v1::CreateJobResponse> {
        self.timed("CreateJob", self.answer_create_job(request))
            .await
    }

    async fn join(&self, request: Request<v1::JoinRequest>) -> Answer<v1::JoinResponse> {
        self.timed("Join", self.answer_join(request)).await
    }

    async fn keep_alive(
        &self,
        request: Request<v1::MemberRequest>,
    ) -> Answer<v1::KeepAliveResponse> {
        self.timed("KeepAlive", self.answer_keep_alive(request))
            .await
    }

    async fn get_assignment(
        &self,
        request: Request<v1::AssignmentRequest>,
    ) -> Answer<v1::Assignment> {
        self.timed("GetAssignment", self.answer_get_assignment(request))
            .await
    }

    async fn watch(&self, request: Request<v1::MemberRequest>) -> Answer<Self::WatchStream> {
        self.timed("Watch", self.answer_watch(request)).await
    }

    async fn acquire(&self, request: Request<v1::AcquireRequest>) -> Answer<v1::AcquireResponse> {
        self.timed("Acquire", self.answer_acquire(request)).await
    }

    async fn report(&self, request: Request<v1::ReportRequest>) -> Answer<v1::ReportResponse> {
        self.timed("Report", self.answer_report(request)).await
    }

    async fn commit(&self, request: Request<v1::CommitRequest>) -> Answer<v1::CommitResponse> {
        self.timed("Commit", self.answer_commit(request)).await
    }

    async fn leave(&self, request: Request<v1::MemberRequest>) -> Answer<v1::LeaveResponse> {
        self.timed("Leave", self.answer_leave(request)).await
    }

    async fn get_status(&self, request: Request<v1::JobRequest>) -> Answer<v1::JobStatus> {
        self.timed("GetStatus", self.answer_get_status(request))
            .await
    }

    async fn list_jobs(
        &self,
        request: Request<v1::ListJobsRequest>,
    ) -> Answer<v1::ListJobsResponse> {
        self.timed("ListJobs", self.answer_list_jobs(request)).await
    }

    async fn delete_job(&self, request: Request<v1::JobRequest>) -> Answer<v1::DeleteJobResponse> {
        self.timed("DeleteJob", self.answer_delete_job(request))
            .await
    }
}
