//! [`EtcdStore`]: the metadata store on etcd (v3 API, 3.4 or later), and
//! [`EtcdElection`] on etcd's election service.
//!
//! Every unary request runs under a timeout (10 s); an unreachable
//! cluster, a timeout or a transport error is [`StoreError::Unavailable`],
//! so callers can tell "retry or step down" from a bug.

use std::collections::VecDeque;
use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use etcd_client::{
    Client, ConnectOptions, DeleteOptions, EventType, GetOptions, PutOptions, Txn, TxnOp,
    WatchOptions, WatchStream,
};
use futures::stream::{self, BoxStream, StreamExt};

use super::{
    Compare, KeyValue, LeaseId, MetaStore, Op, StoreError, StoreResult, TxnOutcome, WatchEvent,
    MAX_TXN_OPS,
};

mod election;

pub use election::EtcdElection;

/// How long [`EtcdStore::connect`] waits for the cluster to answer.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// How long one request may take before the store counts as unavailable.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// A [`MetaStore`] on an etcd cluster. Clones share the connection.
#[derive(Clone)]
pub struct EtcdStore {
    client: Client,
    endpoints: Arc<[String]>,
}

impl fmt::Debug for EtcdStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EtcdStore")
            .field("endpoints", &self.endpoints)
            .finish_non_exhaustive()
    }
}

impl EtcdStore {
    /// Connects to the cluster at `endpoints` (`http://host:port`) and
    /// checks that it answers within 5 s; `Unavailable` if it does not.
    pub async fn connect(endpoints: &[String]) -> StoreResult<Self> {
        let options = ConnectOptions::new()
            .with_connect_timeout(CONNECT_TIMEOUT)
            // Pings find a dead connection under a long watch or campaign;
            // etcd refuses pings more often than every 5 s.
            .with_keep_alive(Duration::from_secs(10), Duration::from_secs(5));
        let connect = async {
            let client = Client::connect(endpoints, Some(options)).await?;
            // The channel connects lazily: make one request to know.
            let status = || {
                let mut maintenance = client.maintenance_client();
                async move { maintenance.status().await }
            };
            retry_unsent(status).await?;
            Ok::<_, etcd_client::Error>(client)
        };
        let client = match tokio::time::timeout(CONNECT_TIMEOUT, connect).await {
            Ok(Ok(client)) => client,
            Ok(Err(error)) => {
                return Err(StoreError::Unavailable(format!(
                    "cannot reach etcd at {endpoints:?}: {error}"
                )))
            }
            Err(_) => {
                return Err(StoreError::Unavailable(format!(
                    "etcd at {endpoints:?} did not answer within {CONNECT_TIMEOUT:?}"
                )))
            }
        };
        Ok(Self {
            client,
            endpoints: endpoints.into(),
        })
    }

    /// The endpoints this store was connected to.
    pub fn endpoints(&self) -> &[String] {
        &self.endpoints
    }

    pub(crate) fn client(&self) -> &Client {
        &self.client
    }
}

/// How many times a request that never reached a member is tried.
const ATTEMPTS: u32 = 8;

/// Runs an etcd request under [`REQUEST_TIMEOUT`], retried by [`retry_unsent`];
/// `lease` names the lease a "lease not found" answer is about.
pub(crate) async fn request<T, F, Fut>(attempt: F, lease: Option<LeaseId>) -> StoreResult<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, etcd_client::Error>>,
{
    once(retry_unsent(attempt), lease).await
}

/// Runs one etcd request under [`REQUEST_TIMEOUT`].
pub(crate) async fn once<T>(
    future: impl Future<Output = Result<T, etcd_client::Error>>,
    lease: Option<LeaseId>,
) -> StoreResult<T> {
    match tokio::time::timeout(REQUEST_TIMEOUT, future).await {
        Ok(result) => result.map_err(|error| map_error(error, lease)),
        Err(_) => Err(StoreError::Unavailable(format!(
            "etcd request timed out after {REQUEST_TIMEOUT:?}"
        ))),
    }
}

/// Tries `attempt` again (up to [`ATTEMPTS`] times) while it fails before
/// reaching any member. The client balances requests over every endpoint
/// and keeps picking a dead member's; a request that could not connect was
/// never sent, so trying it again is safe even for a transaction.
pub(crate) async fn retry_unsent<T, F, Fut>(mut attempt: F) -> Result<T, etcd_client::Error>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, etcd_client::Error>>,
{
    let mut tries = 1;
    loop {
        match attempt().await {
            Err(error) if tries < ATTEMPTS && never_sent(&error) => {
                tracing::debug!(%error, tries, "etcd request could not connect; trying again");
                tokio::time::sleep(Duration::from_millis(20) * tries).await;
                tries += 1;
            }
            result => return result,
        }
    }
}

/// Whether `error` says the request failed to connect (tonic turns
/// hyper's connect errors, timeouts included, into this status).
fn never_sent(error: &etcd_client::Error) -> bool {
    matches!(error, etcd_client::Error::GRpcStatus(status)
        if status.code() == tonic::Code::Unavailable
            && status.message().starts_with("tcp connect error"))
}

/// The one place etcd's errors become [`StoreError`]s.
pub(crate) fn map_error(error: etcd_client::Error, lease: Option<LeaseId>) -> StoreError {
    use etcd_client::Error as E;
    use tonic::Code;
    match error {
        E::GRpcStatus(status) => match (status.code(), lease) {
            (Code::NotFound, Some(lease)) if status.message().contains("lease not found") => {
                StoreError::LeaseNotFound(lease)
            }
            (
                Code::Unavailable
                | Code::DeadlineExceeded
                | Code::Cancelled
                | Code::Aborted
                | Code::ResourceExhausted
                | Code::Unknown,
                _,
            ) => StoreError::Unavailable(format!("etcd: {}", status.message())),
            (code, _) => StoreError::Other(format!("etcd ({code:?}): {}", status.message())),
        },
        E::LeaseKeepAliveError(message) => match lease {
            Some(lease) if message.contains("not found") => StoreError::LeaseNotFound(lease),
            _ => StoreError::Unavailable(format!("etcd lease keep-alive: {message}")),
        },
        E::TransportError(_) | E::IoError(_) | E::WatchError(_) | E::EndpointError(_) => {
            StoreError::Unavailable(format!("etcd: {error}"))
        }
        other => StoreError::Other(format!("etcd: {other}")),
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
        let response = request(
            || {
                let mut kv = kv.clone();
                async move { kv.get(key, None).await }
            },
            None,
        )
        .await?;
        response.kvs().first().map(key_value).transpose()
    }

    async fn range(&self, prefix: &str) -> StoreResult<(Vec<KeyValue>, i64)> {
        let kv = self.client.kv_client();
        let options = GetOptions::new().with_prefix();
        let response = request(
            || {
                let (mut kv, options) = (kv.clone(), options.clone());
                async move { kv.get(prefix, Some(options)).await }
            },
            None,
        )
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
        let response = request(put, lease).await?;
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
        let txn = Txn::new()
            .when(compares.into_iter().map(compare).collect::<Vec<_>>())
            .and_then(ops.into_iter().map(txn_op).collect::<Vec<_>>());
        let kv = self.client.kv_client();
        let response = request(
            || {
                let (mut kv, txn) = (kv.clone(), txn.clone());
                async move { kv.txn(txn).await }
            },
            lease,
        )
        .await?;
        Ok(TxnOutcome {
            succeeded: response.succeeded(),
            revision: revision(response.header())?,
        })
    }

    async fn grant(&self, ttl: Duration) -> StoreResult<LeaseId> {
        let leases = self.client.lease_client();
        let grant = || {
            let mut leases = leases.clone();
            async move { leases.grant(ttl_seconds(ttl), None).await }
        };
        let response = request(grant, None).await?;
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
        match request(renew, Some(lease)).await? {
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
        match request(revoke, Some(lease)).await {
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
        let (stream, created) = request(open, None).await?;
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
