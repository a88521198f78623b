//! [`EtcdElection`]: leader election on etcd's election service.
//!
//! A campaign grants a lease, keeps it alive from a background task
//! (every `ttl / 3`) and asks etcd's `Campaign` to put the candidate under
//! `<name>/<lease>`; etcd answers once every earlier key under `<name>/` is
//! gone, so candidates lead in the order they arrived. The leader watches
//! its key; [`Leadership::lost`] turns `true` when the key is deleted or
//! the lease cannot be renewed before it would expire. Dropping the
//! [`Leadership`] revokes the lease, which deletes the key and lets the next
//! candidate lead at once.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use etcd_client::{GetOptions, LeaseKeepAliveStream, LeaseKeeper, SortOrder, SortTarget};
use futures::stream::{FuturesUnordered, StreamExt};
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use super::call::{call, map_error, retry_unsent, Retry};
use super::EtcdStore;
use crate::store::{Election, Leadership, LeaseId, MetaStore, StoreError, StoreResult, WatchEvent};

/// Leader election among coordinator replicas on etcd.
#[derive(Debug, Clone)]
pub struct EtcdElection {
    store: EtcdStore,
    name: String,
    ttl: Duration,
}

impl EtcdElection {
    /// The election `election_name` (keys under `<election_name>/`), whose
    /// leader holds a lease of `ttl` (whole seconds, at least 1; etcd may
    /// raise it to its minimum TTL). A leader that stops renewing is
    /// replaced within about `ttl`.
    pub fn new(store: EtcdStore, election_name: String, ttl: Duration) -> Self {
        Self {
            store,
            name: election_name,
            ttl,
        }
    }
}

#[async_trait]
impl Election for EtcdElection {
    async fn campaign(&self, candidate: &str) -> StoreResult<Leadership> {
        let lease = self.store.grant(self.ttl).await?;
        let (lost_tx, lost) = watch::channel(false);
        let lost_tx = Arc::new(lost_tx);
        let mut session = Session {
            store: self.store.clone(),
            lease,
            tasks: vec![tokio::spawn(keep_alive(
                self.store.clone(),
                lease,
                self.ttl,
                Arc::clone(&lost_tx),
            ))],
        };
        let elections = self.store.client().election_client();
        let campaign = || {
            let (mut elections, name) = (elections.clone(), self.name.clone());
            async move { elections.campaign(name, candidate, lease).await }
        };
        let mut lease_lost = lost.clone();
        // No timeout: the campaign waits as long as another candidate leads.
        let response = tokio::select! {
            response = retry_unsent(campaign) => {
                response.map_err(|error| map_error(error, Some(lease)))?
            }
            _ = lease_lost.wait_for(|lost| *lost) => {
                return Err(StoreError::LeaseNotFound(lease));
            }
        };
        let leader = response.leader().ok_or_else(|| {
            StoreError::Other(format!(
                "etcd campaign in {:?} answered without a leader key",
                self.name
            ))
        })?;
        let key = leader
            .key_str()
            .map_err(|_| StoreError::Other(format!("election {:?}: key not UTF-8", self.name)))?
            .to_owned();
        let revision = leader.rev();
        session.tasks.push(tokio::spawn(watch_key(
            self.store.clone(),
            key.clone(),
            revision,
            lost_tx,
        )));
        Ok(Leadership {
            key,
            revision,
            lost,
            _guard: Some(Box::new(session)),
        })
    }

    async fn leader(&self) -> StoreResult<Option<String>> {
        // What etcd's `Leader` call does, without its "no leader" error:
        // the oldest key under the election's prefix.
        let options = GetOptions::new()
            .with_prefix()
            .with_sort(SortTarget::Create, SortOrder::Ascend)
            .with_limit(1);
        let kv = self.store.client().kv_client();
        let prefix = format!("{}/", self.name);
        let get = || {
            let (mut kv, prefix, options) = (kv.clone(), prefix.clone(), options.clone());
            async move { kv.get(prefix, Some(options)).await }
        };
        let response = call(self.store.deadlines, Retry::Any, None, get).await?;
        let Some(kv) = response.kvs().first() else {
            return Ok(None);
        };
        kv.value_str().map(|v| Some(v.to_owned())).map_err(|_| {
            StoreError::Other(format!("election {:?}: leader value not UTF-8", self.name))
        })
    }
}

/// A campaign's lease and tasks: dropping it stops them and revokes the
/// lease (in the background, best effort; otherwise it expires).
#[derive(Debug)]
struct Session {
    store: EtcdStore,
    lease: LeaseId,
    tasks: Vec<JoinHandle<()>>,
}

impl Drop for Session {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            let store = self.store.clone();
            let lease = self.lease;
            runtime.spawn(async move {
                if let Err(error) = store.revoke(lease).await {
                    tracing::warn!(lease, %error, "cannot revoke the election lease; it will expire");
                }
            });
        }
    }
}

/// How often the election lease is renewed: a tenth of its TTL, so that
/// after the last renewal before a fault the lease has most of its TTL
/// left for etcd to elect a new raft leader (renewals need one; 1-2 s at
/// etcd's default election timeout). A renewal is a message on an open
/// stream, not a raft write.
fn renew_period(ttl: Duration) -> Duration {
    (ttl / 10).max(Duration::from_millis(100))
}

/// The most renewals of one period in flight at once.
const MAX_RENEWALS: usize = 3;

/// Renews `lease` every [`renew_period`] until it is lost: etcd says it
/// expired, or no renewal succeeded for `ttl` less a small margin. A
/// renewal unanswered for the store's attempt deadline is sent again on a
/// new stream, which the client opens on a member that answers, while the
/// first keeps waiting (a member that forwards to a dead raft leader
/// answers once a new one is elected); one that fails is sent again at
/// once.
async fn keep_alive(
    store: EtcdStore,
    lease: LeaseId,
    ttl: Duration,
    lost: Arc<watch::Sender<bool>>,
) {
    let period = renew_period(ttl);
    // Step down this much before the lease could expire: timers wake late
    // by a millisecond or so.
    let margin = (ttl / 10).min(Duration::from_millis(300));
    let hedge = store.deadlines.attempt;
    let mut stream = None;
    // Counted from before each request, so never later than etcd's view.
    let mut valid_until = Instant::now() + ttl - margin;
    loop {
        let sent = Instant::now();
        match renew_hedged(&store, lease, ttl, &mut stream, hedge, valid_until).await {
            Some(granted) => {
                valid_until = sent + granted.saturating_sub(margin);
                tokio::time::sleep_until((sent + period).min(valid_until)).await;
            }
            None => break,
        }
    }
    tracing::warn!(lease, "election lease lost");
    lost.send_replace(true);
}

/// One renewal of `lease`, sent again as [`keep_alive`] says until one copy
/// succeeds (its TTL) or `valid_until` passes or etcd says the lease is
/// gone (`None`). Keeps the stream that answered in `stream`.
async fn renew_hedged(
    store: &EtcdStore,
    lease: LeaseId,
    ttl: Duration,
    stream: &mut Option<(LeaseKeeper, LeaseKeepAliveStream)>,
    hedge: Duration,
    valid_until: Instant,
) -> Option<Duration> {
    // A copy is abandoned once MAX_RENEWALS newer ones could have been
    // sent: one on a stream to a member that died never answers.
    let copy = |stream| {
        let renewal = renew(store, lease, ttl, stream);
        async move {
            match tokio::time::timeout(hedge * MAX_RENEWALS as u32, renewal).await {
                Ok(result) => result,
                Err(_) => Err(etcd_client::Error::LeaseKeepAliveError(format!(
                    "renewal unanswered after {:?}",
                    hedge * MAX_RENEWALS as u32
                ))),
            }
        }
    };
    let mut copies = FuturesUnordered::new();
    copies.push(copy(stream.take()));
    let mut next = Instant::now() + hedge;
    let mut failures: u32 = 0;
    loop {
        tokio::select! {
            Some(result) = copies.next() => match result {
                Ok((granted, answered)) => {
                    if failures > 0 {
                        tracing::info!(lease, failures, "election lease renewed again");
                    }
                    *stream = Some(answered);
                    return Some(granted);
                }
                Err(error) => match map_error(error, Some(lease)) {
                    StoreError::LeaseNotFound(_) => return None,
                    error => {
                        failures += 1;
                        tracing::warn!(lease, %error, failures, "election lease renewal failed; trying again");
                        let backoff = Duration::from_millis(50) * failures.min(4);
                        next = next.min(Instant::now() + backoff);
                    }
                },
            },
            _ = tokio::time::sleep_until(next.min(valid_until)) => {
                if Instant::now() >= valid_until {
                    return None;
                }
                if copies.len() < MAX_RENEWALS {
                    copies.push(copy(None));
                }
                next = Instant::now() + hedge;
            }
        }
    }
}

/// One renewal of `lease` on `stream`, or on a new stream; returns the TTL
/// the lease now has (at least `ttl`) and the stream.
async fn renew(
    store: &EtcdStore,
    lease: LeaseId,
    ttl: Duration,
    stream: Option<(LeaseKeeper, LeaseKeepAliveStream)>,
) -> Result<(Duration, (LeaseKeeper, LeaseKeepAliveStream)), etcd_client::Error> {
    let Some((mut keeper, mut responses)) = stream else {
        // Opening renews once and fails if the lease is gone; etcd never
        // grants less than was asked.
        let opened = store.client().lease_client().keep_alive(lease).await?;
        return Ok((ttl, opened));
    };
    keeper.keep_alive().await?;
    match responses.message().await? {
        Some(response) if response.ttl() > 0 => Ok((
            Duration::from_secs(response.ttl().unsigned_abs()),
            (keeper, responses),
        )),
        Some(_) => Err(etcd_client::Error::LeaseKeepAliveError(
            "lease not found".into(),
        )),
        None => Err(etcd_client::Error::LeaseKeepAliveError(
            "keep-alive stream closed".into(),
        )),
    }
}

/// Watches the leader `key` (created at `revision`) and reports it lost
/// once the key is gone or belongs to someone else.
async fn watch_key(store: EtcdStore, key: String, revision: i64, lost: Arc<watch::Sender<bool>>) {
    let mut from = revision + 1;
    loop {
        if let Ok(mut events) = store.watch(&key, from).await {
            while let Some(event) = events.next().await {
                match event {
                    Ok(WatchEvent::Delete { key: deleted, .. }) if deleted == key => {
                        lost.send_replace(true);
                        return;
                    }
                    Ok(WatchEvent::Put(kv)) => from = kv.mod_revision + 1,
                    Ok(WatchEvent::Delete { mod_revision, .. }) => from = mod_revision + 1,
                    Err(_) => break,
                }
            }
        }
        // The watch broke: look at the key itself, then watch again.
        match store.range(&key).await {
            Ok((kvs, at)) => {
                let ours = kvs
                    .iter()
                    .any(|kv| kv.key == key && kv.create_revision == revision);
                if !ours {
                    lost.send_replace(true);
                    return;
                }
                from = at + 1;
            }
            // Unreachable: the keep-alive judges by the lease's deadline.
            Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
        }
    }
}
