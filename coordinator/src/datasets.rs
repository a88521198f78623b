//! A job's dataset as the coordinator sees it: its manifests read (all
//! within [`MANIFEST_TIMEOUT`], at most [`Limits::manifest_opens`] at once
//! over the replica, each of at most [`Limits::manifest_bytes`] and parsed
//! off the async runtime), their digests taken, and the layout that
//! planning works on built and checked against [`Limits::check_plan`];
//! and a loaded job's manifests checked against the digests it was created
//! with.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Semaphore;
use tributary_common::ids::JobId;
use tributary_common::plan::mix::{Layout, SourceShape};
use tributary_io::{AnyDataset, IoError, StoreOptions};

use crate::digest::sha256_hex;
use crate::error::{CoordError, Result};
use crate::limits::Limits;
use crate::model::{Dataset, StoredJob};
use tributary_common::job::JobSpec;

/// The longest a manifest read may take while a job loads or is created.
pub const MANIFEST_TIMEOUT: Duration = Duration::from_secs(20);

/// A job's data as planning needs it, with the manifests' digests.
#[derive(Debug)]
pub struct OpenedDataset {
    pub dataset: Dataset,
    /// Samples per epoch.
    pub samples: u64,
    pub crc32c: u32,
    /// SHA-256 of the manifest's canonical JSON, hex; of a mixed job, of
    /// its manifests' digests (`sources`).
    pub sha256: String,
    /// A mixed job's manifests' SHA-256, in source order.
    pub sources: Vec<String>,
}

/// How a replica reads manifests: its store options, its caps, and the
/// permits that bound the manifests read at once.
#[derive(Debug, Clone)]
pub struct Manifests {
    options: StoreOptions,
    limits: Limits,
    opens: Arc<Semaphore>,
}

impl Manifests {
    pub fn new(options: StoreOptions, limits: Limits) -> Self {
        Self {
            opens: Arc::new(Semaphore::new(limits.manifest_opens.max(1))),
            options,
            limits,
        }
    }

    /// The replica's caps.
    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// Opens a job's dataset (or each of its mixed datasets), all within
    /// `MANIFEST_TIMEOUT` (20 s), waiting for permits included; a plan over
    /// the replica's caps is refused before any epoch is built.
    pub async fn open(&self, job: &JobId, config: &JobSpec) -> Result<OpenedDataset> {
        let opened = open_dataset(job, config, self).await?;
        let layout = &opened.dataset.layout;
        self.limits.check_plan(job, config, layout)?;
        self.limits.check_store(job, config, layout)?;
        Ok(opened)
    }
}

async fn open_dataset(
    job: &JobId,
    config: &JobSpec,
    manifests: &Manifests,
) -> Result<OpenedDataset> {
    let failed = |error: String| CoordError::Dataset {
        job: job.clone(),
        error,
    };
    let limit = manifests.limits.manifest_bytes;
    let urls = config.manifest_urls();
    let opens = futures::future::try_join_all(urls.iter().map(|url| async move {
        let _permit = manifests
            .opens
            .acquire()
            .await
            .map_err(|_| failed("the coordinator is shutting down".into()))?;
        let opened = tributary_io::open_any_within(url, &manifests.options, limit)
            .await
            .map_err(|e| match e {
                IoError::TooLarge { .. } => CoordError::Exhausted(format!(
                    "job {:?}: {e}: the coordinator reads manifests of at most {limit} bytes \
                     (--max-manifest-bytes)",
                    job.as_str()
                )),
                e => failed(e.to_string()),
            })?;
        shard_counts(opened, config)
            .await
            .map_err(|e| failed(e.to_string()))
    }));
    let opened: Vec<(Vec<u32>, Vec<u8>)> = tokio::time::timeout(MANIFEST_TIMEOUT, opens)
        .await
        .map_err(|_| {
        failed(format!(
            "the manifest of {} did not arrive within {MANIFEST_TIMEOUT:?}",
            config.describe_data()
        ))
    })??;
    let digests: Vec<(u32, String)> = opened
        .iter()
        .map(|(_, json)| (crc32c::crc32c(json), sha256_hex(json)))
        .collect();
    let counts = |(counts, _): &(Vec<u32>, Vec<u8>)| counts.clone();
    if config.sources.is_empty() {
        let (crc32c, sha256) = digests.into_iter().next().expect("one manifest");
        let layout = Layout::single(counts(&opened[0]));
        return Ok(OpenedDataset {
            samples: layout.epoch_samples(),
            dataset: Dataset {
                layout: Arc::new(layout),
            },
            crc32c,
            sha256,
            sources: Vec::new(),
        });
    }
    let shapes: Vec<SourceShape> = opened
        .iter()
        .zip(&config.sources)
        .map(|(d, source)| SourceShape {
            shard_samples: counts(d),
            take: source.take,
        })
        .collect();
    let layout = Layout::mixed(&shapes, config.epoch_samples)
        .map_err(|e| CoordError::Invalid(format!("config.{e}")))?;
    let sources: Vec<String> = digests.into_iter().map(|(_, sha)| sha).collect();
    let joined = sources.join("\n");
    Ok(OpenedDataset {
        samples: layout.epoch_samples(),
        dataset: Dataset {
            layout: Arc::new(layout),
        },
        crc32c: crc32c::crc32c(joined.as_bytes()),
        sha256: tributary_io::dataset_sha256(&sources, true),
        sources,
    })
}

/// What planning counts in each shard of a dataset (samples; rows of a
/// token job's sequence), and the manifest's canonical JSON for its
/// digest. A token dataset in a sample job, or the reverse, is an error
/// that says what to pass.
async fn shard_counts(
    opened: AnyDataset,
    config: &JobSpec,
) -> std::result::Result<(Vec<u32>, Vec<u8>), String> {
    match (opened, config.sequence) {
        (AnyDataset::Samples(d), None) => {
            let counts = d.manifest.shards.iter().map(|s| s.samples).collect();
            Ok((counts, d.manifest.to_json()))
        }
        (AnyDataset::Tokens(d), Some(sequence)) => {
            let counts = d.shard_rows(sequence).await.map_err(|e| e.to_string())?;
            Ok((counts, d.manifest.to_json()))
        }
        (AnyDataset::Samples(d), Some(_)) => Err(format!(
            "{}: is a sample dataset; sequence_length is for token datasets",
            d.location.url_of("")
        )),
        (AnyDataset::Tokens(d), None) => Err(format!(
            "{}: is a token dataset: the job needs a sequence_length (and packing)",
            d.location.url_of("")
        )),
    }
}

/// A job's stored record, checked: its config within bounds, its manifest
/// the one it was created with.
pub(crate) fn check_stored(name: &JobId, stored: &StoredJob, opened: &OpenedDataset) -> Result<()> {
    let (was, now) = match &stored.manifest_sha256 {
        Some(sha) => (format!("sha256:{sha}"), format!("sha256:{}", opened.sha256)),
        None => (
            format!("crc32c:{:08x}", stored.manifest_crc32c),
            format!("crc32c:{:08x}", opened.crc32c),
        ),
    };
    if was != now {
        // A mixed job names the manifest that changed.
        let urls = stored.config.manifest_urls();
        let changed = stored
            .source_sha256
            .iter()
            .zip(&opened.sources)
            .position(|(then, now)| then != now)
            .and_then(|i| urls.get(i))
            .map(|url| (*url).to_owned())
            .unwrap_or_else(|| urls.join(", "));
        return Err(CoordError::Precondition(format!(
            "job {:?}: the manifest {changed} changed since the job was created ({was} then, {now} now); \
             the plan would change under existing commits: create a new job for the new dataset",
            name.as_str(),
        )));
    }
    Ok(())
}
