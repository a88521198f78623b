//! A coordinator inside the calling process, alone on the in-memory store:
//! what single-node runs use (`tributary quickstart`, and a loader given no
//! coordinator address). Ranks still talk to it over gRPC on loopback, so
//! they take exactly the code paths they take against a real deployment.

use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tributary_io::StoreOptions;

use crate::keys;
use crate::server::{run, ServerConfig};
use crate::store::{Election, MemoryElection, MemoryStore, MetaStore};

/// A fresh in-memory store and an election on it (the only candidate wins).
pub fn memory_store() -> (Arc<dyn MetaStore>, Arc<dyn Election>) {
    let store = MemoryStore::new();
    let election = MemoryElection::new(store.clone(), keys::ELECTION);
    (Arc::new(store), Arc::new(election))
}

/// A running in-process coordinator; stops when dropped.
#[derive(Debug)]
pub struct LocalCoordinator {
    address: String,
    shutdown: Option<oneshot::Sender<()>>,
    task: JoinHandle<Result<(), tonic::transport::Error>>,
}

impl LocalCoordinator {
    /// Starts one on a free loopback port. `store_options` say how it reads
    /// manifests.
    pub async fn start(store_options: StoreOptions) -> std::io::Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let address = listener.local_addr()?.to_string();
        Ok(Self::serve(listener, address, store_options, None))
    }

    /// Starts one listening on `listen` (`host:port`, the host resolved),
    /// asking every call for `auth_token` when given: the coordinator a
    /// torchrun world's rank 0 hosts for its ranks. [`LocalCoordinator::address`]
    /// is then `listen` as given, the address the other ranks dial.
    pub async fn start_on(
        listen: &str,
        store_options: StoreOptions,
        auth_token: Option<String>,
    ) -> std::io::Result<Self> {
        let listener = TcpListener::bind(listen).await.map_err(|e| {
            std::io::Error::new(e.kind(), format!("cannot listen on {listen}: {e}"))
        })?;
        Ok(Self::serve(
            listener,
            listen.to_owned(),
            store_options,
            auth_token,
        ))
    }

    fn serve(
        listener: TcpListener,
        address: String,
        store_options: StoreOptions,
        auth_token: Option<String>,
    ) -> Self {
        let (store, election) = memory_store();
        let mut config = ServerConfig::new(address.clone());
        config.store_options = store_options;
        config.auth_token = auth_token;
        // Writes to memory cost nothing: no reason to hold them for a batch.
        config.flush_interval = Duration::ZERO;
        let (shutdown, stop) = oneshot::channel::<()>();
        let task = tokio::spawn(run(listener, store, election, config, async {
            let _ = stop.await;
        }));
        Self {
            address,
            shutdown: Some(shutdown),
            task,
        }
    }

    /// `host:port` the service listens on.
    pub fn address(&self) -> &str {
        &self.address
    }

    /// Stops serving and waits until the server has shut down.
    pub async fn stop(mut self) -> Result<(), tonic::transport::Error> {
        if let Some(shutdown) = self.shutdown.take() {
            let _ = shutdown.send(());
        }
        match (&mut self.task).await {
            Ok(result) => result,
            Err(join) if join.is_cancelled() => Ok(()),
            Err(join) => std::panic::resume_unwind(join.into_panic()),
        }
    }
}

impl Drop for LocalCoordinator {
    fn drop(&mut self) {
        if let Some(shutdown) = self.shutdown.take() {
            let _ = shutdown.send(());
        }
    }
}
