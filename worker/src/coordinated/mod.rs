//! Loading under a coordinator: join a job, keep the membership alive, and
//! read what the coordinator assigns.
//!
//! - [`client`]: a leader-following gRPC client, with deadlines and
//!   keep-alive; [`credentials`]: its bearer token and TLS settings.
//! - [`Session`]: one membership of one job (its member secret included),
//!   renewed in the background.
//! - [`sync`]: [`SyncLoader`], equal parts per generation (torchrun, DDP),
//!   with `state_dict()` / `commit()` / `load_state_dict()` for checkpoints.
//! - [`dynamic`]: [`DynamicLoader`], units leased from the pool and acked
//!   once every sample of a unit has reached the consumer.

pub mod client;
pub mod credentials;
pub mod dynamic;
mod session;
pub mod sync;

pub use tributary_common::identity::{EnvError, Identity};
use tributary_common::proto::v1;

pub use client::{Client, Stub};
pub use credentials::{AuthToken, ClientCredentials, ClientIdentity, ClientTls};
pub use dynamic::{DynamicLoader, DynamicOptions, OnLeaseLost};
pub use session::{MemberScoped, Session};
pub use sync::{LoaderState, SyncLoader};

use crate::error::{Result, WorkerError};

/// The torchrun environment's errors read as the worker's configuration
/// errors, with the same message.
impl From<EnvError> for WorkerError {
    fn from(error: EnvError) -> Self {
        WorkerError::Config(error.to_string())
    }
}

/// Creates `job` (or checks that it exists with this config).
pub async fn create_job(
    client: &Client,
    job: &str,
    config: v1::JobConfig,
) -> Result<v1::CreateJobResponse> {
    client
        .call(|mut c| {
            let request = v1::CreateJobRequest {
                job: job.to_owned(),
                config: Some(config.clone()),
            };
            async move { c.create_job(request).await }
        })
        .await
}
