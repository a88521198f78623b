//! A manifest changed in place while its job runs: the leader plans from
//! the manifest it read when it loaded the job, so until a failover it
//! would keep serving the old plan to ranks reading the new data. Each
//! rank sends the digest of the dataset it opened with its Join; one other
//! than the job's makes the leader read the job's manifests again (at most
//! once per [`RECHECK_EVERY`] per job, through the replica's manifest-read
//! permits and deadline): changed since the job was created, the job fails
//! (every later call of it says why, as a failover would); unchanged, the
//! Join is refused: the rank reads another copy.

use std::time::{Duration, Instant};

use tributary_common::ids::JobId;

use super::{Leader, Slot};
use crate::datasets::check_stored;
use crate::error::{CoordError, Result};

/// The least time between two reads of one job's manifests that ranks'
/// digests ask for: a client sending wrong digests cannot make the leader
/// read manifests faster than this.
pub(super) const RECHECK_EVERY: Duration = Duration::from_secs(30);

impl Leader {
    /// Checks `rank_sha256`, the digest of the dataset a joining rank
    /// opened (`None`: not given), against job `name`'s.
    pub async fn check_manifest(&self, name: &JobId, rank_sha256: Option<&str>) -> Result<()> {
        let Some(rank_sha256) = rank_sha256 else {
            return Ok(());
        };
        let handle = self.job(name).await?;
        let stored = handle.job.lock().await.stored.clone();
        // A job recorded before digests were (crc32c only) is not checked.
        let Some(recorded) = stored.manifest_sha256.clone() else {
            return Ok(());
        };
        if recorded == rank_sha256 {
            return Ok(());
        }
        let other_copy = || {
            CoordError::Precondition(format!(
                "job {:?}: this rank opened a dataset of digest sha256:{rank_sha256}, the job was \
                 created with sha256:{recorded} and its manifest ({}) still reads so: the rank \
                 reads another copy of the data (another URL, a stale cache, another store \
                 endpoint?); give it the job's dataset",
                name.as_str(),
                stored.config.describe_data(),
            ))
        };
        {
            let mut checked = handle.manifest_checked.lock().await;
            if checked.is_some_and(|at| at.elapsed() < RECHECK_EVERY) {
                return Err(other_copy());
            }
            *checked = Some(Instant::now());
        }
        let opened = self.manifests.open(name, &stored.config).await?;
        match check_stored(name, &stored, &opened) {
            Ok(()) => Err(other_copy()),
            Err(changed) => {
                let reason = changed.to_string();
                tracing::error!(job = name.as_str(), %reason, "a rank found the job's manifest changed: the job fails");
                let mut jobs = self.jobs.lock().await;
                if matches!(jobs.get(name), Some(Slot::Ready(h)) if std::sync::Arc::ptr_eq(h, &handle))
                {
                    jobs.insert(name.clone(), Slot::Failed(reason.clone()));
                }
                Err(CoordError::JobFailed {
                    job: name.clone(),
                    reason,
                })
            }
        }
    }
}
