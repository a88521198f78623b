//! What one replica agrees to hold: caps on everything a caller can make
//! the coordinator keep in memory or in the store. A request over a cap is
//! refused with RESOURCE_EXHAUSTED naming the cap and its flag; a stored
//! job over a cap (one created under larger caps) fails alone when it
//! loads, never the replica.

use tributary_common::ids::JobId;
use tributary_common::job::{JobSpec, Mode};
use tributary_common::plan::mix::Layout;

use crate::config::{MAX_HISTORY, MAX_WORLD};
use crate::error::{CoordError, Result};
use crate::keys::{MAX_JOB_NAME, MAX_MEMBER_NAME};

mod fleet;

pub use fleet::Fleet;

/// The caps, each set by a `tributary coordinator` flag.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Jobs the replica holds, loaded or failed (`--max-jobs`).
    pub jobs: usize,
    /// Live members of one job (`--max-members-per-job`).
    pub members_per_job: usize,
    /// Units (dynamic) or spans (sync) one epoch of one job is planned
    /// into (`--max-units-per-epoch`): the plan of an epoch is built in
    /// memory, about 30 bytes per unit.
    pub units_per_epoch: u64,
    /// Bytes of one manifest the coordinator reads and parses
    /// (`--max-manifest-bytes`), separately from the ranks' larger bound.
    pub manifest_bytes: u64,
    /// Manifests read at once, over every CreateJob and job load.
    pub manifest_opens: usize,
    /// Live members over every job (`--max-members`): each is an etcd
    /// lease and key ([`Fleet`]).
    pub members: u64,
    /// Lease renewals per second the members of every job may cost
    /// (`--max-lease-renewals`): a member renews every third of its job's
    /// `member_ttl_s`.
    pub lease_renewals: u64,
    /// The most one job may keep in etcd at once, counted from its plan
    /// and caps before it is created ([`Limits::check_store`],
    /// `--max-job-store-bytes`).
    pub job_store_bytes: u64,
}

/// Bytes in etcd, at most, of one member's key and record (its name of up
/// to `MAX_MEMBER_NAME` bytes, identity, lease and secret digest), of one
/// dynamic unit's lease or ack key (the member's name as its value), and of
/// one sync generation or one rank's entry in the progress and commit keys.
const MEMBER_BYTES: u64 = 640;
const UNIT_BYTES: u64 = 48 + MAX_JOB_NAME as u64 + MAX_MEMBER_NAME as u64;
const GENERATION_BYTES: u64 = 256;
const RANK_BYTES: u64 = 96;

impl Default for Limits {
    fn default() -> Self {
        Self {
            jobs: 1024,
            members_per_job: 65_536,
            units_per_epoch: 1 << 22,
            manifest_bytes: 256 << 20,
            manifest_opens: 4,
            members: 262_144,
            lease_renewals: 20_000,
            job_store_bytes: 512 << 20,
        }
    }
}

/// The most units one epoch of a dynamic job is planned into: its shard
/// spans (a unit never crosses one) plus one per `unit_samples`.
fn dynamic_units(config: &JobSpec, layout: &Layout) -> u64 {
    layout
        .max_epoch_spans()
        .saturating_add(layout.epoch_samples() / u64::from(config.unit_samples))
}

impl Limits {
    /// Refuses a job whose epoch would plan into more units (or spans)
    /// than the cap: checked from the layout's counts, before any epoch
    /// is built.
    pub fn check_plan(&self, job: &JobId, config: &JobSpec, layout: &Layout) -> Result<()> {
        let (what, count) = match config.mode {
            Mode::Dynamic => (
                format!(
                    "units of {} samples (config.unit_samples)",
                    config.unit_samples
                ),
                dynamic_units(config, layout),
            ),
            Mode::Sync => ("shard spans".to_owned(), layout.max_epoch_spans()),
        };
        if count > self.units_per_epoch {
            return Err(CoordError::Exhausted(format!(
                "job {:?}: an epoch of {} samples would be planned into up to {count} {what}; \
                 this coordinator's cap is {} per epoch (--max-units-per-epoch): use larger \
                 units, fewer repeats, or raise the cap",
                job.as_str(),
                layout.epoch_samples(),
                self.units_per_epoch,
            )));
        }
        Ok(())
    }

    /// Refuses a job that could keep more than `--max-job-store-bytes` in
    /// etcd: its members (up to `--max-members-per-job`), and a dynamic
    /// epoch's unit keys (one per unit, leased or acked) or a sync job's
    /// generations (a chain of at most `MAX_HISTORY` per epoch) and
    /// per-rank progress and commits. Each is counted at its largest, so
    /// what etcd holds stays under the cap whatever the callers do.
    pub fn check_store(&self, job: &JobId, config: &JobSpec, layout: &Layout) -> Result<()> {
        let members = self.members_per_job as u64 * MEMBER_BYTES;
        let (data, what) = match config.mode {
            Mode::Dynamic => (
                dynamic_units(config, layout).saturating_mul(UNIT_BYTES),
                "units' lease and ack keys",
            ),
            Mode::Sync => (
                MAX_HISTORY as u64 * GENERATION_BYTES + 2 * u64::from(MAX_WORLD) * RANK_BYTES,
                "generations and ranks' progress and commits",
            ),
        };
        let bytes = members.saturating_add(data);
        if bytes > self.job_store_bytes {
            return Err(CoordError::Exhausted(format!(
                "job {:?} could keep up to {bytes} bytes in etcd ({members} for up to {} members \
                 of {MEMBER_BYTES}, {data} for its {what}), over this coordinator's cap per \
                 job (--max-job-store-bytes {}): use larger units (config.unit_samples), a \
                 smaller epoch, or raise the cap",
                job.as_str(),
                self.members_per_job,
                self.job_store_bytes,
            )));
        }
        Ok(())
    }

    /// Refuses a new job when the replica holds `held` already.
    pub fn check_jobs(&self, job: &JobId, held: usize) -> Result<()> {
        if held >= self.jobs {
            return Err(CoordError::Exhausted(format!(
                "cannot create job {:?}: this coordinator holds {held} jobs, its cap \
                 (--max-jobs {}); delete finished jobs (`tributary job delete`) or raise the cap",
                job.as_str(),
                self.jobs
            )));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tributary_common::plan::mix::{SourceShape, Take};

    fn spec(mode: Mode, unit_samples: u32) -> JobSpec {
        let mut spec = JobSpec::new("memory:///d/manifest.json");
        spec.mode = mode;
        spec.unit_samples = unit_samples;
        spec
    }

    #[test]
    fn a_dynamic_job_of_one_sample_units_over_a_repeated_tiny_dataset_is_refused() {
        // The reproduction: 200 samples taken 200,000,000 times, units of 1.
        let layout = Layout::mixed(
            &[SourceShape {
                shard_samples: vec![200],
                take: Take::Samples(200_000_000),
            }],
            0,
        )
        .expect("a valid mix");
        let job = JobId::from("bomb");
        let limits = Limits::default();
        let error = limits
            .check_plan(&job, &spec(Mode::Dynamic, 1), &layout)
            .expect_err("over the cap")
            .to_string();
        assert!(error.contains("--max-units-per-epoch"), "{error}");
        assert!(error.contains("200000000 samples"), "{error}");
        // The same epoch in units of 1,024 samples fits.
        limits
            .check_plan(&job, &spec(Mode::Dynamic, 1024), &layout)
            .expect("within the cap");
    }

    #[test]
    fn the_cap_is_inclusive_and_counts_spans_in_sync_jobs() {
        let layout = Layout::single(vec![10; 100]);
        let job = JobId::from("j");
        let exact = Limits {
            units_per_epoch: 100,
            ..Limits::default()
        };
        exact
            .check_plan(&job, &spec(Mode::Sync, 1), &layout)
            .expect("100 spans within a cap of 100");
        let error = Limits {
            units_per_epoch: 99,
            ..exact
        }
        .check_plan(&job, &spec(Mode::Sync, 1), &layout)
        .expect_err("over");
        assert!(matches!(error, CoordError::Exhausted(_)), "{error}");
    }

    #[test]
    fn a_job_that_could_outgrow_its_etcd_share_is_refused_naming_the_cap() {
        let layout = Layout::single(vec![1000; 1000]);
        let job = JobId::from("j");
        let limits = Limits {
            members_per_job: 1000,
            job_store_bytes: 64 << 20,
            ..Limits::default()
        };
        // A million units of one sample: about 370 MB of keys.
        let error = limits
            .check_store(&job, &spec(Mode::Dynamic, 1), &layout)
            .expect_err("over")
            .to_string();
        assert!(error.contains("--max-job-store-bytes 67108864"), "{error}");
        assert!(error.contains("units' lease and ack keys"), "{error}");
        // Units of 64 samples fit, and so does the sync job.
        for (mode, unit) in [(Mode::Dynamic, 64), (Mode::Sync, 1)] {
            limits
                .check_store(&job, &spec(mode, unit), &layout)
                .expect("within");
        }
        // By default a job's etcd share binds before `--max-units-per-epoch`
        // for one-sample units: a million fit, four do not.
        let defaults = Limits::default();
        let million = Layout::single(vec![1 << 18; 4]);
        defaults
            .check_store(&job, &spec(Mode::Dynamic, 1), &million)
            .expect("a million one-sample units");
        let largest = Layout::single(vec![1_000_000; 4]);
        defaults
            .check_plan(&job, &spec(Mode::Dynamic, 1), &largest)
            .expect("within --max-units-per-epoch");
        let error = defaults
            .check_store(&job, &spec(Mode::Dynamic, 1), &largest)
            .expect_err("over the etcd share")
            .to_string();
        assert!(error.contains("--max-job-store-bytes"), "{error}");
    }

    #[test]
    fn the_job_cap_names_its_flag() {
        let limits = Limits {
            jobs: 2,
            ..Limits::default()
        };
        let job = JobId::from("j");
        limits.check_jobs(&job, 1).expect("room");
        let error = limits.check_jobs(&job, 2).expect_err("full").to_string();
        assert!(error.contains("--max-jobs 2"), "{error}");
    }
}
