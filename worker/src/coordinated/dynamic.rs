//! Dynamic mode: units leased from the coordinator's pool, acked once all
//! their samples reached the consumer.
//!
//! A feeder task leases units and streams their spans into the loader, but
//! only a bounded lookahead ahead of the trainer
//! ([`DynamicOptions::lookahead`]): units it does not hold stay in the pool
//! for members that join, and a member that dies orphans at most that much
//! until its TTL. When the pool has nothing free it sends a flush so samples
//! waiting in the shuffle buffer are delivered and their units acked (other
//! members may be waiting on them to finish the epoch). A unit is acked once
//! the consumer is done with every batch holding its samples: when it asks
//! for the next batch. Acks travel in batches, and a retried ack is
//! harmless. Delivery is at least once (a member that dies before acking has
//! its units read again elsewhere); acknowledgement is exactly once.
//!
//! A member whose lease expired (frozen past its TTL, say) has had its
//! units handed to others; by default ([`OnLeaseLost::Rejoin`]) it drops
//! what it held, joins again as a new member and carries on with the job's
//! current epoch.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rayon::ThreadPool;
use tokio::sync::{mpsc, Notify};
use tokio::task::JoinHandle;
use tracing::Instrument;
use tributary_common::job::JobSpec;
use tributary_common::plan::span::Span;
use tributary_common::proto::v1;

use super::Session;
use crate::error::{Result, WorkerError};
use crate::pipeline::fetch::Input;
use crate::pipeline::metrics::Metrics;
use crate::pipeline::output::Batch;
use crate::pipeline::Datasets;
use crate::pipeline::{decode_pool, DecodeConfig, Loader};

/// The most units leased per request.
const LEASE_BATCH: u64 = 4;
/// How long one `Acquire` waits for units to come back.
const ACQUIRE_WAIT: Duration = Duration::from_secs(5);
/// Joins in a row, with no batch between them, before giving up.
const MAX_REJOINS: u32 = 3;

/// What a dynamic member does when the coordinator forgot it (its lease
/// expired, and its units went to others).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum OnLeaseLost {
    /// Drop what it held, join again as a new member and carry on.
    #[default]
    Rejoin,
    /// Fail: `next()` returns the error.
    Raise,
}

impl std::str::FromStr for OnLeaseLost {
    type Err = WorkerError;

    fn from_str(s: &str) -> Result<Self> {
        match s {
            "rejoin" => Ok(Self::Rejoin),
            "raise" => Ok(Self::Raise),
            other => Err(WorkerError::Config(format!(
                "on_lease_lost must be \"rejoin\" or \"raise\", not {other:?}"
            ))),
        }
    }
}

/// Hook called with each leased unit (for logs and tests).
pub type OnLease = Arc<dyn Fn(&v1::Unit) + Send + Sync>;
/// Hook called with units whose acks the coordinator confirmed.
pub type OnAck = Arc<dyn Fn(&[v1::UnitRef]) + Send + Sync>;
/// Hook called with the new member name after the member joined again.
pub type OnRejoin = Arc<dyn Fn(&str) + Send + Sync>;

/// How a dynamic member leases and what it does when its lease is lost.
#[derive(Clone, Default)]
pub struct DynamicOptions {
    /// The most samples the member holds leased but not yet handed to the
    /// trainer (whole units: it leases while a unit fits). Raised to what
    /// the pipeline needs to make progress (the shuffle buffer, a batch and
    /// a unit). `None`: what the pipeline holds when full (the shuffle
    /// buffer, the batches being built, decoded and prefetched) and a unit.
    pub lookahead: Option<u64>,
    pub on_lease_lost: OnLeaseLost,
    pub on_lease: Option<OnLease>,
    pub on_ack: Option<OnAck>,
    pub on_rejoin: Option<OnRejoin>,
}

impl std::fmt::Debug for DynamicOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DynamicOptions")
            .field("lookahead", &self.lookahead)
            .field("on_lease_lost", &self.on_lease_lost)
            .finish_non_exhaustive()
    }
}

/// The lookahead in samples for a job's batch size, shuffle buffer and
/// unit size, and the loader's queue depths (see [`DynamicOptions`]).
pub fn lookahead_samples(asked: Option<u64>, job: &JobSpec, decode: &DecodeConfig) -> u64 {
    let batch = u64::from(job.batch_size.max(1));
    let shuffle = u64::from(job.shuffle_buffer);
    let unit = u64::from(job.unit_samples.max(1));
    let least = shuffle + batch + unit;
    let in_flight = decode.batches_in_flight(batch as usize, decode.decode_threads);
    let queued = (decode.prefetch_batches + in_flight + 1) as u64;
    match asked {
        Some(asked) if asked < least => {
            tracing::warn!(
                asked,
                least,
                "lookahead raised to the shuffle buffer, a batch and a unit, which the pipeline needs"
            );
            least
        }
        Some(asked) => asked,
        None => least.saturating_add(batch.saturating_mul(queued)),
    }
}

/// Samples still owed to the consumer, per unit.
#[derive(Debug, Default)]
struct Tracker {
    /// first sample id -> (unit, end id, samples not yet delivered)
    units: BTreeMap<u64, (v1::UnitRef, u64, u64)>,
    ready: Vec<v1::UnitRef>,
    /// Samples leased and not yet delivered.
    owed: u64,
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
        self.owed -= 1;
        if entry.2 == 0 {
            self.ready.push(entry.0);
            self.units.remove(&first);
        }
    }
}

/// What the feeder and the loader share: the tracker, and a signal that
/// samples were delivered (room in the lookahead).
#[derive(Debug, Default)]
struct Progress {
    tracker: Mutex<Tracker>,
    delivered: Notify,
}

impl Progress {
    fn tracker(&self) -> std::sync::MutexGuard<'_, Tracker> {
        self.tracker.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// A member's loader under a dynamic-mode coordinator.
pub struct DynamicLoader {
    session: Arc<Session>,
    dataset: Datasets,
    /// How the member decodes (the job makes the plan).
    decode: DecodeConfig,
    options: DynamicOptions,
    epoch: u64,
    loader: Option<Loader>,
    /// Decodes every epoch's batches.
    pool: Arc<ThreadPool>,
    /// Counted into by every epoch's (and membership's) loader.
    metrics: Arc<Metrics>,
    progress: Arc<Progress>,
    feeder: Option<JoinHandle<Result<Option<Vec<v1::Unit>>>>>,
    carried: Vec<v1::Unit>,
    /// Units whose last samples went out in the batch the consumer holds.
    unacked: Vec<v1::UnitRef>,
    finished: bool,
    /// Set while dropping the old membership's state and joining again,
    /// so that a cancelled `next()` finishes the job on the next call.
    rejoining: bool,
    /// Joins since the last batch.
    rejoins: u32,
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
        dataset: impl Into<Datasets>,
        decode: DecodeConfig,
        options: DynamicOptions,
    ) -> Result<Self> {
        let epoch = session.epoch();
        let mut loader = Self {
            session,
            dataset: dataset.into(),
            pool: decode_pool(decode.decode_threads)?,
            metrics: Arc::default(),
            decode,
            options,
            epoch,
            loader: None,
            progress: Arc::default(),
            feeder: None,
            carried: Vec::new(),
            unacked: Vec::new(),
            finished: false,
            rejoining: false,
            rejoins: 0,
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

    /// What every loader of this member counted.
    pub fn metrics(&self) -> &Arc<Metrics> {
        &self.metrics
    }

    /// The member's name (a new one after it joined again).
    pub fn member(&self) -> String {
        self.session.member()
    }

    async fn begin(&mut self) -> Result<()> {
        let job = self.session.spec()?;
        let config = super::loader_config(&job, self.epoch, &self.decode);
        let lookahead = lookahead_samples(self.options.lookahead, &job, &self.decode);
        let (tx, rx) = mpsc::channel(LEASE_BATCH as usize);
        self.loader = Some(
            Loader::builder(self.dataset.clone())
                .config(config)
                .input(rx)
                .decode_pool(Arc::clone(&self.pool))
                .metrics(Arc::clone(&self.metrics))
                .build()
                .await?,
        );
        let feeder = Feeder {
            session: Arc::clone(&self.session),
            dataset: self.dataset.clone(),
            epoch: self.epoch,
            progress: Arc::clone(&self.progress),
            on_lease: self.options.on_lease.clone(),
            lookahead,
            unit_samples: u64::from(job.unit_samples.max(1)),
            tx,
        };
        let carried = std::mem::take(&mut self.carried);
        let span = self.session.span.clone();
        self.feeder = Some(tokio::spawn(feeder.run(carried).instrument(span)));
        Ok(())
    }

    /// The next batch of the epoch; `None` at its end (then call
    /// [`DynamicLoader::next_epoch`]). A member whose lease was lost joins
    /// again here ([`OnLeaseLost::Rejoin`]) and goes on with the job's
    /// current epoch.
    pub async fn next(&mut self) -> Option<Result<Batch>> {
        loop {
            if self.rejoining || self.lost_and_rejoining() {
                if let Err(error) = self.rejoin().await {
                    return Some(Err(error));
                }
                continue;
            }
            let item = self.next_of_membership().await;
            if matches!(item, Some(Err(_))) && self.lost_and_rejoining() {
                continue;
            }
            if matches!(item, Some(Ok(_))) {
                self.rejoins = 0;
            }
            return item;
        }
    }

    fn lost_and_rejoining(&self) -> bool {
        self.session.is_lost() && self.options.on_lease_lost == OnLeaseLost::Rejoin
    }

    /// Drops what the lost membership held (its units went to others) and
    /// joins again.
    async fn rejoin(&mut self) -> Result<()> {
        self.rejoins += 1;
        if self.rejoins > MAX_REJOINS {
            return Err(WorkerError::Stopped(format!(
                "member {:?} lost its lease {MAX_REJOINS} times in a row without reading a batch",
                self.session.member()
            )));
        }
        self.rejoining = true;
        if let Some(feeder) = self.feeder.take() {
            feeder.abort();
        }
        self.loader = None;
        self.carried.clear();
        self.unacked.clear();
        *self.progress.tracker() = Tracker::default();
        let was = self.session.member();
        let joined = self.session.rejoin().await?;
        tracing::warn!(
            was,
            member = joined.member,
            epoch = joined.epoch,
            "the member's lease was lost; dropped its units and joined again"
        );
        self.epoch = joined.epoch;
        self.finished = false;
        self.begin().await?;
        self.rejoining = false;
        if let Some(on_rejoin) = &self.options.on_rejoin {
            on_rejoin(&joined.member);
        }
        Ok(())
    }

    async fn next_of_membership(&mut self) -> Option<Result<Batch>> {
        if self.session.is_lost() {
            return Some(Err(WorkerError::Stopped(format!(
                "the coordinator forgot member {:?} (its lease expired); its units went to others",
                self.session.member()
            ))));
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
                let mut tracker = self.progress.tracker();
                // Skipped bad samples count as delivered, or their units
                // would never be acked.
                for &id in batch.ids.iter().chain(&batch.skipped_ids) {
                    tracker.delivered(id);
                }
                self.unacked.append(&mut tracker.ready);
                drop(tracker);
                self.progress.delivered.notify_one();
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
            acked: units.to_vec(),
            ..v1::ReportRequest::default()
        };
        self.session
            .send(&request, |mut c, r| async move { c.report(r).await })
            .await?;
        if let Some(on_ack) = &self.options.on_ack {
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

impl Drop for DynamicLoader {
    fn drop(&mut self) {
        // The feeder holds the session: without this it would go on
        // leasing (and the session renewing) for a loader nobody reads.
        if let Some(feeder) = self.feeder.take() {
            feeder.abort();
        }
    }
}

struct Feeder {
    session: Arc<Session>,
    dataset: Datasets,
    epoch: u64,
    progress: Arc<Progress>,
    on_lease: Option<OnLease>,
    /// The most samples held leased and undelivered.
    lookahead: u64,
    unit_samples: u64,
    tx: mpsc::Sender<Input>,
}

impl Feeder {
    /// Leases and sends units of `self.epoch` until the pool moves on.
    /// Returns the units of the next epoch it leased (`None`: job finished).
    async fn run(self, carried: Vec<v1::Unit>) -> Result<Option<Vec<v1::Unit>>> {
        for unit in carried {
            self.send(&unit).await?;
        }
        let mut request = v1::AcquireRequest {
            job: self.session.job.clone(),
            max_units: 1,
            wait_ms: ACQUIRE_WAIT.as_millis() as u32,
            ..v1::AcquireRequest::default()
        };
        let mut flushed = false;
        loop {
            request.max_units = self.room().await as u32;
            let got = self
                .session
                // The wait is the pool's, not the call's: a lone member
                // waiting out its own leased units at an epoch's end does
                // not time out however short its timeout.
                .send_within(ACQUIRE_WAIT, &request, |mut c, r| async move {
                    c.acquire(r).await
                })
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

    /// Waits until at least one unit fits in the lookahead; returns how
    /// many do (at most [`LEASE_BATCH`]). With nothing owed, one always
    /// fits.
    async fn room(&self) -> u64 {
        loop {
            let delivered = self.progress.delivered.notified();
            let owed = self.progress.tracker().owed;
            let room = self.lookahead.saturating_sub(owed) / self.unit_samples;
            if owed == 0 || room > 0 {
                return room.clamp(1, LEASE_BATCH);
            }
            delivered.await;
        }
    }

    async fn send(&self, unit: &v1::Unit) -> Result<()> {
        let span = unit_span(unit, &self.dataset)?;
        let first = self.dataset.layout().shard_start(span.shard) + u64::from(span.start);
        {
            let mut tracker = self.progress.tracker();
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
            tracker.owed += span.len();
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

/// A leased unit's span, checked: present, forward and inside the dataset
/// (a coordinator serving another dataset's units must not index past this
/// manifest).
fn unit_span(unit: &v1::Unit, datasets: &Datasets) -> Result<Span> {
    let bad = |reason: String| WorkerError::Coordinator {
        code: tonic::Code::Internal,
        message: format!("unit {} of epoch {}: {reason}", unit.id, unit.epoch),
    };
    let span = Span::try_from(unit.span.ok_or_else(|| bad("has no span".into()))?)
        .map_err(|error| bad(error.to_string()))?;
    datasets.check_span(&span).map_err(|error| match error {
        WorkerError::Config(message) => bad(message),
        other => other,
    })?;
    Ok(span)
}

#[cfg(test)]
mod tests;
