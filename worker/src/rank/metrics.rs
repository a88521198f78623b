//! A rank's `/metrics` endpoint: listen before the rank starts, serve its
//! metrics labelled with the job and the rank once it has.

use std::sync::Arc;

use tokio::net::TcpListener;
use tributary_io::MetricsServer;

use crate::coordinated::Identity;
use crate::pipeline::metrics::{export, Metrics};
use crate::{Result, WorkerError};

/// The constant labels of a rank's series.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Labels {
    job: String,
    rank: String,
}

impl Labels {
    /// The job's name, and the torchrun rank or the member's name (a
    /// rejoined member keeps the name it started with).
    pub(super) fn of(job: &str, identity: &Identity) -> Self {
        let rank = match identity {
            Identity::Torchrun { rank, .. } => rank.to_string(),
            Identity::Name(name) => name.clone(),
        };
        Self {
            job: job.to_owned(),
            rank,
        }
    }
}

/// Listens on `address` (`host:port`), when given.
pub(super) async fn listen(address: Option<String>) -> Result<Option<(TcpListener, String)>> {
    let Some(address) = address else {
        return Ok(None);
    };
    match TcpListener::bind(&address).await {
        Ok(listener) => Ok(Some((listener, address))),
        Err(error) => Err(WorkerError::Listen { address, error }),
    }
}

/// Serves `metrics` on `listener` until the server is dropped.
pub(super) fn serve(
    listener: Option<(TcpListener, String)>,
    metrics: &Arc<Metrics>,
    labels: &Labels,
) -> Result<Option<MetricsServer>> {
    let Some((listener, address)) = listener else {
        return Ok(None);
    };
    let registry = export::registry(Arc::clone(metrics), &labels.job, &labels.rank)
        .map_err(|e| WorkerError::Config(format!("metrics_listen {address}: {e}")))?;
    Ok(Some(MetricsServer::serve(listener, registry)))
}
