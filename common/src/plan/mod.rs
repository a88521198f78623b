//! The epoch plan, as pure functions of (seed, epoch, members, cut,
//! progress): which samples each rank reads. See `common/README.md` for the
//! problem statement and the properties these functions guarantee.
//!
//! Its parts, leaves first: [`span`] (spans and span sets, the unit of
//! every assignment) and [`seed`] (deterministic ChaCha streams); the
//! seeded shard order of an epoch and [`EpochPlan`] ([`epoch_spans`]), and
//! the equal split of a cut with its dropped remainder ([`split_equal`],
//! [`dropped`]), both re-exported here; [`mix`] (several datasets in one
//! virtual shard space); [`shuffle`] (the seeded, bounded shuffle buffer
//! every rank runs, here so the planner can replay it); [`assign`] (the
//! parts of ranks without a coordinator); [`generation`] (synchronous
//! elasticity: every generation's cut replayed from its small stored
//! record); [`lease`] (dynamic elasticity: the epoch cut into units and the
//! pool that leases them and records acknowledgements exactly once).

pub mod assign;
mod epoch;
pub mod generation;
pub mod lease;
pub mod mix;
pub mod seed;
pub mod shuffle;
pub mod span;
mod split;

pub use epoch::{epoch_spans, shard_order, EpochPlan};
pub use split::{dropped, split_equal, Remainder};
