//! Reaching a coordinator from the operator commands (`status`, `job`):
//! its address and credentials as flags (each also read from the variable
//! the ranks and the Python `Loader` use), a leader-following client from
//! the worker, and its errors said in one line that names the address and
//! the job.

use std::collections::HashMap;
use std::time::Duration;

use tributary_worker::coordinated::client::{
    AUTH_TOKEN_FILE_VAR, TLS_CA_VAR, TLS_CLIENT_CERT_VAR, TLS_CLIENT_KEY_VAR, TLS_DOMAIN_VAR,
};
use tributary_worker::coordinated::{Client, ClientCredentials, Code};
use tributary_worker::WorkerError;

/// How long one attempt of a call may take.
const CALL_TIMEOUT: Duration = Duration::from_secs(3);

/// The coordinator flags of the operator commands.
#[derive(Debug, Clone, clap::Args)]
pub struct RemoteArgs {
    /// The coordinator: `host:port` or `http(s)://host:port`, a comma list
    /// for several replicas. Calls follow the leader.
    #[arg(long, env = "TRIBUTARY_COORDINATOR")]
    pub coordinator: String,
    /// Seconds a call keeps retrying an unreachable coordinator or a leader
    /// change before it fails (1 to 600).
    #[arg(long, default_value_t = 10, value_parser = crate::pipeline_args::u64_in(1, 600))]
    pub timeout: u64,
    /// PEM CA certificates that https:// coordinators are verified against
    /// (default: the system's roots).
    #[arg(long, env = TLS_CA_VAR)]
    pub tls_ca: Option<String>,
    /// The name every replica's certificate must carry (default: the host
    /// of the first address).
    #[arg(long, env = TLS_DOMAIN_VAR)]
    pub tls_domain: Option<String>,
    /// PEM certificate presented to coordinators that ask for one (needs
    /// --tls-client-key).
    #[arg(long, env = TLS_CLIENT_CERT_VAR)]
    pub tls_client_cert: Option<String>,
    /// PEM private key of --tls-client-cert.
    #[arg(long, env = TLS_CLIENT_KEY_VAR)]
    pub tls_client_key: Option<String>,
    /// File holding the bearer token (else the token in
    /// TRIBUTARY_AUTH_TOKEN, else none).
    #[arg(long, env = AUTH_TOKEN_FILE_VAR)]
    pub auth_token_file: Option<String>,
}

/// How results are printed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Output {
    /// Lines for people.
    Text,
    /// One JSON object per line.
    Json,
}

impl RemoteArgs {
    /// A client of the coordinator, its credentials read from the flags
    /// over `env` (the process environment, read once by the caller).
    pub fn client(&self, env: &HashMap<String, String>) -> anyhow::Result<Client> {
        let mut vars = env.clone();
        for (var, value) in [
            (TLS_CA_VAR, &self.tls_ca),
            (TLS_DOMAIN_VAR, &self.tls_domain),
            (TLS_CLIENT_CERT_VAR, &self.tls_client_cert),
            (TLS_CLIENT_KEY_VAR, &self.tls_client_key),
            (AUTH_TOKEN_FILE_VAR, &self.auth_token_file),
        ] {
            match value {
                Some(value) => vars.insert(var.to_owned(), value.clone()),
                None => vars.remove(var),
            };
        }
        let credentials = ClientCredentials::from_env(&vars)?;
        let timeout = Duration::from_secs(self.timeout);
        Ok(Client::new(std::slice::from_ref(&self.coordinator))?
            .with_credentials(&credentials)?
            .with_deadline(timeout)
            .with_call_timeout(CALL_TIMEOUT.min(timeout)))
    }

    /// `error` of a call about `job` (if any), as one line naming the
    /// coordinator and the job.
    pub fn explain(&self, error: WorkerError, job: Option<&str>) -> anyhow::Error {
        let address = &self.coordinator;
        let WorkerError::Coordinator { code, message } = &error else {
            return anyhow::Error::new(error).context(format!("coordinator {address}"));
        };
        match (code, job) {
            // A job the leader deleted lately: it says so.
            (Code::NotFound, Some(job)) if message.contains("was deleted") => {
                anyhow::anyhow!("no job {job:?} on the coordinator at {address}: {message}")
            }
            (Code::NotFound, Some(job)) => {
                anyhow::anyhow!("no job {job:?} on the coordinator at {address}")
            }
            // Nothing listens there: the client said so, naming the address.
            (Code::Unavailable, _) if message.starts_with("cannot reach the coordinator") => {
                anyhow::anyhow!("{message}")
            }
            (Code::Unavailable | Code::DeadlineExceeded | Code::Unknown | Code::Cancelled, _) => {
                anyhow::anyhow!(
                    "cannot reach the coordinator at {address} within {}s: {message}",
                    self.timeout
                )
            }
            (Code::Unauthenticated | Code::PermissionDenied, _) => anyhow::anyhow!(
                "the coordinator at {address} refused the call: {message} \
                 (--auth-token-file or TRIBUTARY_AUTH_TOKEN gives the token)"
            ),
            _ => anyhow::anyhow!("the coordinator at {address}: {message} ({code:?})"),
        }
    }
}

/// The process environment, read once at the edge.
pub fn environment() -> HashMap<String, String> {
    std::env::vars().collect()
}

/// A unix time in milliseconds as `HH:MM:SS UTC`.
pub fn clock(unix_ms: u64) -> String {
    let seconds = unix_ms / 1000 % 86_400;
    format!(
        "{:02}:{:02}:{:02} UTC",
        seconds / 3600,
        seconds / 60 % 60,
        seconds % 60
    )
}

/// Milliseconds since the Unix epoch, now.
pub fn unix_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// A job's epoch as `status` and `job list` show it, counted from 0 as the
/// loader (`loader.epoch`), checkpoints and `--json` count: `epoch 0 of 2`
/// for the first of two, `2 epochs read` once all are, `epoch 5 of
/// unbounded` for a job without an end (`epochs` 0). `word`: lead with
/// "epoch" (a heading), or not (a table's EPOCH column: `0 of 2`, `2 read`,
/// `5 of unbounded`).
pub fn epoch_phrase(epoch: u64, epochs: u64, word: bool) -> String {
    let lead = if word { "epoch " } else { "" };
    if epochs == 0 {
        format!("{lead}{epoch} of unbounded")
    } else if epoch >= epochs {
        let noun = match (word, epochs) {
            (false, _) => "",
            (true, 1) => " epoch",
            (true, _) => " epochs",
        };
        format!("{epochs}{noun} read")
    } else {
        format!("{lead}{epoch} of {epochs}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_clock_reads_hours_minutes_and_seconds_of_the_day() {
        assert_eq!(clock(0), "00:00:00 UTC");
        assert_eq!(clock(86_400_000 * 3 + 3_723_999), "01:02:03 UTC");
    }

    #[test]
    fn errors_name_the_coordinator_and_the_job() {
        let args = RemoteArgs {
            coordinator: "10.0.0.1:7070".into(),
            timeout: 2,
            tls_ca: None,
            tls_domain: None,
            tls_client_cert: None,
            tls_client_key: None,
            auth_token_file: None,
        };
        let coordinator = |code| WorkerError::Coordinator {
            code,
            message: "m".into(),
        };
        let missing = args.explain(coordinator(Code::NotFound), Some("train"));
        assert_eq!(
            missing.to_string(),
            "no job \"train\" on the coordinator at 10.0.0.1:7070"
        );
        let down = args.explain(coordinator(Code::Unavailable), Some("train"));
        assert_eq!(
            down.to_string(),
            "cannot reach the coordinator at 10.0.0.1:7070 within 2s: m"
        );
        let refused = args.explain(coordinator(Code::Unauthenticated), None);
        assert!(
            refused.to_string().contains("TRIBUTARY_AUTH_TOKEN"),
            "{refused}"
        );
    }
}
