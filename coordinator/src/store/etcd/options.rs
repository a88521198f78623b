//! How [`super::EtcdStore`] connects: deadlines, TLS and user/password.

use std::fmt;
use std::time::Duration;

use etcd_client::{Certificate, ConnectOptions, Identity, TlsOptions};

use super::call::Deadlines;
use crate::store::{StoreError, StoreResult};

/// PEM material for TLS to etcd.
#[derive(Clone, Default)]
pub struct EtcdTls {
    /// The CA that signed etcd's server certificates; none: the system's
    /// roots.
    pub ca: Option<Vec<u8>>,
    /// A client certificate chain and its private key, for etcd's
    /// `--client-cert-auth`.
    pub identity: Option<(Vec<u8>, Vec<u8>)>,
}

impl fmt::Debug for EtcdTls {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EtcdTls")
            .field("ca", &self.ca.is_some())
            .field("identity", &self.identity.is_some())
            .finish()
    }
}

/// How to connect to etcd. `Default`: plaintext, no user, a copy of a
/// request sent again after 500 ms, 5 s per call.
#[derive(Clone)]
pub struct EtcdOptions {
    pub deadlines: Deadlines,
    /// How long [`super::EtcdStore::connect_with`] waits for the cluster.
    pub connect_timeout: Duration,
    /// TLS: endpoints must then be `https://host:port` or `host:port`.
    pub tls: Option<EtcdTls>,
    /// etcd user and password (etcd's auth must be enabled).
    pub user: Option<(String, String)>,
}

impl Default for EtcdOptions {
    fn default() -> Self {
        Self {
            deadlines: Deadlines::default(),
            connect_timeout: Duration::from_secs(5),
            tls: None,
            user: None,
        }
    }
}

impl fmt::Debug for EtcdOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EtcdOptions")
            .field("deadlines", &self.deadlines)
            .field("connect_timeout", &self.connect_timeout)
            .field("tls", &self.tls)
            .field("user", &self.user.as_ref().map(|(name, _)| name))
            .finish()
    }
}

/// HTTP/2 pings find a dead connection under a long watch or campaign.
/// etcd answers pings more often than every 5 s (its
/// `--grpc-keepalive-min-time`), or pings on a connection without streams,
/// with GOAWAY.
const PING_INTERVAL: Duration = Duration::from_secs(6);
const PING_TIMEOUT: Duration = Duration::from_secs(3);

impl EtcdOptions {
    /// Checks `endpoints` against the options; an error names the bad one.
    pub(crate) fn check(&self, endpoints: &[String]) -> StoreResult<()> {
        if endpoints.is_empty() {
            return Err(StoreError::Other("no etcd endpoints given".into()));
        }
        for endpoint in endpoints {
            if self.tls.is_some() && endpoint.starts_with("http://") {
                return Err(StoreError::Other(format!(
                    "etcd endpoint {endpoint:?} is http:// but TLS is configured: use https://"
                )));
            }
        }
        let deadlines = &self.deadlines;
        if deadlines.attempt.is_zero() || deadlines.budget < deadlines.attempt {
            return Err(StoreError::Other(format!(
                "etcd deadlines: an attempt ({:?}) must be positive and at most the budget ({:?})",
                deadlines.attempt, deadlines.budget
            )));
        }
        Ok(())
    }

    pub(crate) fn connect_options(&self) -> ConnectOptions {
        let mut options = ConnectOptions::new()
            .with_connect_timeout(self.connect_timeout.min(self.deadlines.attempt))
            .with_keep_alive(PING_INTERVAL, PING_TIMEOUT)
            .with_keep_alive_while_idle(false)
            // A member cut off from the raft leader answers "no leader" at
            // once instead of holding the request, and cancels its watches.
            .with_require_leader(true);
        if let Some((name, password)) = &self.user {
            options = options
                .with_user(name.clone(), password.clone())
                .with_auto_token_refresh(true);
        }
        if let Some(tls) = &self.tls {
            let mut config = TlsOptions::new();
            config = match &tls.ca {
                Some(ca) => config.ca_certificate(Certificate::from_pem(ca)),
                None => config.with_native_roots(),
            };
            if let Some((cert, key)) = &tls.identity {
                config = config.identity(Identity::from_pem(cert, key));
            }
            options = options.with_tls(config);
        }
        options
    }
}
