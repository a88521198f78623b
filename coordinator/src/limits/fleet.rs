//! The members of every job a leader holds, counted together: each is a
//! key in etcd and a KeepAlive call to answer every third of its job's
//! `member_ttl_s` (from memory: `model::liveness`), so the whole fleet, not
//! one job, is what fills etcd's quota or floods the leader with renewals.
//!
//! A [`Job`](crate::model::Job) counts its members into the leader's
//! [`Fleet`] as they join and leave, and takes them out when it is dropped
//! (a leadership ending, a reload, a deletion), so the count is of the jobs
//! the leader holds, by construction.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use tributary_common::ids::JobId;

use super::Limits;
use crate::error::{CoordError, Result};

/// KeepAlives per second, in thousandths, that one member of a job of
/// `ttl_s` costs: its client renews every `ttl_s / 3`.
fn renewal_milli(ttl_s: u32) -> u64 {
    3_000 / u64::from(ttl_s.max(1))
}

#[derive(Debug, Default)]
struct Count {
    members: AtomicU64,
    renewal_milli: AtomicU64,
}

/// The leader's members over all jobs, and its caps on them.
#[derive(Debug, Clone)]
pub struct Fleet {
    count: Arc<Count>,
    /// `--max-members`.
    members: u64,
    /// `--max-lease-renewals`, per second.
    renewals: u64,
}

impl Default for Fleet {
    /// A fleet of its own with no caps (a job outside any leader: tests,
    /// tools).
    fn default() -> Self {
        Self {
            count: Arc::default(),
            members: u64::MAX,
            renewals: u64::MAX / 1000,
        }
    }
}

impl Fleet {
    pub fn new(limits: &Limits) -> Self {
        Self {
            count: Arc::default(),
            members: limits.members,
            renewals: limits.lease_renewals,
        }
    }

    /// Members counted now.
    pub fn members(&self) -> u64 {
        self.count.members.load(Ordering::Relaxed)
    }

    /// Lease renewals per second the counted members cost.
    pub fn renewals(&self) -> f64 {
        self.count.renewal_milli.load(Ordering::Relaxed) as f64 / 1000.0
    }

    /// Counts `n` members of a job of `ttl_s` in.
    pub fn add(&self, n: u64, ttl_s: u32) {
        self.count.members.fetch_add(n, Ordering::Relaxed);
        self.count
            .renewal_milli
            .fetch_add(n * renewal_milli(ttl_s), Ordering::Relaxed);
    }

    /// Counts `n` members of a job of `ttl_s` out.
    pub fn remove(&self, n: u64, ttl_s: u32) {
        self.count.members.fetch_sub(n, Ordering::Relaxed);
        self.count
            .renewal_milli
            .fetch_sub(n * renewal_milli(ttl_s), Ordering::Relaxed);
    }

    /// Refuses one more member of `job` (whose `member_ttl_s` is `ttl_s`)
    /// past either cap. Checked under the job's lock, not the fleet's: joins
    /// of different jobs at the same instant may pass it together, so the
    /// count may overshoot by the joins in flight, never more.
    pub fn check_room(&self, job: &JobId, ttl_s: u32) -> Result<()> {
        let members = self.members();
        if members >= self.members {
            return Err(CoordError::Exhausted(format!(
                "cannot add a member to job {:?}: this coordinator holds {members} members over \
                 all its jobs, its cap (--max-members {}); each is an etcd lease and key. Wait \
                 for members to leave, delete finished jobs, or raise the cap",
                job.as_str(),
                self.members
            )));
        }
        let milli = self.count.renewal_milli.load(Ordering::Relaxed) + renewal_milli(ttl_s);
        if milli > self.renewals.saturating_mul(1000) {
            return Err(CoordError::Exhausted(format!(
                "cannot add a member to job {:?}: its lease (member_ttl_s {ttl_s}, renewed every \
                 {:.1} s) would bring the renewals of every member's lease to {:.0} per second, \
                 over this coordinator's cap (--max-lease-renewals {}); give jobs a longer \
                 member_ttl_s, or raise the cap",
                job.as_str(),
                f64::from(ttl_s) / 3.0,
                milli as f64 / 1000.0,
                self.renewals
            )));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fleet_refuses_members_past_either_cap_and_counts_them_out_again() {
        let fleet = Fleet::new(&Limits {
            members: 3,
            lease_renewals: 1,
            ..Limits::default()
        });
        let job = JobId::from("j");
        // Three members of a 10 s job: 0.9 renewals a second.
        fleet.check_room(&job, 10).expect("room");
        fleet.add(3, 10);
        let error = fleet.check_room(&job, 10).expect_err("full").to_string();
        assert!(error.contains("--max-members 3"), "{error}");
        fleet.remove(2, 10);
        // One member of a 1 s job renews 3 times a second: over the cap.
        let error = fleet.check_room(&job, 1).expect_err("renewals").to_string();
        assert!(error.contains("--max-lease-renewals 1"), "{error}");
        assert!(error.contains("member_ttl_s 1"), "{error}");
        fleet.check_room(&job, 10).expect("0.6 renewals a second");
        fleet.remove(1, 10);
        assert_eq!((fleet.members(), fleet.renewals()), (0, 0.0));
    }
}
