//! Whether a client has reached a coordinator, and the error that names
//! the addresses when it cannot.
//!
//! A client that never reached any replica, and whose every endpoint
//! refuses connections, stops retrying after [`REFUSED_GRACE`]: nothing
//! listens there (a typo, a coordinator not started), and waiting out the
//! failover deadline would only delay the answer. Once a replica answered,
//! refusals are a failover (a replica restarting, a leader moving) and are
//! retried until the deadline.

use std::collections::HashSet;
use std::time::Duration;

use tokio::time::Instant;
use tonic::Status;

use crate::error::WorkerError;

/// How long a client that never reached a coordinator retries while every
/// endpoint refuses connections (a coordinator starting at the same time).
pub const REFUSED_GRACE: Duration = Duration::from_secs(5);

/// Whether `status` is a connection the remote host refused (nothing
/// listens on the port), found in its chain of sources.
pub fn refused(status: &Status) -> bool {
    let mut source: Option<&(dyn std::error::Error + 'static)> = std::error::Error::source(status);
    while let Some(error) = source {
        if let Some(io) = error.downcast_ref::<std::io::Error>() {
            if io.kind() == std::io::ErrorKind::ConnectionRefused {
                return true;
            }
        }
        source = error.source();
    }
    status.message().contains("Connection refused")
}

/// `host:port` of an endpoint URL, as users write it.
fn bare(address: &str) -> &str {
    address
        .strip_prefix("http://")
        .unwrap_or(address)
        .trim_end_matches('/')
}

/// The attempts of one call: how many, since when, and which endpoints
/// refused the connection on their latest one.
#[derive(Debug)]
pub struct Attempts {
    started: Instant,
    count: u32,
    refused: HashSet<String>,
}

impl Attempts {
    pub fn new() -> Self {
        Self {
            started: Instant::now(),
            count: 0,
            refused: HashSet::new(),
        }
    }

    /// Counts a failed attempt on `address` with `status`; the attempt's
    /// number.
    pub fn failed(&mut self, address: &str, status: &Status) -> u32 {
        self.count += 1;
        if refused(status) {
            self.refused.insert(address.to_owned());
        } else {
            self.refused.remove(address);
        }
        self.count
    }

    /// The error to stop with now, if any: every endpoint refused the
    /// connection, none was ever reached, and the grace has passed.
    pub fn give_up(
        &self,
        endpoints: &[String],
        reached: bool,
        grace: Duration,
    ) -> Option<WorkerError> {
        let all_refused = endpoints.iter().all(|e| self.refused.contains(e));
        if reached || !all_refused || self.started.elapsed() < grace {
            return None;
        }
        let addresses = list(endpoints);
        Some(WorkerError::Coordinator {
            code: tonic::Code::Unavailable,
            message: format!(
                "cannot reach the coordinator at {addresses}: connection refused ({} attempts \
                 over {:.1}s); is `tributary coordinator` running at {addresses}?",
                self.count,
                self.started.elapsed().as_secs_f64()
            ),
        })
    }

    /// The error a call ends with after its deadline: the server's answer
    /// when one came, else one naming the addresses tried (and, when no
    /// replica was ever reached, asking whether the coordinator runs).
    pub fn final_error(
        &self,
        endpoints: &[String],
        address: &str,
        status: &Status,
        reached: bool,
    ) -> WorkerError {
        let addresses = list(endpoints);
        let hint = if reached {
            String::new()
        } else {
            format!("; is `tributary coordinator` running at {addresses}?")
        };
        WorkerError::Coordinator {
            code: status.code(),
            message: format!(
                "no answer from the coordinator at {addresses} within {:.1}s ({} attempts; the \
                 last, to {}: {}){hint}",
                self.started.elapsed().as_secs_f64(),
                self.count,
                bare(address),
                status.message()
            ),
        }
    }
}

fn list(endpoints: &[String]) -> String {
    endpoints
        .iter()
        .map(|e| bare(e))
        .collect::<Vec<_>>()
        .join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refusal_is_found_in_the_status_source_chain_or_message() {
        let io = std::io::Error::from(std::io::ErrorKind::ConnectionRefused);
        let mut status = Status::unavailable("tcp connect error");
        status.set_source(std::sync::Arc::new(io));
        assert!(refused(&status));
        assert!(!refused(&Status::unavailable("not the leader")));
    }

    #[test]
    fn no_fail_fast_once_reached_or_while_an_endpoint_does_not_refuse() {
        let endpoints = vec!["http://a:1".to_owned(), "http://b:2".to_owned()];
        let refusal = || {
            let mut status = Status::unavailable("tcp connect error");
            status.set_source(std::sync::Arc::new(std::io::Error::from(
                std::io::ErrorKind::ConnectionRefused,
            )));
            status
        };
        let mut attempts = Attempts::new();
        attempts.failed("http://a:1", &refusal());
        assert!(attempts
            .give_up(&endpoints, false, Duration::ZERO)
            .is_none());
        attempts.failed("http://b:2", &Status::unavailable("not the leader"));
        assert!(attempts
            .give_up(&endpoints, false, Duration::ZERO)
            .is_none());
        attempts.failed("http://b:2", &refusal());
        assert!(
            attempts.give_up(&endpoints, true, Duration::ZERO).is_none(),
            "a coordinator reached before: a failover, retried"
        );
        let error = attempts
            .give_up(&endpoints, false, Duration::ZERO)
            .expect("every endpoint refuses, none ever reached");
        let message = error.to_string();
        assert!(
            message.contains("cannot reach the coordinator at a:1,b:2"),
            "{message}"
        );
        assert!(
            message.contains("is `tributary coordinator` running at a:1,b:2?"),
            "{message}"
        );
    }
}
