//! Test support shared by the workspace's integration tests: a real etcd
//! on loopback ([`etcd`]). It depends on no Tributary crate, so any crate
//! can use it as a dev-dependency.
//!
//! End-to-end tests live in `tests/e2e/`.

pub mod etcd;
