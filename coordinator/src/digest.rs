//! Digests: the one place bytes become the hex SHA-256 that tokens,
//! member secrets and manifests are compared by (`tributary_io::digest`,
//! which the ranks use too).

pub use tributary_io::digest::{hex, sha256_hex};
