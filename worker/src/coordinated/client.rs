//! A coordinator client that follows the leader: a "not leader" answer
//! names the leader, and the call is retried there; an unreachable replica
//! (killed, restarting) is retried on the next endpoint with backoff until a
//! deadline, so ranks ride out a leader change without losing their place.

use std::future::Future;
use std::time::Duration;

use tokio::sync::Mutex;
use tokio::time::Instant;
use tonic::transport::{Channel, Endpoint};
use tonic::{Code, Status};
use tributary_common::proto::v1::coordinator_client::CoordinatorClient;
use tributary_common::proto::LEADER_METADATA;

use crate::error::{Result, WorkerError};

/// How long a call keeps retrying through leader changes.
pub const FAILOVER_DEADLINE: Duration = Duration::from_secs(60);

/// A leader-following client of a coordinator cluster.
#[derive(Debug)]
pub struct Client {
    endpoints: Vec<String>,
    current: Mutex<(usize, String, Option<CoordinatorClient<Channel>>)>,
    deadline: Duration,
}

fn url(address: &str) -> String {
    if address.starts_with("http://") || address.starts_with("https://") {
        address.to_owned()
    } else {
        format!("http://{address}")
    }
}

/// Maps a final gRPC status to the worker's error.
pub fn coordinator_error(status: &Status) -> WorkerError {
    WorkerError::Coordinator {
        code: format!("{:?}", status.code()),
        message: status.message().to_owned(),
    }
}

impl Client {
    /// A client of the replicas at `endpoints` (`host:port`, comma lists
    /// allowed). Connects lazily.
    pub fn new(endpoints: &[String]) -> Result<Self> {
        let endpoints: Vec<String> = endpoints
            .iter()
            .flat_map(|e| e.split(','))
            .map(str::trim)
            .filter(|e| !e.is_empty())
            .map(url)
            .collect();
        let first = endpoints
            .first()
            .cloned()
            .ok_or_else(|| WorkerError::Config("no coordinator address given".into()))?;
        Ok(Self {
            endpoints,
            current: Mutex::new((0, first, None)),
            deadline: FAILOVER_DEADLINE,
        })
    }

    /// How long a call keeps retrying an unreachable coordinator or a
    /// leader change before it fails ([`FAILOVER_DEADLINE`] by default).
    #[must_use]
    pub fn with_deadline(mut self, deadline: Duration) -> Self {
        self.deadline = deadline;
        self
    }

    async fn channel(&self) -> Result<(String, CoordinatorClient<Channel>)> {
        let mut current = self.current.lock().await;
        if let Some(client) = &current.2 {
            return Ok((current.1.clone(), client.clone()));
        }
        let endpoint = Endpoint::from_shared(current.1.clone())
            .map_err(|e| {
                WorkerError::Config(format!("bad coordinator address {}: {e}", current.1))
            })?
            .connect_timeout(Duration::from_secs(2))
            .tcp_nodelay(true);
        let client = CoordinatorClient::new(endpoint.connect_lazy());
        current.2 = Some(client.clone());
        Ok((current.1.clone(), client))
    }

    /// Switches to `leader`, or to the next endpoint when none is named.
    async fn switch(&self, failed: &str, leader: Option<String>) {
        let mut current = self.current.lock().await;
        if current.1 != failed {
            return;
        }
        current.2 = None;
        match leader {
            Some(leader) if !leader.is_empty() => current.1 = url(&leader),
            _ => {
                current.0 = (current.0 + 1) % self.endpoints.len();
                current.1 = self.endpoints[current.0].clone();
            }
        }
    }

    /// [`Client::call`] with a request that is cloned for every attempt.
    pub async fn send<R, T, F, Fut>(&self, request: &R, call: F) -> Result<T>
    where
        R: Clone,
        F: Fn(CoordinatorClient<Channel>, R) -> Fut,
        Fut: Future<Output = std::result::Result<tonic::Response<T>, Status>>,
    {
        self.call(|client| call(client, request.clone())).await
    }

    /// Runs `call` against the leader, retrying through leader changes and
    /// unreachable replicas until the deadline ([`Client::with_deadline`]).
    pub async fn call<T, F, Fut>(&self, mut call: F) -> Result<T>
    where
        F: FnMut(CoordinatorClient<Channel>) -> Fut,
        Fut: Future<Output = std::result::Result<tonic::Response<T>, Status>>,
    {
        let deadline = Instant::now() + self.deadline;
        let mut backoff = Duration::from_millis(50);
        loop {
            let (address, client) = self.channel().await?;
            let status = match call(client).await {
                Ok(response) => return Ok(response.into_inner()),
                Err(status) => status,
            };
            let retry = matches!(
                status.code(),
                Code::Unavailable | Code::Unknown | Code::Cancelled
            );
            if !retry || Instant::now() >= deadline {
                return Err(coordinator_error(&status));
            }
            let leader = status
                .metadata()
                .get(LEADER_METADATA)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned);
            let redirected = leader
                .as_deref()
                .is_some_and(|l| !l.is_empty() && url(l) != address);
            tracing::debug!(
                address,
                ?leader,
                message = status.message(),
                "retrying on another replica"
            );
            self.switch(&address, leader).await;
            if !redirected {
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(Duration::from_millis(500));
            }
        }
    }
}
