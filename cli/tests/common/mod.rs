//! What the CLI's integration tests share: running the binary.

use std::process::{Command, Output};

/// Runs `tributary ARGS` and returns what it did.
pub fn tributary(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tributary"))
        .args(args)
        .env("RUST_BACKTRACE", "0")
        .output()
        .expect("run tributary")
}
