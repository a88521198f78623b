//! The coordinator's caps on what callers can make it hold
//! (`tributary_coordinator::limits`).

use tributary_coordinator::limits::Limits;
use tributary_coordinator::transport;

use crate::pipeline_args::u64_in;

#[derive(Debug, clap::Args)]
pub struct LimitArgs {
    /// Jobs this coordinator holds at most (created, loaded or failed); a
    /// CreateJob past it is refused (RESOURCE_EXHAUSTED) until finished
    /// jobs are deleted.
    #[arg(long, env = "TRIBUTARY_MAX_JOBS", default_value_t = Limits::default().jobs as u64,
          value_parser = u64_in(1, 1 << 20))]
    max_jobs: u64,
    /// Live members one job may have at most; a Join past it is refused.
    #[arg(long, env = "TRIBUTARY_MAX_MEMBERS_PER_JOB",
          default_value_t = Limits::default().members_per_job as u64,
          value_parser = u64_in(1, 1 << 20))]
    max_members_per_job: u64,
    /// Live members over every job; a Join past it is refused. Each is an
    /// etcd lease and key.
    #[arg(long, env = "TRIBUTARY_MAX_MEMBERS",
          default_value_t = Limits::default().members,
          value_parser = u64_in(1, 1 << 24))]
    max_members: u64,
    /// Lease renewals per second the members of every job may cost (a
    /// member renews every third of its job's member_ttl_s); a Join past it
    /// is refused.
    #[arg(long, env = "TRIBUTARY_MAX_LEASE_RENEWALS",
          default_value_t = Limits::default().lease_renewals,
          value_parser = u64_in(1, 1 << 24))]
    max_lease_renewals: u64,
    /// Bytes one job may keep in etcd at most, counted from its plan
    /// before it is created (members at their cap, a dynamic epoch's unit
    /// keys, a sync job's generations and ranks); a CreateJob past it is
    /// refused, and a stored job past it fails alone when it loads.
    #[arg(long, env = "TRIBUTARY_MAX_JOB_STORE_BYTES",
          default_value_t = Limits::default().job_store_bytes,
          value_parser = u64_in(1 << 20, 1 << 40))]
    max_job_store_bytes: u64,
    /// Units (dynamic jobs) or shard spans (sync jobs) one epoch of a job
    /// may be planned into: each costs about 30 bytes of the coordinator's
    /// memory while its epoch is open.
    #[arg(long, env = "TRIBUTARY_MAX_UNITS_PER_EPOCH",
          default_value_t = Limits::default().units_per_epoch,
          value_parser = u64_in(1, 1 << 30))]
    max_units_per_epoch: u64,
    /// Bytes of one manifest the coordinator reads and parses (ranks read
    /// manifests of up to 1 GiB; the coordinator keeps every job's).
    #[arg(long, env = "TRIBUTARY_MAX_MANIFEST_BYTES",
          default_value_t = Limits::default().manifest_bytes,
          value_parser = u64_in(1 << 10, 1 << 30))]
    max_manifest_bytes: u64,
    /// Manifests read at once, over every CreateJob and job load.
    #[arg(long, env = "TRIBUTARY_MAX_MANIFEST_READS",
          default_value_t = Limits::default().manifest_opens as u64,
          value_parser = u64_in(1, 256))]
    max_manifest_reads: u64,
    /// Connections each port holds at once; one more is closed as it is
    /// accepted. A connection that makes no valid call within 10 s of
    /// opening is closed.
    #[arg(long, env = "TRIBUTARY_MAX_CONNECTIONS",
          default_value_t = transport::Limits::default().connections as u64,
          value_parser = u64_in(16, 1 << 20))]
    max_connections: u64,
}

impl LimitArgs {
    pub fn limits(&self) -> Limits {
        Limits {
            jobs: self.max_jobs as usize,
            members_per_job: self.max_members_per_job as usize,
            units_per_epoch: self.max_units_per_epoch,
            manifest_bytes: self.max_manifest_bytes,
            manifest_opens: self.max_manifest_reads as usize,
            members: self.max_members,
            lease_renewals: self.max_lease_renewals,
            job_store_bytes: self.max_job_store_bytes,
        }
    }

    /// The bounds of each listening port.
    pub fn connections(&self) -> transport::Limits {
        transport::Limits {
            connections: self.max_connections as usize,
            ..transport::Limits::default()
        }
    }

    /// One line, as `--check` prints it.
    pub fn describe(&self) -> String {
        format!(
            "caps          {} jobs, {} members per job, {} members, {} lease renewals/s, {} etcd bytes per job, {} units per epoch, manifests of {} bytes, {} read at once, {} connections",
            self.max_jobs,
            self.max_members_per_job,
            self.max_members,
            self.max_lease_renewals,
            self.max_job_store_bytes,
            self.max_units_per_epoch,
            self.max_manifest_bytes,
            self.max_manifest_reads,
            self.max_connections
        )
    }
}
