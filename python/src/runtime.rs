//! Waiting on the loader's tokio runtime from Python: without the GIL, and
//! interruptible by Ctrl-C.

use std::future::Future;
use std::time::Duration;

use pyo3::prelude::*;

use crate::inner::Runtime;

/// How long a wait lasts before checking for Ctrl-C.
const SIGNAL_CHECK: Duration = Duration::from_millis(100);

/// Runs `future` on `runtime` without the GIL, waking every
/// [`SIGNAL_CHECK`] to run Python's signal handlers: Ctrl-C raises
/// `KeyboardInterrupt` and drops the future, so it must be cancel-safe.
pub fn block<F: Future + Send>(py: Python<'_>, runtime: &Runtime, future: F) -> PyResult<F::Output>
where
    F::Output: Send,
{
    let mut future = std::pin::pin!(future);
    loop {
        // The timer is made inside the runtime: it needs its clock.
        let step = py.detach(|| {
            runtime.block_on(async { tokio::time::timeout(SIGNAL_CHECK, future.as_mut()).await })
        });
        match step {
            Ok(output) => return Ok(output),
            Err(_elapsed) => py.check_signals()?,
        }
    }
}
