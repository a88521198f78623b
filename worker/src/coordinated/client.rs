//! A coordinator client that follows the leader: a "not leader" answer
//! names the leader, and the call is retried there; an unreachable replica
//! (killed, restarting, frozen) is retried on the next endpoint with
//! jittered backoff until a deadline, so ranks ride out a leader change
//! without losing their place, and without retrying all at once.
//!
//! Every call has a deadline of its own ([`Client::with_call_timeout`]; a
//! long poll gets its wait on top), and the connection sends HTTP/2 pings
//! ([`Client::with_keep_alive`]), so a leader that stops answering (a long
//! pause, a half-open connection) fails the calls waiting on it within
//! seconds; they move to the other replicas, which say who leads now. A
//! replica that timed out is not trusted as a redirect target for a while
//! ([`SUSPECT_FOR`]): the others name it as leader until their election
//! ends, and going back to it would wait out its silence again.
//!
//! With `https://` addresses the client speaks TLS to every replica, the
//! leaders it is sent to included, and checks each one's certificate
//! against one name ([`ClientTls`]): replicas advertise pod addresses, but
//! share the certificate of the name clients were given (a Service's). With
//! an [`AuthToken`], every call carries `authorization: Bearer <token>`.
//!
//! Each retry is logged (a warning naming the address, the attempt and the
//! delay). A client that never reached a replica, all of whose addresses
//! refuse connections, fails after [`REFUSED_GRACE`] rather than the
//! deadline, asking whether `tributary coordinator` runs there (`client/reach.rs`).

mod reach;
mod scheme;

use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use tokio::sync::Mutex;
use tokio::time::Instant;
use tonic::service::interceptor::InterceptedService;
use tonic::service::Interceptor;
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Endpoint, Identity};
use tonic::{Code, Status};
use tributary_common::proto::v1::coordinator_client::CoordinatorClient;
use tributary_common::proto::LEADER_METADATA;

pub use reach::REFUSED_GRACE;

pub use super::credentials::{
    AuthToken, ClientCredentials, ClientIdentity, ClientTls, AUTH_TOKEN_FILE_VAR, AUTH_TOKEN_VAR,
    TLS_CA_VAR, TLS_CLIENT_CERT_VAR, TLS_CLIENT_KEY_VAR, TLS_DOMAIN_VAR,
};
use crate::error::{Result, WorkerError};

/// How long a call keeps retrying through leader changes.
pub const FAILOVER_DEADLINE: Duration = Duration::from_secs(60);
/// How long one attempt of a call may take (a long poll: its wait on top).
pub const CALL_TIMEOUT: Duration = Duration::from_secs(5);
/// How often an HTTP/2 ping checks the connection.
pub const KEEP_ALIVE_INTERVAL: Duration = Duration::from_secs(1);
/// How long a ping may go unanswered before the connection is dropped.
pub const KEEP_ALIVE_TIMEOUT: Duration = Duration::from_secs(1);
/// How long a replica that stopped answering is not followed as a leader.
pub const SUSPECT_FOR: Duration = Duration::from_secs(3);
/// How long a TCP connection (and TLS handshake) may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);

/// Adds the bearer token, if any, to every call.
#[derive(Clone, Default)]
pub struct Auth(Option<tonic::metadata::MetadataValue<tonic::metadata::Ascii>>);

impl std::fmt::Debug for Auth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.is_some() {
            "Auth(bearer)"
        } else {
            "Auth(none)"
        })
    }
}

impl Interceptor for Auth {
    fn call(
        &mut self,
        mut request: tonic::Request<()>,
    ) -> std::result::Result<tonic::Request<()>, Status> {
        if let Some(value) = &self.0 {
            request
                .metadata_mut()
                .insert("authorization", value.clone());
        }
        Ok(request)
    }
}

/// The gRPC stub calls are made on: a channel to one replica, with the
/// client's credentials attached.
pub type Stub = CoordinatorClient<InterceptedService<Channel, Auth>>;

/// Where calls go now: the endpoint index, the address, its stub.
#[derive(Debug)]
struct Current {
    index: usize,
    address: String,
    stub: Option<Stub>,
}

/// A leader-following client of a coordinator cluster.
#[derive(Debug)]
pub struct Client {
    endpoints: Vec<String>,
    current: Mutex<Current>,
    deadline: Duration,
    call_timeout: Duration,
    keep_alive: (Duration, Duration),
    /// Replicas that timed out or could not be reached, and when.
    suspects: std::sync::Mutex<HashMap<String, Instant>>,
    /// Set when the addresses are `https://`: every connection uses it.
    tls: Option<ClientTlsConfig>,
    auth: Auth,
    /// The scheme given to bare `host:port` addresses (a leader's).
    scheme: &'static str,
    /// Set once any replica answered a call (even "not the leader").
    reached: AtomicBool,
    /// How long refusals from every endpoint are retried before a replica
    /// was ever reached.
    refused_grace: Duration,
}

fn url(scheme: &str, address: &str) -> String {
    if address.starts_with("http://") || address.starts_with("https://") {
        address.to_owned()
    } else {
        format!("{scheme}://{address}")
    }
}

/// The host of `url` (`scheme://host:port/...`), without brackets.
fn host(url: &str) -> &str {
    let rest = url.split_once("://").map_or(url, |(_, rest)| rest);
    let authority = rest.split('/').next().unwrap_or(rest);
    if let Some(v6) = authority.strip_prefix('[') {
        return v6.split(']').next().unwrap_or(v6);
    }
    authority
        .rsplit_once(':')
        .map_or(authority, |(host, _)| host)
}

/// Maps a final gRPC status to the worker's error.
pub fn coordinator_error(status: &Status) -> WorkerError {
    WorkerError::Coordinator {
        code: status.code(),
        message: status.message().to_owned(),
    }
}

impl Client {
    /// A client of the replicas at `endpoints` (`host:port` or
    /// `http(s)://host:port`, comma lists allowed). `https://` addresses
    /// verify certificates against the system's roots until
    /// [`Client::with_tls`] says otherwise. Connects lazily.
    pub fn new(endpoints: &[String]) -> Result<Self> {
        let given: Vec<&str> = endpoints
            .iter()
            .flat_map(|e| e.split(','))
            .map(str::trim)
            .filter(|e| !e.is_empty())
            .collect();
        let tls = given.iter().any(|e| e.starts_with("https://"));
        if tls && given.iter().any(|e| e.starts_with("http://")) {
            return Err(WorkerError::Config(format!(
                "coordinator addresses {} mix http:// and https://",
                given.join(",")
            )));
        }
        let scheme = if tls { "https" } else { "http" };
        let endpoints: Vec<String> = given.iter().map(|e| url(scheme, e)).collect();
        let first = endpoints
            .first()
            .cloned()
            .ok_or_else(|| WorkerError::Config("no coordinator address given".into()))?;
        let client = Self {
            endpoints,
            current: Mutex::new(Current {
                index: 0,
                address: first,
                stub: None,
            }),
            deadline: FAILOVER_DEADLINE,
            call_timeout: CALL_TIMEOUT,
            keep_alive: (KEEP_ALIVE_INTERVAL, KEEP_ALIVE_TIMEOUT),
            suspects: std::sync::Mutex::default(),
            tls: None,
            auth: Auth::default(),
            scheme,
            reached: AtomicBool::new(false),
            refused_grace: REFUSED_GRACE,
        };
        Ok(if tls {
            client.with_tls(&ClientTls::default())
        } else {
            client
        })
    }

    /// How `https://` addresses are verified, and the certificate presented
    /// to them; a no-op for `http://` ones.
    #[must_use]
    pub fn with_tls(mut self, tls: &ClientTls) -> Self {
        if self.scheme != "https" {
            return self;
        }
        let domain = match &tls.domain {
            Some(domain) => domain.clone(),
            None => host(&self.endpoints[0]).to_owned(),
        };
        let mut config = ClientTlsConfig::new().domain_name(domain);
        config = match &tls.ca_pem {
            Some(pem) => config.ca_certificate(Certificate::from_pem(pem)),
            None => config.with_native_roots(),
        };
        if let Some(identity) = &tls.identity {
            config = config.identity(Identity::from_pem(&identity.cert_pem, &identity.key_pem));
        }
        self.tls = Some(config);
        self
    }

    /// Sends `authorization: Bearer <token>` on every call (none: nothing).
    #[must_use]
    pub fn with_auth_token(mut self, token: Option<&AuthToken>) -> Self {
        if token.is_some() && self.scheme == "http" {
            if let Some(remote) = self
                .endpoints
                .iter()
                .find(|e| !scheme::is_loopback(host(e)))
            {
                tracing::warn!(
                    coordinator = remote.as_str(),
                    "the bearer token goes to {remote} in clear (http://): use https:// beyond this machine"
                );
            }
        }
        self.auth = Auth(token.map(AuthToken::header));
        self
    }

    /// [`Client::with_tls`] and [`Client::with_auth_token`]. A client
    /// certificate for `http://` addresses is an error: it would not be
    /// presented.
    pub fn with_credentials(self, credentials: &ClientCredentials) -> Result<Self> {
        if credentials.tls.identity.is_some() && self.scheme != "https" {
            return Err(WorkerError::Config(format!(
                "{TLS_CLIENT_CERT_VAR} is set but the coordinator addresses ({}) are not https://",
                self.endpoints.join(",")
            )));
        }
        Ok(self
            .with_tls(&credentials.tls)
            .with_auth_token(credentials.auth_token.as_ref()))
    }

    /// How long a call keeps retrying an unreachable coordinator or a
    /// leader change before it fails ([`FAILOVER_DEADLINE`] by default).
    #[must_use]
    pub fn with_deadline(mut self, deadline: Duration) -> Self {
        self.deadline = deadline;
        self
    }

    /// How long a client that never reached a replica retries while every
    /// address refuses connections ([`REFUSED_GRACE`] by default; at most
    /// the deadline): longer where ranks may start before their coordinator.
    #[must_use]
    pub fn with_refused_grace(mut self, grace: Duration) -> Self {
        self.refused_grace = grace;
        self
    }

    /// How long one attempt of a call may take before it is abandoned and
    /// retried on another replica ([`CALL_TIMEOUT`] by default).
    #[must_use]
    pub fn with_call_timeout(mut self, timeout: Duration) -> Self {
        self.call_timeout = timeout;
        self
    }

    /// The HTTP/2 keep-alive: a ping every `interval`, and the connection
    /// dropped when one goes unanswered for `timeout`
    /// ([`KEEP_ALIVE_INTERVAL`], [`KEEP_ALIVE_TIMEOUT`] by default).
    #[must_use]
    pub fn with_keep_alive(mut self, interval: Duration, timeout: Duration) -> Self {
        self.keep_alive = (interval, timeout);
        self
    }

    /// How long one attempt of a call may take.
    pub fn call_timeout(&self) -> Duration {
        self.call_timeout
    }

    async fn stub(&self) -> Result<(String, Stub)> {
        let mut current = self.current.lock().await;
        if let Some(stub) = &current.stub {
            return Ok((current.address.clone(), stub.clone()));
        }
        let bad = |e: tonic::transport::Error| {
            WorkerError::Config(format!("bad coordinator address {}: {e}", current.address))
        };
        let mut endpoint = Endpoint::from_shared(current.address.clone())
            .map_err(bad)?
            .connect_timeout(CONNECT_TIMEOUT)
            .http2_keep_alive_interval(self.keep_alive.0)
            .keep_alive_timeout(self.keep_alive.1)
            .keep_alive_while_idle(true)
            .tcp_nodelay(true);
        if let Some(tls) = &self.tls {
            endpoint = endpoint.tls_config(tls.clone()).map_err(bad)?;
        }
        let stub = CoordinatorClient::with_interceptor(endpoint.connect_lazy(), self.auth.clone());
        current.stub = Some(stub.clone());
        Ok((current.address.clone(), stub))
    }

    fn suspect(&self, address: &str) -> bool {
        let mut suspects = self.suspects.lock().unwrap_or_else(|e| e.into_inner());
        suspects.retain(|_, since| since.elapsed() < SUSPECT_FOR);
        suspects.contains_key(address)
    }

    fn mark_suspect(&self, address: &str) {
        let mut suspects = self.suspects.lock().unwrap_or_else(|e| e.into_inner());
        suspects.insert(address.to_owned(), Instant::now());
    }

    /// Switches to `leader`, or to the next endpoint when none is named or
    /// the one named stopped answering lately; endpoints that stopped
    /// answering lately are skipped while others remain.
    async fn switch(&self, failed: &str, leader: Option<String>) {
        let mut current = self.current.lock().await;
        if current.address != failed {
            return;
        }
        current.stub = None;
        if let Some(leader) = leader.filter(|l| !l.is_empty()) {
            let leader = url(self.scheme, &leader);
            if !self.suspect(&leader) {
                current.address = leader;
                return;
            }
        }
        let count = self.endpoints.len();
        let next = (1..=count)
            .map(|step| (current.index + step) % count)
            .find(|&i| !self.suspect(&self.endpoints[i]))
            .unwrap_or((current.index + 1) % count);
        current.index = next;
        current.address = self.endpoints[next].clone();
    }

    /// [`Client::call`] with a request that is cloned for every attempt.
    pub async fn send<R, T, F, Fut>(&self, request: &R, call: F) -> Result<T>
    where
        R: Clone,
        F: Fn(Stub, R) -> Fut,
        Fut: Future<Output = std::result::Result<tonic::Response<T>, Status>>,
    {
        self.call(|stub| call(stub, request.clone())).await
    }

    /// Runs `call` against the leader, retrying through leader changes and
    /// unreachable replicas until the deadline ([`Client::with_deadline`]);
    /// each attempt may take [`Client::call_timeout`].
    pub async fn call<T, F, Fut>(&self, call: F) -> Result<T>
    where
        F: FnMut(Stub) -> Fut,
        Fut: Future<Output = std::result::Result<tonic::Response<T>, Status>>,
    {
        self.call_within(Duration::ZERO, call).await
    }

    /// [`Client::call`] of a long poll the coordinator may hold for `wait`
    /// (an empty pool is not a call timing out): each attempt may take
    /// `wait` plus [`Client::call_timeout`]; the deadline starts after it.
    pub async fn call_within<T, F, Fut>(&self, wait: Duration, mut call: F) -> Result<T>
    where
        F: FnMut(Stub) -> Fut,
        Fut: Future<Output = std::result::Result<tonic::Response<T>, Status>>,
    {
        let timeout = wait + self.call_timeout;
        let deadline = Instant::now() + wait + self.deadline;
        let mut backoff = Duration::from_millis(50);
        let mut attempts = reach::Attempts::new();
        // The last answer a replica gave, for when the deadline cuts the
        // attempt after it short.
        let mut answered: Option<(String, Status)> = None;
        loop {
            let (address, stub) = self.stub().await?;
            // The last attempt ends with the failover deadline.
            let left = deadline.saturating_duration_since(Instant::now());
            let attempt = timeout.min(left).max(Duration::from_millis(1));
            let status = match tokio::time::timeout(attempt, call(stub)).await {
                Ok(Ok(response)) => {
                    self.reached.store(true, Ordering::Relaxed);
                    return Ok(response.into_inner());
                }
                Ok(Err(status)) => status,
                Err(_elapsed) if attempt < timeout && answered.is_some() => {
                    let (address, status) = answered.expect("checked");
                    let reached = self.reached.load(Ordering::Relaxed);
                    return Err(attempts.final_error(&self.endpoints, &address, &status, reached));
                }
                Err(_elapsed) => Status::deadline_exceeded(format!(
                    "coordinator {address} did not answer within {attempt:?}"
                )),
            };
            let retry = matches!(
                status.code(),
                Code::Unavailable | Code::Unknown | Code::Cancelled | Code::DeadlineExceeded
            );
            // A replica's "not the leader" carries the leader (maybe none
            // yet); a call without it did not reach a working replica.
            let leader = status
                .metadata()
                .get(LEADER_METADATA)
                .map(|v| v.to_str().unwrap_or_default().to_owned());
            if !retry || leader.is_some() {
                self.reached.store(true, Ordering::Relaxed);
            }
            if let Some(leader) = leader.as_deref() {
                scheme::check_redirect(self.scheme, &address, leader)?;
            }
            if !retry {
                return Err(coordinator_error(&status));
            }
            let number = attempts.failed(&address, &status);
            let reached = self.reached.load(Ordering::Relaxed);
            if Instant::now() >= deadline {
                return Err(if leader.is_some() {
                    coordinator_error(&status)
                } else {
                    attempts.final_error(&self.endpoints, &address, &status, reached)
                });
            }
            let grace = self.refused_grace.min(self.deadline);
            if let Some(error) = attempts.give_up(&self.endpoints, reached, grace) {
                return Err(error);
            }
            if status.code() != Code::DeadlineExceeded {
                answered = Some((address.clone(), status.clone()));
            }
            if leader.is_none() {
                self.mark_suspect(&address);
            }
            let redirected = leader.as_deref().is_some_and(|l| {
                !l.is_empty()
                    && url(self.scheme, l) != address
                    && !self.suspect(&url(self.scheme, l))
            });
            self.switch(&address, leader.clone()).await;
            if redirected {
                tracing::debug!(address, ?leader, attempt = number, "following the leader");
            } else {
                let delay =
                    jittered(backoff).min(deadline.saturating_duration_since(Instant::now()));
                tracing::warn!(
                    address,
                    attempt = number,
                    delay_ms = u64::try_from(delay.as_millis()).unwrap_or(u64::MAX),
                    code = ?status.code(),
                    message = status.message(),
                    "coordinator call failed; retrying"
                );
                tokio::time::sleep(delay).await;
                backoff = (backoff * 2).min(Duration::from_millis(500));
            }
        }
    }
}

/// Half of `backoff` plus a random part of the other half: ranks that
/// failed together (a leader change) retry spread out, not in one wave.
fn jittered(backoff: Duration) -> Duration {
    use std::hash::BuildHasher;
    let random = std::collections::hash_map::RandomState::new().hash_one(Instant::now());
    backoff / 2 + backoff.mul_f64((random % 1024) as f64 / 2048.0)
}

#[cfg(test)]
mod tests;
