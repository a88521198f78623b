//! The leader's background tasks: loading each job, retrying a job whose
//! manifest could not be read, forgetting members that stopped calling
//! ([`liveness`]) and those an earlier coordinator's store lease took
//! ([`watch_members`]).

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use tokio::sync::watch;
use tributary_common::ids::{JobId, MemberId};

use super::{apply, JobHandle, Leader, Slot, Staged, RETRY_INTERVAL};
use crate::error::CoordError;
use crate::keys::{self, Key};
use crate::metrics::Metrics;
use crate::model::{Effects, Job};
use crate::store::{KeyValue, MetaStore, WatchEvent};

/// Loads one job (its keys `kvs`, read at `revision`) into its slot: ready,
/// failed with the reason (a manifest that could not be read is tried again
/// in the background), or gone when it has no stored record. Then tells
/// the calls waiting for it.
pub(super) async fn load_job(
    leader: Arc<Leader>,
    name: JobId,
    kvs: Vec<KeyValue>,
    revision: i64,
    done: watch::Sender<bool>,
) {
    let slot = match leader.open_job(&name, &kvs, revision).await {
        Ok(Some(handle)) => Some(Slot::Ready(handle)),
        Ok(None) => None,
        Err(error) => {
            tracing::error!(job = name.as_str(), %error, "job failed to load; serving the others");
            if matches!(error, CoordError::Dataset { .. }) {
                tokio::spawn(retry_job(Arc::downgrade(&leader), name.clone()));
            }
            Some(Slot::Failed(error.to_string()))
        }
    };
    let mut jobs = leader.jobs.lock().await;
    match slot {
        Some(slot) => jobs.insert(name, slot),
        None => jobs.remove(&name),
    };
    drop(jobs);
    done.send_replace(true);
}

/// Tries a job whose manifest could not be read again until it loads, its
/// failure becomes permanent, or this leadership ends.
pub(super) async fn retry_job(leader: std::sync::Weak<Leader>, name: JobId) {
    loop {
        tokio::time::sleep(RETRY_INTERVAL).await;
        let Some(leader) = leader.upgrade() else {
            return;
        };
        if *leader.failed.borrow() {
            return;
        }
        let result = match leader.store.range(&keys::job(&name)).await {
            Ok((kvs, revision)) => leader.open_job(&name, &kvs, revision).await,
            Err(error) => Err(error.into()),
        };
        let mut jobs = leader.jobs.lock().await;
        match result {
            Ok(Some(handle)) => {
                tracing::info!(
                    job = name.as_str(),
                    "the job's manifest is readable again; serving it"
                );
                jobs.insert(name, Slot::Ready(handle));
                return;
            }
            Ok(None) => {
                jobs.remove(&name);
                return;
            }
            Err(error) => {
                let retry = matches!(error, CoordError::Dataset { .. } | CoordError::Store(_));
                jobs.insert(name.clone(), Slot::Failed(error.to_string()));
                if !retry {
                    return;
                }
            }
        }
    }
}

/// How often the leader looks for members that stopped calling: a member
/// is forgotten within this much of its TTL.
pub const EXPIRY_TICK: Duration = Duration::from_millis(250);

/// How late a tick must be to count as the leader having stalled.
const STALL: Duration = Duration::from_secs(1);

/// Forgets, every [`EXPIRY_TICK`], the members of every job that have not
/// called within their job's TTL (`model::liveness`): their records are
/// deleted and their units returned, in one fenced write per job, as any
/// change. Runs until this leadership ends (the caller aborts it then).
///
/// A tick that comes late (the process was stopped, or starved of CPU)
/// first gives every member the time the leader was away ([`Job::grace`]):
/// their calls were waiting for it, not missing.
pub async fn liveness(leader: std::sync::Weak<Leader>) {
    let mut tick = tokio::time::interval(EXPIRY_TICK);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut last = tokio::time::Instant::now();
    loop {
        tick.tick().await;
        let now = tokio::time::Instant::now();
        let late = now
            .saturating_duration_since(last)
            .saturating_sub(EXPIRY_TICK);
        last = now;
        let Some(leader) = leader.upgrade() else {
            return;
        };
        if leader.has_failed() {
            return;
        }
        let handles: Vec<Arc<JobHandle>> = leader
            .jobs
            .lock()
            .await
            .values()
            .filter_map(|slot| match slot {
                Slot::Ready(handle) => Some(Arc::clone(handle)),
                _ => None,
            })
            .collect();
        for handle in handles {
            expire_members(&leader, &handle, late).await;
        }
    }
}

/// One job's turn of [`liveness`]: gives its members the leader's stall
/// back, then forgets those silent past their TTL.
async fn expire_members(leader: &Leader, handle: &Arc<JobHandle>, late: Duration) {
    let (name, any) = {
        let mut job = handle.job.lock().await;
        if late > STALL {
            job.grace(late);
            tracing::warn!(
                job = job.name.as_str(),
                late_ms = late.as_millis() as u64,
                "the leader stalled; its members get the time back"
            );
        }
        (job.name.clone(), job.any_expired(Instant::now()))
    };
    if !any {
        return;
    }
    let mut gone = Vec::new();
    let expire = |job: &mut Job| {
        let (expired, effects) = job.expire(Instant::now());
        gone = expired;
        (Ok(()), effects)
    };
    match leader.change(handle, expire).await {
        Ok(()) if !gone.is_empty() => tracing::info!(
            job = name.as_str(),
            members = gone.len(),
            first = gone[0].as_str(),
            "members expired (no call within the job's member TTL); their units return to the pool"
        ),
        Ok(()) => {}
        Err(error) => {
            tracing::warn!(job = name.as_str(), %error, "cannot forget expired members")
        }
    }
}

/// Forgets members whose keys vanish (an earlier coordinator's store lease
/// expired), returning their units to the pool at once, until no member is
/// under such a lease. Re-reads and re-watches when the watch breaks.
pub(super) async fn watch_members(
    store: Arc<dyn MetaStore>,
    metrics: Metrics,
    handle: std::sync::Weak<JobHandle>,
    job: JobId,
    mut from_revision: i64,
) {
    let prefix = keys::members(&job);
    let member_of = |key: &str| match Key::parse(key) {
        Ok(Key::Member { member, .. }) => Some(member),
        _ => None,
    };
    loop {
        let mut events = match store.watch(&prefix, from_revision).await {
            Ok(events) => events,
            Err(error) => {
                tracing::warn!(%error, job = job.as_str(), "member watch failed; retrying");
                tokio::time::sleep(Duration::from_millis(500)).await;
                continue;
            }
        };
        while let Some(event) = events.next().await {
            let Ok(event) = event else { break };
            let WatchEvent::Delete { key, mod_revision } = event else {
                continue;
            };
            from_revision = mod_revision + 1;
            let Some(handle) = handle.upgrade() else {
                return;
            };
            let Some(member) = member_of(&key) else {
                tracing::warn!(key, "a key under the members is no member's; ignored");
                continue;
            };
            let effects = handle.job.lock().await.lease_expired(&member);
            if !effects.is_empty() {
                tracing::info!(
                    job = job.as_str(),
                    member = member.as_str(),
                    "member expired (its lease ran out); its units return to the pool"
                );
            }
            expired(store.as_ref(), &metrics, &handle, effects).await;
            if !handle.job.lock().await.has_leased_members() {
                return; // the last member under a store lease is gone
            }
        }
        // The watch broke: reconcile with what the store holds, then resume.
        let Some(handle) = handle.upgrade() else {
            return;
        };
        match store.range(&prefix).await {
            Ok((kvs, revision)) => {
                let live: Vec<MemberId> = kvs.iter().filter_map(|kv| member_of(&kv.key)).collect();
                let mut model = handle.job.lock().await;
                let gone: Vec<MemberId> = model
                    .members
                    .keys()
                    .filter(|m| !live.contains(m))
                    .cloned()
                    .collect();
                let mut effects = Effects::default();
                for member in gone {
                    effects.extend(model.lease_expired(&member));
                }
                drop(model);
                effects.wake = true;
                expired(store.as_ref(), &metrics, &handle, effects).await;
                from_revision = revision + 1;
            }
            Err(error) => {
                tracing::warn!(%error, job = job.as_str(), "cannot re-read members");
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
        }
    }
}

/// Applies the effects of expired leases: nothing to write, so nothing that
/// can fail; logged if it does.
async fn expired(
    store: &dyn MetaStore,
    metrics: &Metrics,
    handle: &Arc<JobHandle>,
    effects: Effects,
) {
    if let Err(error) = apply(store, metrics, Staged::unwritten(handle, effects)).await {
        tracing::warn!(%error, "cannot apply an expired lease's effects");
    }
}
