//! The gRPC service: thin handlers. Each converts its request (see
//! `convert`: names, identities and counts checked, ids typed), calls the
//! one [`Leader`] method that answers it (the leader runs the model under
//! the job's lock and applies its effects), and converts the answer back
//! to the protocol's. Protocol types live here and in `convert` only.

mod convert;

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Instant as StdInstant;

use futures::{Stream, StreamExt};
use tokio::sync::RwLock;
use tokio_stream::wrappers::BroadcastStream;
use tonic::{Request, Response, Status};
use tracing::Instrument;
use tributary_common::ids::Epoch;
use tributary_common::proto::v1::{self, coordinator_server::Coordinator};

use crate::auth::{Access, DatasetPolicy, TokenCheck};
use crate::error::{CoordError, Result};
use crate::leader::{DeleteReason, Leader};
use crate::metrics::Metrics;
use crate::store::Election;
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
    /// The token check: mints the job credential CreateJob hands the
    /// operator.
    pub token: TokenCheck,
}

impl Service {
    async fn leader(&self) -> Result<Arc<Leader>> {
        if let Role::Leader(leader) = &*self.role.read().await {
            if !leader.has_failed() {
                return Ok(Arc::clone(leader));
            }
        }
        let address = self.election.leader().await.ok().flatten();
        Err(CoordError::NotLeader(address))
    }

    /// A member-scoped request, converted, with the leader: every member
    /// call's preamble.
    async fn call<R, T>(&self, request: Request<R>) -> Result<(Call<T>, Arc<Leader>)>
    where
        Call<T>: TryFrom<R, Error = CoordError>,
    {
        let access = Access::of(&request);
        let call = Call::<T>::try_from(request.into_inner())?;
        access.reach(&call.job)?;
        let span = tracing::Span::current();
        span.record("job", call.job.as_str());
        span.record("member", call.caller.member.as_str());
        Ok((call, self.leader().await?))
    }
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
        let access = Access::of(&request);
        let CreateJob { job, config } = CreateJob::try_from(request.into_inner())?;
        access.reach(&job)?;
        if config.sources.is_empty() {
            self.datasets.check(&config.manifest_url)?;
        }
        for (i, source) in config.sources.iter().enumerate() {
            self.datasets
                .check_field(&format!("sources[{i}].manifest_url"), &source.manifest_url)?;
        }
        let leader = self.leader().await?;
        let created = leader.create_job(job.clone(), config).await?;
        let job_token = match access {
            Access::Job(_) | Access::Member { .. } => None,
            Access::Open | Access::Operator => self.token.mint(&job),
        };
        Ok(Response::new(v1::CreateJobResponse {
            job_token: job_token.unwrap_or_default(),
            ..created.into()
        }))
    }

    async fn answer_join(&self, request: Request<v1::JoinRequest>) -> Answer<v1::JoinResponse> {
        let access = Access::of(&request);
        let Join {
            job,
            joiner,
            manifest_sha256,
        } = Join::try_from(request.into_inner())?;
        access.reach(&job)?;
        access.may_join(&joiner.identity)?;
        let span = tracing::Span::current();
        span.record("job", job.as_str());
        span.record("member", joiner.member.as_str());
        let leader = self.leader().await?;
        leader
            .check_manifest(&job, manifest_sha256.as_deref())
            .await?;
        let joined = leader.join(&job, joiner).await?;
        span.record("rank", joined.rank);
        span.record("generation", joined.generation);
        tracing::info!(
            job = job.as_str(),
            member = joined.member.as_str(),
            rank = joined.rank,
            generation = joined.generation,
            "member joined"
        );
        Ok(Response::new(joined.into()))
    }

    async fn answer_keep_alive(
        &self,
        request: Request<v1::MemberRequest>,
    ) -> Answer<v1::KeepAliveResponse> {
        let (call, leader) = self.call::<_, ()>(request).await?;
        let ttl = leader.keep_alive(&call.job, &call.caller).await?;
        Ok(Response::new(v1::KeepAliveResponse {
            ttl_ms: ttl.as_millis() as u32,
        }))
    }

    async fn answer_get_assignment(
        &self,
        request: Request<v1::AssignmentRequest>,
    ) -> Answer<v1::Assignment> {
        let (call, leader) = self.call::<_, Epoch>(request).await?;
        let assignment = leader
            .assignment(&call.job, &call.caller, call.args)
            .await?;
        let span = tracing::Span::current();
        span.record("rank", assignment.rank);
        span.record("generation", assignment.generation);
        Ok(Response::new(assignment.into()))
    }

    async fn answer_watch(&self, request: Request<v1::MemberRequest>) -> Answer<EventStream> {
        let (call, leader) = self.call::<_, ()>(request).await?;
        let events = leader.watch(&call.job, &call.caller).await?;
        let events = BroadcastStream::new(events)
            .filter_map(|e| async move { e.ok().map(|e| Ok(v1::JobEvent::from(e))) });
        Ok(Response::new(Box::pin(events)))
    }

    async fn answer_acquire(
        &self,
        request: Request<v1::AcquireRequest>,
    ) -> Answer<v1::AcquireResponse> {
        let (call, leader) = self.call::<_, Acquire>(request).await?;
        let Acquire { wait, max } = call.args;
        let acquired = leader.acquire(&call.job, &call.caller, max, wait).await?;
        Ok(Response::new(acquired.into()))
    }

    async fn answer_report(
        &self,
        request: Request<v1::ReportRequest>,
    ) -> Answer<v1::ReportResponse> {
        let (call, leader) = self.call::<_, Report>(request).await?;
        let Report {
            generation,
            samples,
            acked,
        } = &call.args;
        if acked.is_empty() {
            tracing::Span::current().record("generation", generation.get());
        }
        leader
            .report(&call.job, &call.caller, *generation, *samples, acked)
            .await?;
        Ok(Response::new(v1::ReportResponse {}))
    }

    async fn answer_commit(
        &self,
        request: Request<v1::CommitRequest>,
    ) -> Answer<v1::CommitResponse> {
        let (call, leader) = self.call::<_, Commit>(request).await?;
        let Commit {
            generation,
            samples,
        } = call.args;
        tracing::Span::current().record("generation", generation.get());
        leader
            .commit(&call.job, &call.caller, generation, samples)
            .await?;
        tracing::debug!(
            job = call.job.as_str(),
            generation = generation.get(),
            samples,
            "commit"
        );
        Ok(Response::new(v1::CommitResponse {}))
    }

    async fn answer_leave(&self, request: Request<v1::MemberRequest>) -> Answer<v1::LeaveResponse> {
        let (call, leader) = self.call::<_, ()>(request).await?;
        leader.leave(&call.job, &call.caller).await?;
        Ok(Response::new(v1::LeaveResponse {}))
    }

    async fn answer_list_jobs(
        &self,
        request: Request<v1::ListJobsRequest>,
    ) -> Answer<v1::ListJobsResponse> {
        Access::of(&request).operate("ListJobs")?;
        let leader = self.leader().await?;
        let jobs = leader.list().await;
        Ok(Response::new(v1::ListJobsResponse {
            jobs: jobs.into_iter().map(v1::JobSummary::from).collect(),
            leader: leader.address().to_owned(),
        }))
    }

    async fn answer_delete_job(
        &self,
        request: Request<v1::JobRequest>,
    ) -> Answer<v1::DeleteJobResponse> {
        Access::of(&request).operate("DeleteJob")?;
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
        let access = Access::of(&request);
        let job = convert::job("job", request.into_inner().job)?;
        access.reach(&job)?;
        let leader = self.leader().await?;
        let status = match leader.status(&job).await {
            Ok(status) => v1::JobStatus::from(status),
            Err(CoordError::JobFailed { reason, .. }) => v1::JobStatus {
                failed: reason,
                ..v1::JobStatus::default()
            },
            Err(error) => return Err(error.into()),
        };
        Ok(Response::new(v1::JobStatus {
            leader: leader.address().to_owned(),
            ..status
        }))
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
