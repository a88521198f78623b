//! Batch buffers as numpy arrays that view them, no copy.
//!
//! The array's base object owns the batch's buffer ([`Images`], or a
//! field's [`Bytes`]); when the array (and every view of it, such as a
//! `torch.from_numpy` tensor) is gone, an image buffer goes back to the
//! loader's pool and the next batch is decoded into it.

#![allow(unsafe_code)] // numpy's borrow_from_array; see the SAFETY comments.

use bytes::Bytes;
use numpy::ndarray::{ArrayViewD, IxDyn};
use numpy::{Element, PyArray1, PyArrayDyn};
use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use tributary_worker::Images;

/// Owns a batch's image buffer while numpy arrays view it.
#[pyclass(module = "tributary._tributary")]
pub struct BatchImages(Images);

/// Owns a field's bytes while a numpy array views them.
#[pyclass(module = "tributary._tributary")]
pub struct FieldBytes(Bytes);

/// The numpy array of `images`, shaped `shape`.
pub fn images_to_py(py: Python<'_>, images: Images, shape: &[usize]) -> PyResult<Py<PyAny>> {
    let owner = Bound::new(py, BatchImages(images))?;
    let held = owner.borrow();
    let array = match &held.0 {
        Images::F32(data) => view(owner.as_any(), data, shape)?,
        Images::U8(data) => view(owner.as_any(), data, shape)?,
    };
    Ok(array)
}

/// A read-only `memoryview` of `bytes`, sharing their buffer.
pub fn bytes_to_py(py: Python<'_>, bytes: Bytes) -> PyResult<Py<PyAny>> {
    let owner = Bound::new(py, FieldBytes(bytes))?;
    let held = owner.borrow();
    let array = view(owner.as_any(), &held.0, &[held.0.len()])?;
    let array = array.bind(py);
    array.call_method1("setflags", (false,))?;
    Ok(py
        .import("builtins")?
        .getattr("memoryview")?
        .call1((array,))?
        .unbind())
}

/// A numpy array of `dtype` (numpy's `descr`) and `shape` holding `data`
/// (copied once, into an array numpy owns).
pub fn typed_to_py(
    py: Python<'_>,
    descr: &str,
    shape: &[usize],
    data: &[u8],
) -> PyResult<Py<PyAny>> {
    let raw = PyArray1::from_slice(py, data);
    let numpy = py.import("numpy")?;
    let typed = raw.call_method1("view", (numpy.call_method1("dtype", (descr,))?,))?;
    Ok(typed.call_method1("reshape", (shape.to_vec(),))?.unbind())
}

fn view<T: Element>(owner: &Bound<'_, PyAny>, data: &[T], shape: &[usize]) -> PyResult<Py<PyAny>> {
    let view = ArrayViewD::from_shape(IxDyn(shape), data)
        .map_err(|e| PyRuntimeError::new_err(format!("batch shape: {e}")))?;
    // SAFETY: `data` is the heap allocation of the buffer `owner` holds. The
    // array keeps `owner` as its base object, so the allocation lives (and
    // does not move: neither owner type has a method that touches it) until
    // the array and all its views are gone; only then is the buffer reused.
    let array = unsafe { PyArrayDyn::borrow_from_array(&view, owner.clone()) };
    Ok(array.into_any().unbind())
}
