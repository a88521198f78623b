//! Members' liveness, judged by the leader: a member lives while it calls
//! (a KeepAlive, or any call the job answers) at least once per its job's
//! `member_ttl_s`, and is forgotten once it has not for that long: its
//! record is deleted and (dynamic) its units return to the pool, in one
//! fenced write like any change.
//!
//! Nothing of it is stored and no member has a store lease, so a member
//! costs the store nothing while it lives: a KeepAlive is answered from
//! memory, however many ranks there are. A leader that takes over gives
//! every member it loads a whole TTL ([`Job::load`]), so a member that
//! stopped calling is forgotten within a TTL of the failover.
//!
//! Members admitted by an earlier coordinator kept their keys under a store
//! lease of their own; nobody renews it any more, so the store deletes them
//! within a TTL, and the leader forgets such a member when it sees that
//! ([`Job::lease_expired`]).

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use tributary_common::ids::MemberId;

use super::effects::Effects;
use super::Job;

/// When each member last called.
pub type Renewals = BTreeMap<MemberId, Instant>;

impl Job {
    /// The members that have not called within the TTL before `now`.
    fn silent(&self, now: Instant) -> impl Iterator<Item = &MemberId> {
        let ttl = self.member_ttl();
        self.renewed
            .iter()
            .filter(move |(_, &at)| now.saturating_duration_since(at) > ttl)
            .map(|(member, _)| member)
    }

    /// Whether a member has not called within the TTL before `now`.
    pub fn any_expired(&self, now: Instant) -> bool {
        self.silent(now).next().is_some()
    }

    /// Forgets every member that has not called within the TTL before
    /// `now`: the effects delete their records and return their units.
    /// Returns the members forgotten with them.
    pub fn expire(&mut self, now: Instant) -> (Vec<MemberId>, Effects) {
        let expired: Vec<MemberId> = self.silent(now).cloned().collect();
        let mut effects = Effects::default();
        for member in &expired {
            let lease = self.members.get(member).and_then(|r| r.store_lease());
            effects.extend(self.remove_member(member));
            effects.revoke.extend(lease);
            effects.tally.leases_expired += 1;
        }
        (expired, effects)
    }

    /// The leader did not look for `stalled` (its process was stopped, or
    /// starved of CPU): the members' calls meanwhile waited unanswered, so
    /// each member gets that time back rather than being expired for the
    /// leader's silence.
    pub fn grace(&mut self, stalled: Duration) {
        for at in self.renewed.values_mut() {
            *at += stalled;
        }
    }

    /// Whether a member's record is under a store lease (an earlier
    /// coordinator's): only then can the store delete it by itself.
    pub fn has_leased_members(&self) -> bool {
        self.members.values().any(|r| r.store_lease().is_some())
    }

    /// The store no longer has the record of `member`: forget the member
    /// if its record is under a store lease (an earlier coordinator's, which
    /// expired). Nothing is left to write. A record under no lease is the
    /// leader's alone to delete: one missing is a write still queued, or a
    /// delete seen late of a member that has since joined again.
    pub fn lease_expired(&mut self, member: &MemberId) -> Effects {
        if self
            .members
            .get(member)
            .and_then(|r| r.store_lease())
            .is_none()
        {
            return Effects::default();
        }
        let mut effects = self.remove_member(member);
        // The member's key and its leased units went with the lease.
        effects.ops.clear();
        effects.tally.leases_expired = 1;
        effects
    }
}
