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
pub mod state;
pub mod sync;

pub use tributary_common::identity::{DataParallel, EnvError, Identity};
use tributary_common::job::JobSpec;
use tributary_common::proto::v1;

pub use client::{Client, Stub};
pub use credentials::{AuthToken, ClientCredentials, ClientIdentity, ClientTls};
pub use dynamic::{DynamicLoader, DynamicOptions, OnLeaseLost};
pub use session::{MemberScoped, Session, Who};
pub use state::LoaderState;
pub use sync::SyncLoader;
/// The gRPC status code a [`crate::WorkerError::Coordinator`] carries.
pub use tonic::Code;

use crate::error::{Result, WorkerError};
use crate::pipeline::{DecodeConfig, LoaderConfig, PlanConfig};

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

/// The loader's config for `epoch` of a job: its plan is the job's (seed,
/// batch size, shuffle buffer) and `epoch`'s, its decoding the rank's
/// `decode`. The coordinator plans the epoch's remainder, so the loader
/// drops no last batch of its own. Sync and dynamic loaders both read
/// through this (a sync loader then sets its assignment's generation, rank
/// and world, and its stripe).
pub fn loader_config(job: &JobSpec, epoch: u64, decode: &DecodeConfig) -> LoaderConfig {
    LoaderConfig {
        plan: PlanConfig {
            seed: job.seed,
            epoch,
            batch_size: job.batch_size as usize,
            shuffle_buffer: job.shuffle_buffer as usize,
            drop_last: false,
            ..PlanConfig::default()
        },
        decode: decode.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_job_makes_the_plan_and_the_rank_the_decoding() {
        let job = JobSpec {
            seed: 7,
            batch_size: 32,
            shuffle_buffer: 512,
            ..JobSpec::new("memory:///d")
        };
        let decode = DecodeConfig {
            decode_threads: 5,
            ..DecodeConfig::default()
        };
        let config = loader_config(&job, 2, &decode);
        let plan = &config.plan;
        assert_eq!(
            (plan.seed, plan.epoch, plan.batch_size, plan.shuffle_buffer),
            (7, 2, 32, 512)
        );
        assert!(!plan.drop_last, "the coordinator plans the remainder");
        assert_eq!(config.decode.decode_threads, 5);
    }
}
