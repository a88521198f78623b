//! A batch's columns as Python objects: images and labels as numpy arrays
//! over the Rust buffers, text as `str`, JSON as Python values, `npy`
//! fields as numpy arrays (stacked when they agree), other fields as
//! read-only `memoryview`s of the bytes as read.

use numpy::ndarray::Array1;
use numpy::PyArray1;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};
use tributary_worker::pipeline::decode::fields::{Array, Arrays};
use tributary_worker::{Batch, Column};

use crate::images::{bytes_to_py, images_to_py, typed_to_py};

/// What a batch becomes in Python: its columns in field order, then the
/// sample ids (with `ids`), each sample's dataset in the mix (with
/// `sources`) and the validity mask (with `valid`).
pub fn batch_to_py(
    py: Python<'_>,
    batch: Batch,
    ids: bool,
    sources: bool,
    valid: bool,
) -> PyResult<Py<PyAny>> {
    let mask = valid.then(|| batch.valid());
    let mut items: Vec<Py<PyAny>> = Vec::with_capacity(batch.columns.len() + 3);
    for column in batch.columns {
        items.push(column_to_py(py, column)?);
    }
    if ids {
        items.push(
            PyArray1::from_owned_array(py, Array1::from_vec(batch.ids))
                .into_any()
                .unbind(),
        );
    }
    if sources {
        items.push(PyArray1::from_vec(py, batch.sources).into_any().unbind());
    }
    if let Some(mask) = mask {
        items.push(PyArray1::from_vec(py, mask).into_any().unbind());
    }
    Ok(pyo3::types::PyTuple::new(py, items)?.into_any().unbind())
}

fn column_to_py(py: Python<'_>, column: Column) -> PyResult<Py<PyAny>> {
    Ok(match column {
        Column::Images(images, shape) => images_to_py(py, images, &shape)?,
        Column::ImageList(images) => {
            let list = PyList::empty(py);
            for (image, shape) in images {
                list.append(images_to_py(py, image, &shape)?)?;
            }
            list.into_any().unbind()
        }
        Column::Labels(labels) => PyArray1::from_vec(py, labels).into_any().unbind(),
        Column::Text(texts) => texts.into_pyobject(py)?.into_any().unbind(),
        Column::Json(values) => list(py, values, json_to_py)?,
        Column::Arrays(Arrays::Stacked {
            dtype,
            shape,
            count,
            data,
        }) => {
            let mut full = vec![count];
            full.extend(&shape);
            typed_to_py(py, dtype.descr(), &full, &data)?
        }
        Column::Arrays(Arrays::List(arrays)) => list(py, arrays, |py, array: Array| {
            typed_to_py(py, array.dtype.descr(), &array.shape, &array.data)
        })?,
        Column::Bytes(fields) => list(py, fields, bytes_to_py)?,
    })
}

/// A Python list of `items` converted by `convert`, `None` where missing.
fn list<T>(
    py: Python<'_>,
    items: Vec<Option<T>>,
    convert: impl Fn(Python<'_>, T) -> PyResult<Py<PyAny>>,
) -> PyResult<Py<PyAny>> {
    let list = PyList::empty(py);
    for item in items {
        match item {
            Some(item) => list.append(convert(py, item)?)?,
            None => list.append(py.None())?,
        }
    }
    Ok(list.into_any().unbind())
}

/// A parsed JSON value as the Python value `json.loads` gives.
fn json_to_py(py: Python<'_>, value: serde_json::Value) -> PyResult<Py<PyAny>> {
    use serde_json::Value;
    Ok(match value {
        Value::Null => py.None(),
        Value::Bool(b) => b.into_pyobject(py)?.to_owned().into_any().unbind(),
        Value::Number(n) => {
            if let Some(i) = n.as_i64() {
                i.into_pyobject(py)?.into_any().unbind()
            } else if let Some(u) = n.as_u64() {
                u.into_pyobject(py)?.into_any().unbind()
            } else {
                n.as_f64()
                    .unwrap_or(f64::NAN)
                    .into_pyobject(py)?
                    .into_any()
                    .unbind()
            }
        }
        Value::String(s) => s.into_pyobject(py)?.into_any().unbind(),
        Value::Array(items) => {
            let list = PyList::empty(py);
            for item in items {
                list.append(json_to_py(py, item)?)?;
            }
            list.into_any().unbind()
        }
        Value::Object(map) => {
            let dict = PyDict::new(py);
            for (key, item) in map {
                dict.set_item(key, json_to_py(py, item)?)?;
            }
            dict.into_any().unbind()
        }
    })
}
