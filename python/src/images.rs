//! Batch images as numpy arrays that view the loader's buffer, no copy.
//!
//! The array's base object owns the batch's [`Images`]; when the array (and
//! every view of it, such as a `torch.from_numpy` tensor) is gone, the buffer
//! goes back to the loader's pool and the next batch is decoded into it.

#![allow(unsafe_code)] // numpy's borrow_from_array; see the SAFETY comment.

use numpy::ndarray::ArrayView4;
use numpy::{Element, PyArray4};
use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use tributary_worker::Images;

/// Owns a batch's image buffer while numpy arrays view it.
#[pyclass(module = "tributary._tributary")]
pub struct BatchImages(Images);

/// The numpy array of `images`, shaped `shape`.
pub fn images_to_py(py: Python<'_>, images: Images, shape: [usize; 4]) -> PyResult<Py<PyAny>> {
    let owner = Bound::new(py, BatchImages(images))?;
    let held = owner.borrow();
    let array = match &held.0 {
        Images::F32(data) => view(&owner, data, shape)?,
        Images::U8(data) => view(&owner, data, shape)?,
    };
    Ok(array)
}

fn view<T: Element>(
    owner: &Bound<'_, BatchImages>,
    data: &[T],
    [n, a, b, c]: [usize; 4],
) -> PyResult<Py<PyAny>> {
    let view = ArrayView4::from_shape((n, a, b, c), data)
        .map_err(|e| PyRuntimeError::new_err(format!("batch shape: {e}")))?;
    // SAFETY: `data` is the heap allocation of the buffer `owner` holds. The
    // array keeps `owner` as its base object, so the allocation lives (and
    // does not move: `BatchImages` has no method that touches it) until the
    // array and all its views are gone; only then is the buffer reused.
    let array = unsafe { PyArray4::borrow_from_array(&view, owner.clone().into_any()) };
    Ok(array.into_any().unbind())
}
