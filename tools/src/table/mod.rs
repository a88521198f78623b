//! Parquet datasets: indexed where they lie ([`index`]), so that the
//! loader reads their row groups in place; and whole columns of local
//! files read for packing ([`rows`]).

pub mod index;
pub mod rows;
