//! A coordinator client that follows the leader: a "not leader" answer
//! names the leader, and the call is retried there; an unreachable replica
//! (killed, restarting) is retried on the next endpoint with backoff until a
//! deadline, so ranks ride out a leader change without losing their place.
//!
//! With `https://` addresses the client speaks TLS to every replica, the
//! leaders it is sent to included, and checks each one's certificate
//! against one name ([`ClientTls`]): replicas advertise pod addresses, but
//! share the certificate of the name clients were given (a Service's).

use std::collections::HashMap;
use std::future::Future;
use std::time::Duration;

use tokio::sync::Mutex;
use tokio::time::Instant;
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Endpoint};
use tonic::{Code, Status};
use tributary_common::proto::v1::coordinator_client::CoordinatorClient;
use tributary_common::proto::LEADER_METADATA;

use crate::error::{Result, WorkerError};

/// How long a call keeps retrying through leader changes.
pub const FAILOVER_DEADLINE: Duration = Duration::from_secs(60);

/// Environment variable naming a PEM file of CA certificates to trust.
pub const TLS_CA_VAR: &str = "TRIBUTARY_TLS_CA";
/// Environment variable naming the server name to verify certificates for.
pub const TLS_DOMAIN_VAR: &str = "TRIBUTARY_TLS_DOMAIN";

/// How the client checks coordinators' certificates on `https://` addresses.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClientTls {
    /// PEM CA certificates to trust; the system's roots when `None`.
    pub ca_pem: Option<Vec<u8>>,
    /// The name every replica's certificate must carry; by default the host
    /// of the first address the client was given.
    pub domain: Option<String>,
}

impl ClientTls {
    /// Reads [`TLS_CA_VAR`] (a file, read now) and [`TLS_DOMAIN_VAR`] from
    /// `env`, passed in from the edge. Errors name the variable and file.
    pub fn from_env(env: &HashMap<String, String>) -> Result<Self> {
        let ca_pem = match env.get(TLS_CA_VAR).filter(|v| !v.trim().is_empty()) {
            Some(path) => {
                let pem = std::fs::read(path).map_err(|e| {
                    WorkerError::Config(format!("{TLS_CA_VAR}={path}: cannot read it: {e}"))
                })?;
                if !pem.windows(27).any(|w| w == b"-----BEGIN CERTIFICATE-----") {
                    return Err(WorkerError::Config(format!(
                        "{TLS_CA_VAR}={path}: holds no PEM certificate"
                    )));
                }
                Some(pem)
            }
            None => None,
        };
        let domain = env
            .get(TLS_DOMAIN_VAR)
            .map(|v| v.trim().to_owned())
            .filter(|v| !v.is_empty());
        Ok(Self { ca_pem, domain })
    }
}

/// A leader-following client of a coordinator cluster.
#[derive(Debug)]
pub struct Client {
    endpoints: Vec<String>,
    current: Mutex<(usize, String, Option<CoordinatorClient<Channel>>)>,
    deadline: Duration,
    /// Set when the addresses are `https://`: every connection uses it.
    tls: Option<ClientTlsConfig>,
    /// The scheme given to bare `host:port` addresses (a leader's).
    scheme: &'static str,
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
        code: format!("{:?}", status.code()),
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
            current: Mutex::new((0, first, None)),
            deadline: FAILOVER_DEADLINE,
            tls: None,
            scheme,
        };
        Ok(if tls {
            client.with_tls(&ClientTls::default())
        } else {
            client
        })
    }

    /// How `https://` addresses are verified; a no-op for `http://` ones.
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
        self.tls = Some(config);
        self
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
        let bad = |e: tonic::transport::Error| {
            WorkerError::Config(format!("bad coordinator address {}: {e}", current.1))
        };
        let mut endpoint = Endpoint::from_shared(current.1.clone())
            .map_err(bad)?
            .connect_timeout(Duration::from_secs(2))
            .tcp_nodelay(true);
        if let Some(tls) = &self.tls {
            endpoint = endpoint.tls_config(tls.clone()).map_err(bad)?;
        }
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
            Some(leader) if !leader.is_empty() => current.1 = url(self.scheme, &leader),
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
                .is_some_and(|l| !l.is_empty() && url(self.scheme, l) != address);
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_is_taken_from_urls_with_names_ips_and_ipv6() {
        assert_eq!(host("https://coord.ns.svc:7070"), "coord.ns.svc");
        assert_eq!(host("https://10.0.0.7:7070/"), "10.0.0.7");
        assert_eq!(host("https://[fd00::7]:7070"), "fd00::7");
        assert_eq!(host("coord"), "coord");
    }

    #[test]
    fn https_addresses_make_leaders_https_and_verify_the_first_host() {
        let client =
            Client::new(&["https://coord.ns.svc:7070,10.0.0.8:7070".to_owned()]).expect("client");
        assert_eq!(client.scheme, "https");
        assert_eq!(
            client.endpoints,
            ["https://coord.ns.svc:7070", "https://10.0.0.8:7070"]
        );
        let plain = Client::new(&["coord:7070".to_owned()]).expect("client");
        assert_eq!(plain.endpoints, ["http://coord:7070"]);
        assert!(plain.tls.is_none());
        let mixed = Client::new(&["https://a:1,http://b:2".to_owned()]).expect_err("mixed");
        assert!(
            mixed.to_string().contains("mix http:// and https://"),
            "{mixed}"
        );
    }

    #[test]
    fn a_ca_file_that_is_missing_or_not_pem_is_named() {
        let dir = tempfile::tempdir().expect("tempdir");
        let junk = dir.path().join("ca.txt");
        std::fs::write(&junk, "not a certificate").expect("write");
        for (path, why) in [
            (dir.path().join("missing.pem"), "cannot read it"),
            (junk, "holds no PEM certificate"),
        ] {
            let env = HashMap::from([(TLS_CA_VAR.to_owned(), path.display().to_string())]);
            let error = ClientTls::from_env(&env).expect_err("bad CA");
            let text = error.to_string();
            assert!(
                text.contains(&path.display().to_string()) && text.contains(why),
                "{text}"
            );
        }
        let env = HashMap::from([(TLS_DOMAIN_VAR.to_owned(), " coord.ns.svc ".to_owned())]);
        let tls = ClientTls::from_env(&env).expect("tls");
        assert_eq!(tls.domain.as_deref(), Some("coord.ns.svc"));
        assert!(tls.ca_pem.is_none());
    }
}
