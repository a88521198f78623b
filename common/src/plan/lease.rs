//! Dynamic elasticity as a pure data structure: the epoch cut into *units*
//! and a pool that leases them to members and records acknowledgements.
//!
//! Consumers that need no lockstep (inference, preprocessing) lease a few
//! units at a time, acknowledge each once processed, and when a member is
//! gone its unacknowledged units return to the pool for the others at once.
//! Delivery is at least once (a dead member may have read a unit it never
//! acknowledged); acknowledgement is exactly once, which the pool enforces.
//!
//! The coordinator keeps only leases and acknowledgements in its store and
//! rebuilds the pool from them ([`LeasePool::restore_leased`],
//! [`LeasePool::restore_acked`]); the units themselves are recomputed by
//! [`units`]. Leasing hands out the lowest free units first, so members
//! read the epoch roughly in its seeded shard order. Every operation costs
//! `O(log n)` per unit it touches; free units are a cursor over units never
//! leased plus a sorted set of units given back.

use std::collections::{BTreeSet, HashMap};

use super::epoch::EpochPlan;
use super::span::Span;
use crate::error::PoolError;
use crate::ids::MemberId;

/// The epoch's units: its spans in seeded shard order, each shard cut into
/// pieces of at most `unit_samples` samples (a unit never crosses shards).
/// A unit's index is its position in the returned vector.
///
/// # Panics
///
/// If `unit_samples` is 0.
pub fn units(
    plan: &(impl EpochPlan + ?Sized),
    seed: u64,
    epoch: u64,
    unit_samples: u32,
) -> Vec<Span> {
    assert!(unit_samples > 0, "a unit must hold at least one sample");
    let spans = plan.epoch_spans(seed, epoch);
    let mut out = Vec::with_capacity(spans.spans().len());
    for span in spans.spans() {
        let mut start = span.start;
        while start < span.end {
            let end = start.saturating_add(unit_samples).min(span.end);
            out.push(Span::new(span.shard, start, end));
            start = end;
        }
    }
    out
}

/// Where a unit stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UnitState<'a> {
    Free,
    Leased(&'a MemberId),
    Acked(&'a MemberId),
}

/// A unit's state, with members interned as indices into `LeasePool::members`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Slot {
    Free,
    Leased(u32),
    Acked(u32),
}

/// Leases and acknowledgements over the units `0..n` of one epoch.
#[derive(Debug, Clone)]
pub struct LeasePool {
    slots: Vec<Slot>,
    members: Vec<MemberId>,
    member_index: HashMap<MemberId, u32>,
    /// Per interned member: the units it holds and has not acknowledged.
    leases: Vec<BTreeSet<u32>>,
    /// Units from `cursor` on were never handed out by [`LeasePool::lease`].
    cursor: u32,
    /// Units given back (or restored) that may be free; a candidate whose
    /// slot is no longer free is skipped when reached.
    returned: BTreeSet<u32>,
    free: usize,
    acked: usize,
}

impl LeasePool {
    /// A pool of `units` free units.
    ///
    /// # Panics
    ///
    /// If `units` does not fit in a `u32`.
    pub fn new(units: usize) -> Self {
        assert!(
            u32::try_from(units).is_ok(),
            "{units} units do not fit in u32 unit indices"
        );
        Self {
            slots: vec![Slot::Free; units],
            members: Vec::new(),
            member_index: HashMap::new(),
            leases: Vec::new(),
            cursor: 0,
            returned: BTreeSet::new(),
            free: units,
            acked: 0,
        }
    }

    /// Number of units.
    pub fn len(&self) -> usize {
        self.slots.len()
    }

    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    fn intern(&mut self, member: &MemberId) -> u32 {
        if let Some(&index) = self.member_index.get(member) {
            return index;
        }
        let index = self.members.len() as u32;
        self.members.push(member.clone());
        self.member_index.insert(member.clone(), index);
        self.leases.push(BTreeSet::new());
        index
    }

    fn slot(&self, unit: u32) -> Result<Slot, PoolError> {
        self.slots
            .get(unit as usize)
            .copied()
            .ok_or(PoolError::UnknownUnit { unit })
    }

    /// Leases up to `max` free units to `member`, lowest indices first.
    pub fn lease(&mut self, member: &MemberId, max: usize) -> Vec<u32> {
        let holder = self.intern(member);
        let mut out = Vec::new();
        while out.len() < max {
            let fresh = (self.cursor as usize) < self.slots.len();
            let unit = match self.returned.first() {
                Some(&back) if !fresh || back < self.cursor => {
                    self.returned.pop_first();
                    back
                }
                _ if fresh => {
                    self.cursor += 1;
                    self.cursor - 1
                }
                _ => break,
            };
            if self.slots[unit as usize] == Slot::Free {
                self.slots[unit as usize] = Slot::Leased(holder);
                self.leases[holder as usize].insert(unit);
                self.free -= 1;
                out.push(unit);
            }
        }
        out
    }

    /// Records that `member` processed `unit`, which it must hold.
    pub fn ack(&mut self, member: &MemberId, unit: u32) -> Result<(), PoolError> {
        match self.slot(unit)? {
            Slot::Acked(by) => Err(PoolError::AlreadyAcked {
                unit,
                by: self.members[by as usize].clone(),
            }),
            Slot::Leased(holder) if self.members[holder as usize] == *member => {
                self.slots[unit as usize] = Slot::Acked(holder);
                self.leases[holder as usize].remove(&unit);
                self.acked += 1;
                Ok(())
            }
            Slot::Leased(holder) => Err(PoolError::NotLeasedTo {
                unit,
                member: member.clone(),
                holder: Some(self.members[holder as usize].clone()),
            }),
            Slot::Free => Err(PoolError::NotLeasedTo {
                unit,
                member: member.clone(),
                holder: None,
            }),
        }
    }

    /// Returns `member`'s unacknowledged units to the free set (it left, or
    /// its lease expired) and lists them.
    pub fn release(&mut self, member: &MemberId) -> Vec<u32> {
        let Some(&holder) = self.member_index.get(member) else {
            return Vec::new();
        };
        let units = std::mem::take(&mut self.leases[holder as usize]);
        for &unit in &units {
            self.slots[unit as usize] = Slot::Free;
            self.returned.insert(unit);
        }
        self.free += units.len();
        units.into_iter().collect()
    }

    /// Rebuilding from a store: `unit` is leased to `member`. Restoring the
    /// same fact twice is harmless; a contradicting one is an error.
    pub fn restore_leased(&mut self, unit: u32, member: &MemberId) -> Result<(), PoolError> {
        match self.slot(unit)? {
            Slot::Free => {
                let holder = self.intern(member);
                self.slots[unit as usize] = Slot::Leased(holder);
                self.leases[holder as usize].insert(unit);
                self.free -= 1;
                Ok(())
            }
            Slot::Leased(holder) if self.members[holder as usize] == *member => Ok(()),
            Slot::Leased(holder) => Err(PoolError::NotLeasedTo {
                unit,
                member: member.clone(),
                holder: Some(self.members[holder as usize].clone()),
            }),
            Slot::Acked(by) => Err(PoolError::AlreadyAcked {
                unit,
                by: self.members[by as usize].clone(),
            }),
        }
    }

    /// Rebuilding from a store: `unit` was acknowledged by `member` (an
    /// acknowledgement overrides a lease restored before it).
    pub fn restore_acked(&mut self, unit: u32, member: &MemberId) -> Result<(), PoolError> {
        match self.slot(unit)? {
            Slot::Acked(by) if self.members[by as usize] == *member => return Ok(()),
            Slot::Acked(by) => {
                return Err(PoolError::AlreadyAcked {
                    unit,
                    by: self.members[by as usize].clone(),
                })
            }
            Slot::Leased(holder) => {
                self.leases[holder as usize].remove(&unit);
            }
            Slot::Free => self.free -= 1,
        }
        let by = self.intern(member);
        self.slots[unit as usize] = Slot::Acked(by);
        self.acked += 1;
        Ok(())
    }

    /// The units `member` holds and has not acknowledged, ascending.
    pub fn leased_by(&self, member: &MemberId) -> Vec<u32> {
        self.member_index
            .get(member)
            .map(|&holder| self.leases[holder as usize].iter().copied().collect())
            .unwrap_or_default()
    }

    /// Where `unit` stands, or `None` if it is not in the pool.
    pub fn state(&self, unit: u32) -> Option<UnitState<'_>> {
        Some(match self.slot(unit).ok()? {
            Slot::Free => UnitState::Free,
            Slot::Leased(holder) => UnitState::Leased(&self.members[holder as usize]),
            Slot::Acked(by) => UnitState::Acked(&self.members[by as usize]),
        })
    }

    pub fn acked_count(&self) -> usize {
        self.acked
    }

    pub fn free_count(&self) -> usize {
        self.free
    }

    /// Units leased and not yet acknowledged.
    pub fn leased_count(&self) -> usize {
        self.slots.len() - self.free - self.acked
    }

    /// Every unit acknowledged: the epoch is done.
    pub fn is_complete(&self) -> bool {
        self.acked == self.slots.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::epoch_spans;

    fn id(name: &str) -> MemberId {
        MemberId::from(name)
    }

    #[test]
    fn units_cut_shards_in_epoch_order() {
        let shards = [5, 0, 7, 3];
        let all = units(&shards, 9, 1, 3);
        let order: Vec<u32> = epoch_spans(&shards, 9, 1)
            .spans()
            .iter()
            .map(|s| s.shard)
            .collect();
        let mut expected = Vec::new();
        for shard in order {
            let n = shards[shard as usize];
            expected.extend(
                (0..n)
                    .step_by(3)
                    .map(|a| Span::new(shard, a, (a + 3).min(n))),
            );
        }
        assert_eq!(all, expected);
        assert_eq!(all.iter().map(Span::len).sum::<u64>(), 15);
    }

    #[test]
    fn lease_ack_release_and_errors() {
        let (a, b) = (id("a"), id("b"));
        let mut pool = LeasePool::new(6);
        assert_eq!(pool.lease(&a, 2), [0, 1]);
        assert_eq!(pool.lease(&b, 3), [2, 3, 4]);
        pool.ack(&a, 0).expect("a holds 0");
        assert_eq!(
            pool.ack(&b, 0),
            Err(PoolError::AlreadyAcked {
                unit: 0,
                by: a.clone()
            })
        );
        assert_eq!(
            pool.ack(&a, 2).map_err(|e| e.to_string()),
            Err("unit 2 is not leased to member a (holder: b)".into())
        );
        assert_eq!(
            pool.ack(&a, 5).map_err(|e| e.to_string()),
            Err("unit 5 is not leased to member a (holder: none)".into())
        );
        assert_eq!(pool.ack(&a, 6), Err(PoolError::UnknownUnit { unit: 6 }));
        pool.ack(&b, 3).expect("b holds 3");
        assert_eq!(pool.release(&b), [2, 4]);
        assert_eq!(pool.free_count(), 3);
        assert_eq!(pool.state(2), Some(UnitState::Free));
        // Given-back units come first, lowest first.
        assert_eq!(pool.lease(&a, 10), [2, 4, 5]);
        assert_eq!(pool.leased_by(&a), [1, 2, 4, 5]);
        for unit in [1, 2, 4, 5] {
            pool.ack(&a, unit).expect("a holds it");
        }
        assert!(pool.is_complete());
        assert!(pool.lease(&b, 1).is_empty());
    }

    #[test]
    fn restore_rebuilds_the_same_pool() {
        let (a, b) = (id("a"), id("b"));
        let mut pool = LeasePool::new(8);
        pool.restore_acked(6, &a).expect("free unit");
        pool.restore_leased(7, &b).expect("free unit");
        pool.restore_leased(1, &a).expect("free unit");
        pool.restore_leased(1, &a).expect("same fact twice");
        pool.restore_leased(3, &b).expect("free unit");
        pool.restore_acked(3, &b).expect("an ack overrides a lease");
        assert!(pool.restore_leased(7, &a).is_err());
        assert!(pool.restore_acked(6, &b).is_err());
        assert_eq!(pool.acked_count(), 2);
        assert_eq!(pool.leased_count(), 2);
        assert_eq!(pool.free_count(), 4);
        assert_eq!(pool.lease(&a, 10), [0, 2, 4, 5]);
        assert_eq!(pool.release(&b), [7]);
        assert_eq!(pool.lease(&a, 10), [7]);
    }
}
