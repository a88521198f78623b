//! [`EtcdStore`]: the metadata store on etcd (v3 API, 3.4 or later), and
//! [`EtcdElection`] on etcd's election service.
//!
//! Every request runs under [`Deadlines`]: a short deadline per attempt,
//! retried within a budget where sending it again is safe ([`call`]); an
//! unreachable cluster, a timeout or a transport error is
//! [`StoreError::Unavailable`], so callers can tell "retry or step down"
//! from a bug. Transactions carry a guard ([`guard`]), so one that timed
//! out can be sent again without applying twice.

use std::collections::VecDeque;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use etcd_client::{
    Client, DeleteOptions, EventType, GetOptions, PutOptions, Txn, TxnOp, TxnOpResponse,
    WatchOptions, WatchStream,
};
use futures::stream::{self, BoxStream, StreamExt};

use super::{
    Compare, KeyValue, LeaseId, MetaStore, Op, StoreError, StoreResult, TxnOutcome, WatchEvent,
    MAX_TXN_OPS,
};

mod call;
mod election;
mod guard;
mod options;

pub use call::Deadlines;
pub use election::EtcdElection;
pub use options::{EtcdOptions, EtcdTls};

use call::{call, is_lease_not_found, map_error, Retry};
use guard::Guards;

/// Where the guards of transactions live (under their own lease; job
/// names cannot start with '.').
const GUARD_PREFIX: &str = "/tributary/.txn/";

/// A [`MetaStore`] on an etcd cluster. Clones share the connection.
#[derive(Clone)]
pub struct EtcdStore {
    client: Client,
    endpoints: Arc<[String]>,
    deadlines: Deadlines,
    guards: Arc<Guards>,
}

impl fmt::Debug for EtcdStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EtcdStore")
            .field("endpoints", &self.endpoints)
            .field("deadlines", &self.deadlines)
            .finish_non_exhaustive()
    }
}

impl EtcdStore {
    /// Connects to the cluster at `endpoints` (`http://host:port`) with the
    /// default [`EtcdOptions`]; `Unavailable` if it does not answer.
    pub async fn connect(endpoints: &[String]) -> StoreResult<Self> {
        Self::connect_with(endpoints, &EtcdOptions::default()).await
    }

    /// Connects to the cluster at `endpoints` and checks that it answers
    /// (and accepts the credentials) within `options.connect_timeout`.
    pub async fn connect_with(endpoints: &[String], options: &EtcdOptions) -> StoreResult<Self> {
        options.check(endpoints)?;
        let timeout = options.connect_timeout;
        let connect = async {
            // With a user, this authenticates (one request) too.
            let client = Client::connect(endpoints, Some(options.connect_options()))
                .await
                .map_err(|error| map_error(error, None))?;
            // The channel connects lazily: make one request to know.
            let budget = Deadlines {
                attempt: options.deadlines.attempt.min(timeout),
                budget: timeout,
            };
            call(budget, Retry::Any, None, || {
                let mut maintenance = client.maintenance_client();
                async move { maintenance.status().await }
            })
            .await?;
            Ok::<_, StoreError>(client)
        };
        let client = match tokio::time::timeout(timeout, connect).await {
            Ok(Ok(client)) => client,
            Ok(Err(StoreError::Unavailable(error))) => {
                return Err(StoreError::Unavailable(format!(
                    "cannot reach etcd at {endpoints:?}: {error}"
                )))
            }
            Ok(Err(error)) => {
                return Err(StoreError::Other(format!(
                    "etcd at {endpoints:?} refused the connection: {error}"
                )))
            }
            Err(_) => {
                return Err(StoreError::Unavailable(format!(
                    "etcd at {endpoints:?} did not answer within {timeout:?}"
                )))
            }
        };
        Ok(Self {
            client,
            endpoints: endpoints.into(),
            deadlines: options.deadlines,
            guards: Arc::new(Guards::new(GUARD_PREFIX.to_owned())),
        })
    }

    /// The endpoints this store was connected to.
    pub fn endpoints(&self) -> &[String] {
        &self.endpoints
    }

    /// The deadlines every request runs under.
    pub fn deadlines(&self) -> Deadlines {
        self.deadlines
    }

    pub(crate) fn client(&self) -> &Client {
        &self.client
    }

    /// One try of `txn` with guard `guard`: `Ok(None)` when etcd no longer
    /// knows the guard's lease (nothing was applied).
    async fn guarded_txn(
        &self,
        compares: &[Compare],
        ops: &[Op],
        lease: Option<LeaseId>,
        guard: &str,
        guard_lease: LeaseId,
    ) -> StoreResult<Option<TxnOutcome>> {
        let mut when: Vec<_> = compares.iter().cloned().map(compare).collect();
        when.push(etcd_client::Compare::create_revision(
            guard,
            etcd_client::CompareOp::Equal,
            0,
        ));
        let mut then: Vec<_> = ops.iter().cloned().map(txn_op).collect();
        then.push(TxnOp::put(
            guard,
            Vec::new(),
            Some(PutOptions::new().with_lease(guard_lease)),
        ));
        let txn = Txn::new()
            .when(when)
            .and_then(then)
            .or_else(vec![TxnOp::get(guard, None)]);
        let kv = self.client.kv_client();
        let result = call(self.deadlines, Retry::Any, lease, || {
            let (mut kv, txn) = (kv.clone(), txn.clone());
            async move { kv.txn(txn).await }
        })
        .await;
        let response = match result {
            Ok(response) => response,
            Err(error) if is_lease_not_found(&error) => {
                self.guards.forget(guard_lease).await;
                return match lease {
                    // The caller's lease may be the one gone: say so.
                    Some(_) => Err(error),
                    None => Ok(None),
                };
            }
            Err(error) => return Err(error),
        };
        if response.succeeded() {
            return Ok(Some(TxnOutcome {
                succeeded: true,
                revision: revision(response.header())?,
            }));
        }
        // A compare failed: ours (an earlier copy applied, at the guard's
        // revision) or the caller's.
        let earlier = response.op_responses().into_iter().find_map(|op| match op {
            TxnOpResponse::Get(get) => get.kvs().first().map(|kv| kv.mod_revision()),
            _ => None,
        });
        Ok(Some(match earlier {
            Some(applied) => TxnOutcome {
                succeeded: true,
                revision: applied,
            },
            None => TxnOutcome {
                succeeded: false,
                revision: revision(response.header())?,
            },
        }))
    }
}

fn key_value(kv: &etcd_client::KeyValue) -> StoreResult<KeyValue> {
    let key = kv
        .key_str()
        .map_err(|_| StoreError::Other(format!("etcd key {:?} is not UTF-8", kv.key())))?;
    Ok(KeyValue {
        key: key.to_owned(),
        value: kv.value().to_vec(),
        create_revision: kv.create_revision(),
        mod_revision: kv.mod_revision(),
        lease: kv.lease(),
    })
}

fn revision(header: Option<&etcd_client::ResponseHeader>) -> StoreResult<i64> {
    header
        .map(etcd_client::ResponseHeader::revision)
        .ok_or_else(|| StoreError::Other("etcd answered without a response header".into()))
}

/// A lease's TTL in whole seconds, at least 1 (rounding up).
fn ttl_seconds(ttl: Duration) -> i64 {
    (ttl.as_secs() + u64::from(ttl.subsec_nanos() > 0)).max(1) as i64
}

fn compare(compare: Compare) -> etcd_client::Compare {
    use etcd_client::CompareOp::Equal;
    match compare {
        Compare::ModRevision { key, revision } => {
            etcd_client::Compare::mod_revision(key, Equal, revision)
        }
        Compare::CreateRevision { key, revision } => {
            etcd_client::Compare::create_revision(key, Equal, revision)
        }
    }
}

fn txn_op(op: Op) -> TxnOp {
    match op {
        Op::Put { key, value, lease } => {
            TxnOp::put(key, value, lease.map(|l| PutOptions::new().with_lease(l)))
        }
        Op::Delete { key } => TxnOp::delete(key, None),
        Op::DeletePrefix { prefix } => {
            TxnOp::delete(prefix, Some(DeleteOptions::new().with_prefix()))
        }
    }
}

#[async_trait]
impl MetaStore for EtcdStore {
    async fn get(&self, key: &str) -> StoreResult<Option<KeyValue>> {
        let kv = self.client.kv_client();
        let response = call(self.deadlines, Retry::Any, None, || {
            let mut kv = kv.clone();
            async move { kv.get(key, None).await }
        })
        .await?;
        response.kvs().first().map(key_value).transpose()
    }

    async fn range(&self, prefix: &str) -> StoreResult<(Vec<KeyValue>, i64)> {
        let kv = self.client.kv_client();
        let options = GetOptions::new().with_prefix();
        let response = call(self.deadlines, Retry::Any, None, || {
            let (mut kv, options) = (kv.clone(), options.clone());
            async move { kv.get(prefix, Some(options)).await }
        })
        .await?;
        let kvs = response
            .kvs()
            .iter()
            .map(key_value)
            .collect::<StoreResult<_>>()?;
        Ok((kvs, revision(response.header())?))
    }

    async fn put(&self, key: &str, value: Vec<u8>, lease: Option<LeaseId>) -> StoreResult<i64> {
        let kv = self.client.kv_client();
        let options = lease.map(|l| PutOptions::new().with_lease(l));
        let put = || {
            let (mut kv, value, options) = (kv.clone(), value.clone(), options.clone());
            async move { kv.put(key, value, options).await }
        };
        // Not sent again after a timeout: it may still apply, late.
        let response = call(self.deadlines, Retry::Unsent, lease, put).await?;
        revision(response.header())
    }

    async fn txn(&self, compares: Vec<Compare>, ops: Vec<Op>) -> StoreResult<TxnOutcome> {
        // etcd rejects these too, but with a generic error; say it the
        // same way as the memory store.
        let too_many = compares.len().max(ops.len());
        if too_many > MAX_TXN_OPS {
            return Err(StoreError::TooManyOps(too_many));
        }
        let lease = ops.iter().find_map(|op| match op {
            Op::Put { lease, .. } => *lease,
            _ => None,
        });
        let mut guard = None;
        // Twice at most: once more when etcd had lost the guards' lease.
        for _ in 0..2 {
            let store = self.clone();
            let guard_lease = self
                .guards
                .lease(|ttl| async move { store.grant(ttl).await })
                .await?;
            let guard = guard.get_or_insert_with(|| self.guards.key(guard_lease));
            if let Some(outcome) = self
                .guarded_txn(&compares, &ops, lease, guard, guard_lease)
                .await?
            {
                return Ok(outcome);
            }
        }
        Err(StoreError::Other(
            "etcd lost two leases for transaction guards in a row".into(),
        ))
    }

    async fn grant(&self, ttl: Duration) -> StoreResult<LeaseId> {
        let leases = self.client.lease_client();
        let grant = || {
            let mut leases = leases.clone();
            async move { leases.grant(ttl_seconds(ttl), None).await }
        };
        // A grant sent twice leaks a lease, which expires on its own.
        let response = call(self.deadlines, Retry::Any, None, grant).await?;
        Ok(response.id())
    }

    async fn keep_alive(&self, lease: LeaseId) -> StoreResult<Duration> {
        let leases = self.client.lease_client();
        let renew = || {
            let mut leases = leases.clone();
            async move {
                // Opening the stream renews once and checks the lease
                // exists; a second renewal reports the TTL.
                let (mut keeper, mut responses) = leases.keep_alive(lease).await?;
                keeper.keep_alive().await?;
                responses.message().await
            }
        };
        match call(self.deadlines, Retry::Any, Some(lease), renew).await? {
            Some(response) if response.ttl() > 0 => {
                Ok(Duration::from_secs(response.ttl().unsigned_abs()))
            }
            Some(_) => Err(StoreError::LeaseNotFound(lease)),
            None => Err(StoreError::Unavailable(format!(
                "etcd closed the keep-alive stream of lease {lease}"
            ))),
        }
    }

    async fn revoke(&self, lease: LeaseId) -> StoreResult<()> {
        let leases = self.client.lease_client();
        let revoke = || {
            let mut leases = leases.clone();
            async move { leases.revoke(lease).await }
        };
        match call(self.deadlines, Retry::Any, Some(lease), revoke).await {
            Ok(_) | Err(StoreError::LeaseNotFound(_)) => Ok(()),
            Err(error) => Err(error),
        }
    }

    async fn watch(
        &self,
        prefix: &str,
        from_revision: i64,
    ) -> StoreResult<BoxStream<'static, StoreResult<WatchEvent>>> {
        let mut options = WatchOptions::new().with_prefix();
        if from_revision > 0 {
            options = options.with_start_revision(from_revision);
        }
        let watches = self.client.watch_client();
        let open = || {
            let (mut watches, options) = (watches.clone(), options.clone());
            async move {
                let mut stream = watches.watch(prefix, Some(options)).await?;
                // Wait for etcd to confirm, so the watch is in place on return.
                let created = stream.message().await?;
                Ok((stream, created))
            }
        };
        let (stream, created) = call(self.deadlines, Retry::Any, None, open).await?;
        let mut watch = EtcdWatch {
            stream,
            prefix: prefix.to_owned(),
            buffer: VecDeque::new(),
            done: false,
        };
        match created {
            Some(response) => watch.take(&response)?,
            None => return Err(watch.closed()),
        }
        Ok(stream::unfold(watch, |mut watch| async move {
            let item = watch.next().await?;
            Some((item, watch))
        })
        .boxed())
    }
}

/// An etcd watch as a stream of single events.
struct EtcdWatch {
    /// Holds the request half too: dropping it would cancel the watch.
    stream: WatchStream,
    prefix: String,
    buffer: VecDeque<WatchEvent>,
    done: bool,
}

impl EtcdWatch {
    async fn next(&mut self) -> Option<StoreResult<WatchEvent>> {
        loop {
            if let Some(event) = self.buffer.pop_front() {
                return Some(Ok(event));
            }
            if self.done {
                return None;
            }
            let taken = match self.stream.message().await {
                Ok(Some(response)) => self.take(&response),
                Ok(None) => Err(self.closed()),
                Err(error) => Err(map_error(error, None)),
            };
            if let Err(error) = taken {
                self.done = true;
                return Some(Err(error));
            }
        }
    }

    /// Buffers the events of `response`; an error if etcd canceled it.
    fn take(&mut self, response: &etcd_client::WatchResponse) -> StoreResult<()> {
        if response.canceled() {
            return Err(StoreError::Unavailable(format!(
                "etcd canceled the watch on {:?} (compacted at revision {}): {}",
                self.prefix,
                response.compact_revision(),
                response.cancel_reason()
            )));
        }
        for event in response.events() {
            let kv = event.kv().ok_or_else(|| {
                StoreError::Other(format!(
                    "etcd watch event on {:?} without a key",
                    self.prefix
                ))
            })?;
            let kv = key_value(kv)?;
            self.buffer.push_back(match event.event_type() {
                EventType::Put => WatchEvent::Put(kv),
                EventType::Delete => WatchEvent::Delete {
                    key: kv.key,
                    mod_revision: kv.mod_revision,
                },
            });
        }
        Ok(())
    }

    fn closed(&self) -> StoreError {
        StoreError::Unavailable(format!("etcd closed the watch on {:?}", self.prefix))
    }
}
