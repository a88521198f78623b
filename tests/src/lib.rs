//! Test support shared by the workspace's tests and benches: a real etcd on
//! loopback ([`etcd`]) and helpers for talking to a coordinator
//! ([`coordinator`]).
//!
//! End-to-end tests live in `tests/e2e/`.

pub mod coordinator;
pub mod etcd;
