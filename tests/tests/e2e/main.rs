//! End-to-end tests: the `tributary` binary, a real S3-compatible server
//! (moto) on loopback, and the Python `webdataset` library, all started by
//! the test support in this package's library (`tributary_tests`). One test
//! binary, as the style guide asks.
//!
//! Needs the test virtualenv (`scripts/test.sh` creates it): `moto_server`
//! and `python` with `webdataset`, found through `TRIBUTARY_VENV` or
//! `<repo>/.venv`.

mod bad_requests;
mod cache;
mod cli;
mod deploy;
mod elastic;
mod epochs;
mod freeze;
mod hostile;
mod lifecycle;
mod metrics;
mod s3;
mod status;
mod store_faults;
mod webdataset;
