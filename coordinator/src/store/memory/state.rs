//! The state machine behind [`super::MemoryStore`]: keys, leases and the
//! event history, with etcd's rules. Pure: every function that looks at time
//! takes `now`, so unit tests need no clock.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::ops::Bound;
use std::time::Duration;

use tokio::time::Instant;

use crate::store::{
    Compare, KeyValue, LeaseId, Op, StoreError, StoreResult, TxnOutcome, WatchEvent, MAX_TXN_OPS,
};

/// How many events the history keeps for watches that start in the past
/// or fall behind; older revisions count as compacted.
pub(super) const HISTORY_CAPACITY: usize = 10_000;

#[derive(Debug)]
struct Lease {
    ttl: Duration,
    deadline: Instant,
    keys: BTreeSet<String>,
}

#[derive(Debug)]
pub(super) struct State {
    revision: i64,
    kvs: BTreeMap<String, KeyValue>,
    leases: HashMap<LeaseId, Lease>,
    next_lease: LeaseId,
    /// Events in revision order; a transaction's events share a revision.
    history: VecDeque<WatchEvent>,
    /// The newest revision whose events may be missing from `history`.
    compacted: i64,
    history_capacity: usize,
}

impl Default for State {
    fn default() -> Self {
        Self::with_history(HISTORY_CAPACITY)
    }
}

/// The revision an event happened at.
fn event_revision(event: &WatchEvent) -> i64 {
    match event {
        WatchEvent::Put(kv) => kv.mod_revision,
        WatchEvent::Delete { mod_revision, .. } => *mod_revision,
    }
}

fn event_key(event: &WatchEvent) -> &str {
    match event {
        WatchEvent::Put(kv) => &kv.key,
        WatchEvent::Delete { key, .. } => key,
    }
}

impl State {
    pub(super) fn with_history(history_capacity: usize) -> Self {
        Self {
            revision: 1,
            kvs: BTreeMap::new(),
            leases: HashMap::new(),
            next_lease: 1,
            history: VecDeque::new(),
            compacted: 0,
            history_capacity,
        }
    }

    pub(super) fn revision(&self) -> i64 {
        self.revision
    }

    pub(super) fn get(&self, key: &str) -> Option<KeyValue> {
        self.kvs.get(key).cloned()
    }

    pub(super) fn range(&self, prefix: &str) -> Vec<KeyValue> {
        self.kvs
            .range::<str, _>((Bound::Included(prefix), Bound::Unbounded))
            .take_while(|(key, _)| key.starts_with(prefix))
            .map(|(_, kv)| kv.clone())
            .collect()
    }

    /// Checks `compares`, then applies `ops` in one revision. Like etcd, a
    /// transaction that changes nothing leaves the revision alone.
    pub(super) fn txn(&mut self, compares: &[Compare], ops: &[Op]) -> StoreResult<TxnOutcome> {
        let too_many = compares.len().max(ops.len());
        if too_many > MAX_TXN_OPS {
            return Err(StoreError::TooManyOps(too_many));
        }
        check_distinct_keys(ops)?;
        let succeeded = compares.iter().all(|compare| self.holds(compare));
        if succeeded {
            self.apply(ops)?;
        }
        Ok(TxnOutcome {
            succeeded,
            revision: self.revision,
        })
    }

    fn holds(&self, compare: &Compare) -> bool {
        match compare {
            Compare::ModRevision { key, revision } => {
                self.kvs.get(key).map_or(0, |kv| kv.mod_revision) == *revision
            }
            Compare::CreateRevision { key, revision } => {
                self.kvs.get(key).map_or(0, |kv| kv.create_revision) == *revision
            }
        }
    }

    fn apply(&mut self, ops: &[Op]) -> StoreResult<()> {
        for op in ops {
            if let Op::Put {
                lease: Some(lease), ..
            } = op
            {
                if !self.leases.contains_key(lease) {
                    return Err(StoreError::LeaseNotFound(*lease));
                }
            }
        }
        let revision = self.revision + 1;
        let mut changed = false;
        for op in ops {
            match op {
                Op::Put { key, value, lease } => {
                    self.put_key(key, value.clone(), lease.unwrap_or(0), revision);
                    changed = true;
                }
                Op::Delete { key } => changed |= self.delete_key(key, revision),
                Op::DeletePrefix { prefix } => {
                    let keys: Vec<String> =
                        self.range(prefix).into_iter().map(|kv| kv.key).collect();
                    for key in keys {
                        changed |= self.delete_key(&key, revision);
                    }
                }
            }
        }
        if changed {
            self.revision = revision;
        }
        Ok(())
    }

    fn put_key(&mut self, key: &str, value: Vec<u8>, lease: LeaseId, revision: i64) {
        let old = self
            .kvs
            .get(key)
            .map(|old| (old.lease, old.create_revision));
        let create_revision = match old {
            Some((old_lease, create_revision)) => {
                if old_lease != lease {
                    self.detach(old_lease, key);
                }
                create_revision
            }
            None => revision,
        };
        if let Some(attached) = self.leases.get_mut(&lease) {
            attached.keys.insert(key.to_owned());
        }
        let kv = KeyValue {
            key: key.to_owned(),
            value,
            create_revision,
            mod_revision: revision,
            lease,
        };
        self.record(WatchEvent::Put(kv.clone()));
        self.kvs.insert(key.to_owned(), kv);
    }

    fn delete_key(&mut self, key: &str, revision: i64) -> bool {
        let Some(old) = self.kvs.remove(key) else {
            return false;
        };
        self.detach(old.lease, key);
        self.record(WatchEvent::Delete {
            key: key.to_owned(),
            mod_revision: revision,
        });
        true
    }

    fn detach(&mut self, lease: LeaseId, key: &str) {
        if let Some(lease) = self.leases.get_mut(&lease) {
            lease.keys.remove(key);
        }
    }

    fn record(&mut self, event: WatchEvent) {
        self.history.push_back(event);
        while self.history.len() > self.history_capacity {
            if let Some(dropped) = self.history.pop_front() {
                self.compacted = event_revision(&dropped);
            }
        }
    }

    /// Events on keys under `prefix` from revision `from` on, or `Err` with
    /// the compacted revision when some of them are no longer kept.
    pub(super) fn events_since(&self, prefix: &str, from: i64) -> Result<Vec<WatchEvent>, i64> {
        if from <= self.compacted {
            return Err(self.compacted);
        }
        let start = self.history.partition_point(|e| event_revision(e) < from);
        Ok(self
            .history
            .range(start..)
            .filter(|e| event_key(e).starts_with(prefix))
            .cloned()
            .collect())
    }

    /// Grants a lease of `ttl` from `now`.
    pub(super) fn grant(&mut self, ttl: Duration, now: Instant) -> LeaseId {
        let id = self.next_lease;
        self.next_lease += 1;
        let lease = Lease {
            ttl,
            deadline: now + ttl,
            keys: BTreeSet::new(),
        };
        self.leases.insert(id, lease);
        id
    }

    /// Renews `lease` from `now`; returns its TTL.
    pub(super) fn keep_alive(&mut self, lease: LeaseId, now: Instant) -> StoreResult<Duration> {
        let found = self
            .leases
            .get_mut(&lease)
            .ok_or(StoreError::LeaseNotFound(lease))?;
        found.deadline = now + found.ttl;
        Ok(found.ttl)
    }

    /// Revokes `lease` and deletes its keys in one revision.
    pub(super) fn revoke(&mut self, lease: LeaseId) {
        let Some(revoked) = self.leases.remove(&lease) else {
            return;
        };
        let revision = self.revision + 1;
        let mut changed = false;
        for key in &revoked.keys {
            changed |= self.delete_key(key, revision);
        }
        if changed {
            self.revision = revision;
        }
    }

    /// Revokes every lease whose deadline has passed at `now`, earliest
    /// first, each in its own revision (as etcd does).
    pub(super) fn expire(&mut self, now: Instant) {
        let mut expired: Vec<(Instant, LeaseId)> = self
            .leases
            .iter()
            .filter(|(_, lease)| lease.deadline <= now)
            .map(|(id, lease)| (lease.deadline, *id))
            .collect();
        expired.sort_unstable();
        for (_, id) in expired {
            self.revoke(id);
        }
    }

    /// When the next lease expires, if any lease exists.
    pub(super) fn next_deadline(&self) -> Option<Instant> {
        self.leases.values().map(|lease| lease.deadline).min()
    }
}

/// etcd rejects a transaction that puts a key twice, or puts a key that
/// one of its deletes also covers.
fn check_distinct_keys(ops: &[Op]) -> StoreResult<()> {
    let mut puts = BTreeSet::new();
    for op in ops {
        if let Op::Put { key, .. } = op {
            if !puts.insert(key.as_str()) {
                return Err(duplicate(key));
            }
        }
    }
    for op in ops {
        let covered = match op {
            Op::Put { .. } => None,
            Op::Delete { key } => puts.contains(key.as_str()).then_some(key),
            Op::DeletePrefix { prefix } => puts
                .range::<str, _>((Bound::Included(prefix.as_str()), Bound::Unbounded))
                .next()
                .filter(|key| key.starts_with(prefix.as_str()))
                .map(|_| prefix),
        };
        if let Some(key) = covered {
            return Err(duplicate(key));
        }
    }
    Ok(())
}

fn duplicate(key: &str) -> StoreError {
    StoreError::Other(format!(
        "transaction writes key {key:?} more than once (etcd: duplicate key given in txn request)"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn put(key: &str, lease: Option<LeaseId>) -> Op {
        Op::Put {
            key: key.into(),
            value: b"v".to_vec(),
            lease,
        }
    }

    #[test]
    fn expiry_deletes_the_leases_keys_in_one_revision() {
        let start = Instant::now();
        let mut state = State::default();
        let lease = state.grant(Duration::from_secs(2), start);
        state
            .txn(&[], &[put("a", Some(lease)), put("b", Some(lease))])
            .expect("put under the lease");
        let before = state.revision();

        state.expire(start + Duration::from_millis(1999));
        assert_eq!(state.range("").len(), 2, "not yet expired");

        state.expire(start + Duration::from_secs(2));
        assert!(state.range("").is_empty());
        assert_eq!(state.revision(), before + 1);
        assert_eq!(state.next_deadline(), None);
        let deletes = state.events_since("", before + 1).expect("kept");
        assert_eq!(deletes.len(), 2);
        assert!(deletes.iter().all(
            |e| matches!(e, WatchEvent::Delete { mod_revision, .. } if *mod_revision == before + 1)
        ));
    }

    #[test]
    fn keep_alive_moves_the_deadline() {
        let start = Instant::now();
        let mut state = State::default();
        let lease = state.grant(Duration::from_secs(1), start);
        let later = start + Duration::from_millis(900);
        assert_eq!(
            state.keep_alive(lease, later).expect("alive"),
            Duration::from_secs(1)
        );
        state.expire(start + Duration::from_millis(1500));
        assert_eq!(state.next_deadline(), Some(later + Duration::from_secs(1)));
        state.expire(later + Duration::from_secs(1));
        assert!(matches!(
            state.keep_alive(lease, later + Duration::from_secs(1)),
            Err(StoreError::LeaseNotFound(id)) if id == lease
        ));
    }

    #[test]
    fn a_put_moves_the_key_to_its_new_lease() {
        let now = Instant::now();
        let mut state = State::default();
        let first = state.grant(Duration::from_secs(1), now);
        let second = state.grant(Duration::from_secs(10), now);
        state.txn(&[], &[put("k", Some(first))]).expect("put");
        state.txn(&[], &[put("k", Some(second))]).expect("put");
        state.expire(now + Duration::from_secs(1));
        assert_eq!(state.get("k").map(|kv| kv.lease), Some(second));
        state.txn(&[], &[put("k", None)]).expect("put");
        state.revoke(second);
        assert_eq!(state.get("k").map(|kv| kv.lease), Some(0));
    }

    #[test]
    fn history_overflow_compacts_old_revisions() {
        let mut state = State::with_history(3);
        for key in ["a", "b", "c", "d"] {
            state.txn(&[], &[put(key, None)]).expect("put");
        }
        // Revisions 2..=5; the first was dropped.
        assert_eq!(state.events_since("", 2), Err(2));
        assert_eq!(state.events_since("", 3).expect("kept").len(), 3);
        assert_eq!(state.events_since("", 6).expect("kept").len(), 0);
    }

    #[test]
    fn deletes_that_find_nothing_do_not_advance_the_revision() {
        let mut state = State::default();
        let before = state.revision();
        let outcome = state
            .txn(
                &[],
                &[
                    Op::Delete { key: "x".into() },
                    Op::DeletePrefix { prefix: "y".into() },
                ],
            )
            .expect("txn");
        assert!(outcome.succeeded);
        assert_eq!(outcome.revision, before);
    }

    #[test]
    fn duplicate_keys_are_rejected() {
        let ops = [
            put("p/a", None),
            Op::DeletePrefix {
                prefix: "p/".into(),
            },
        ];
        assert!(matches!(
            check_distinct_keys(&ops),
            Err(StoreError::Other(_))
        ));
        let ops = [put("a", None), put("a", None)];
        assert!(matches!(
            check_distinct_keys(&ops),
            Err(StoreError::Other(_))
        ));
        let ops = [
            put("p/a", None),
            Op::DeletePrefix {
                prefix: "q/".into(),
            },
            Op::Delete { key: "q/a".into() },
        ];
        assert!(check_distinct_keys(&ops).is_ok());
    }
}
