//! # tributary-coordinator
//!
//! The coordinator hands each trainer rank its part of every epoch and keeps
//! that assignment correct while ranks come and go. It is a tonic gRPC
//! service whose state lives in a metadata store (etcd in production, an
//! in-memory store for single-node runs); replicas elect a leader through
//! the store, and the leader alone serves.
//!
//! The coordinator stores small facts (job config, members under leases,
//! each generation's world and the commit it resumed from, acked units) and
//! recomputes plans from them with the pure planner of `tributary-common`.
//!
//! ## Layout
//!
//! - [`store`]: the metadata-store and election traits, their in-memory and
//!   etcd implementations, and the conformance suite both pass.
//! - [`keys`]: where each fact lives under `/tributary/<job>/`; every key
//!   is built and parsed there.
//! - [`config`]: what the coordinator adds to a job's spec
//!   ([`tributary_common::job`]): request validation, the world bound.
//! - [`limits`]: the caps on what callers can make a replica hold.
//! - [`datasets`]: a job's manifests read, their digests checked, and the
//!   layout planning works on.
//! - [`model`]: each job's state and every change to it (sync generations,
//!   the dynamic lease pool), returning its effects: the writes that make
//!   it durable, leases to revoke, events.
//! - [`writer`]: group commit, so store writes per second stay bounded.
//! - [`leader`]: the leader's state, loaded from the store on election:
//!   one method per call (it runs the model under the job's lock), and the
//!   one place a change's effects are applied.
//! - [`service`]: the gRPC handlers, and the conversion between the
//!   protocol and the leader's types (requests checked, answers built).
//! - [`auth`]: the bearer token, member secrets, allowed dataset prefixes.
//! - [`digest`]: the SHA-256 that tokens, secrets and manifests are
//!   compared by.
//! - [`server`]: one replica: server, health, election loop.
//! - [`transport`]: listening sockets with a cap on connections and a
//!   deadline for a connection's first valid call.
//! - [`local`]: a coordinator inside the calling process, on the in-memory
//!   store, for single-node runs.
//! - [`metrics`]: the replica's Prometheus metrics (`docs/METRICS.md`).
//! - [`error`]: errors and their mapping to gRPC status codes.

pub mod auth;
pub mod config;
pub mod datasets;
pub mod digest;
pub mod error;
pub mod keys;
pub mod leader;
pub mod limits;
pub mod local;
pub mod metrics;
pub mod model;
pub mod server;
pub mod service;
pub mod store;
pub mod transport;
pub mod writer;

pub use error::CoordError;
pub use local::LocalCoordinator;
pub use metrics::Metrics;
pub use server::{
    run, Listeners, ServerConfig, DEFAULT_FINISHED_JOB_TTL, HEALTH_LEADER, HEALTH_READY,
};
pub use tributary_common::job::{JobSpec, Mode};
