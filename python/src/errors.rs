//! The loader's errors as Python exceptions: `ValueError`,
//! `FileNotFoundError`, `ConnectionError`, `PermissionError` (no cloud
//! credentials; a coordinator token refused, or a job credential used
//! beyond its job), `OSError` or `RuntimeError`,
//! carrying the Rust message.

use pyo3::exceptions::{
    PyConnectionError, PyFileNotFoundError, PyOSError, PyPermissionError, PyRuntimeError,
    PyValueError,
};
use pyo3::PyErr;
use tributary_io::IoError;
use tributary_worker::coordinated::Code;
use tributary_worker::rank::{Field, SpecError};
use tributary_worker::{InvalidConfig, WorkerError};

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
        WorkerError::Invalid(invalid) => PyValueError::new_err(format!(
            "invalid configuration: {}",
            invalid_message(&invalid)
        )),
        // S3 without credentials: what to set, not the metadata endpoint's 403.
        WorkerError::Io(IoError::NoCredentials { .. }) => PyPermissionError::new_err(message),
        // A local directory (the shard cache's) that cannot be made.
        WorkerError::Io(IoError::Local { .. }) => PyOSError::new_err(message),
        WorkerError::Listen { .. } => PyOSError::new_err(message),
        WorkerError::Coordinator { code, .. } => match code {
            Code::Unavailable | Code::DeadlineExceeded | Code::Cancelled | Code::Unknown => {
                PyConnectionError::new_err(message)
            }
            Code::NotFound => PyFileNotFoundError::new_err(message),
            // A wrong token, or a job credential used beyond its job.
            Code::Unauthenticated | Code::PermissionDenied => PyPermissionError::new_err(message),
            _ => PyValueError::new_err(message),
        },
        // A store that keeps failing, after the retry budget.
        WorkerError::Io(
            IoError::Store { .. } | IoError::GaveUp { .. } | IoError::ReadFailed { .. },
        ) => PyConnectionError::new_err(message),
        _ => PyRuntimeError::new_err(message),
    }
}

/// A configuration the rank refuses, in the words of the `Loader`'s
/// keyword arguments.
fn invalid_message(invalid: &InvalidConfig) -> String {
    match invalid {
        InvalidConfig::Job(error) => spec_message(error),
        InvalidConfig::Stripe { index, count } => {
            format!("worker=({index}, {count}): the worker id must be below the number of workers")
        }
        InvalidConfig::DynamicStripesInProcess { count } => format!(
            "{count} worker processes of a dynamic job need a shared coordinator: pass \
             coordinator=\"host:port\" (with coordinator=None each would read the whole epoch)"
        ),
        InvalidConfig::WorldInProcess { world } => format!(
            "a world of {world} ranks needs a shared coordinator: pass coordinator=\"host:port\" \
             (coordinator=None runs one rank alone)"
        ),
        InvalidConfig::LookaheadForSync => {
            "lookahead= is for mode=\"dynamic\"; sync ranks read a fixed part".into()
        }
        InvalidConfig::EpochForDynamic => {
            "epoch= is for mode=\"sync\"; dynamic members read the job's current epoch".into()
        }
        InvalidConfig::UnshuffledDynamic => {
            "shuffle=False (evaluation) reads a fixed split by rank: use mode=\"sync\"".into()
        }
    }
}

/// A job spec's error, naming the keyword argument the field comes from.
fn spec_message(error: &SpecError) -> String {
    let name = match error.field {
        Field::ManifestUrl | Field::Sources => "dataset".to_owned(),
        Field::Source(i) | Field::SourceUrl(i) => format!("dataset[{i}]"),
        other => other.to_string(),
    };
    error.message(&name)
}
