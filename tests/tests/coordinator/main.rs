//! The coordinator's integration tests (`cargo test -p tributary-tests
//! --test coordinator`): they start real etcd servers and clusters, or drive
//! the coordinator through the worker's loaders, so they live beside the
//! end-to-end suite rather than in the coordinator crate, which links
//! neither.

mod etcd_auth;
mod etcd_faults;
mod lone_member;
mod lookahead;
mod rejoin;
mod store;
