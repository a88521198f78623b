//! One coordinator replica: the gRPC server, the health service, and the
//! election loop that turns it into the leader and back.
//!
//! Health, on the main port and on the optional plaintext health port
//! (kubelet's gRPC probes speak no TLS):
//!
//! - `""`: SERVING while the process serves (liveness);
//! - [`HEALTH_READY`]: SERVING while this replica leads or knows a live
//!   leader to send clients to (readiness: followers redirect, so they
//!   count);
//! - [`HEALTH_LEADER`] (`tributary.v1.Coordinator`): SERVING on the leader
//!   only.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::sync::{watch, RwLock};
use tonic::server::NamedService;
use tonic::transport::{Server, ServerTlsConfig};
use tonic_health::server::HealthReporter;
use tonic_health::ServingStatus;
use tributary_common::proto::v1::coordinator_server::CoordinatorServer;
use tributary_io::StoreOptions;

use crate::auth::{DatasetPolicy, TokenCheck};
use crate::leader::{housekeeping, liveness, Leader, LeaderConfig};
use crate::limits::Limits;
use crate::metrics::Metrics;
use crate::service::{Role, Service};
use crate::store::{CachedLeader, Election, MetaStore, LEADER_CACHE};
use crate::transport::{self, Proof};

/// How a replica runs.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// The address clients reach this replica at (given to followers'
    /// clients as the leader's address).
    pub advertise: String,
    /// Group-commit window: the most one write waits for others to join it.
    pub flush_interval: Duration,
    /// How the coordinator reads manifests.
    pub store_options: StoreOptions,
    /// What the replica agrees to hold (jobs, members, units, manifests).
    pub limits: Limits,
    /// Connections each listener holds, and how soon each must make a
    /// valid call.
    pub connections: transport::Limits,
    /// Serve the main port with TLS (the health port stays plaintext).
    /// With a client CA root in it, callers must present certificates.
    pub tls: Option<ServerTlsConfig>,
    /// The bearer token every call must carry; `None`: any caller.
    pub auth_token: Option<String>,
    /// Which manifests CreateJob may name.
    pub datasets: DatasetPolicy,
    /// This replica's metrics (serve `metrics.registry()` to expose them).
    pub metrics: Metrics,
    /// How long a finished job is kept before it is deleted.
    pub finished_job_ttl: Duration,
}

/// How long a finished job is kept by default: a week.
pub const DEFAULT_FINISHED_JOB_TTL: Duration = Duration::from_secs(7 * 24 * 3600);

/// Health service name that is SERVING while a replica can answer calls:
/// it leads, or knows a live leader to redirect to.
pub const HEALTH_READY: &str = "ready";
/// Health service name that is SERVING on the leader only.
pub const HEALTH_LEADER: &str = <CoordinatorServer<Service> as NamedService>::NAME;
/// How often a replica re-checks that it can redirect to a leader.
const READINESS_INTERVAL: Duration = Duration::from_secs(1);
/// HTTP/2 keep-alive: a proven connection whose peer stops answering
/// pings for `KEEPALIVE_TIMEOUT` after one sent every `KEEPALIVE_INTERVAL`
/// is closed.
const KEEPALIVE_INTERVAL: Duration = Duration::from_secs(30);
const KEEPALIVE_TIMEOUT: Duration = Duration::from_secs(10);
/// Calls in flight on one connection (a rank makes a few; a Watch and an
/// Acquire each hold one while they wait).
const STREAMS_PER_CONNECTION: u32 = 1024;

/// A server builder with the transport's bounds.
fn bounded() -> Server {
    Server::builder()
        .tcp_keepalive(Some(KEEPALIVE_INTERVAL))
        .http2_keepalive_interval(Some(KEEPALIVE_INTERVAL))
        .http2_keepalive_timeout(Some(KEEPALIVE_TIMEOUT))
        .max_concurrent_streams(Some(STREAMS_PER_CONNECTION))
}

/// Where a replica serves.
#[derive(Debug)]
pub struct Listeners {
    /// The coordinator service and health (TLS when configured).
    pub grpc: TcpListener,
    /// Health only, always plaintext: for probes that speak no TLS.
    pub health: Option<TcpListener>,
}

impl From<TcpListener> for Listeners {
    fn from(grpc: TcpListener) -> Self {
        Self { grpc, health: None }
    }
}

impl ServerConfig {
    pub fn new(advertise: impl Into<String>) -> Self {
        Self {
            advertise: advertise.into(),
            flush_interval: Duration::from_millis(50),
            store_options: StoreOptions::default(),
            limits: Limits::default(),
            connections: transport::Limits::default(),
            tls: None,
            auth_token: None,
            datasets: DatasetPolicy::any(),
            metrics: Metrics::new(),
            finished_job_ttl: DEFAULT_FINISHED_JOB_TTL,
        }
    }

    /// What the leader takes of it, once this replica wins an election.
    pub fn leader(&self) -> LeaderConfig {
        LeaderConfig {
            address: self.advertise.clone(),
            flush_interval: self.flush_interval,
            store_options: self.store_options.clone(),
            limits: self.limits,
            metrics: self.metrics.clone(),
            finished_job_ttl: self.finished_job_ttl,
        }
    }
}

/// Serves on `listeners` until `shutdown` completes: campaigns for
/// leadership, loads every job from `store` when it wins, serves as leader
/// until leadership is lost (then campaigns again), and answers "not
/// leader" with the leader's address meanwhile.
pub async fn run(
    listeners: impl Into<Listeners>,
    store: Arc<dyn MetaStore>,
    election: Arc<dyn Election>,
    config: ServerConfig,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), tonic::transport::Error> {
    let listeners = listeners.into();
    // Followers name the leader in every "not the leader" answer: looked
    // up once per LEADER_CACHE, not once per call.
    let election: Arc<dyn Election> = Arc::new(CachedLeader::new(election, LEADER_CACHE));
    let role = Arc::new(RwLock::new(Role::Follower));
    let (health, health_service) = tonic_health::server::health_reporter();
    health.set_service_status("", ServingStatus::Serving).await;
    health
        .set_service_status(HEALTH_LEADER, ServingStatus::NotServing)
        .await;
    health
        .set_service_status(HEALTH_READY, ServingStatus::NotServing)
        .await;
    let service = Service {
        role: Arc::clone(&role),
        election: Arc::clone(&election),
        datasets: config.datasets.clone(),
        metrics: config.metrics.clone(),
        token: TokenCheck::new(config.auth_token.as_deref()),
    };
    let token = service.token.clone();
    let connections = config.connections;
    let refused = config.metrics.clone();
    let mut main = bounded();
    if let Some(tls) = config.tls.clone() {
        main = main.tls_config(tls)?;
    }
    let readiness = tokio::spawn(report_readiness(
        Arc::clone(&election),
        Arc::clone(&role),
        health.clone(),
    ));
    let campaign = tokio::spawn(lead(store, election, config, role, health));

    // One shutdown signal for both servers.
    let (stop, stopped) = watch::channel(false);
    tokio::spawn(async move {
        shutdown.await;
        let _ = stop.send(true);
    });
    let until_stopped = |mut stopped: watch::Receiver<bool>| async move {
        let _ = stopped.wait_for(|stopped| *stopped).await;
    };
    let health_server = async {
        match listeners.health {
            Some(listener) => {
                bounded()
                    .add_service(health_service.clone())
                    .serve_with_incoming_shutdown(
                        transport::incoming(listener, connections, Arc::default()),
                        until_stopped(stopped.clone()),
                    )
                    .await
            }
            None => Ok(()),
        }
    };
    let main_server = main
        .add_service(health_service.clone())
        .add_service(CoordinatorServer::with_interceptor(service, move |r| {
            // Refused before any handler: counted under method "*" (the
            // interceptor does not see which method was called).
            let r = token
                .check(r)
                .inspect_err(|s| refused.rpc("*", s.code(), Duration::ZERO))?;
            // A valid call: its connection stays open (`transport`).
            if let Some(proof) = r.extensions().get::<Proof>() {
                proof.prove();
            }
            Ok(r)
        }))
        .serve_with_incoming_shutdown(
            transport::incoming(listeners.grpc, connections, Arc::default()),
            until_stopped(stopped.clone()),
        );
    let result = tokio::try_join!(main_server, health_server).map(|_| ());
    campaign.abort();
    readiness.abort();
    result
}

/// Keeps [`HEALTH_READY`] true while this replica leads or can name a
/// leader (it reaches the store, and somebody holds the election).
async fn report_readiness(
    election: Arc<dyn Election>,
    role: Arc<RwLock<Role>>,
    health: HealthReporter,
) {
    let mut reported = None;
    loop {
        let leading = matches!(*role.read().await, Role::Leader(_));
        let ready = leading || matches!(election.leader().await, Ok(Some(_)));
        if reported != Some(ready) {
            let status = if ready {
                ServingStatus::Serving
            } else {
                ServingStatus::NotServing
            };
            health.set_service_status(HEALTH_READY, status).await;
            tracing::info!(ready, "readiness changed");
            reported = Some(ready);
        }
        tokio::time::sleep(READINESS_INTERVAL).await;
    }
}

async fn lead(
    store: Arc<dyn MetaStore>,
    election: Arc<dyn Election>,
    config: ServerConfig,
    role: Arc<RwLock<Role>>,
    health: HealthReporter,
) {
    loop {
        let leadership = match election.campaign(&config.advertise).await {
            Ok(leadership) => leadership,
            Err(error) => {
                tracing::warn!(%error, "campaign failed; retrying");
                tokio::time::sleep(Duration::from_millis(500)).await;
                continue;
            }
        };
        let mut lost = leadership.lost.clone();
        let started = std::time::Instant::now();
        let leader = match Leader::load(Arc::clone(&store), leadership, config.leader()).await {
            Ok(leader) => leader,
            Err(error) => {
                tracing::error!(%error, "cannot load the jobs as leader; stepping down");
                tokio::time::sleep(Duration::from_millis(500)).await;
                continue;
            }
        };
        tracing::info!(
            address = config.advertise,
            load_ms = started.elapsed().as_millis() as u64,
            "leading"
        );
        let mut failed = leader.failed();
        let tidy = tokio::spawn(housekeeping(Arc::downgrade(&leader)));
        let reaper = tokio::spawn(liveness(Arc::downgrade(&leader)));
        config.metrics.set_leader(true);
        *role.write().await = Role::Leader(leader);
        health
            .set_service_status(HEALTH_LEADER, ServingStatus::Serving)
            .await;
        health
            .set_service_status(HEALTH_READY, ServingStatus::Serving)
            .await;
        tokio::select! {
            _ = lost.wait_for(|lost| *lost) => tracing::warn!("leadership lost"),
            _ = failed.wait_for(|failed| *failed) => tracing::warn!("a write failed; stepping down"),
        }
        tidy.abort();
        reaper.abort();
        health
            .set_service_status(HEALTH_LEADER, ServingStatus::NotServing)
            .await;
        *role.write().await = Role::Follower;
        config.metrics.set_leader(false);
        let m = &config.metrics;
        for gauge in [&m.jobs, &m.job_members, &m.job_epoch, &m.job_leased_units] {
            gauge.reset();
        }
    }
}
