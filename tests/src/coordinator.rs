//! Talking to a coordinator directly, as tests and benches do: clients that
//! wait for a leader, the requests tests send, and checks of the answers.

use std::time::Duration;

use tonic::metadata::{Ascii, MetadataValue};
use tonic::service::interceptor::InterceptedService;
use tonic::service::Interceptor;
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

/// Sends `Authorization: Bearer <token>` with every call, or nothing.
#[derive(Debug, Clone)]
pub struct Bearer(Option<MetadataValue<Ascii>>);

impl Interceptor for Bearer {
    fn call(&mut self, mut request: Request<()>) -> Result<Request<()>, Status> {
        if let Some(value) = &self.0 {
            request
                .metadata_mut()
                .insert("authorization", value.clone());
        }
        Ok(request)
    }
}

/// A client that calls with a bearer token.
pub type AuthedClient = CoordinatorClient<InterceptedService<Channel, Bearer>>;

/// Connects to `address`, calling with `token` (none: no header).
pub async fn client_with_token(address: &str, token: Option<&str>) -> AuthedClient {
    let channel = Channel::from_shared(format!("http://{address}"))
        .expect("uri")
        .connect()
        .await
        .expect("connect");
    let header = token.map(|t| format!("Bearer {t}").parse().expect("ascii"));
    CoordinatorClient::with_interceptor(channel, Bearer(header))
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
        })),
        secret: String::new(),
    }
}

/// Joins `job` as the dynamic member `name`, with `secret` (may be empty).
pub fn named_join(job: &str, name: &str, secret: &str) -> v1::JoinRequest {
    v1::JoinRequest {
        job: job.into(),
        identity: Some(join_request::Identity::Name(name.into())),
        secret: secret.into(),
    }
}

/// A call of `joined`'s member of `job`, with `secret`.
pub fn member_request(job: &str, joined: &v1::JoinResponse, secret: &str) -> v1::MemberRequest {
    v1::MemberRequest {
        job: job.into(),
        member: joined.member.clone(),
        secret: secret.into(),
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

/// `joined`'s member of `job` asks, with `secret`, for up to `max_units`
/// units without waiting.
pub fn acquire_request(
    job: &str,
    joined: &v1::JoinResponse,
    secret: &str,
    max_units: u32,
) -> v1::AcquireRequest {
    v1::AcquireRequest {
        job: job.into(),
        member: joined.member.clone(),
        max_units,
        wait_ms: 0,
        secret: secret.into(),
    }
}

/// `joined`'s member of `job` asks, with `secret`, for its part of `epoch`.
pub fn assignment_request(
    job: &str,
    joined: &v1::JoinResponse,
    secret: &str,
    epoch: u64,
) -> v1::AssignmentRequest {
    v1::AssignmentRequest {
        job: job.into(),
        member: joined.member.clone(),
        epoch,
        secret: secret.into(),
    }
}

/// `joined`'s member of `job` commits, with `secret`, `samples` of
/// `generation`.
pub fn commit_request(
    job: &str,
    joined: &v1::JoinResponse,
    secret: &str,
    generation: u64,
    samples: u64,
) -> v1::CommitRequest {
    v1::CommitRequest {
        job: job.into(),
        member: joined.member.clone(),
        generation,
        samples,
        secret: secret.into(),
    }
}
