//! Dynamic mode: the epoch's units leased to whoever asks.
//!
//! A unit is leased under the member's store lease, so when the member stops
//! renewing it, the store deletes the unit's lease key and the leader returns
//! the unit to the pool at once. An ack moves a unit from leased to acked,
//! exactly once: an ack from a member that no longer holds the unit fails.
//! When every unit of the epoch is acked, the next epoch opens.

use tributary_common::error::PoolError;
use tributary_common::ids::MemberId;
use tributary_common::lease::{units, LeasePool};
use tributary_common::proto::v1;
use tributary_common::span::Span;

use super::{json, put, Dataset};
use crate::config::JobConfig;
use crate::error::CoordError;
use crate::keys;
use crate::store::{LeaseId, Op};

#[derive(Debug)]
pub struct DynModel {
    epoch: u64,
    epochs: u64,
    seed: u64,
    unit_samples: u32,
    units: Vec<Span>,
    pool: LeasePool,
}

impl DynModel {
    pub fn new(config: &JobConfig, dataset: &Dataset, epoch: u64) -> Self {
        let units = units(
            &dataset.shard_samples,
            config.seed,
            epoch,
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

    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    pub fn finished(&self) -> bool {
        self.epoch >= self.epochs
    }

    pub fn restore_acked(&mut self, _epoch: u64, unit: u32, member: &str) {
        let _ = self.pool.restore_acked(unit, &MemberId::from(member));
    }

    pub fn restore_leased(&mut self, _epoch: u64, unit: u32, member: &str) {
        let _ = self.pool.restore_leased(unit, &MemberId::from(member));
    }

    /// Returns `member`'s unacked units to the pool.
    pub fn release(&mut self, member: &str) -> Vec<u32> {
        self.pool.release(&MemberId::from(member))
    }

    /// Opens the next epoch when this one is complete; returns the ops.
    pub fn advance(&mut self, job: &str, dataset: &Dataset) -> Option<Vec<Op>> {
        if self.finished() || !self.pool.is_complete() {
            return None;
        }
        self.epoch += 1;
        tracing::info!(job, epoch = self.epoch, "epoch complete; next epoch");
        let mut ops = vec![
            put(keys::dyn_epoch(job), json(&self.epoch)),
            Op::DeletePrefix {
                prefix: keys::dyn_units(job, self.epoch - 1),
            },
        ];
        if !self.finished() {
            self.units = units(
                &dataset.shard_samples,
                self.seed,
                self.epoch,
                self.unit_samples,
            );
            self.pool = LeasePool::new(self.units.len());
        } else {
            ops.truncate(1);
        }
        Some(ops)
    }

    /// Leases up to `max` units to `member` (under its store `lease`).
    pub fn acquire(
        &mut self,
        job: &str,
        member: &str,
        lease: LeaseId,
        max: usize,
    ) -> (Vec<v1::Unit>, Vec<Op>) {
        let got = self.pool.lease(&MemberId::from(member), max);
        let ops = got
            .iter()
            .map(|&unit| Op::Put {
                key: keys::leased(job, self.epoch, unit),
                value: json(&member),
                lease: Some(lease),
            })
            .collect();
        let units = got
            .iter()
            .map(|&id| v1::Unit {
                epoch: self.epoch,
                id,
                span: Some(self.units[id as usize].into()),
            })
            .collect();
        (units, ops)
    }

    /// Acks units in order, stopping at the first that cannot be acked;
    /// returns the ops of those acked and the error, if any.
    pub fn ack(
        &mut self,
        job: &str,
        member: &str,
        acked: &[v1::UnitRef],
    ) -> (Vec<Op>, Option<CoordError>) {
        let mut ops = Vec::with_capacity(acked.len() * 2);
        for unit in acked {
            if unit.epoch != self.epoch {
                let error = CoordError::Precondition(format!(
                    "unit {} of epoch {} cannot be acked: the job is at epoch {}",
                    unit.id, unit.epoch, self.epoch
                ));
                return (ops, Some(error));
            }
            match self.pool.ack(&MemberId::from(member), unit.id) {
                // A retried ack (its answer was lost) is already done.
                Err(PoolError::AlreadyAcked { by, .. }) if by.as_str() == member => continue,
                Err(e) => {
                    let error = match e {
                        PoolError::UnknownUnit { .. } => CoordError::Invalid(e.to_string()),
                        _ => CoordError::Precondition(e.to_string()),
                    };
                    return (ops, Some(error));
                }
                Ok(()) => {}
            }
            ops.push(Op::Delete {
                key: keys::leased(job, self.epoch, unit.id),
            });
            ops.push(put(keys::acked(job, self.epoch, unit.id), json(&member)));
        }
        (ops, None)
    }

    pub fn fill_status(&self, status: &mut v1::JobStatus) {
        status.epoch = self.epoch;
        status.acked_units = self.pool.acked_count() as u64;
        status.total_units = self.units.len() as u64;
        status.finished = self.finished();
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    #[test]
    fn a_retried_ack_is_done_and_another_members_ack_is_refused() {
        let config = JobConfig::from_proto(Some(v1::JobConfig {
            manifest_url: "memory:///ds".into(),
            batch_size: 4,
            epochs: 1,
            mode: v1::Mode::Dynamic as i32,
            unit_samples: 8,
            ..v1::JobConfig::default()
        }))
        .expect("config");
        let dataset = Dataset {
            shard_samples: Arc::new(vec![16]),
        };
        let mut model = DynModel::new(&config, &dataset, 0);
        let (units, _) = model.acquire("job", "a", 1, 1);
        let unit = v1::UnitRef {
            epoch: 0,
            id: units[0].id,
        };
        let (ops, error) = model.ack("job", "a", &[unit]);
        assert!(error.is_none() && ops.len() == 2, "{error:?}");
        // The answer was lost and the member retries: nothing more to do.
        let (ops, error) = model.ack("job", "a", &[unit]);
        assert!(error.is_none() && ops.is_empty(), "{error:?}");
        // Another member cannot ack it.
        let (_, error) = model.ack("job", "b", &[unit]);
        assert!(
            matches!(&error, Some(CoordError::Precondition(m)) if m.contains("already")),
            "{error:?}"
        );
    }
}
