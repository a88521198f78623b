//! The loader's errors as Python exceptions: `ValueError`,
//! `FileNotFoundError`, `ConnectionError`, `OSError` or `RuntimeError`,
//! carrying the Rust message.

use pyo3::exceptions::{
    PyConnectionError, PyFileNotFoundError, PyOSError, PyRuntimeError, PyValueError,
};
use pyo3::PyErr;
use tributary_io::IoError;
use tributary_worker::coordinated::Code;
use tributary_worker::WorkerError;

// By value so that it reads `.map_err(to_py)`.
#[allow(clippy::needless_pass_by_value)]
pub fn to_py(error: WorkerError) -> PyErr {
    let message = error.to_string();
    match error {
        WorkerError::Io(IoError::NotFound { .. }) => PyFileNotFoundError::new_err(message),
        WorkerError::Io(
            IoError::BadUrl { .. } | IoError::Manifest { .. } | IoError::Cache { .. },
        )
        | WorkerError::Config(_) => PyValueError::new_err(message),
        // A local directory (the shard cache's) that cannot be made.
        WorkerError::Io(IoError::Local { .. }) => PyOSError::new_err(message),
        WorkerError::Listen { .. } => PyOSError::new_err(message),
        WorkerError::Coordinator { code, .. } => match code {
            Code::Unavailable | Code::DeadlineExceeded | Code::Cancelled | Code::Unknown => {
                PyConnectionError::new_err(message)
            }
            Code::NotFound => PyFileNotFoundError::new_err(message),
            _ => PyValueError::new_err(message),
        },
        // A store that keeps failing, after the retry budget.
        WorkerError::Io(
            IoError::Store { .. } | IoError::GaveUp { .. } | IoError::ReadFailed { .. },
        ) => PyConnectionError::new_err(message),
        _ => PyRuntimeError::new_err(message),
    }
}
