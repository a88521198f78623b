//! One method per member call: each checks the caller's secret, changes the
//! job in memory, and returns the answer with the call's [`Effects`]. None
//! does I/O; the service applies what they return.

use std::time::{Duration, Instant};

use tributary_common::ids::{Epoch, Generation, JobId, MemberId};
use tributary_common::job::JobSpec;
use tributary_common::plan::generation::CommitPoint;

use super::dynamic::{Unit, UnitRef};
use super::effects::{outcome, Effects, Event, Outcome};
use super::sync::{Assignment, Resume};
use super::{Dataset, DynModel, Identity, Job, MemberRecord, State, SyncModel};
use crate::auth::{chosen_secret, secret_digest};
use crate::error::{CoordError, Result};

/// Who makes a member-scoped call, and the secret that proves it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caller {
    pub member: MemberId,
    pub secret: String,
}

/// Who joins: its identity, the member name that stands for it, and the
/// secret it carries (to replace the member, or to become a new one's).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Joiner {
    pub identity: Identity,
    pub member: MemberId,
    pub secret: String,
    /// Sync: the checkpoint the rank restored (see [`super::sync`]).
    pub resume: Option<Resume>,
}

/// What a Join answers: the member's name, its secret and lease's
/// time to live, and (sync) its place in the generation it joined.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Joined {
    pub member: MemberId,
    pub config: JobSpec,
    pub ttl: Duration,
    /// Sync: the generation joined, its epoch, its world (the parts its
    /// plan splits the cut into: data-parallel groups, else ranks) and the
    /// member's part (its group, else its rank); dynamic: the open epoch,
    /// and zeros.
    pub generation: u64,
    pub epoch: u64,
    pub rank: u32,
    pub world: u32,
    /// The secret every later call of the member must carry.
    pub secret: String,
    /// Sync: the job's commit when the group committed past the start of
    /// the generation's incarnation (a new process must resume from it).
    pub committed: Option<CommitPoint>,
}

/// What one look at the pool found for an Acquire.
#[derive(Debug, PartialEq)]
pub enum Acquired {
    /// Units leased to the caller.
    Units { units: Vec<Unit>, epoch: Epoch },
    /// Every epoch is done.
    Finished(Epoch),
    /// The epoch was complete and the next one opened: look again.
    Advanced,
    /// Every unit of the epoch is leased or acked: wait for some to return.
    Empty(Epoch),
}

/// A job as one call sees it ([`Job::checked`]).
struct Checked<'a> {
    /// The caller's record: its identity and lease.
    record: MemberRecord,
    name: &'a JobId,
    config: &'a JobSpec,
    dataset: &'a Dataset,
    state: &'a mut State,
}

/// The sync model of `state`, or why a dynamic job cannot answer the call.
fn sync<'a>(state: &'a mut State, job: &JobId) -> Result<&'a mut SyncModel> {
    match state {
        State::Sync(model) => Ok(model),
        State::Dynamic(_) => Err(sync_only(job)),
    }
}

/// The dynamic model of `state`, or why a sync job cannot answer the call.
fn dynamic<'a>(state: &'a mut State, job: &JobId) -> Result<&'a mut DynModel> {
    match state {
        State::Dynamic(model) => Ok(model),
        State::Sync(_) => Err(dynamic_only(job)),
    }
}

/// Opens the next epoch if this one is complete: its effects, the waiting
/// Acquires woken and the watchers told.
fn advance(model: &mut DynModel, job: &JobId, dataset: &Dataset) -> Result<Option<Effects>> {
    let Some(ops) = model.advance(job, dataset)? else {
        return Ok(None);
    };
    let mut effects = Effects::ops(ops);
    effects.events.push(Event::PoolChanged(model.epoch()));
    effects.wake = true;
    Ok(Some(effects))
}

fn dynamic_only(job: &JobId) -> CoordError {
    CoordError::Precondition(format!(
        "job {:?} is a sync job; Acquire is for dynamic jobs",
        job.as_str()
    ))
}

/// Refuses a data-parallel group in a dynamic job: its members lease
/// units one by one, so the peers of a group would not read identical
/// batches.
fn grouped_dynamic(job: &JobId, identity: &Identity) -> Result<()> {
    match identity {
        Identity::Torchrun { dp: Some(dp), .. } => Err(CoordError::Invalid(format!(
            "job {:?} is a dynamic job, whose members lease units one by one, so the peers of a \
             data-parallel group would not read identical batches: data_parallel=({}, {}) is for \
             sync jobs (mode=\"sync\"); join a dynamic job without it",
            job.as_str(),
            dp.rank,
            dp.size
        ))),
        _ => Ok(()),
    }
}

fn sync_only(job: &JobId) -> CoordError {
    CoordError::Precondition(format!(
        "job {:?} is a dynamic job; use Acquire and acks instead of assignments and commits",
        job.as_str()
    ))
}

impl Job {
    /// How long a member lives without calling: the job's `member_ttl_s`.
    pub fn member_ttl(&self) -> Duration {
        Duration::from_secs(u64::from(self.stored.config.member_ttl_s))
    }

    /// Refuses a torchrun rank whose restart count skips past the next one
    /// (`restart > current + 1`, same run) while members of the current
    /// generation hold live leases: such a jump would strand them (their
    /// calls answered stale), and a real torchrun restart moves by one. It
    /// is answered ALREADY_EXISTS, which the client's Join retries, so a
    /// group that really skipped a restart (whose ranks never joined) joins
    /// once the old members leave or expire.
    fn skip_check(
        job: &JobId,
        members: &std::collections::BTreeMap<MemberId, MemberRecord>,
        model: &SyncModel,
        identity: &Identity,
        ttl_s: u32,
    ) -> Result<()> {
        let (
            Identity::Torchrun {
                run_id, restart, ..
            },
            Some((current_run, current)),
        ) = (identity, model.current_restart())
        else {
            return Ok(());
        };
        if run_id != current_run || *restart <= current.saturating_add(1) {
            return Ok(());
        }
        let live = members
            .values()
            .filter(|m| {
                matches!(&m.identity, Identity::Torchrun { run_id: r, restart: s, .. }
                    if r == current_run && *s == current)
            })
            .count();
        if live == 0 {
            return Ok(());
        }
        Err(CoordError::Stranding(format!(
            "job {:?}: restart count {restart} skips past {} while {live} members of the \
             current restart {current} (run {run_id:?}) are live: a torchrun restart moves by \
             one; this Join waits for them to leave or expire (up to {ttl_s} s)",
            job.as_str(),
            current.saturating_add(1),
        )))
    }

    /// Refuses a new member once the job holds [`Job::member_cap`], or
    /// the leader's jobs together hold their caps (one that replaces itself
    /// takes no room).
    fn room_for(&self, member: &MemberId) -> Result<()> {
        if self.members.contains_key(member) {
            return Ok(());
        }
        if self.members.len() < self.member_cap {
            return self.fleet_room();
        }
        Err(CoordError::Exhausted(format!(
            "job {:?} has {} live members, this coordinator's cap per job \
             (--max-members-per-job {}): a new member can join once one leaves or expires",
            self.name.as_str(),
            self.members.len(),
            self.member_cap
        )))
    }

    fn already_joined(&self, member: &MemberId) -> CoordError {
        CoordError::AlreadyJoined {
            job: self.name.clone(),
            member: member.clone(),
            ttl_s: self.stored.config.member_ttl_s,
        }
    }

    /// A member joins at `now`: a sync rank gets its generation (a new one
    /// for a restart). A member that exists is replaced only by a Join
    /// carrying its secret, which it keeps; a new member gets the secret it
    /// brings when that is random enough, else `fresh_secret`. A refused
    /// Join changes nothing.
    pub fn join(&mut self, joiner: Joiner, fresh_secret: String, now: Instant) -> Outcome<Joined> {
        outcome(self.admit(joiner, fresh_secret, now))
    }

    fn admit(
        &mut self,
        joiner: Joiner,
        fresh_secret: String,
        now: Instant,
    ) -> Result<(Joined, Effects)> {
        let Joiner {
            identity,
            member,
            secret,
            resume,
        } = joiner;
        self.room_for(&member)?;
        let ttl = self.member_ttl();
        let mut effects = Effects::default();
        let mut response = Joined {
            member: member.clone(),
            config: self.stored.config.clone(),
            ttl,
            generation: 0,
            epoch: 0,
            rank: 0,
            world: 0,
            secret: String::new(),
            committed: None,
        };
        match &mut self.state {
            State::Sync(model) => {
                // A bad request is refused as such before any wait.
                model.check_join(&identity, resume.as_ref())?;
                Self::skip_check(
                    &self.name,
                    &self.members,
                    model,
                    &identity,
                    self.stored.config.member_ttl_s,
                )?;
                let config = &self.stored.config;
                let (gen, ops) = model.join(
                    &self.name,
                    config,
                    &self.dataset,
                    &identity,
                    resume.as_ref(),
                )?;
                if !ops.is_empty() {
                    effects
                        .events
                        .push(Event::Generation(gen.record.generation));
                    effects.tally.generations = 1;
                }
                effects.ops.extend(ops);
                response.generation = gen.record.generation.get();
                response.epoch = gen.record.epoch.get();
                response.world = gen.record.world;
                response.committed = model.committed_since(&gen);
                if let Some(part) = identity.part() {
                    response.rank = part.rank;
                }
            }
            State::Dynamic(_) if resume.is_some() => return Err(sync_only(&self.name)),
            State::Dynamic(model) => {
                grouped_dynamic(&self.name, &identity)?;
                response.epoch = model.epoch().get();
            }
        }
        // Checked after the model: an existing member has the same identity,
        // so its join changed nothing there (or was refused as stale).
        let replaced = match self.members.get(&member) {
            None => None,
            Some(_) => match self.authorize(&member, &secret) {
                Ok(old) => Some(old.store_lease()),
                Err(_) => return Err(self.already_joined(&member)),
            },
        };
        // A Join proving the member's secret keeps it, and a new member may
        // bring a random secret of its own: processes that share one
        // identity (a rank's DataLoader workers) share one secret.
        let secret = match replaced {
            Some(_) => secret,
            None if chosen_secret(&secret) => secret,
            None => fresh_secret,
        };
        if let Some(old) = replaced {
            effects.extend(self.remove_member(&member));
            effects.revoke.extend(old);
        }
        let record = MemberRecord {
            identity,
            lease: 0,
            secret_sha256: secret_digest(&secret),
        };
        response.secret = secret;
        effects.ops.push(self.add_member(member, record, now)?);
        Ok((response, effects))
    }

    /// The job as one call sees it: the caller's record, checked, beside
    /// the parts a mode's model works on.
    fn checked(&mut self, caller: &Caller) -> Result<Checked<'_>> {
        let record = self.authorize(&caller.member, &caller.secret)?.clone();
        Ok(Checked {
            record,
            name: &self.name,
            config: &self.stored.config,
            dataset: &self.dataset,
            state: &mut self.state,
        })
    }

    /// The calling sync rank's part of `epoch`.
    pub fn assignment(&mut self, caller: &Caller, epoch: Epoch) -> Result<(Assignment, Effects)> {
        let job = self.checked(caller)?;
        let model = sync(job.state, job.name)?;
        let (assignment, ops) = model.assignment(
            job.name,
            job.config,
            job.dataset,
            &job.record.identity,
            epoch,
        )?;
        let mut effects = Effects::ops(ops);
        if !effects.ops.is_empty() {
            let generation = Generation(assignment.generation);
            effects.events.push(Event::Generation(generation));
            effects.tally.generations = 1;
        }
        Ok((assignment, effects))
    }

    /// One look at a dynamic job's pool for the calling member: up to `max`
    /// units, or why there are none.
    pub fn acquire(&mut self, caller: &Caller, max: usize) -> Result<(Acquired, Effects)> {
        let job = self.checked(caller)?;
        let model = dynamic(job.state, job.name)?;
        if model.finished() {
            return Ok((Acquired::Finished(model.epoch()), Effects::default()));
        }
        if let Some(effects) = advance(model, job.name, job.dataset)? {
            return Ok((Acquired::Advanced, effects));
        }
        let epoch = model.epoch();
        let (units, ops) =
            model.acquire(job.name, &caller.member, job.record.store_lease(), max)?;
        if units.is_empty() {
            return Ok((Acquired::Empty(epoch), Effects::ops(ops)));
        }
        let mut effects = Effects::ops(ops);
        effects.tally.units_leased = units.len() as u64;
        Ok((Acquired::Units { units, epoch }, effects))
    }

    /// The calling member's progress: a sync rank's samples of
    /// `generation`, or a dynamic member's acks (applied in order up to the
    /// first refused one, whose error the outcome carries).
    pub fn report(
        &mut self,
        caller: &Caller,
        generation: Generation,
        samples: u64,
        acked: &[UnitRef],
    ) -> Outcome<()> {
        match self.record_report(caller, generation, samples, acked) {
            Ok((None, effects)) => (Ok(()), effects),
            Ok((Some(error), effects)) => (Err(error), effects),
            Err(error) => (Err(error), Effects::default()),
        }
    }

    fn record_report(
        &mut self,
        caller: &Caller,
        generation: Generation,
        samples: u64,
        acked: &[UnitRef],
    ) -> Result<(Option<CoordError>, Effects)> {
        let job = self.checked(caller)?;
        match job.state {
            State::Sync(model) => {
                let ops = model.report(
                    job.name,
                    job.config,
                    job.dataset,
                    &job.record.identity,
                    generation,
                    samples,
                )?;
                Ok((None, Effects::ops(ops)))
            }
            State::Dynamic(model) => {
                let (ops, error, tally) = model.ack(job.name, &caller.member, acked)?;
                let mut effects = Effects::ops(ops);
                effects.tally = tally;
                if let Some(advanced) = advance(model, job.name, job.dataset)? {
                    effects.extend(advanced);
                }
                Ok((error, effects))
            }
        }
    }

    /// The calling rank had emitted `samples` of `generation` when its
    /// checkpoint became durable; the job's commit, the point the next
    /// restart resumes from, is the minimum over the group's ranks.
    pub fn commit(
        &mut self,
        caller: &Caller,
        generation: Generation,
        samples: u64,
    ) -> Result<((), Effects)> {
        let job = self.checked(caller)?;
        let model = sync(job.state, job.name)?;
        let identity = &job.record.identity;
        let ops = model.commit(
            job.name,
            job.config,
            job.dataset,
            identity,
            generation,
            samples,
        )?;
        let mut effects = Effects::ops(ops);
        effects.tally.commits = u64::from(!effects.ops.is_empty());
        Ok(((), effects))
    }

    /// The calling member leaves: forgotten, its units back in the pool.
    pub fn leave(&mut self, caller: &Caller) -> Result<((), Effects)> {
        let lease = self
            .authorize(&caller.member, &caller.secret)?
            .store_lease();
        let mut effects = self.remove_member(&caller.member);
        effects.revoke.extend(lease);
        effects.wake = true;
        Ok(((), effects))
    }
}
