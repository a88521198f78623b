//! The members' calls and GetStatus, one method each: the job found
//! (waiting while it loads), the model's method run under the job's lock
//! with the call recorded as the member's (`Job::seen`), and its effects
//! applied by `Leader::change` before the answer returns.

use std::time::{Duration, Instant};

use tokio::sync::broadcast;
use tributary_common::ids::{Epoch, Generation, JobId};

use super::Leader;
use crate::auth::new_secret;
use crate::error::{CoordError, Result};
use crate::model::{
    outcome, Acquired, Assignment, Caller, Event, Job, JobStatus, Joined, Joiner, Progress, State,
    UnitRef,
};

/// Event streams a job holds beyond two per member.
const WATCH_SLACK: usize = 16;

impl Leader {
    /// A member joins the job `name` ([`Job::join`]).
    pub async fn join(&self, name: &JobId, joiner: Joiner) -> Result<Joined> {
        let handle = self.job(name).await?;
        let fresh_secret = new_secret()?;
        self.change(&handle, |job| {
            job.join(joiner, fresh_secret, Instant::now())
        })
        .await
    }

    /// The calling member is alive: it lives another member TTL, which is
    /// returned. Answered from memory: a member's liveness costs the store
    /// nothing (`model::liveness`). A member the job no longer has (it
    /// stopped calling for longer) is answered `UnknownMember`.
    pub async fn keep_alive(&self, name: &JobId, caller: &Caller) -> Result<Duration> {
        let handle = self.job(name).await?;
        let mut job = handle.job.lock().await;
        if job.deleted {
            return Err(self.deleted.unknown(&job.name));
        }
        job.renew(caller, Instant::now())
    }

    /// The calling sync rank's part of `epoch` ([`Job::assignment`]).
    pub async fn assignment(
        &self,
        name: &JobId,
        caller: &Caller,
        epoch: Epoch,
    ) -> Result<Assignment> {
        let handle = self.job(name).await?;
        self.change(&handle, |job| {
            let answer = outcome(job.assignment(caller, epoch));
            job.seen(caller, Instant::now(), answer, |_| Progress::None)
        })
        .await
    }

    /// The job's events, for the calling member: they end when the job is
    /// deleted (once the last call holding it returns).
    pub async fn watch(&self, name: &JobId, caller: &Caller) -> Result<broadcast::Receiver<Event>> {
        let handle = self.job(name).await?;
        let members = {
            let job = handle.job.lock().await;
            job.authorize(&caller.member, &caller.secret)?;
            job.members.len()
        };
        // Each member watches once (a client that reconnects may hold two
        // for a moment): more streams than that are refused, not held.
        let cap = 2 * members + WATCH_SLACK;
        let watching = handle.events.receiver_count();
        if watching >= cap {
            return Err(CoordError::Exhausted(format!(
                "job {:?} has {watching} event streams open for {members} members: a member \
                 watches once; close the streams it no longer reads",
                name.as_str()
            )));
        }
        Ok(handle.events.subscribe())
    }

    /// Up to `max` units of a dynamic job's pool for the calling member,
    /// waiting up to `wait` for some to return: `Units`, `Finished`, or
    /// `Empty` when the wait ran out (never `Advanced`: an epoch that
    /// opened is looked at again at once).
    pub async fn acquire(
        &self,
        name: &JobId,
        caller: &Caller,
        max: usize,
        wait: Duration,
    ) -> Result<Acquired> {
        let handle = self.job(name).await?;
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            let notified = handle.notify.notified();
            let look = |job: &mut Job| {
                let answer = outcome(job.acquire(caller, max));
                job.seen(caller, Instant::now(), answer, |_| Progress::None)
            };
            match self.change(&handle, look).await? {
                Acquired::Advanced => continue,
                Acquired::Empty(epoch) => {
                    if tokio::time::timeout_at(deadline, notified).await.is_err() {
                        return Ok(Acquired::Empty(epoch));
                    }
                }
                got => return Ok(got),
            }
        }
    }

    /// The calling member's progress ([`Job::report`]). Reports of many
    /// ranks share one flush: each waits for its write after its lock is
    /// released.
    pub async fn report(
        &self,
        name: &JobId,
        caller: &Caller,
        generation: Generation,
        samples: u64,
        acked: &[UnitRef],
    ) -> Result<()> {
        let handle = self.job(name).await?;
        self.change(&handle, |job| {
            let answer = job.report(caller, generation, samples, acked);
            let sync = acked.is_empty() && matches!(job.state, State::Sync(_));
            job.seen(caller, Instant::now(), answer, |effects| match sync {
                true => Progress::Consumed(samples),
                false => Progress::Acked(effects.tally.samples_acked),
            })
        })
        .await
    }

    /// Every rank of `generation` consumed `samples` ([`Job::commit`]).
    pub async fn commit(
        &self,
        name: &JobId,
        caller: &Caller,
        generation: Generation,
        samples: u64,
    ) -> Result<()> {
        let handle = self.job(name).await?;
        self.change(&handle, |job| {
            let answer = outcome(job.commit(caller, generation, samples));
            job.seen(caller, Instant::now(), answer, |_| Progress::None)
        })
        .await
    }

    /// The calling member leaves ([`Job::leave`]).
    pub async fn leave(&self, name: &JobId, caller: &Caller) -> Result<()> {
        let handle = self.job(name).await?;
        self.change(&handle, |job| outcome(job.leave(caller)))
            .await?;
        tracing::info!(
            job = name.as_str(),
            member = caller.member.as_str(),
            "member left"
        );
        Ok(())
    }

    /// The job's status, once every write made so far is durable;
    /// `JobFailed` with the reason for a job that cannot be served.
    pub async fn status(&self, name: &JobId) -> Result<JobStatus> {
        let handle = self.job(name).await?;
        let status = handle.job.lock().await.status();
        // A handler cancelled mid-write (its client died) leaves its change
        // in memory with the write still queued: answer only once it is
        // durable, so a status never shows what a crash could lose.
        self.flush().await?;
        Ok(status)
    }
}
