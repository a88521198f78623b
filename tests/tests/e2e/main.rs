//! End-to-end tests: the `tributary` binary, a real S3-compatible server
//! (moto), an Azure Blob Storage emulator (Azurite) and a GCS one
//! (gcp-storage-emulator) on loopback, and the Python `webdataset` library,
//! all started by the test support in this package's library
//! (`tributary_tests`). One test binary, as the style guide asks.
//!
//! Needs the test virtualenv (`scripts/test.sh` creates it): `moto_server`,
//! `python` with `webdataset` and `gcp_storage_emulator`, and Azurite in its
//! `azurite/` npm prefix, found through `TRIBUTARY_VENV` or `<repo>/.venv`.

mod bad_requests;
mod big_uploads;
mod cache;
mod cli;
mod clouds;
mod credentials;
mod deploy;
mod elastic;
mod epochs;
mod freeze;
mod hostile;
mod lifecycle;
mod limits;
mod manifest_change;
mod memory;
mod metrics;
mod mix;
mod parquet;
mod resume;
mod s3;
mod status;
mod store_faults;
mod token_pack;
mod tokens;
mod webdataset;
