//! Tests of Parquet footers and reads.
