//! Dynamic mode: units leased from the coordinator's pool, acked once all
//! their samples reached the consumer.
//!
//! A feeder task leases a few units at a time and streams their spans into
//! the loader; when the pool has nothing free it sends a flush so samples
//! waiting in the shuffle buffer are delivered and their units acked (other
//! members may be waiting on them to finish the epoch). A unit is acked once
//! the consumer is done with every batch holding its samples: when it asks
//! for the next batch. Acks travel in batches, and a retried ack is
//! harmless. Delivery is at least once (a member that dies before acking has
//! its units read again elsewhere); acknowledgement is exactly once.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use rayon::ThreadPool;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tributary_common::proto::v1;
use tributary_common::span::Span;

use super::Session;
use crate::batch::Batch;
use crate::dataset::Dataset;
use crate::error::{Result, WorkerError};
use crate::fetch::Input;
use crate::loader::{decode_pool, Loader, LoaderConfig};

/// Units leased per request.
const LEASE_BATCH: u32 = 2;
/// How long one `Acquire` waits for units to come back.
const ACQUIRE_WAIT_MS: u32 = 5_000;

/// Samples still owed to the consumer, per unit.
#[derive(Debug, Default)]
struct Tracker {
    /// first sample id -> (unit, end id, samples not yet delivered)
    units: BTreeMap<u64, (v1::UnitRef, u64, u64)>,
    ready: Vec<v1::UnitRef>,
}

impl Tracker {
    fn delivered(&mut self, id: u64) {
        let Some((&first, entry)) = self.units.range_mut(..=id).next_back() else {
            return;
        };
        if id >= entry.1 {
            return;
        }
        entry.2 -= 1;
        if entry.2 == 0 {
            self.ready.push(entry.0);
            self.units.remove(&first);
        }
    }
}

/// Hook called with each leased unit (for logs and tests).
pub type OnLease = Arc<dyn Fn(&v1::Unit) + Send + Sync>;
/// Hook called with units whose acks the coordinator confirmed.
pub type OnAck = Arc<dyn Fn(&[v1::UnitRef]) + Send + Sync>;

/// A member's loader under a dynamic-mode coordinator.
pub struct DynamicLoader {
    session: Arc<Session>,
    dataset: Dataset,
    base: LoaderConfig,
    epoch: u64,
    loader: Option<Loader>,
    /// Decodes every epoch's batches.
    pool: Arc<ThreadPool>,
    tracker: Arc<Mutex<Tracker>>,
    feeder: Option<JoinHandle<Result<Option<Vec<v1::Unit>>>>>,
    carried: Vec<v1::Unit>,
    /// Units whose last samples went out in the batch the consumer holds.
    unacked: Vec<v1::UnitRef>,
    finished: bool,
    on_lease: Option<OnLease>,
    on_ack: Option<OnAck>,
}

impl std::fmt::Debug for DynamicLoader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DynamicLoader")
            .field("member", &self.session.member())
            .field("epoch", &self.epoch)
            .finish_non_exhaustive()
    }
}

impl DynamicLoader {
    /// Starts reading the job's current epoch.
    pub async fn start(
        session: Arc<Session>,
        dataset: Dataset,
        base: LoaderConfig,
        on_lease: Option<OnLease>,
        on_ack: Option<OnAck>,
    ) -> Result<Self> {
        let epoch = session.joined.epoch;
        let mut loader = Self {
            session,
            dataset,
            pool: decode_pool(base.decode_threads)?,
            base,
            epoch,
            loader: None,
            tracker: Arc::default(),
            feeder: None,
            carried: Vec::new(),
            unacked: Vec::new(),
            finished: false,
            on_lease,
            on_ack,
        };
        loader.begin().await?;
        Ok(loader)
    }

    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    pub fn finished(&self) -> bool {
        self.finished
    }

    async fn begin(&mut self) -> Result<()> {
        let job = self.session.config();
        let config = LoaderConfig {
            seed: job.seed,
            epoch: self.epoch,
            batch_size: job.batch_size as usize,
            shuffle_buffer: job.shuffle_buffer as usize,
            drop_last: false,
            ..self.base.clone()
        };
        let (tx, rx) = mpsc::channel(LEASE_BATCH as usize);
        self.loader = Some(
            Loader::builder(self.dataset.clone())
                .config(config)
                .input(rx)
                .decode_pool(Arc::clone(&self.pool))
                .build()
                .await?,
        );
        let feeder = Feeder {
            session: Arc::clone(&self.session),
            dataset: self.dataset.clone(),
            epoch: self.epoch,
            tracker: Arc::clone(&self.tracker),
            on_lease: self.on_lease.clone(),
            tx,
        };
        let carried = std::mem::take(&mut self.carried);
        self.feeder = Some(tokio::spawn(feeder.run(carried)));
        Ok(())
    }

    /// The next batch of the epoch; `None` at its end (then call
    /// [`DynamicLoader::next_epoch`]).
    pub async fn next(&mut self) -> Option<Result<Batch>> {
        if self.session.is_lost() {
            return Some(Err(WorkerError::Stopped(
                "the coordinator forgot this member (its lease expired)".into(),
            )));
        }
        // The consumer is done with the batch it held. Cancel-safe: the
        // units stay here until the coordinator has the ack.
        if !self.unacked.is_empty() {
            if let Err(e) = self.ack(&self.unacked).await {
                return Some(Err(e));
            }
            self.unacked.clear();
        }
        let item = self.loader.as_mut()?.next().await;
        match &item {
            Some(Ok(batch)) => {
                let mut tracker = self.tracker.lock().unwrap_or_else(|e| e.into_inner());
                // Skipped bad samples count as delivered, or their units
                // would never be acked.
                for &id in batch.ids.iter().chain(&batch.skipped_ids) {
                    tracker.delivered(id);
                }
                self.unacked.append(&mut tracker.ready);
            }
            None => {
                if let Some(feeder) = self.feeder.take() {
                    match feeder.await {
                        Ok(Ok(Some(next))) => self.carried = next,
                        Ok(Ok(None)) => self.finished = true,
                        Ok(Err(e)) => return Some(Err(e)),
                        Err(e) => return Some(Err(WorkerError::Stopped(format!("feeder: {e}")))),
                    }
                }
            }
            Some(Err(_)) => {}
        }
        item
    }

    async fn ack(&self, units: &[v1::UnitRef]) -> Result<()> {
        let request = v1::ReportRequest {
            job: self.session.job.clone(),
            member: self.session.member().to_owned(),
            acked: units.to_vec(),
            ..v1::ReportRequest::default()
        };
        self.session
            .client
            .send(&request, |mut c, r| async move { c.report(r).await })
            .await?;
        if let Some(on_ack) = &self.on_ack {
            on_ack(units);
        }
        Ok(())
    }

    /// Moves to the next epoch; false when the job is finished.
    pub async fn next_epoch(&mut self) -> Result<bool> {
        while self.loader.is_some() && self.feeder.is_some() {
            match self.next().await {
                Some(Err(e)) => return Err(e),
                Some(Ok(_)) => {}
                None => break,
            }
        }
        if self.finished {
            return Ok(false);
        }
        self.epoch = self.carried.first().map_or(self.epoch + 1, |u| u.epoch);
        self.begin().await?;
        Ok(true)
    }
}

struct Feeder {
    session: Arc<Session>,
    dataset: Dataset,
    epoch: u64,
    tracker: Arc<Mutex<Tracker>>,
    on_lease: Option<OnLease>,
    tx: mpsc::Sender<Input>,
}

impl Feeder {
    /// Leases and sends units of `self.epoch` until the pool moves on.
    /// Returns the units of the next epoch it leased (`None`: job finished).
    async fn run(self, carried: Vec<v1::Unit>) -> Result<Option<Vec<v1::Unit>>> {
        for unit in carried {
            self.send(&unit).await?;
        }
        let request = v1::AcquireRequest {
            secret: String::new(),
            job: self.session.job.clone(),
            member: self.session.member().to_owned(),
            max_units: LEASE_BATCH,
            wait_ms: ACQUIRE_WAIT_MS,
        };
        let mut flushed = false;
        loop {
            let got = self
                .session
                .client
                .send(&request, |mut c, r| async move { c.acquire(r).await })
                .await?;
            if got.finished {
                return Ok(None);
            }
            if let Some(first) = got.units.first() {
                if first.epoch != self.epoch {
                    return Ok(Some(got.units));
                }
                for unit in &got.units {
                    self.send(unit).await?;
                }
                flushed = false;
            } else if got.epoch != self.epoch {
                return Ok(Some(Vec::new()));
            } else if !flushed {
                // Nothing free: deliver what the shuffle buffer holds, so
                // our units get acked and the epoch can end.
                if self.tx.send(Input::Flush).await.is_err() {
                    return Ok(Some(Vec::new()));
                }
                flushed = true;
            }
        }
    }

    async fn send(&self, unit: &v1::Unit) -> Result<()> {
        let span: Span = unit.span.unwrap_or_default().into();
        let first = self.dataset.manifest.shard_start(span.shard as usize) + u64::from(span.start);
        {
            let mut tracker = self.tracker.lock().unwrap_or_else(|e| e.into_inner());
            tracker.units.insert(
                first,
                (
                    v1::UnitRef {
                        epoch: unit.epoch,
                        id: unit.id,
                    },
                    first + span.len(),
                    span.len(),
                ),
            );
        }
        if let Some(on_lease) = &self.on_lease {
            on_lease(unit);
        }
        self.tx
            .send(Input::Span(span))
            .await
            .map_err(|_| WorkerError::Stopped("the loader stopped".into()))
    }
}
