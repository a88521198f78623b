//! Dynamic mode: the epoch's units leased to whoever asks.
//!
//! A unit is leased to a member until it acks it; when the member stops
//! calling, the leader forgets it (`liveness`), deletes the unit's lease
//! key and returns the unit to the pool at once. An ack moves a unit from leased to acked,
//! exactly once: an ack from a member that no longer holds the unit fails.
//! When every unit of the epoch is acked, the next epoch opens.

use tributary_common::error::PoolError;
use tributary_common::ids::{Epoch, JobId, MemberId};
use tributary_common::job::JobSpec;
use tributary_common::plan::lease::{units, LeasePool};
use tributary_common::plan::span::Span;

use super::effects::{leased_put, put, Tally};
use super::status::ModeStatus;
use super::Dataset;
use crate::error::{CoordError, Result};
use crate::keys::{self, Key};
use crate::store::{LeaseId, Op};

#[derive(Debug)]
pub struct DynModel {
    epoch: Epoch,
    /// `None`: unbounded (never finished).
    epochs: Option<u64>,
    seed: u64,
    unit_samples: u32,
    units: Vec<Span>,
    pool: LeasePool,
}

/// A unit a member acks: its epoch and its index in the epoch's units.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UnitRef {
    pub epoch: Epoch,
    pub unit: u32,
}

/// A unit leased to a member: its epoch, its index in the epoch's units,
/// and the samples it holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Unit {
    pub epoch: u64,
    pub id: u32,
    pub span: Span,
}

impl DynModel {
    pub fn new(config: &JobSpec, dataset: &Dataset, epoch: Epoch) -> Self {
        let units = units(
            &*dataset.layout,
            config.seed,
            epoch.get(),
            config.unit_samples,
        );
        Self {
            epoch,
            epochs: config.epochs,
            seed: config.seed,
            unit_samples: config.unit_samples,
            pool: LeasePool::new(units.len()),
            units,
        }
    }

    pub fn epoch(&self) -> Epoch {
        self.epoch
    }

    pub fn finished(&self) -> bool {
        self.epochs.is_some_and(|epochs| self.epoch.get() >= epochs)
    }

    /// Records a stored ack of the open epoch; an error (the unit does not
    /// exist, or is acked twice) is the caller's to name the key with.
    pub fn restore_acked(
        &mut self,
        unit: u32,
        member: &MemberId,
    ) -> std::result::Result<(), PoolError> {
        self.pool.restore_acked(unit, member)
    }

    /// Records a stored lease of the open epoch, as [`Self::restore_acked`].
    pub fn restore_leased(
        &mut self,
        unit: u32,
        member: &MemberId,
    ) -> std::result::Result<(), PoolError> {
        self.pool.restore_leased(unit, member)
    }

    /// How many units `member` holds.
    pub fn leased_by(&self, member: &MemberId) -> u32 {
        self.pool.leased_by(member).len() as u32
    }

    /// Returns `member`'s unacked units to the pool.
    pub fn release(&mut self, member: &MemberId) -> Vec<u32> {
        self.pool.release(member)
    }

    /// Opens the next epoch when this one is complete; returns the ops.
    pub fn advance(&mut self, job: &JobId, dataset: &Dataset) -> Result<Option<Vec<Op>>> {
        if self.finished() || !self.pool.is_complete() {
            return Ok(None);
        }
        let done = self.epoch;
        self.epoch = done.next();
        tracing::info!(
            job = job.as_str(),
            epoch = done.get(),
            next = self.epoch.get(),
            "epoch finished"
        );
        let mut ops = vec![put(Key::DynEpoch { job: job.clone() }, &self.epoch)?];
        if !self.finished() {
            ops.push(Op::DeletePrefix {
                prefix: keys::dyn_units(job, done),
            });
            self.units = units(
                &*dataset.layout,
                self.seed,
                self.epoch.get(),
                self.unit_samples,
            );
            self.pool = LeasePool::new(self.units.len());
        }
        Ok(Some(ops))
    }

    /// Leases up to `max` units to `member` (their keys under the store
    /// `lease` of a member an earlier coordinator admitted, if any).
    pub fn acquire(
        &mut self,
        job: &JobId,
        member: &MemberId,
        lease: Option<LeaseId>,
        max: usize,
    ) -> Result<(Vec<Unit>, Vec<Op>)> {
        let got = self.pool.lease(member, max);
        let ops = got
            .iter()
            .map(|&unit| {
                let key = Key::Leased {
                    job: job.clone(),
                    epoch: self.epoch,
                    unit,
                };
                leased_put(key, member, lease)
            })
            .collect::<Result<_>>()?;
        let units = got
            .iter()
            .map(|&id| Unit {
                epoch: self.epoch.get(),
                id,
                span: self.units[id as usize],
            })
            .collect();
        Ok((units, ops))
    }

    /// Acks units in order, stopping at the first that cannot be acked;
    /// returns the ops of those acked, the error, if any, and what was
    /// acked (units and their samples).
    pub fn ack(
        &mut self,
        job: &JobId,
        member: &MemberId,
        acked: &[UnitRef],
    ) -> Result<(Vec<Op>, Option<CoordError>, Tally)> {
        let mut ops = Vec::with_capacity(acked.len() * 2);
        let mut tally = Tally::default();
        for &UnitRef { epoch, unit } in acked {
            if epoch != self.epoch {
                let error = CoordError::Precondition(format!(
                    "unit {unit} of epoch {epoch} cannot be acked: the job is at epoch {}",
                    self.epoch
                ));
                return Ok((ops, Some(error), tally));
            }
            match self.pool.ack(member, unit) {
                // A retried ack (its answer was lost) is already done.
                Err(PoolError::AlreadyAcked { by, .. }) if by == *member => continue,
                Err(e) => {
                    let error = match e {
                        PoolError::UnknownUnit { .. } => CoordError::Invalid(e.to_string()),
                        _ => CoordError::Precondition(e.to_string()),
                    };
                    return Ok((ops, Some(error), tally));
                }
                Ok(()) => {}
            }
            tally.units_acked += 1;
            tally.samples_acked += self.units[unit as usize].len();
            let key = |kind: fn(JobId, Epoch, u32) -> Key| kind(job.clone(), self.epoch, unit);
            ops.push(Op::Delete {
                key: key(|job, epoch, unit| Key::Leased { job, epoch, unit }).into(),
            });
            ops.push(put(
                key(|job, epoch, unit| Key::Acked { job, epoch, unit }),
                member,
            )?);
        }
        Ok((ops, None, tally))
    }

    /// The dynamic part of a job's status.
    pub fn status(&self) -> ModeStatus {
        ModeStatus {
            epoch: self.epoch.get(),
            acked_units: self.pool.acked_count() as u64,
            total_units: self.units.len() as u64,
            leased_units: self.pool.leased_count() as u64,
            finished: self.finished(),
            ..ModeStatus::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use tributary_common::proto::v1;

    use super::*;

    #[test]
    fn a_retried_ack_is_done_and_another_members_ack_is_refused() {
        let config = crate::config::job_spec(Some(v1::JobConfig {
            manifest_url: "memory:///ds".into(),
            batch_size: 4,
            epochs: 1,
            mode: v1::Mode::Dynamic as i32,
            unit_samples: 8,
            ..v1::JobConfig::default()
        }))
        .expect("config");
        let dataset = Dataset {
            layout: Arc::new(tributary_common::plan::mix::Layout::single(vec![16])),
        };
        let mut model = DynModel::new(&config, &dataset, Epoch(0));
        let (job, a, b) = (JobId::from("job"), MemberId::from("a"), MemberId::from("b"));
        let (units, _) = model.acquire(&job, &a, None, 1).expect("acquire");
        let unit = UnitRef {
            epoch: Epoch(0),
            unit: units[0].id,
        };
        let (ops, error, tally) = model.ack(&job, &a, &[unit]).expect("ack");
        assert!(error.is_none() && ops.len() == 2, "{error:?}");
        assert_eq!(
            (tally.units_acked, tally.samples_acked),
            (1, u64::from(units[0].span.end - units[0].span.start))
        );
        // The answer was lost and the member retries: nothing more to do,
        // and nothing counted twice.
        let (ops, error, again) = model.ack(&job, &a, &[unit]).expect("ack");
        assert!(error.is_none() && ops.is_empty(), "{error:?}");
        assert_eq!(again.units_acked, 0);
        // Another member cannot ack it.
        let (_, error, _) = model.ack(&job, &b, &[unit]).expect("ack");
        assert!(
            matches!(&error, Some(CoordError::Precondition(m)) if m.contains("already")),
            "{error:?}"
        );
    }
}
