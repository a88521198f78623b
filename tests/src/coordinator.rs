//! Talking to a coordinator directly, as tests and benches do: clients that
//! wait for a leader, the requests tests send, and checks of the answers.

use std::time::Duration;

use tonic::metadata::{Ascii, MetadataValue};
use tonic::service::interceptor::InterceptedService;
use tonic::transport::Channel;
use tonic::{Code, Request, Response, Status};
use tributary_common::proto::v1::{self, coordinator_client::CoordinatorClient, join_request};

use crate::eventually;

/// How long a coordinator may take to lead.
const LEAD_DEADLINE: Duration = Duration::from_secs(30);
const PROBE_EVERY: Duration = Duration::from_millis(50);

/// Whether a probe's answer came from a leader: only a leader answers
/// NOT_FOUND for an unknown job (a follower redirects, a replica that is
/// not up does not answer).
fn led<T>(probe: &Result<Response<T>, Status>) -> bool {
    matches!(probe, Err(status) if status.code() == Code::NotFound)
}

fn probe_request() -> v1::JobRequest {
    v1::JobRequest {
        job: "probe".into(),
    }
}

/// Connects to the replica at `address` once it leads. Panics after 30 s.
pub async fn leader_client(address: &str) -> CoordinatorClient<Channel> {
    let mut client = None;
    eventually(
        &format!("the coordinator at {address} to lead"),
        LEAD_DEADLINE,
        PROBE_EVERY,
        async || {
            let Ok(mut c) = CoordinatorClient::connect(format!("http://{address}")).await else {
                return false;
            };
            let leads = led(&c.get_status(probe_request()).await);
            client = Some(c);
            leads
        },
    )
    .await;
    client.expect("a client that reached the leader")
}

/// Adds `Authorization: Bearer <token>` to a call, or nothing.
pub type Bearer = Box<dyn FnMut(Request<()>) -> Result<Request<()>, Status> + Send>;

/// A client that calls with a bearer token.
pub type AuthedClient = CoordinatorClient<InterceptedService<Channel, Bearer>>;

/// Connects to `address`, calling with `token` (none: no header).
/// The replica may still be starting: connecting is retried until
/// it accepts (30 s at most).
pub async fn client_with_token(address: &str, token: Option<&str>) -> AuthedClient {
    let endpoint = Channel::from_shared(format!("http://{address}")).expect("uri");
    let mut channel = None;
    eventually(
        &format!("the coordinator at {address} to accept connections"),
        LEAD_DEADLINE,
        PROBE_EVERY,
        async || {
            channel = endpoint.connect().await.ok();
            channel.is_some()
        },
    )
    .await;
    let channel = channel.expect("connected");
    let header: Option<MetadataValue<Ascii>> =
        token.map(|t| format!("Bearer {t}").parse().expect("ascii"));
    let bearer: Bearer = Box::new(move |mut request: Request<()>| {
        if let Some(value) = &header {
            request
                .metadata_mut()
                .insert("authorization", value.clone());
        }
        Ok(request)
    });
    CoordinatorClient::with_interceptor(channel, bearer)
}

/// [`client_with_token`] once the replica leads (its answers to the
/// token's calls say so). Panics after 30 s.
pub async fn leader_client_with_token(address: &str, token: &str) -> AuthedClient {
    let mut client = client_with_token(address, Some(token)).await;
    eventually(
        &format!("the coordinator at {address} to lead"),
        LEAD_DEADLINE,
        PROBE_EVERY,
        async || led(&client.get_status(probe_request()).await),
    )
    .await;
    client
}

/// The status of `job`, which must answer.
pub async fn job_status(client: &mut CoordinatorClient<Channel>, job: &str) -> v1::JobStatus {
    client
        .get_status(v1::JobRequest { job: job.into() })
        .await
        .expect("status")
        .into_inner()
}

/// Asserts that `result` failed with `code` and a message containing `what`.
#[track_caller]
pub fn expect_status<T: std::fmt::Debug>(
    result: Result<Response<T>, Status>,
    code: Code,
    what: &str,
) {
    let status = result.expect_err(&format!("expected {code:?} ({what})"));
    assert_eq!(status.code(), code, "{}", status.message());
    assert!(
        status.message().contains(what),
        "{code:?}: message {:?} should mention {what:?}",
        status.message()
    );
}

/// References to `units`, to acknowledge them.
pub fn unit_refs(units: &[v1::Unit]) -> Vec<v1::UnitRef> {
    units
        .iter()
        .map(|u| v1::UnitRef {
            epoch: u.epoch,
            id: u.id,
        })
        .collect()
}

/// Creates `job` with `config`.
pub fn create_request(job: &str, config: v1::JobConfig) -> v1::CreateJobRequest {
    v1::CreateJobRequest {
        job: job.into(),
        config: Some(config),
    }
}

/// Joins `job` as rank `rank` of `world` of torchrun run `run`, restart
/// `restart`, with no secret.
pub fn torchrun_join(job: &str, rank: u32, world: u32, restart: u64) -> v1::JoinRequest {
    v1::JoinRequest {
        job: job.into(),
        identity: Some(join_request::Identity::Torchrun(v1::TorchrunIdentity {
            rank,
            world_size: world,
            run_id: "run".into(),
            restart_count: restart,
            ..v1::TorchrunIdentity::default()
        })),
        secret: String::new(),
        ..v1::JoinRequest::default()
    }
}

/// Joins `job` as the dynamic member `name`, with `secret` (may be empty).
pub fn named_join(job: &str, name: &str, secret: &str) -> v1::JoinRequest {
    v1::JoinRequest {
        job: job.into(),
        identity: Some(join_request::Identity::Name(name.into())),
        secret: secret.into(),
        ..v1::JoinRequest::default()
    }
}

/// A small job on the dataset at `url`: batches of 4, 2 epochs, a shuffle
/// buffer of 16, units of 8 samples, members kept 120 s without a word.
pub fn job_config(url: &str, mode: v1::Mode) -> v1::JobConfig {
    v1::JobConfig {
        manifest_url: url.to_owned(),
        batch_size: 4,
        epochs: 2,
        mode: mode as i32,
        shuffle_buffer: 16,
        unit_samples: 8,
        member_ttl_s: 120,
        ..v1::JobConfig::default()
    }
}

/// The calls one member of a job makes, with a secret that may or may not
/// be its own.
#[derive(Debug, Clone, Copy)]
pub struct MemberCalls<'a> {
    job: &'a str,
    member: &'a str,
    secret: &'a str,
}

impl<'a> MemberCalls<'a> {
    /// Calls of `joined`'s member of `job`, with `secret`.
    pub fn new(job: &'a str, joined: &'a v1::JoinResponse, secret: &'a str) -> Self {
        Self {
            job,
            member: &joined.member,
            secret,
        }
    }

    /// Calls of `joined`'s member of `job`, with its own secret.
    pub fn own(job: &'a str, joined: &'a v1::JoinResponse) -> Self {
        Self::new(job, joined, &joined.secret)
    }

    /// Keep-alive, leave, watch.
    pub fn member(&self) -> v1::MemberRequest {
        v1::MemberRequest {
            job: self.job.into(),
            member: self.member.into(),
            secret: self.secret.into(),
        }
    }

    /// Up to `max_units` units, without waiting.
    pub fn acquire(&self, max_units: u32) -> v1::AcquireRequest {
        v1::AcquireRequest {
            job: self.job.into(),
            member: self.member.into(),
            max_units,
            wait_ms: 0,
            secret: self.secret.into(),
        }
    }

    /// The member's part of `epoch`.
    pub fn assignment(&self, epoch: u64) -> v1::AssignmentRequest {
        v1::AssignmentRequest {
            epoch,
            job: self.job.into(),
            member: self.member.into(),
            secret: self.secret.into(),
        }
    }

    /// Reports `samples` of `generation` read (sync).
    pub fn report(&self, generation: u64, samples: u64) -> v1::ReportRequest {
        v1::ReportRequest {
            job: self.job.into(),
            member: self.member.into(),
            generation,
            samples,
            secret: self.secret.into(),
            ..v1::ReportRequest::default()
        }
    }

    /// Commits `samples` of `generation`.
    pub fn commit(&self, generation: u64, samples: u64) -> v1::CommitRequest {
        v1::CommitRequest {
            job: self.job.into(),
            member: self.member.into(),
            generation,
            samples,
            secret: self.secret.into(),
        }
    }
}
