//! Parquet datasets: indexed where they lie ([`index`]), so that the
//! loader reads their row groups in place.

pub mod index;
