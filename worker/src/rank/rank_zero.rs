//! A torchrun world's coordinator hosted by its rank 0, for ranks given no
//! coordinator address: rank 0 starts one (on the in-memory store) where
//! torchrun's rendezvous already points every rank, and the other ranks
//! wait for it there.
//!
//! The address is `MASTER_ADDR` and, for the port, `MASTER_PORT + 1`
//! (torchrun's own store listens on `MASTER_PORT` itself), or
//! [`COORDINATOR_PORT_VAR`] when set. Such a coordinator lives and dies with
//! rank 0: a shared, deployed coordinator (on etcd) stays the choice for
//! jobs that must outlive their ranks (preemptible fleets, restarts).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use tokio::time::Instant;

use super::config::InProcess;
use crate::{Result, StoreOptions, WorkerError};

/// Sets the port rank 0's coordinator listens on (instead of
/// `MASTER_PORT + 1`).
pub const COORDINATOR_PORT_VAR: &str = "TRIBUTARY_COORDINATOR_PORT";

/// What rank 0's coordinator starts with.
#[derive(Debug, Clone)]
pub struct HostOptions {
    /// `host:port` to listen on: [`rank_zero_address`].
    pub listen: String,
    /// How it reads manifests.
    pub store: StoreOptions,
    /// The token it asks every call for: the ranks' own (from
    /// `TRIBUTARY_AUTH_TOKEN(_FILE)` or `auth_token`), when they have one.
    pub auth_token: Option<String>,
}

/// Starts rank 0's coordinator. The worker does not link the coordinator:
/// its caller passes this (e.g. one that starts
/// `tributary_coordinator::LocalCoordinator::start_on`).
pub type StartHost =
    Arc<dyn Fn(HostOptions) -> BoxFuture<'static, Result<InProcess>> + Send + Sync>;

/// Where rank 0 of the torchrun world in `env` hosts the coordinator:
/// `MASTER_ADDR:(MASTER_PORT + 1)`, or `MASTER_ADDR:$TRIBUTARY_COORDINATOR_PORT`.
/// Errors name the variable that is missing or wrong.
pub fn rank_zero_address(env: &HashMap<String, String>) -> Result<String> {
    let var = |name: &str| env.get(name).map(|v| v.trim()).filter(|v| !v.is_empty());
    let hint = "rank 0 hosts the coordinator of a torchrun world given no coordinator=; \
                run under torchrun, or pass coordinator=\"host:port\" of a running `tributary coordinator`";
    let host = var("MASTER_ADDR")
        .ok_or_else(|| WorkerError::Config(format!("MASTER_ADDR is not set ({hint})")))?;
    let port = match var(COORDINATOR_PORT_VAR) {
        Some(port) => port
            .parse::<u16>()
            .ok()
            .filter(|&p| p != 0)
            .ok_or_else(|| {
                WorkerError::Config(format!(
                    "{COORDINATOR_PORT_VAR}={port:?} is not a port (1..=65535)"
                ))
            })?,
        None => {
            let master = var("MASTER_PORT")
                .ok_or_else(|| WorkerError::Config(format!("MASTER_PORT is not set ({hint})")))?;
            let master = master.parse::<u16>().map_err(|_| {
                WorkerError::Config(format!("MASTER_PORT={master:?} is not a port"))
            })?;
            master.checked_add(1).ok_or_else(|| {
                WorkerError::Config(format!(
                    "MASTER_PORT={master} leaves no port above it for the coordinator: \
                     set {COORDINATOR_PORT_VAR}"
                ))
            })?
        }
    };
    Ok(if host.contains(':') && !host.starts_with('[') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    })
}

/// How long a rank waits between two attempts to reach rank 0's
/// coordinator, at most.
const MAX_BACKOFF: Duration = Duration::from_secs(1);

/// Waits until rank 0's coordinator accepts connections at `address`,
/// within `deadline`: rank 0 starts it only once it opened the dataset,
/// so the other ranks usually come first. Each failed attempt is logged.
/// `who` names the waiting rank in the error (`rank 1`).
pub async fn wait_for_rank_zero(address: &str, who: &str, deadline: Duration) -> Result<()> {
    let until = Instant::now() + deadline;
    let mut backoff = Duration::from_millis(50);
    let mut attempts = 0u32;
    loop {
        attempts += 1;
        let error =
            match tokio::time::timeout_at(until, tokio::net::TcpStream::connect(address)).await {
                Ok(Ok(_)) => return Ok(()),
                Ok(Err(error)) => error.to_string(),
                Err(_) => "timed out".to_owned(),
            };
        if Instant::now() + backoff >= until {
            return Err(WorkerError::Coordinator {
                code: tonic::Code::Unavailable,
                message: format!(
                    "{who} cannot reach the coordinator rank 0 hosts at {address} within \
                     {deadline:?} ({attempts} attempts, last: {error}): is rank 0 running, and \
                     did it start its loader (its log says why not)? If that port is taken, set \
                     {COORDINATOR_PORT_VAR} to a free one on every rank"
                ),
            });
        }
        tracing::info!(address, attempts, %error, "waiting for rank 0's coordinator");
        tokio::time::sleep(backoff).await;
        backoff = (backoff * 2).min(MAX_BACKOFF);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(vars: &[(&str, &str)]) -> HashMap<String, String> {
        vars.iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn rank_zero_hosts_on_master_addr_one_port_above_master_port_or_the_override() {
        let base = [("MASTER_ADDR", "10.0.0.7"), ("MASTER_PORT", "29500")];
        assert_eq!(
            rank_zero_address(&env(&base)).expect("ok"),
            "10.0.0.7:29501"
        );
        let over = [base[0], base[1], (COORDINATOR_PORT_VAR, "7070")];
        assert_eq!(rank_zero_address(&env(&over)).expect("ok"), "10.0.0.7:7070");
        let v6 = [("MASTER_ADDR", "::1"), ("MASTER_PORT", "1")];
        assert_eq!(rank_zero_address(&env(&v6)).expect("ok"), "[::1]:2");
        let message = |vars: &[(&str, &str)]| {
            rank_zero_address(&env(vars))
                .expect_err("an error")
                .to_string()
        };
        assert!(message(&[("MASTER_PORT", "1")]).contains("MASTER_ADDR is not set"));
        assert!(message(&[base[0]]).contains("MASTER_PORT is not set"));
        assert!(message(&[base[0], ("MASTER_PORT", "65535")]).contains(COORDINATOR_PORT_VAR));
        assert!(message(&[base[0], (COORDINATOR_PORT_VAR, "0")]).contains("is not a port"));
    }

    #[tokio::test]
    async fn a_rank_waits_for_rank_zero_and_names_the_address_when_it_never_comes() {
        // A port nothing listens on: bound, then released.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .expect("ok")
            .local_addr()
            .expect("ok")
            .port();
        let address = format!("127.0.0.1:{port}");
        let error = wait_for_rank_zero(&address, "rank 1", Duration::from_millis(300))
            .await
            .expect_err("an error")
            .to_string();
        assert!(
            error.contains(&address) && error.contains("rank 1"),
            "{error}"
        );
        // Once it is up, the rank reaches it.
        let listener = tokio::net::TcpListener::bind(&address).await.expect("ok");
        wait_for_rank_zero(&address, "rank 1", Duration::from_secs(5))
            .await
            .expect("reached");
        drop(listener);
    }
}
