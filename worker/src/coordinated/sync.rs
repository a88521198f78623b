//! Sync mode: this rank's equal part of each generation.
//!
//! The loader reads the part the coordinator assigns (its data-parallel
//! group's, shared with its peers, or its own), shuffled with the
//! seed `(seed, epoch, generation, rank)`, so the coordinator can recompute
//! which samples it emitted from a count alone. A checkpoint saves
//! [`SyncLoader::state_dict`] and, once the checkpoint is durable, calls
//! [`SyncLoader::commit`] (every rank does: the job's commit is the
//! minimum over the group's ranks); after a torchrun restart the new
//! generation resumes from that commit, and a process started again any
//! other way (a plain re-run, a requeue, a pod restart, a fresh in-process
//! coordinator) resumes from it by handing the checkpoint's state to
//! [`SyncLoader::load_state_dict`] before reading.

use std::sync::Arc;
use std::time::{Duration, Instant};

use rayon::ThreadPool;
use tracing::Instrument;
use tributary_common::plan::generation::{CommitPoint, GenerationRecord};
use tributary_common::plan::span::SpanSet;
use tributary_common::proto::{spans_from_proto, v1};

use super::state::{plan_digest, LoaderState};
use super::Session;
use crate::error::{Result, WorkerError};
use crate::pipeline::metrics::Metrics;
use crate::pipeline::output::Batch;
use crate::pipeline::Datasets;
use crate::pipeline::{decode_pool, DecodeConfig, Loader, LoaderConfig, ShuffleBytes, Stripe};

/// How long a rank asking for the next epoch waits for the other ranks
/// of its generation to read their parts of this one (see
/// [`SyncLoader::assignment_of`]): far longer than ranks stepping together
/// drift apart, short enough that a rank that skipped its epoch's end fails.
const EPOCH_WAIT: Duration = Duration::from_secs(600);

/// Progress reaches the coordinator at most this often.
const REPORT_EVERY: Duration = Duration::from_secs(1);

/// A rank's loader under a sync-mode coordinator.
///
/// The pipeline starts on the first [`SyncLoader::next`], so a loader used
/// only to checkpoint (its batches read by DataLoader worker processes)
/// fetches nothing.
#[derive(Debug)]
pub struct SyncLoader {
    session: Arc<Session>,
    dataset: Datasets,
    /// [`plan_digest`] of the job and its dataset, stamped on every state
    /// and checked against every state loaded.
    plan: u32,
    /// How the rank decodes, and which of the epoch's batches it reads.
    decode: DecodeConfig,
    stripe: Stripe,
    assignment: v1::Assignment,
    pipeline: Pipeline,
    /// Decodes every epoch's batches.
    pool: Option<Arc<ThreadPool>>,
    /// Counted into by every epoch's loader.
    metrics: Arc<Metrics>,
    emitted: u64,
    reported: Instant,
    /// Batches were handed out in this process: a state can no longer
    /// decide where the loader starts.
    delivered: bool,
    /// The job's commit a new process must resume from before reading
    /// (the group committed past the start of the generation it joined).
    must_resume: Option<CommitPoint>,
    /// The end of the part reached the coordinator (see [`SyncLoader::next`]).
    end_reported: bool,
}

#[derive(Debug)]
enum Pipeline {
    /// The job is finished.
    None,
    /// Assigned, not started yet.
    Pending(Box<LoaderConfig>, SpanSet),
    Running(Loader),
}

impl SyncLoader {
    /// Reads the member's part of the epoch it joined in, decoded as
    /// `decode` says; the job and the assignment make the plan (see
    /// [`super::loader_config`]), but for the `stripe` of it this process
    /// reads.
    pub async fn start(
        session: Arc<Session>,
        dataset: impl Into<Datasets>,
        decode: DecodeConfig,
        stripe: Stripe,
    ) -> Result<Self> {
        let epoch = session.epoch();
        Self::start_at(session, dataset, decode, stripe, epoch).await
    }

    /// Reads the member's part of `epoch`, which must be the epoch of the
    /// generation the member is in, or the next one.
    pub async fn start_at(
        session: Arc<Session>,
        dataset: impl Into<Datasets>,
        decode: DecodeConfig,
        stripe: Stripe,
        epoch: u64,
    ) -> Result<Self> {
        let dataset = dataset.into();
        let plan = plan_digest(&session.spec()?, dataset.layout());
        let mut loader = Self {
            session,
            plan,
            dataset,
            decode,
            stripe,
            assignment: v1::Assignment::default(),
            pipeline: Pipeline::None,
            pool: None,
            metrics: Arc::default(),
            emitted: 0,
            reported: Instant::now(),
            delivered: false,
            must_resume: None,
            end_reported: false,
        };
        loader.begin(epoch).await?;
        Ok(loader)
    }

    /// Marks the loader as a new process's: when the group committed past
    /// the start of the generation it joined, reading it from the start
    /// would train those samples twice, so the first batch is refused
    /// until [`SyncLoader::load_state_dict`] resumes from the job's commit.
    pub fn guard_replay(mut self, joined: &v1::JoinResponse) -> Self {
        self.must_resume = joined.committed_generation.map(|g| CommitPoint {
            generation: tributary_common::ids::Generation(g),
            samples: joined.committed_samples,
        });
        self
    }

    /// Starts `epoch` over from its first batch (see [`SyncLoader::start_at`]).
    pub async fn set_epoch(&mut self, epoch: u64) -> Result<()> {
        self.begin(epoch).await
    }

    /// Asks for the rank's part of `request.epoch`. The next epoch opens
    /// once every rank of the current generation read its part (the
    /// coordinator answers ABORTED until then): asked at the end of an
    /// epoch, that is a wait for the slowest rank's last batches, retried
    /// here for up to [`EPOCH_WAIT`].
    async fn assignment_of(&self, request: &v1::AssignmentRequest) -> Result<v1::Assignment> {
        let deadline = tokio::time::Instant::now() + EPOCH_WAIT;
        let mut pause = Duration::from_millis(20);
        let mut told = None::<tokio::time::Instant>;
        loop {
            let answer = self
                .session
                .send(request, |mut c, r| async move { c.get_assignment(r).await })
                .await;
            match answer {
                Err(WorkerError::Coordinator {
                    code: tonic::Code::Aborted,
                    message,
                }) if tokio::time::Instant::now() < deadline => {
                    let now = tokio::time::Instant::now();
                    if told.is_none_or(|at| now - at >= Duration::from_secs(30)) {
                        told = Some(now);
                        tracing::info!(epoch = request.epoch, %message, "waiting for the other ranks");
                    }
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).min(Duration::from_secs(1));
                }
                answer => return answer,
            }
        }
    }

    async fn begin(&mut self, epoch: u64) -> Result<()> {
        let request = v1::AssignmentRequest {
            secret: String::new(),
            job: self.session.job.clone(),
            epoch,
            ..v1::AssignmentRequest::default()
        };
        let assignment = self.assignment_of(&request).await?;
        self.emitted = 0;
        self.end_reported = false;
        self.pipeline = Pipeline::None;
        if !assignment.finished {
            let job = self.session.spec()?;
            let mut config = super::loader_config(&job, assignment.epoch, &self.decode);
            config.plan.generation = assignment.generation;
            config.plan.rank = assignment.rank as usize;
            config.plan.world = assignment.world as usize;
            config.plan.stripe = self.stripe;
            // The coordinator recomputes what this rank's buffer emitted
            // from positions alone (a dead rank's remainder): a byte bound
            // would make emissions depend on sizes it does not know, so the
            // buffer gives out by count and fails past its byte bound.
            config.plan.shuffle_bytes = ShuffleBytes::for_sync();
            config.validate()?;
            let spans = spans_from_proto(assignment.spans.clone()).map_err(|error| {
                WorkerError::Coordinator {
                    code: tonic::Code::Internal,
                    message: format!("the assignment of epoch {}: {error}", assignment.epoch),
                }
            })?;
            tracing::info!(
                epoch = assignment.epoch,
                generation = assignment.generation,
                rank = assignment.rank,
                samples = spans.len(),
                "assignment"
            );
            self.pipeline = Pipeline::Pending(Box::new(config), spans);
        }
        self.assignment = assignment;
        Ok(())
    }

    pub fn epoch(&self) -> u64 {
        self.assignment.epoch
    }

    pub fn generation(&self) -> u64 {
        self.assignment.generation
    }

    pub fn rank(&self) -> u32 {
        self.assignment.rank
    }

    pub fn world(&self) -> u32 {
        self.assignment.world
    }

    /// Samples of this rank's part of the generation.
    pub fn samples(&self) -> u64 {
        match &self.pipeline {
            Pipeline::None => 0,
            Pipeline::Pending(_, spans) => spans.len(),
            Pipeline::Running(loader) => loader.samples(),
        }
    }

    /// Whether every epoch of the job is done.
    pub fn finished(&self) -> bool {
        self.assignment.finished
    }

    /// What every epoch's loader counted.
    pub fn metrics(&self) -> &Arc<Metrics> {
        &self.metrics
    }

    /// The next batch of the epoch; `None` at its end (then call
    /// [`SyncLoader::next_epoch`]). Before the end is answered, the report
    /// of the whole part has reached the coordinator (retried as every call
    /// is): the job finishes on the reports of its last epoch, so the end is
    /// not left to a best-effort report. An error there is answered instead
    /// of the end (the next call tries again).
    pub async fn next(&mut self) -> Option<Result<Batch>> {
        if self.session.is_lost() {
            return Some(Err(WorkerError::Stopped(
                "the coordinator forgot this member (its lease expired) and it could not rejoin"
                    .into(),
            )));
        }
        if let Err(error) = self.check_resumed() {
            return Some(Err(error));
        }
        if let Pipeline::Pending(config, spans) = &self.pipeline {
            // Cancel-safe: the pending pipeline stays until one is running.
            let pool = match &self.pool {
                Some(pool) => Arc::clone(pool),
                None => match decode_pool(config.decode.decode_threads) {
                    Ok(pool) => Arc::clone(self.pool.insert(pool)),
                    Err(error) => return Some(Err(error)),
                },
            };
            let built = Loader::builder(self.dataset.clone())
                .config((**config).clone())
                .spans(spans.clone())
                .decode_pool(pool)
                .metrics(Arc::clone(&self.metrics))
                .build()
                .await;
            match built {
                Ok(loader) => self.pipeline = Pipeline::Running(loader),
                Err(error) => {
                    self.pipeline = Pipeline::None;
                    return Some(Err(error));
                }
            }
        }
        let Pipeline::Running(loader) = &mut self.pipeline else {
            return None;
        };
        let item = loader.next().await;
        // A stripe's count is not the rank's: only whole readers report.
        let whole = self.stripe.count == 1;
        if item.is_none() && whole && !self.end_reported {
            // Cancel-safe: nothing is consumed here, a retry reports again.
            match self.send_report().await {
                Ok(()) => {}
                // A newer restart replaced this rank's generation: what it
                // read no longer decides the job's end (its next call says
                // it is stale).
                Err(WorkerError::Coordinator {
                    code: tonic::Code::FailedPrecondition,
                    message,
                }) => {
                    tracing::warn!(
                        generation = self.assignment.generation,
                        %message,
                        "the end of the part was not recorded"
                    );
                }
                Err(error) => return Some(Err(error)),
            }
            self.end_reported = true;
            return None;
        }
        if let Some(Ok(batch)) = &item {
            // Skipped bad samples were read too: the coordinator counts
            // the part's samples in order, whatever became of them.
            self.emitted += batch.consumed() as u64;
            self.delivered = true;
            if whole && (self.reported.elapsed() >= REPORT_EVERY || self.emitted == self.samples())
            {
                self.reported = Instant::now();
                self.report();
            }
        }
        item
    }

    /// Refuses to read while this new process must resume first (see
    /// [`SyncLoader::guard_replay`]); readers sharing the rank's membership
    /// (DataLoader workers) are checked through their rank's loader.
    pub fn check_resumed(&self) -> Result<()> {
        let Some(commit) = self.must_resume else {
            return Ok(());
        };
        Err(WorkerError::Config(format!(
            "job {:?} has a commit (generation {}, {} samples) past the start of generation {}, \
             which this new process joined: reading it from the start would train the \
             committed samples twice. Restore the checkpoint saved at that commit and pass its \
             loader state to load_state_dict(state) before reading (or use another job= to \
             start over)",
            self.session.job,
            commit.generation.get(),
            commit.samples,
            self.assignment.generation
        )))
    }

    /// Sends progress without waiting (best effort; commits are what count).
    /// Sends progress and waits for the coordinator's answer.
    async fn send_report(&self) -> Result<()> {
        self.report_state(&LoaderState {
            epoch: self.assignment.epoch,
            generation: self.assignment.generation,
            samples: self.emitted,
            history: Vec::new(),
            plan: None,
        })
        .await
    }

    /// Reports that the rank's trainer consumed `state.samples` of
    /// `state.generation`, and waits for the answer: what a process whose
    /// batches other processes read (DataLoader workers, each a stripe)
    /// sends at the end of a pass, so that the job's end is known.
    pub async fn report_state(&self, state: &LoaderState) -> Result<()> {
        let request = v1::ReportRequest {
            job: self.session.job.clone(),
            generation: state.generation,
            samples: state.samples,
            ..v1::ReportRequest::default()
        };
        self.session
            .send(&request, |mut c, r| async move { c.report(r).await })
            .await?;
        Ok(())
    }

    /// Sends progress without waiting (best effort, for status; the end of
    /// the part is reported and waited for by [`SyncLoader::next`]).
    fn report(&self) {
        let session = Arc::clone(&self.session);
        let request = v1::ReportRequest {
            job: session.job.clone(),
            generation: self.assignment.generation,
            samples: self.emitted,
            ..v1::ReportRequest::default()
        };
        let span = session.span.clone();
        let generation = request.generation;
        tokio::spawn(
            async move {
                let result = session
                    .send(&request, |mut c, r| async move { c.report(r).await })
                    .await;
                if let Err(error) = result {
                    tracing::warn!(%error, generation, "progress report failed");
                }
            }
            .instrument(span),
        );
    }

    /// Moves to the next epoch; false when the job is finished.
    pub async fn next_epoch(&mut self) -> Result<bool> {
        if self.assignment.finished {
            return Ok(false);
        }
        self.begin(self.assignment.epoch + 1).await?;
        Ok(!self.assignment.finished)
    }

    /// The state to save with a checkpoint.
    pub fn state_dict(&self) -> LoaderState {
        LoaderState {
            epoch: self.assignment.epoch,
            generation: self.assignment.generation,
            samples: self.emitted,
            history: self
                .assignment
                .history
                .iter()
                .cloned()
                .map(GenerationRecord::from)
                .collect(),
            plan: Some(self.plan),
        }
    }

    /// Tells the coordinator a checkpoint holding `state` is durable: a
    /// restart resumes after it.
    pub async fn commit(&self, state: &LoaderState) -> Result<()> {
        let request = v1::CommitRequest {
            secret: String::new(),
            job: self.session.job.clone(),
            generation: state.generation,
            samples: state.samples,
            ..v1::CommitRequest::default()
        };
        self.session
            .send(&request, |mut c, r| async move { c.commit(r).await })
            .await?;
        Ok(())
    }

    /// Resumes from a restored checkpoint: the rank joins the generation
    /// that resumes from `state`, which must be the job's commit (a new one
    /// when the group's current generation did not already resume from it;
    /// a job with no commit, on a fresh in-process coordinator, is seeded
    /// from the state's history). Refused, with what to do, for a state
    /// that is not the job's commit, and once this process has handed out
    /// batches: never accepted and ignored.
    pub async fn load_state_dict(&mut self, state: &LoaderState) -> Result<()> {
        if self.delivered {
            return Err(WorkerError::Config(format!(
                "load_state_dict() after this loader handed out batches (generation {}, {} \
                 samples): restore the checkpoint before reading from the loader",
                self.assignment.generation, self.emitted
            )));
        }
        state.validate()?;
        if let Some(plan) = state.plan.filter(|p| *p != self.plan) {
            return Err(WorkerError::Config(format!(
                "the loader state was saved under another plan (plan {plan:08x}, job {:?} plans \
                 as {:08x}): its seed, batch size, shuffle buffer, mix or dataset differ, so its \
                 counts would resume other samples. Load a checkpoint of this job, or start this \
                 job with the settings and dataset the state was saved with",
                self.session.job, self.plan
            )));
        }
        let joined = self.session.resume(state.to_resume()).await?;
        self.must_resume = None;
        self.begin(joined.epoch).await?;
        if self.assignment.generation != joined.generation && !self.assignment.finished {
            return Err(WorkerError::Coordinator {
                code: tonic::Code::Aborted,
                message: format!(
                    "resumed into generation {}, but the job moved on to generation {} meanwhile",
                    joined.generation, self.assignment.generation
                ),
            });
        }
        tracing::info!(
            generation = joined.generation,
            epoch = joined.epoch,
            from_generation = state.generation,
            from_samples = state.samples,
            "resumed from a checkpoint"
        );
        Ok(())
    }
}
