//! `tributary coordinator`: one coordinator replica. With `--etcd` its state
//! lives in etcd and replicas elect a leader there; without, it runs alone
//! on the in-memory store (state is lost when it stops).
//!
//! Every flag also reads a `TRIBUTARY_*` variable, so a Kubernetes
//! ConfigMap can hold the settings; `--check` prints what a replica would
//! run with and exits.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use tokio::net::TcpListener;
use tonic::transport::{Certificate, Identity, ServerTlsConfig};
use tributary_coordinator::auth::DatasetPolicy;
use tributary_coordinator::store::{Election, EtcdElection, EtcdStore, MetaStore, OwnRuntime};

mod etcd_args;
mod limit_args;
mod open_files;

use etcd_args::EtcdArgs;
use limit_args::LimitArgs;
use tributary_coordinator::{keys, Listeners, ServerConfig};

use crate::pipeline_args::u64_in;
use crate::storage::StoreArgs;

/// The variables read besides those the flags name, for `--help`.
const ENVIRONMENT: &str = "\
Environment:
  Every flag above reads the variable shown beside it. Also read:
  RUST_LOG   log filter (default warn), e.g. info or tributary_coordinator=debug
  TRIBUTARY_LOG_FORMAT  text (default) or json: one JSON object per log line
  AWS_*      S3 credentials and settings (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY,
             AWS_SESSION_TOKEN, AWS_REGION, ...), for reading dataset manifests
  GOOGLE_*   GCS credentials (GOOGLE_SERVICE_ACCOUNT, GOOGLE_APPLICATION_CREDENTIALS, ...)
  AZURE_*    Azure Blob credentials (AZURE_STORAGE_ACCOUNT_NAME, AZURE_STORAGE_ACCOUNT_KEY, ...)";

#[derive(Debug, clap::Args)]
#[command(after_help = ENVIRONMENT)]
pub struct Args {
    /// Address to listen on for gRPC.
    #[arg(long, env = "TRIBUTARY_LISTEN", default_value = "127.0.0.1:7070")]
    listen: String,
    /// Address clients reach this replica at (default: the bound address).
    /// Followers hand it out as the leader's.
    #[arg(long, env = "TRIBUTARY_ADVERTISE")]
    advertise: Option<String>,
    /// etcd endpoints, comma-separated (host:port or http://host:port).
    /// None: run alone on the in-memory store.
    #[arg(long, env = "TRIBUTARY_ETCD", value_delimiter = ',')]
    etcd: Vec<String>,
    /// Leader lease time to live: how long a dead leader holds on.
    #[arg(long, env = "TRIBUTARY_LEADER_TTL_S", default_value_t = 3, value_parser = u64_in(1, 3600))]
    leader_ttl_s: u64,
    /// Group-commit window for store writes, in milliseconds.
    #[arg(long, env = "TRIBUTARY_FLUSH_MS", default_value_t = 50, value_parser = u64_in(0, 60_000))]
    flush_ms: u64,
    /// Also serve the gRPC health service, always without TLS, here (for
    /// kubelet gRPC probes, which speak no TLS).
    #[arg(long, env = "TRIBUTARY_HEALTH_LISTEN")]
    health_listen: Option<String>,
    /// Serve Prometheus metrics over plain HTTP at /metrics here
    /// (host:port; e.g. 0.0.0.0:9464). None: no metrics endpoint.
    #[arg(long, env = "TRIBUTARY_METRICS_LISTEN")]
    metrics_listen: Option<String>,
    /// How long a finished job is kept (its status readable, its keys in
    /// etcd) before it is deleted: a number with a unit, ms, s, m, h or d
    /// (e.g. 7d, 12h, 30s).
    #[arg(long, env = "TRIBUTARY_FINISHED_JOB_TTL", default_value = "7d", value_parser = ttl)]
    finished_job_ttl: Duration,
    /// PEM certificate chain: serve gRPC over TLS (needs --tls-key).
    #[arg(long, env = "TRIBUTARY_TLS_CERT", requires = "tls_key")]
    tls_cert: Option<PathBuf>,
    /// PEM private key of --tls-cert.
    #[arg(long, env = "TRIBUTARY_TLS_KEY", requires = "tls_cert")]
    tls_key: Option<PathBuf>,
    /// PEM CA certificate(s): callers must present a client certificate
    /// signed by one of them (mutual TLS; needs --tls-cert).
    #[arg(long, env = "TRIBUTARY_TLS_CLIENT_CA", requires = "tls_cert")]
    tls_client_ca: Option<PathBuf>,
    /// File holding the bearer token every call must carry (a mounted
    /// Kubernetes Secret). Without it any caller that reaches the port is
    /// served.
    #[arg(long, env = "TRIBUTARY_AUTH_TOKEN_FILE")]
    auth_token_file: Option<PathBuf>,
    /// Serve a non-loopback --listen address without --auth-token-file
    /// (any caller that reaches the port acts on every job). Without it,
    /// such a coordinator refuses to start.
    #[arg(long, env = "TRIBUTARY_INSECURE_NO_AUTH")]
    insecure_no_auth: bool,
    /// Manifest URL prefixes CreateJob may name, comma-separated (e.g.
    /// s3://bucket/datasets/). Without it, any URL the coordinator's
    /// credentials reach (a warning at start-up).
    #[arg(long, env = "TRIBUTARY_ALLOWED_DATASETS", value_delimiter = ',')]
    allowed_datasets: Vec<String>,
    #[command(flatten)]
    etcd_args: EtcdArgs,
    #[command(flatten)]
    limits: LimitArgs,
    /// Check the flags and environment, print the settings, and exit.
    #[arg(long)]
    check: bool,
    #[command(flatten)]
    store: StoreArgs,
}

impl Args {
    /// The settings, one per line, as `--check` prints them.
    fn describe(&self) -> String {
        let or = |value: &Option<String>, default: &str| {
            value.clone().unwrap_or_else(|| default.to_owned())
        };
        let path = |value: &Option<PathBuf>| value.as_ref().map(|p| p.display().to_string());
        let etcd = if self.etcd.is_empty() {
            "none: the in-memory store, state lost on exit".to_owned()
        } else {
            self.etcd.join(",")
        };
        [
            format!("listen        {}", self.listen),
            format!("advertise     {}", or(&self.advertise, "the bound address")),
            format!("etcd          {etcd}"),
            format!("leader ttl    {} s", self.leader_ttl_s),
            format!("flush         {} ms", self.flush_ms),
            format!(
                "health        {}",
                or(&self.health_listen, "the gRPC port only")
            ),
            format!("metrics       {}", or(&self.metrics_listen, "none")),
            format!("finished ttl  {:?}", self.finished_job_ttl),
            format!(
                "tls cert      {}",
                or(&path(&self.tls_cert), "none: plaintext")
            ),
            format!("tls key       {}", or(&path(&self.tls_key), "none")),
            self.etcd_args.describe(),
            self.limits.describe(),
            format!(
                "client ca     {}",
                or(&path(&self.tls_client_ca), "none: no client certificates")
            ),
            format!(
                "auth token    {}",
                or(
                    &path(&self.auth_token_file),
                    if self.insecure_no_auth {
                        "none: any caller (--insecure-no-auth)"
                    } else {
                        "none: any caller, on loopback only"
                    }
                )
            ),
            format!(
                "datasets      {}",
                if self.allowed_datasets.is_empty() {
                    "any URL".to_owned()
                } else {
                    self.allowed_datasets.join(",")
                }
            ),
            format!(
                "s3 endpoint   {}",
                or(&self.store.s3_endpoint, "the default")
            ),
        ]
        .join("\n")
    }

    /// Checks what parsing does not: values that must be set, and shapes.
    fn validate(&self) -> anyhow::Result<()> {
        anyhow::ensure!(!self.listen.trim().is_empty(), "--listen is empty");
        if let Some(advertise) = &self.advertise {
            anyhow::ensure!(
                advertise.contains(':') && !advertise.contains("$("),
                "--advertise {advertise:?} is not host:port (an unexpanded $(VAR)?)"
            );
        }
        anyhow::ensure!(self.leader_ttl_s >= 1, "--leader-ttl-s must be at least 1");
        self.datasets()?;
        self.etcd_args.validate()?;
        if let (true, Some(flag)) = (self.etcd.is_empty(), self.etcd_args.first_connection_flag()) {
            anyhow::bail!("{flag} needs --etcd (the in-memory store has no connection to secure)");
        }
        Ok(())
    }

    /// Reads the certificate and key, naming the file that fails.
    fn tls(&self) -> anyhow::Result<Option<ServerTlsConfig>> {
        let (Some(cert), Some(key)) = (&self.tls_cert, &self.tls_key) else {
            return Ok(None);
        };
        let read = |path: &PathBuf, what: &str| {
            std::fs::read(path)
                .with_context(|| format!("cannot read the TLS {what} {}", path.display()))
        };
        let identity = Identity::from_pem(read(cert, "certificate")?, read(key, "key")?);
        let mut tls = ServerTlsConfig::new().identity(identity);
        if let Some(ca) = &self.tls_client_ca {
            tls = tls.client_ca_root(Certificate::from_pem(read(ca, "client CA")?));
        }
        Ok(Some(tls))
    }

    /// The bearer token, read from its file (trimmed); an empty file is an
    /// error, not "no authentication".
    fn auth_token(&self) -> anyhow::Result<Option<String>> {
        let Some(path) = &self.auth_token_file else {
            return Ok(None);
        };
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read --auth-token-file {}", path.display()))?;
        let token = text.trim();
        anyhow::ensure!(
            !token.is_empty(),
            "--auth-token-file {} is empty",
            path.display()
        );
        anyhow::ensure!(
            token.len() <= 4096 && token.bytes().all(|b| b.is_ascii_graphic()),
            "--auth-token-file {}: the token must be at most 4096 printable ASCII characters",
            path.display()
        );
        Ok(Some(token.to_owned()))
    }

    fn datasets(&self) -> anyhow::Result<DatasetPolicy> {
        let prefixes: Vec<String> = self
            .allowed_datasets
            .iter()
            .map(|p| p.trim().to_owned())
            .filter(|p| !p.is_empty())
            .collect();
        if prefixes.is_empty() {
            return Ok(DatasetPolicy::any());
        }
        DatasetPolicy::under(&prefixes).map_err(|e| anyhow::anyhow!("--allowed-datasets: {e}"))
    }
}

pub async fn run(mut args: Args) -> anyhow::Result<()> {
    // An empty TRIBUTARY_ETCD means no etcd, as an absent one does.
    args.etcd.retain(|endpoint| !endpoint.trim().is_empty());
    args.validate()?;
    if args.check {
        println!("{}", args.describe());
        return Ok(());
    }
    let tls = args.tls()?;
    let auth_token = args.auth_token()?;
    match open_files::raise() {
        Ok(limit) => tracing::info!(limit, "open files"),
        Err(error) => tracing::warn!(%error, "cannot raise the open-files limit"),
    }
    let datasets = args.datasets()?;
    let listener = TcpListener::bind(&args.listen)
        .await
        .with_context(|| format!("cannot listen on {}", args.listen))?;
    let health = match &args.health_listen {
        Some(address) => Some(
            TcpListener::bind(address)
                .await
                .with_context(|| format!("cannot listen on {address} (--health-listen)"))?,
        ),
        None => None,
    };
    let metrics = tributary_coordinator::Metrics::new();
    let metrics_server = match &args.metrics_listen {
        Some(address) => Some(
            tributary_io::MetricsServer::bind(address, metrics.registry().clone())
                .await
                .with_context(|| format!("cannot listen on {address} (--metrics-listen)"))?,
        ),
        None => None,
    };
    let bound = listener.local_addr()?;
    let advertise = args.advertise.clone().unwrap_or_else(|| bound.to_string());
    let (store, election): (Arc<dyn MetaStore>, Arc<dyn Election>) = if args.etcd.is_empty() {
        tracing::warn!(
            "no --etcd given: running alone on the in-memory store; state is lost on exit"
        );
        eprintln!(
            "coordinator: no --etcd given, using the in-memory store (state is lost on exit)"
        );
        tributary_coordinator::local::memory_store()
    } else {
        let options = args.etcd_args.options()?;
        let store = EtcdStore::connect_with(&args.etcd, &options)
            .await
            .with_context(|| format!("cannot reach etcd at {}", args.etcd.join(",")))?;
        // The election has a connection and a thread of its own: its
        // renewals never queue behind the jobs' calls, writes and watches.
        let (endpoints, ttl) = (
            args.etcd.clone(),
            Duration::from_secs(args.leader_ttl_s.max(1)),
        );
        let election = OwnRuntime::start(async move {
            let own = EtcdStore::connect_with(&endpoints, &options).await?;
            let election = EtcdElection::new(own, keys::ELECTION.to_owned(), ttl);
            Ok(Arc::new(election) as Arc<dyn Election>)
        })
        .await
        .with_context(|| format!("cannot reach etcd at {}", args.etcd.join(",")))?;
        (Arc::new(store), Arc::new(election))
    };
    let mut config = ServerConfig::new(advertise.clone());
    config.metrics = metrics;
    config.finished_job_ttl = args.finished_job_ttl;
    config.flush_interval = Duration::from_millis(args.flush_ms);
    config.store_options = args.store.options("s3://");
    config.limits = args.limits.limits();
    config.connections = args.limits.connections();
    let scheme = if tls.is_some() { "TLS" } else { "plaintext" };
    config.tls = tls;
    if auth_token.is_none() {
        if !bound.ip().is_loopback() && !args.insecure_no_auth {
            anyhow::bail!(
                "--listen {} is reachable beyond this machine and no --auth-token-file is given: any \
                 caller could act on every job. Give --auth-token-file (trainers then use job \
                 credentials, `tributary job token`), listen on 127.0.0.1, or pass \
                 --insecure-no-auth to serve without credentials anyway",
                args.listen
            );
        }
        eprintln!("coordinator: warning: no --auth-token-file: any client that reaches the port is served");
    }
    if datasets.is_open() {
        eprintln!("coordinator: warning: no --allowed-datasets: CreateJob may name any manifest the coordinator's credentials reach");
    }
    config.auth_token = auth_token;
    config.datasets = datasets;
    let mut health_note = match &health {
        Some(listener) => format!(", health on {}", listener.local_addr()?),
        None => String::new(),
    };
    if let Some(server) = &metrics_server {
        health_note.push_str(&format!(", metrics on http://{}/metrics", server.address()));
    }
    eprintln!(
        "coordinator: listening on {bound} ({scheme}, advertised as {advertise}){health_note}"
    );
    let listeners = Listeners {
        grpc: listener,
        health,
    };
    tributary_coordinator::run(listeners, store, election, config, shutdown()).await?;
    Ok(())
}

/// The longest `--finished-job-ttl`: ten years.
const MAX_TTL: Duration = Duration::from_secs(3650 * 24 * 3600);

/// A duration flag: a whole number and a unit (`ms`, `s`, `m`, `h`, `d`),
/// from one second to ten years.
fn ttl(text: &str) -> Result<Duration, String> {
    let digits = text.trim_end_matches(|c: char| c.is_ascii_alphabetic());
    let unit = &text[digits.len()..];
    let n: u64 = digits
        .parse()
        .map_err(|_| format!("{text:?} is not a number with a unit (e.g. 7d, 12h, 30s)"))?;
    let ms = match unit {
        "ms" => 1,
        "s" => 1_000,
        "m" => 60_000,
        "h" => 3_600_000,
        "d" => 86_400_000,
        _ => return Err(format!("{text:?}: the unit must be ms, s, m, h or d")),
    };
    let duration = n
        .checked_mul(ms)
        .map(Duration::from_millis)
        .filter(|d| *d <= MAX_TTL)
        .ok_or_else(|| format!("{text:?} is longer than ten years"))?;
    if duration < Duration::from_secs(1) {
        return Err(format!("{text:?} is shorter than one second"));
    }
    Ok(duration)
}

async fn shutdown() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut term =
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(term) => term,
                Err(_) => {
                    let _ = ctrl_c.await;
                    return;
                }
            };
        tokio::select! {
            _ = ctrl_c => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    let _ = ctrl_c.await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ttl_is_a_number_and_a_unit_within_bounds() {
        assert_eq!(ttl("7d"), Ok(Duration::from_secs(7 * 86_400)));
        assert_eq!(ttl("1500ms"), Ok(Duration::from_millis(1500)));
        assert_eq!(ttl("2m"), Ok(Duration::from_secs(120)));
        for bad in [
            "",
            "7",
            "d",
            "-1s",
            "1.5h",
            "7days",
            "999ms",
            "3651d",
            "18446744073709551615d",
        ] {
            let error = ttl(bad).expect_err(bad);
            assert!(error.contains(&format!("{bad:?}")), "{error}");
        }
    }
}
