//! # tributary-python
//!
//! The `tributary._tributary` extension module behind the `tributary` Python
//! package: `Loader` wraps a rank's loader (see `inner.rs`) for Python.
//!
//! - Batches arrive as numpy arrays over the Rust buffers (no copy), which
//!   go back to the loader for reuse when the arrays are gone (`images.rs`).
//! - The GIL is released while waiting (for a batch, the coordinator or the
//!   store), and every wait wakes each 100 ms to let Ctrl-C interrupt it.
//! - After `fork()` (DataLoader workers) the native state, whose threads did
//!   not survive the fork, is abandoned and rebuilt from the arguments.
//! - Errors become `ValueError`, `FileNotFoundError`, `ConnectionError`,
//!   `OSError` (a metrics port in use) or `RuntimeError` carrying the Rust
//!   message.
//! - `cache_dir=`, `cache_limit=` keep fetched shards on local disk
//!   (`tributary_io::cache`), shared by the ranks of a node.
//! - `metrics_port=` serves the rank's metrics; `Loader.metrics()` reads
//!   them (`metrics.rs`).
//!
//! ## Layout
//!
//! - `loader.rs`: the `Loader` class, its constructor and methods.
//! - `args.rs`: constructor arguments that need parsing (image size, dataset
//!   or mix, fields) and saved loader states.
//! - `runtime.rs`: waiting on the tokio runtime without the GIL.
//! - `errors.rs`: the one mapping of Rust errors to Python exceptions.
//! - `inner.rs`: the native loader, free of Python.
//! - `columns.rs`, `images.rs`: batches as Python objects.
//! - `metrics.rs`: `metrics_port=` and `Loader.metrics()`.

mod args;
mod columns;
mod errors;
mod images;
mod inner;
mod loader;
mod metrics;
mod runtime;

use pyo3::prelude::*;

use crate::loader::Loader;

/// Rust's logs on stderr when `RUST_LOG` asks for them (e.g. `info`), as
/// text or, with `TRIBUTARY_LOG_FORMAT=json`, one JSON object per line with
/// the member's span (job, member, rank, generation). Nothing otherwise, and
/// nothing when the process already set a subscriber.
fn init_logs() {
    let Ok(filter) = std::env::var("RUST_LOG") else {
        return;
    };
    let logs = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::new(filter))
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_writer(std::io::stderr);
    let _ = match std::env::var("TRIBUTARY_LOG_FORMAT").as_deref() {
        Ok("json") => logs
            .json()
            .with_current_span(true)
            .with_span_list(true)
            .try_init(),
        _ => logs.try_init(),
    };
}

#[pymodule]
fn _tributary(m: &Bound<'_, PyModule>) -> PyResult<()> {
    init_logs();
    m.add_class::<Loader>()?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
