//! Test support shared by the workspace's tests and benches: a real etcd on
//! loopback ([`etcd`]), helpers for talking to a coordinator
//! ([`coordinator`]), test certificates ([`tls`]), and an S3-compatible
//! server that misbehaves on command ([`faulty_s3`]).
//!
//! End-to-end tests live in `tests/e2e/`.

pub mod coordinator;
pub mod etcd;
pub mod faulty_s3;
pub mod tls;
