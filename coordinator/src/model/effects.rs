//! What a change of the model asks of the world. A model method updates the
//! job in memory and returns its [`Effects`]; the leader hands them to
//! `Leader::apply`, the one place that writes the store,
//! revokes leases, broadcasts events and wakes waiting calls.

use serde::Serialize;
use tributary_common::ids::{Epoch, Generation};

use crate::error::{CoordError, Result};
use crate::keys::Key;
use crate::store::{LeaseId, Op};

/// An event a job's watchers are told of, once the change is durable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event {
    /// A new generation began.
    Generation(Generation),
    /// Units returned to the pool, or an epoch opened.
    PoolChanged(Epoch),
}

/// The consequences of one change, applied in this order: `ops` written
/// (group commit), then `revoke`d leases, then `events` broadcast and
/// waiting Acquires woken (`wake`).
#[derive(Debug, Default)]
#[must_use]
pub struct Effects {
    /// Store writes that make the change durable, in the model's order.
    pub ops: Vec<Op>,
    /// Store leases to revoke once the writes are durable (a replaced,
    /// departed or expired member's, if an earlier coordinator put its keys
    /// under one).
    pub revoke: Vec<LeaseId>,
    /// Told to the job's watchers once the writes are durable.
    pub events: Vec<Event>,
    /// Whether Acquires waiting for units should look again.
    pub wake: bool,
    /// What the change did, for the metrics.
    pub tally: Tally,
}

/// What a change did, counted ([`crate::metrics::Metrics::count`]).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Tally {
    pub generations: u64,
    pub commits: u64,
    pub units_leased: u64,
    pub units_acked: u64,
    /// Samples in the units acked.
    pub samples_acked: u64,
    pub units_reassigned: u64,
    pub leases_expired: u64,
}

impl Tally {
    fn add(&mut self, other: Tally) {
        self.generations += other.generations;
        self.commits += other.commits;
        self.units_leased += other.units_leased;
        self.units_acked += other.units_acked;
        self.samples_acked += other.samples_acked;
        self.units_reassigned += other.units_reassigned;
        self.leases_expired += other.leases_expired;
    }
}

impl Effects {
    /// Effects of writing `ops` alone.
    pub fn ops(ops: Vec<Op>) -> Self {
        Self {
            ops,
            ..Self::default()
        }
    }

    /// Adds `other`'s effects after these.
    pub fn extend(&mut self, other: Effects) {
        self.ops.extend(other.ops);
        self.revoke.extend(other.revoke);
        self.events.extend(other.events);
        self.wake |= other.wake;
        self.tally.add(other.tally);
    }

    pub fn is_empty(&self) -> bool {
        self.ops.is_empty()
            && self.revoke.is_empty()
            && self.events.is_empty()
            && !self.wake
            && self.tally == Tally::default()
    }
}

/// An answer and the effects of the change that made it; the answer may be
/// an error that still has effects (acks applied before a refused one, a
/// refused Join's lease revoked).
pub type Outcome<T> = (Result<T>, Effects);

/// A model method's `Result<(T, Effects)>` as an [`Outcome`]: a refusal
/// before any change has no effects.
pub fn outcome<T>(result: Result<(T, Effects)>) -> Outcome<T> {
    match result {
        Ok((answer, effects)) => (Ok(answer), effects),
        Err(error) => (Err(error), Effects::default()),
    }
}

/// The value of a stored key as JSON; an error naming the key if it cannot
/// be encoded (no value the model stores has a way to fail, but a silent
/// empty value would read back as corruption).
pub fn json<T: Serialize + ?Sized>(key: &Key, value: &T) -> Result<Vec<u8>> {
    serde_json::to_vec(value).map_err(|e| CoordError::Encode {
        key: key.to_string(),
        error: e.to_string(),
    })
}

/// A put of `value` at `key`, without a lease.
pub fn put<T: Serialize + ?Sized>(key: Key, value: &T) -> Result<Op> {
    leased_put(key, value, None)
}

/// A put of `value` at `key`, under `lease` when given.
pub fn leased_put<T: Serialize + ?Sized>(
    key: Key,
    value: &T,
    lease: Option<LeaseId>,
) -> Result<Op> {
    Ok(Op::Put {
        value: json(&key, value)?,
        key: key.into(),
        lease,
    })
}
