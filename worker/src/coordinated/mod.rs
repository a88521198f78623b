//! Loading under a coordinator: join a job, keep the membership alive, and
//! read what the coordinator assigns.
//!
//! - [`client`]: a leader-following gRPC client.
//! - [`Session`]: one membership of one job, renewed in the background.
//! - [`sync`]: [`SyncLoader`], equal parts per generation (torchrun, DDP),
//!   with `state_dict()` / `commit()` / `load_state_dict()` for checkpoints.
//! - [`dynamic`]: [`DynamicLoader`], units leased from the pool and acked
//!   once every sample of a unit has reached the consumer.

pub mod client;
pub mod dynamic;
pub mod sync;

use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::task::JoinHandle;
use tonic::transport::Channel;
use tributary_common::proto::v1;
use tributary_common::proto::v1::coordinator_client::CoordinatorClient;

pub use client::{Client, ClientTls};
pub use dynamic::DynamicLoader;
pub use sync::{LoaderState, SyncLoader};

use crate::error::{Result, WorkerError};

/// How a member identifies itself when it joins.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Identity {
    /// A torchrun rank: `RANK`, `WORLD_SIZE`, `TORCHELASTIC_RUN_ID`,
    /// `TORCHELASTIC_RESTART_COUNT`.
    Torchrun {
        rank: u32,
        world: u32,
        run_id: String,
        restart: u64,
    },
    /// A free-form member name (dynamic jobs).
    Name(String),
}

impl Identity {
    /// The torchrun identity in `env` (passed in, read once at the edge), or
    /// `None` when `RANK` is unset. Errors name the bad variable.
    pub fn from_torchrun_env(env: &HashMap<String, String>) -> Result<Option<Self>> {
        let Some(rank) = env.get("RANK") else {
            return Ok(None);
        };
        let number = |name: &str, value: &str| {
            value
                .trim()
                .parse::<u64>()
                .map_err(|_| WorkerError::Config(format!("{name}={value:?} is not a number")))
        };
        let world = env
            .get("WORLD_SIZE")
            .ok_or_else(|| WorkerError::Config("RANK is set but WORLD_SIZE is not".into()))?;
        let restart = match env.get("TORCHELASTIC_RESTART_COUNT") {
            Some(v) => number("TORCHELASTIC_RESTART_COUNT", v)?,
            None => 0,
        };
        Ok(Some(Self::Torchrun {
            rank: number("RANK", rank)? as u32,
            world: number("WORLD_SIZE", world)? as u32,
            run_id: env
                .get("TORCHELASTIC_RUN_ID")
                .cloned()
                .unwrap_or_else(|| "none".into()),
            restart,
        }))
    }

    fn to_proto(&self) -> v1::join_request::Identity {
        match self {
            Identity::Torchrun {
                rank,
                world,
                run_id,
                restart,
            } => v1::join_request::Identity::Torchrun(v1::TorchrunIdentity {
                rank: *rank,
                world_size: *world,
                run_id: run_id.clone(),
                restart_count: *restart,
            }),
            Identity::Name(name) => v1::join_request::Identity::Name(name.clone()),
        }
    }
}

/// Creates `job` (or checks that it exists with this config).
pub async fn create_job(
    client: &Client,
    job: &str,
    config: v1::JobConfig,
) -> Result<v1::CreateJobResponse> {
    client
        .call(|mut c| {
            let request = v1::CreateJobRequest {
                job: job.to_owned(),
                config: Some(config.clone()),
            };
            async move { c.create_job(request).await }
        })
        .await
}

/// One membership of a job, kept alive in the background until dropped.
///
/// A torchrun rank's membership is its identity, not its lease: when the
/// lease expired anyway (a coordinator failover that outlasted the member
/// TTL, or a long stall), the session joins again as the same rank, which
/// puts it back in the same generation; calls made through
/// [`Session::send`] do that transparently. A dynamic member whose lease
/// expired has had its units handed to others, so it is lost instead.
#[derive(Debug)]
pub struct Session {
    pub client: Arc<Client>,
    pub job: String,
    pub joined: v1::JoinResponse,
    identity: Identity,
    lost: Arc<AtomicBool>,
    keepalive: JoinHandle<()>,
}

async fn join(client: &Client, job: &str, identity: &Identity) -> Result<v1::JoinResponse> {
    let request = v1::JoinRequest {
        job: job.to_owned(),
        identity: Some(identity.to_proto()),
    };
    client
        .send(&request, |mut c, r| async move { c.join(r).await })
        .await
}

/// Whether `error` says the coordinator does not know the member (or job).
fn not_found(error: &WorkerError) -> bool {
    matches!(error, WorkerError::Coordinator { code, .. } if code == "NotFound")
}

/// Joins again after the member's lease expired, when that is safe: a
/// torchrun rank rejoining lands in its own generation (the coordinator
/// refuses it as stale when a newer restart has begun).
async fn rejoin(client: &Client, job: &str, identity: &Identity, member: &str) -> Result<()> {
    if !matches!(identity, Identity::Torchrun { .. }) {
        return Err(WorkerError::Stopped(format!(
            "the coordinator forgot member {member:?} (its lease expired); its units went to others"
        )));
    }
    let joined = join(client, job, identity).await?;
    tracing::warn!(
        member,
        generation = joined.generation,
        "the member's lease had expired; joined again as the same rank"
    );
    Ok(())
}

impl Session {
    /// Joins `job` as `identity`.
    pub async fn join(client: Arc<Client>, job: &str, identity: &Identity) -> Result<Self> {
        let joined = join(&client, job, identity).await?;
        let lost = Arc::new(AtomicBool::new(false));
        let keepalive = tokio::spawn(keep_alive(
            Arc::clone(&client),
            job.to_owned(),
            identity.clone(),
            joined.member.clone(),
            Duration::from_millis(u64::from(joined.ttl_ms.max(300))),
            Arc::clone(&lost),
        ));
        tracing::info!(
            job,
            member = joined.member,
            generation = joined.generation,
            "joined"
        );
        Ok(Self {
            client,
            job: job.to_owned(),
            joined,
            identity: identity.clone(),
            lost,
            keepalive,
        })
    }

    pub fn member(&self) -> &str {
        &self.joined.member
    }

    pub fn config(&self) -> v1::JobConfig {
        self.joined.config.clone().unwrap_or_default()
    }

    /// Whether the membership is gone for good (a dynamic member's lease
    /// expired, or a torchrun rank could not rejoin).
    pub fn is_lost(&self) -> bool {
        self.lost.load(Ordering::Relaxed)
    }

    /// [`Client::send`] as this member: when the coordinator no longer
    /// knows the member, rejoins (torchrun ranks) and retries once.
    pub async fn send<R, T, F, Fut>(&self, request: &R, call: F) -> Result<T>
    where
        R: Clone,
        F: Fn(CoordinatorClient<Channel>, R) -> Fut,
        Fut: Future<Output = std::result::Result<tonic::Response<T>, tonic::Status>>,
    {
        match self.client.send(request, &call).await {
            Err(error) if not_found(&error) => {
                rejoin(&self.client, &self.job, &self.identity, self.member()).await?;
                self.client.send(request, &call).await
            }
            result => result,
        }
    }

    fn member_request(&self) -> v1::MemberRequest {
        v1::MemberRequest {
            secret: String::new(),
            job: self.job.clone(),
            member: self.joined.member.clone(),
        }
    }

    /// Leaves the job: a dynamic member's unacked units return to the pool.
    pub async fn leave(&self) -> Result<()> {
        self.keepalive.abort();
        let request = self.member_request();
        self.client
            .send(&request, |mut c, r| async move { c.leave(r).await })
            .await?;
        Ok(())
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        self.keepalive.abort();
    }
}

async fn keep_alive(
    client: Arc<Client>,
    job: String,
    identity: Identity,
    member: String,
    ttl: Duration,
    lost: Arc<AtomicBool>,
) {
    let request = v1::MemberRequest {
        secret: String::new(),
        job: job.clone(),
        member,
    };
    loop {
        tokio::time::sleep(ttl / 3).await;
        let mut result = client
            .send(&request, |mut c, r| async move { c.keep_alive(r).await })
            .await
            .map(drop);
        if matches!(&result, Err(error) if not_found(error)) {
            result = rejoin(&client, &job, &identity, &request.member).await;
        }
        if let Err(error) = result {
            tracing::error!(%error, member = request.member, "membership lost");
            lost.store(true, Ordering::Relaxed);
            return;
        }
    }
}
