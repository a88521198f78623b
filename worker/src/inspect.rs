//! The inspector: dataset statistics plus a full verification of every
//! shard against the manifest (object checksum, chunk checksums, tar
//! structure, sample counts).

use std::sync::Arc;

use futures::stream::{self, StreamExt};
use tributary_common::shard::verify_shard;

use crate::dataset::Dataset;
use crate::error::WorkerError;
use crate::progress::Progress;

/// What [`inspect`] found. `problems` is empty for a healthy dataset.
#[derive(Debug, Clone, Default)]
pub struct InspectReport {
    pub shards: usize,
    pub samples: u64,
    pub bytes: u64,
    pub min_shard_samples: u32,
    pub max_shard_samples: u32,
    pub verified_shards: usize,
    pub verified_samples: u64,
    /// One line per shard that failed, naming shard, chunk and offset.
    pub problems: Vec<String>,
}

/// Reads every shard of `dataset` and verifies it.
pub async fn inspect(dataset: &Dataset, progress: Arc<dyn Progress>) -> InspectReport {
    let manifest = Arc::clone(&dataset.manifest);
    let mut report = InspectReport {
        shards: manifest.shards.len(),
        samples: manifest.samples,
        bytes: manifest.bytes,
        min_shard_samples: manifest.shards.iter().map(|s| s.samples).min().unwrap_or(0),
        max_shard_samples: manifest.shards.iter().map(|s| s.samples).max().unwrap_or(0),
        ..InspectReport::default()
    };
    progress.total(manifest.samples, manifest.bytes);
    let mut results = stream::iter(0..manifest.shards.len())
        .map(|i| {
            let manifest = Arc::clone(&manifest);
            let progress = Arc::clone(&progress);
            async move {
                let meta = &manifest.shards[i];
                let data = dataset.location.get(&meta.name).await?;
                let len = data.len() as u64;
                let checked = tokio::task::spawn_blocking(move || {
                    verify_shard(&manifest.shards[i], manifest.compression, &data)
                })
                .await
                .map_err(|e| WorkerError::Stopped(format!("verifier panicked: {e}")))??;
                progress.advance(u64::from(checked), len);
                Ok::<_, WorkerError>(checked)
            }
        })
        .buffered(4);
    while let Some(result) = results.next().await {
        match result {
            Ok(samples) => {
                report.verified_shards += 1;
                report.verified_samples += u64::from(samples);
            }
            Err(error) => report.problems.push(error.to_string()),
        }
    }
    report
}
