//! The constructor's arguments that need more than a plain extraction:
//! image sizes, datasets (one URL or a mix), fields, and saved loader
//! states (both ways).

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use tributary_common::ids::{Epoch, Generation};
use tributary_common::plan::generation::{CommitPoint, GenerationRecord};
use tributary_common::tokens::{Packing, SequenceSpec, MAX_SEQUENCE_LENGTH};
use tributary_worker::coordinated::state::MAX_HISTORY;
use tributary_worker::coordinated::LoaderState;
use tributary_worker::rank::Source;
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
pub fn dataset_arg(value: &Bound<'_, PyAny>) -> PyResult<(String, Vec<Source>)> {
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
        .map(|(i, (manifest_url, take))| {
            let take = take.parse().map_err(|e| {
                PyValueError::new_err(format!("dataset[{i}] ({manifest_url}): {e}"))
            })?;
            Ok(Source { manifest_url, take })
        })
        .collect::<PyResult<_>>()?;
    Ok((String::new(), sources))
}

/// `sequence_length=` and `packing=`: a token job's rows, or `None`
/// (samples). `packing` without a length is refused where it is not the
/// default.
pub fn sequence_arg(length: Option<u32>, packing: &str) -> PyResult<Option<SequenceSpec>> {
    let packing: Packing = packing
        .parse()
        .map_err(|e: String| PyValueError::new_err(format!("packing: {e}")))?;
    match length {
        None if packing != Packing::Concat => Err(PyValueError::new_err(format!(
            "packing={:?} needs sequence_length= (the tokens per row)",
            packing.as_str()
        ))),
        None => Ok(None),
        Some(length) if !(1..=MAX_SEQUENCE_LENGTH).contains(&length) => Err(PyValueError::new_err(
            format!("sequence_length={length} is outside 1..={MAX_SEQUENCE_LENGTH}"),
        )),
        Some(length) => Ok(Some(SequenceSpec { length, packing })),
    }
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

/// A saved loader state (`Loader.state_dict()`): `epoch`, `generation`,
/// `samples` and `history`, the plan records of the epoch up to the state's
/// generation, each `[generation, epoch, world]` or `[generation, epoch,
/// world, from_generation, from_samples]`. A state without `history`
/// (saved by an older tributary) resumes only a job whose coordinator
/// still holds its commit. `plan`, when present, is the digest of the job's
/// plan the state was saved under (a state of another plan is refused).
/// Checked as untrusted input: every field named when it is missing or
/// wrong.
pub fn state_from(dict: &Bound<'_, PyDict>) -> PyResult<LoaderState> {
    let field = |name: &str| -> PyResult<u64> {
        dict.get_item(name)?
            .ok_or_else(|| PyValueError::new_err(format!("loader state has no `{name}`")))?
            .extract()
            .map_err(|_| {
                PyValueError::new_err(format!(
                    "loader state `{name}` must be an int in 0..2**64 (a dict from Loader.state_dict())"
                ))
            })
    };
    let history = match dict.get_item("history")? {
        None => Vec::new(),
        Some(value) => history_from(&value)?,
    };
    let plan = match dict.get_item("plan")? {
        None => None,
        Some(value) => Some(value.extract::<u32>().map_err(|_| {
            PyValueError::new_err(
                "loader state `plan` must be an int in 0..2**32 (a dict from Loader.state_dict())",
            )
        })?),
    };
    let state = LoaderState {
        epoch: field("epoch")?,
        generation: field("generation")?,
        samples: field("samples")?,
        history,
        plan,
    };
    state
        .validate()
        .map_err(|e| PyValueError::new_err(e.to_string()))?;
    Ok(state)
}

fn history_from(value: &Bound<'_, PyAny>) -> PyResult<Vec<GenerationRecord>> {
    let bad = |why: String| PyValueError::new_err(format!("loader state `history`: {why}"));
    let len = value
        .len()
        .map_err(|_| bad("must be a list of lists of ints".into()))?;
    if len > MAX_HISTORY {
        return Err(bad(format!("{len} records (at most {MAX_HISTORY})")));
    }
    let rows: Vec<Vec<u64>> = value
        .extract()
        .map_err(|_| bad("must be a list of lists of ints in 0..2**64".into()))?;
    rows.iter()
        .enumerate()
        .map(|(i, row)| match row[..] {
            [generation, epoch, world] | [generation, epoch, world, _, _] => {
                let world = u32::try_from(world)
                    .map_err(|_| bad(format!("record {i}: world {world} is too large")))?;
                let from = match row[..] {
                    [_, _, _, g, samples] => Some(CommitPoint {
                        generation: Generation(g),
                        samples,
                    }),
                    _ => None,
                };
                Ok(GenerationRecord {
                    generation: Generation(generation),
                    epoch: Epoch(epoch),
                    world,
                    from,
                })
            }
            _ => Err(bad(format!(
                "record {i} has {} ints, not 3 (generation, epoch, world) or 5 (and the \
                 commit it resumed from)",
                row.len()
            ))),
        })
        .collect()
}

/// `state` as the dict `Loader.state_dict()` returns (see [`state_from`]).
pub fn state_to_py<'py>(py: Python<'py>, state: &LoaderState) -> PyResult<Bound<'py, PyDict>> {
    let dict = PyDict::new(py);
    dict.set_item("epoch", state.epoch)?;
    dict.set_item("generation", state.generation)?;
    dict.set_item("samples", state.samples)?;
    let history: Vec<Vec<u64>> = state
        .history
        .iter()
        .map(|r| {
            let mut row = vec![r.generation.get(), r.epoch.get(), u64::from(r.world)];
            if let Some(from) = r.from {
                row.extend([from.generation.get(), from.samples]);
            }
            row
        })
        .collect();
    dict.set_item("history", history)?;
    if let Some(plan) = state.plan {
        dict.set_item("plan", plan)?;
    }
    Ok(dict)
}
