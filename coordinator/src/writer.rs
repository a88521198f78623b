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

impl Writer {
    /// Starts the task. `fence` guards every transaction; when one fails (the
    /// fence no longer holds, or the store errs) `failed` turns true and
    /// every later write fails.
    pub fn spawn(
        store: Arc<dyn MetaStore>,
        fence: Option<Compare>,
        interval: Duration,
        failed: watch::Sender<bool>,
    ) -> Self {
        let (tx, rx) = mpsc::channel(1024);
        tokio::spawn(run(store, fence, interval, rx, failed));
        Self { tx }
    }

    /// Writes `ops` with the next flush; returns once they are durable.
    pub async fn write(&self, ops: Vec<Op>) -> StoreResult<()> {
        if ops.is_empty() {
            return Ok(());
        }
        self.submit(ops).await
    }

    /// Returns once every write submitted before it is durable (or fails
    /// when one of them failed): a read of the leader's state after this
    /// sees nothing the store could still lose.
    pub async fn flush(&self) -> StoreResult<()> {
        self.submit(Vec::new()).await
    }

    async fn submit(&self, ops: Vec<Op>) -> StoreResult<()> {
        let (done, wait) = oneshot::channel();
        self.tx
            .send(Request { ops, done })
            .await
            .map_err(|_| StoreError::Unavailable("the writer has stopped".into()))?;
        wait.await
            .map_err(|_| StoreError::Unavailable("the writer has stopped".into()))?
    }
}

async fn run(
    store: Arc<dyn MetaStore>,
    fence: Option<Compare>,
    interval: Duration,
    mut rx: mpsc::Receiver<Request>,
    failed: watch::Sender<bool>,
) {
    while let Some(first) = rx.recv().await {
        let deadline = Instant::now() + interval;
        let mut batch = vec![first];
        while let Ok(Some(next)) = tokio::time::timeout_at(deadline, rx.recv()).await {
            batch.push(next);
        }
        let ops = coalesce(batch.iter_mut().flat_map(|r| std::mem::take(&mut r.ops)));
        let mut result = Ok(());
        if *failed.borrow() {
            result = Err(StoreError::Unavailable("leadership lost".into()));
        }
        for chunk in ops.chunks(MAX_TXN_OPS) {
            if result.is_err() {
                break;
            }
            let compares = fence.iter().cloned().collect();
            result = match store.txn(compares, chunk.to_vec()).await {
                Ok(outcome) if outcome.succeeded => Ok(()),
                Ok(_) => Err(StoreError::Unavailable(
                    "leadership lost: the election key changed".into(),
                )),
                Err(e) => Err(e),
            };
        }
        if let Err(error) = &result {
            tracing::warn!(%error, "write failed; stepping down");
            let _ = failed.send(true);
        }
        for request in batch {
            let _ = request.done.send(match &result {
                Ok(()) => Ok(()),
                Err(e) => Err(StoreError::Unavailable(e.to_string())),
            });
        }
    }
}

/// Keeps only the last write of each key, in the order of last writes.
fn coalesce(ops: impl Iterator<Item = Op>) -> Vec<Op> {
    let ops: Vec<Op> = ops.collect();
    let mut last: HashMap<&str, usize> = HashMap::new();
    for (i, op) in ops.iter().enumerate() {
        if let Some(key) = key_of(op) {
            last.insert(key, i);
        }
    }
    let keep: Vec<bool> = ops
        .iter()
        .enumerate()
        .map(|(i, op)| key_of(op).is_none_or(|k| last[k] == i))
        .collect();
    ops.into_iter()
        .zip(keep)
        .filter_map(|(op, keep)| keep.then_some(op))
        .collect()
}

fn key_of(op: &Op) -> Option<&str> {
    match op {
        Op::Put { key, .. } | Op::Delete { key } => Some(key),
        Op::DeletePrefix { .. } => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn put(key: &str, v: u8) -> Op {
        Op::Put {
            key: key.into(),
            value: vec![v],
            lease: None,
        }
    }

    #[test]
    fn coalesce_keeps_the_last_write_per_key() {
        let ops = vec![
            put("a", 1),
            put("b", 1),
            put("a", 2),
            Op::Delete { key: "b".into() },
        ];
        assert_eq!(
            coalesce(ops.into_iter()),
            vec![put("a", 2), Op::Delete { key: "b".into() }]
        );
    }
}
