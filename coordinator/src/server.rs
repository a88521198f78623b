//! One coordinator replica: the gRPC server, the health service, and the
//! election loop that turns it into the leader and back.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::sync::RwLock;
use tokio_stream::wrappers::TcpListenerStream;
use tributary_common::proto::v1::coordinator_server::CoordinatorServer;
use tributary_worker::StoreOptions;

use crate::leader::Leader;
use crate::service::{Role, Service};
use crate::store::{Election, MetaStore};

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
}

impl ServerConfig {
    pub fn new(advertise: impl Into<String>) -> Self {
        Self {
            advertise: advertise.into(),
            flush_interval: Duration::from_millis(50),
            store_options: StoreOptions::default(),
        }
    }
}

/// Serves on `listener` until `shutdown` completes: campaigns for
/// leadership, loads every job from `store` when it wins, serves as leader
/// until leadership is lost (then campaigns again), and answers "not
/// leader" with the leader's address meanwhile.
pub async fn run(
    listener: TcpListener,
    store: Arc<dyn MetaStore>,
    election: Arc<dyn Election>,
    config: ServerConfig,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), tonic::transport::Error> {
    let role = Arc::new(RwLock::new(Role::Follower));
    let (health, health_service) = tonic_health::server::health_reporter();
    health.set_not_serving::<CoordinatorServer<Service>>().await;
    let service = Service {
        role: Arc::clone(&role),
        election: Arc::clone(&election),
    };
    let campaign = tokio::spawn(lead(store, election, config, role, health));
    let result = tonic::transport::Server::builder()
        .add_service(health_service)
        .add_service(CoordinatorServer::new(service))
        .serve_with_incoming_shutdown(TcpListenerStream::new(listener), shutdown)
        .await;
    campaign.abort();
    result
}

async fn lead(
    store: Arc<dyn MetaStore>,
    election: Arc<dyn Election>,
    config: ServerConfig,
    role: Arc<RwLock<Role>>,
    health: tonic_health::server::HealthReporter,
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
        let leader = match Leader::load(
            Arc::clone(&store),
            leadership,
            config.advertise.clone(),
            config.store_options.clone(),
            config.flush_interval,
        )
        .await
        {
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
        let mut failed = leader.failed.clone();
        *role.write().await = Role::Leader(leader);
        health.set_serving::<CoordinatorServer<Service>>().await;
        tokio::select! {
            _ = lost.wait_for(|lost| *lost) => tracing::warn!("leadership lost"),
            _ = failed.wait_for(|failed| *failed) => tracing::warn!("a write failed; stepping down"),
        }
        health.set_not_serving::<CoordinatorServer<Service>>().await;
        *role.write().await = Role::Follower;
    }
}
