//! The constructor's arguments that need more than a plain extraction:
//! image sizes, datasets (one URL or a mix), fields, and saved loader states.

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use tributary_worker::coordinated::LoaderState;
use tributary_worker::rank::MixSource;
use tributary_worker::{Fields, Size, Transform};

/// `image_size=`: an int or `(height, width)`; 224 by default.
pub fn image_size_arg(value: Option<&Bound<'_, PyAny>>) -> PyResult<Size> {
    let Some(value) = value else {
        return Ok(Transform::default().size);
    };
    if let Ok(side) = value.extract::<u32>() {
        return Ok(Size::square(side));
    }
    let (height, width) = value.extract::<(u32, u32)>().map_err(|_| {
        PyValueError::new_err(format!(
            "image_size must be an int or (height, width), not {value}"
        ))
    })?;
    Ok(Size { height, width })
}

/// `dataset=`: one URL, or a mix: `(url, take)` pairs, `take` being
/// `"weight:W"`, `"samples:N"` or `"repeat:R"` (what the Python `Loader`
/// makes of a list of `tributary.Source`).
pub fn dataset_arg(value: &Bound<'_, PyAny>) -> PyResult<(String, Vec<MixSource>)> {
    if let Ok(url) = value.extract::<String>() {
        return Ok((url, Vec::new()));
    }
    let pairs: Vec<(String, String)> = value.extract().map_err(|_| {
        PyValueError::new_err(
            "dataset must be a URL, or a list of tributary.Source(url, weight=|samples=|repeat=) to mix",
        )
    })?;
    if pairs.is_empty() {
        return Err(PyValueError::new_err(
            "dataset: the list of sources to mix is empty",
        ));
    }
    let sources = pairs
        .into_iter()
        .enumerate()
        .map(|(i, (url, take))| {
            let take = take
                .parse()
                .map_err(|e| PyValueError::new_err(format!("dataset[{i}] ({url}): {e}")))?;
            Ok(MixSource { url, take })
        })
        .collect::<PyResult<_>>()?;
    Ok((String::new(), sources))
}

/// `fields=`: a list of names, or one comma-separated string.
pub fn fields_arg(value: Option<&Bound<'_, PyAny>>) -> PyResult<Fields> {
    let Some(value) = value else {
        return Ok(Fields::default());
    };
    let parsed = if let Ok(text) = value.extract::<String>() {
        text.parse()
    } else {
        let names: Vec<String> = value.extract().map_err(|_| {
            PyValueError::new_err(
                "fields must be a list of field names (\"image\", \"cls\", \"txt\", ...)",
            )
        })?;
        Fields::parse(names.iter().map(String::as_str))
    };
    parsed.map_err(|e| PyValueError::new_err(format!("fields: {e}")))
}

pub fn state_from(dict: &Bound<'_, PyDict>) -> PyResult<LoaderState> {
    let field = |name: &str| -> PyResult<u64> {
        dict.get_item(name)?
            .ok_or_else(|| PyValueError::new_err(format!("loader state has no `{name}`")))?
            .extract()
    };
    Ok(LoaderState {
        epoch: field("epoch")?,
        generation: field("generation")?,
        samples: field("samples")?,
    })
}
