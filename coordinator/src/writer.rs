//! Group commit: every write of the leader goes through one task that
//! gathers what arrives within a flush interval into as few transactions as
//! possible, each fenced by the leadership. So the store sees a bounded
//! number of writes per second however many ranks report, and a deposed
//! leader's writes fail instead of landing.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, oneshot, watch};
use tokio::time::Instant;

use crate::metrics::Metrics;
use crate::store::{Compare, MetaStore, Op, StoreError, StoreResult, MAX_TXN_OPS};

struct Request {
    ops: Vec<Op>,
    done: oneshot::Sender<StoreResult<()>>,
}

/// Handle to the group-commit task.
#[derive(Debug, Clone)]
pub struct Writer {
    tx: mpsc::Sender<Request>,
}

/// A write handed to the writer, not yet known durable: [`Pending::wait`]
/// for it. Enqueueing is ordered, so a caller that enqueues while holding a
/// job's lock and waits after releasing it keeps the store's order equal to
/// the model's.
#[derive(Debug)]
pub struct Pending(Option<oneshot::Receiver<StoreResult<()>>>);

impl Pending {
    /// A write of nothing: done already.
    pub fn nothing() -> Self {
        Pending(None)
    }

    /// Returns once the write is durable, or with why it is not.
    pub async fn wait(self) -> StoreResult<()> {
        match self.0 {
            None => Ok(()),
            Some(wait) => wait.await.map_err(|_| stopped())?,
        }
    }
}

/// Room for one write in the writer's queue. Taken before a job's lock is
/// (the queue is full only while the store is slow, so waiting for room
/// then holds no lock), and used under it: [`Reserved::send`] hands the
/// ops over at once, in the order the model made them.
pub struct Reserved<'a>(mpsc::Permit<'a, Request>);

impl std::fmt::Debug for Reserved<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Reserved")
    }
}

impl Reserved<'_> {
    /// Hands `ops` to the next flush without waiting; no ops, no write
    /// (the room is given back).
    pub fn send(self, ops: Vec<Op>) -> Pending {
        if ops.is_empty() {
            return Pending(None);
        }
        let (done, wait) = oneshot::channel();
        self.0.send(Request { ops, done });
        Pending(Some(wait))
    }
}

fn stopped() -> StoreError {
    StoreError::Unavailable("the writer has stopped".into())
}

impl Writer {
    /// Starts the task. `fence` guards every transaction; when it no longer
    /// holds, or the store is unavailable, `failed` turns true and every
    /// later write fails (the replica must step down). A transaction the
    /// store rejects for another reason (a lease that expired meanwhile, a
    /// malformed write) fails only the requests that carry it.
    pub fn spawn(
        store: Arc<dyn MetaStore>,
        fence: Option<Compare>,
        interval: Duration,
        failed: watch::Sender<bool>,
        metrics: Metrics,
    ) -> Self {
        let (tx, rx) = mpsc::channel(1024);
        tokio::spawn(run(store, fence, interval, rx, failed, metrics));
        Self { tx }
    }

    /// Writes `ops` with the next flush; returns once they are durable.
    pub async fn write(&self, ops: Vec<Op>) -> StoreResult<()> {
        self.enqueue(ops).await?.wait().await
    }

    /// Hands `ops` to the next flush and returns without waiting for it.
    pub async fn enqueue(&self, ops: Vec<Op>) -> StoreResult<Pending> {
        if ops.is_empty() {
            return Ok(Pending(None));
        }
        self.submit(ops).await.map(|wait| Pending(Some(wait)))
    }

    /// Waits for room in the queue for one write; see [`Reserved`].
    pub async fn reserve(&self) -> StoreResult<Reserved<'_>> {
        self.tx.reserve().await.map(Reserved).map_err(|_| stopped())
    }

    /// Returns once every write submitted before it is durable (or fails
    /// when one of them failed): a read of the leader's state after this
    /// sees nothing the store could still lose.
    pub async fn flush(&self) -> StoreResult<()> {
        Pending(Some(self.submit(Vec::new()).await?)).wait().await
    }

    async fn submit(&self, ops: Vec<Op>) -> StoreResult<oneshot::Receiver<StoreResult<()>>> {
        let (done, wait) = oneshot::channel();
        self.tx
            .send(Request { ops, done })
            .await
            .map_err(|_| stopped())?;
        Ok(wait)
    }
}

async fn run(
    store: Arc<dyn MetaStore>,
    fence: Option<Compare>,
    interval: Duration,
    mut rx: mpsc::Receiver<Request>,
    failed: watch::Sender<bool>,
    metrics: Metrics,
) {
    let fence: Vec<Compare> = fence.into_iter().collect();
    let store = store.as_ref();
    while let Some(first) = rx.recv().await {
        let deadline = Instant::now() + interval;
        let mut batch = vec![first];
        while let Ok(Some(next)) = tokio::time::timeout_at(deadline, rx.recv()).await {
            batch.push(next);
        }
        if *failed.borrow() {
            let lost = || StoreError::Unavailable("leadership lost".into());
            batch
                .into_iter()
                .for_each(|r| drop(r.done.send(Err(lost()))));
            continue;
        }
        // The window's ops go to `transactions` one at a time: an op a
        // later write of its key replaces is dropped there, never held
        // beside every other request's copy.
        let results = match apply(store, &metrics, &fence, ops_of(&batch)).await {
            Ok(()) => batch.iter().map(|_| Ok(())).collect(),
            Err(error) if steps_down(&error) => batch.iter().map(|_| Err(copy(&error))).collect(),
            Err(error) => {
                // Rejected, not unavailable: find which requests carry what
                // the store refuses by replaying them one at a time, in order
                // (every op is idempotent), so the others still land.
                tracing::warn!(%error, requests = batch.len(), "store rejected a write; retrying its requests one by one");
                let mut results = Vec::with_capacity(batch.len());
                for request in &batch {
                    let result = match results.last() {
                        Some(Err(e)) if steps_down(e) => Err(copy(e)),
                        _ => {
                            let ops = ops_of(std::slice::from_ref(request));
                            apply(store, &metrics, &fence, ops).await
                        }
                    };
                    if let Err(error) = &result {
                        if !steps_down(error) {
                            tracing::warn!(%error, "store rejected a write; failing its request");
                        }
                    }
                    results.push(result);
                }
                results
            }
        };
        if let Some(Err(error)) = results
            .iter()
            .find(|r| matches!(r, Err(e) if steps_down(e)))
        {
            tracing::warn!(%error, "write failed; stepping down");
            let _ = failed.send(true);
        }
        for (request, result) in batch.into_iter().zip(results) {
            let _ = request.done.send(result);
        }
    }
}

/// The ops of `requests`, in order, cloned one at a time.
fn ops_of(requests: &[Request]) -> impl Iterator<Item = Op> + Send + '_ {
    requests.iter().flat_map(|r| r.ops.iter().cloned())
}

/// Whether a failed write means this replica can no longer lead: the fence
/// failed or the store is unreachable. Anything else the store rejected is
/// the request's own fault.
fn steps_down(error: &StoreError) -> bool {
    error.is_unavailable()
}

fn copy(error: &StoreError) -> StoreError {
    match error {
        StoreError::Unavailable(m) => StoreError::Unavailable(m.clone()),
        StoreError::LeaseNotFound(lease) => StoreError::LeaseNotFound(*lease),
        StoreError::TooManyOps(n) => StoreError::TooManyOps(*n),
        StoreError::Other(m) => StoreError::Other(m.clone()),
    }
}

/// Writes `ops` as the fenced transactions [`transactions`] makes of them.
async fn apply(
    store: &dyn MetaStore,
    metrics: &Metrics,
    fence: &[Compare],
    ops: impl IntoIterator<Item = Op>,
) -> StoreResult<()> {
    for txn in transactions(ops) {
        for chunk in txn.chunks(MAX_TXN_OPS) {
            metrics.group_commit_ops.observe(chunk.len() as f64);
            let started = std::time::Instant::now();
            let outcome = store.txn(fence.to_vec(), chunk.to_vec()).await;
            metrics
                .txn_duration
                .observe(started.elapsed().as_secs_f64());
            let outcome = outcome.inspect_err(|_| metrics.txn_failures.inc())?;
            if !outcome.succeeded {
                metrics.txn_failures.inc();
                return Err(StoreError::Unavailable(
                    "leadership lost: the election key changed".into(),
                ));
            }
        }
    }
    Ok(())
}

/// Turns ops, in the order they were made, into transactions the store
/// accepts, whose application in order has the effect of applying the ops
/// one by one. Inside one transaction etcd refuses to write a key twice or
/// to put a key under a prefix the same transaction deletes ("duplicate key
/// given in txn request"). So: a later write of a key replaces the earlier
/// one; a prefix delete swallows the earlier writes under it; a put under a
/// prefix already deleted in this transaction starts the next one.
fn transactions(ops: impl IntoIterator<Item = Op>) -> Vec<Vec<Op>> {
    let mut done = Vec::new();
    let mut txn = Txn::default();
    for op in ops {
        if let Some(op) = txn.add(op) {
            done.push(std::mem::take(&mut txn).finish());
            let _ = txn.add(op);
        }
    }
    if !txn.slots.is_empty() {
        done.push(txn.finish());
    }
    done.retain(|t| !t.is_empty());
    done
}

/// One transaction being collapsed.
#[derive(Default)]
struct Txn {
    slots: Vec<Option<Op>>,
    /// Key of each live single-key op -> its slot.
    keys: HashMap<String, usize>,
    /// Live prefix deletes -> their slot.
    prefixes: HashMap<String, usize>,
}

impl Txn {
    /// Adds `op`, or hands it back when it needs a transaction of its own
    /// (a put under a prefix this one deletes).
    fn add(&mut self, op: Op) -> Option<Op> {
        match &op {
            Op::Put { key, .. } | Op::Delete { key } => {
                let deleted = self.prefixes.keys().any(|p| key.starts_with(p.as_str()));
                if deleted {
                    // A delete of a key already deleted changes nothing.
                    return matches!(op, Op::Put { .. }).then_some(op);
                }
                if let Some(slot) = self.keys.remove(key) {
                    self.slots[slot] = None;
                }
                self.keys.insert(key.clone(), self.slots.len());
            }
            Op::DeletePrefix { prefix } => {
                if self.prefixes.keys().any(|p| prefix.starts_with(p.as_str())) {
                    return None;
                }
                let under = |k: &String| k.starts_with(prefix.as_str());
                for map in [&mut self.keys, &mut self.prefixes] {
                    let swallowed: Vec<String> = map.keys().filter(|k| under(k)).cloned().collect();
                    for key in swallowed {
                        if let Some(slot) = map.remove(&key) {
                            self.slots[slot] = None;
                        }
                    }
                }
                self.prefixes.insert(prefix.clone(), self.slots.len());
            }
        }
        self.slots.push(Some(op));
        None
    }

    fn finish(self) -> Vec<Op> {
        self.slots.into_iter().flatten().collect()
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::store::MemoryStore;

    fn put(key: &str, v: u8) -> Op {
        Op::Put {
            key: key.into(),
            value: vec![v],
            lease: None,
        }
    }

    fn delete(key: &str) -> Op {
        Op::Delete { key: key.into() }
    }

    fn delete_prefix(prefix: &str) -> Op {
        Op::DeletePrefix {
            prefix: prefix.into(),
        }
    }

    #[test]
    fn a_later_write_of_a_key_replaces_the_earlier_one() {
        let ops = vec![put("a", 1), put("b", 1), put("a", 2), delete("b")];
        assert_eq!(transactions(ops), vec![vec![put("a", 2), delete("b")]]);
    }

    /// The wedge of a two-epoch dynamic job: the report carrying an epoch's
    /// last ack also advances the epoch, deleting the epoch's prefix.
    #[test]
    fn an_ack_and_the_epoch_advance_that_deletes_it_never_share_a_key() {
        let ops = vec![
            put("dyn/000000/acked/7", 1),
            delete_prefix("dyn/000000/"),
            put("dyn/epoch", 1),
        ];
        assert_eq!(
            transactions(ops),
            vec![vec![delete_prefix("dyn/000000/"), put("dyn/epoch", 1)]]
        );
    }

    #[test]
    fn a_put_under_a_prefix_deleted_before_it_starts_the_next_transaction() {
        let ops = vec![delete_prefix("p/"), put("p/a", 1), delete("p/b")];
        assert_eq!(
            transactions(ops),
            vec![
                vec![delete_prefix("p/")],
                vec![put("p/a", 1), delete("p/b")]
            ]
        );
    }

    fn op() -> impl Strategy<Value = Op> {
        let key = prop::sample::select(vec!["a", "a/x", "a/y", "a/x/1", "b", "b/x"]);
        let prefix = prop::sample::select(vec!["a/", "a/x", "b", ""]);
        prop_oneof![
            (key.clone(), any::<u8>()).prop_map(|(k, v)| put(k, v)),
            key.prop_map(delete),
            prefix.prop_map(delete_prefix),
        ]
    }

    fn contents(store: &MemoryStore) -> Vec<(String, Vec<u8>)> {
        let (kvs, _) = futures::executor::block_on(store.range("")).expect("range");
        kvs.into_iter().map(|kv| (kv.key, kv.value)).collect()
    }

    proptest! {
        /// Whatever a window holds, the store accepts every transaction
        /// (the memory store refuses what etcd refuses) and ends as if the
        /// ops had been applied one at a time.
        #[test]
        fn transactions_are_accepted_and_equal_applying_ops_in_order(
            ops in prop::collection::vec(op(), 0..24),
        ) {
            let one_by_one = MemoryStore::new();
            for op in &ops {
                one_by_one.txn_now(&[], std::slice::from_ref(op)).expect("single op");
            }
            let grouped = MemoryStore::new();
            for txn in transactions(ops.clone()) {
                prop_assert!(!txn.is_empty());
                grouped.txn_now(&[], &txn).map_err(|e| {
                    TestCaseError::fail(format!("{txn:?} rejected: {e}"))
                })?;
            }
            prop_assert_eq!(contents(&grouped), contents(&one_by_one));
        }
    }

    /// A request the store rejects fails alone, and the replica keeps
    /// leading: writes before, beside and after it land.
    #[tokio::test]
    async fn a_rejected_request_fails_alone_and_the_writer_keeps_serving() {
        let store = MemoryStore::new();
        let (failed_tx, failed) = watch::channel(false);
        let writer = Writer::spawn(
            Arc::new(store.clone()),
            None,
            Duration::from_millis(20),
            failed_tx,
            Metrics::new(),
        );
        let expired = Op::Put {
            key: "member".into(),
            value: vec![1],
            lease: Some(12345),
        };
        let good = writer
            .enqueue(vec![put("before", 1)])
            .await
            .expect("enqueue");
        let bad = writer.enqueue(vec![expired]).await.expect("enqueue");
        let beside = writer
            .enqueue(vec![put("beside", 1)])
            .await
            .expect("enqueue");
        good.wait().await.expect("an innocent write lands");
        let error = bad
            .wait()
            .await
            .expect_err("a put under an unknown lease is rejected");
        assert!(!steps_down(&error), "{error}");
        beside.wait().await.expect("an innocent write lands");
        writer
            .write(vec![put("after", 1)])
            .await
            .expect("the writer keeps serving");
        assert!(
            !*failed.borrow(),
            "a rejected request must not depose the leader"
        );
        let keys: Vec<String> = contents(&store).into_iter().map(|(k, _)| k).collect();
        assert_eq!(keys, ["after", "before", "beside"]);
    }
}
