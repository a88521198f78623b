//! The seeded, bounded shuffle buffer. It lives in `tributary-common`
//! because the coordinator recomputes what a rank's buffer emitted
//! (`tributary_common::plan::generation::emitted`) and the two must never drift
//! apart; this module re-exports it for the pipeline.

pub use tributary_common::plan::shuffle::*;
