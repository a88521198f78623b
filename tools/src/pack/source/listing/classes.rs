//! A listing's classes, from its labels (the rule is in the
//! [listing docs](super)): collected row by row, decided at the end.

use std::collections::{BTreeSet, HashMap};
use std::path::Path;

use super::rows::{at, Row};
use crate::error::{Result, ToolsError};

/// The most classes a listing may name (integer labels: the largest label
/// plus one).
pub const MAX_LISTED_CLASSES: usize = 1 << 20;

/// The labels of a listing, seen row by row: the distinct ones, and the
/// first integer label too large to be a class index.
#[derive(Debug, Default)]
pub struct Labels {
    names: BTreeSet<String>,
    /// The line and label of the first integer label that is too large.
    too_large: Option<(usize, String)>,
}

impl Labels {
    /// Notes the label of `row`.
    pub fn add(&mut self, row: &Row) {
        let Some(label) = &row.label else { return };
        if self.too_large.is_none()
            && integer_label(label).is_some_and(|value| value >= MAX_LISTED_CLASSES as u64)
        {
            self.too_large = Some((row.line, label.clone()));
        }
        if !self.names.contains(label) {
            self.names.insert(label.clone());
        }
    }

    /// The classes and each label's index.
    pub fn finish(self, src: &Path) -> Result<(Vec<String>, HashMap<String, u32>)> {
        if self.names.iter().all(|name| integer_label(name).is_some()) {
            if let Some((line, label)) = self.too_large {
                return Err(at(
                    src,
                    line,
                    format!(
                        "integer label {label} is a class index, at most {}",
                        MAX_LISTED_CLASSES - 1
                    ),
                ));
            }
            let index: HashMap<String, u32> = self
                .names
                .into_iter()
                .map(|name| {
                    let value = integer_label(&name).unwrap_or(0) as u32;
                    (name, value)
                })
                .collect();
            let count = index.values().max().map_or(0, |max| *max as usize + 1);
            return Ok(((0..count).map(|i| i.to_string()).collect(), index));
        }
        if self.names.len() > MAX_LISTED_CLASSES {
            return Err(ToolsError::Config(format!(
                "{}: {} distinct labels, over the limit of {MAX_LISTED_CLASSES} classes",
                src.display(),
                self.names.len()
            )));
        }
        let index = self
            .names
            .iter()
            .enumerate()
            .map(|(i, name)| (name.clone(), i as u32))
            .collect();
        Ok((self.names.into_iter().collect(), index))
    }
}

/// A label that is a class index: digits without a leading zero.
fn integer_label(label: &str) -> Option<u64> {
    let canonical = label == "0"
        || (!label.starts_with('0')
            && !label.is_empty()
            && label.bytes().all(|b| b.is_ascii_digit()));
    canonical.then(|| label.parse().ok()).flatten()
}

/// The classes of `rows` and each label's index (see the
/// [listing docs](super)).
pub fn classes(src: &Path, rows: &[Row]) -> Result<(Vec<String>, HashMap<String, u32>)> {
    let mut labels = Labels::default();
    for row in rows {
        labels.add(row);
    }
    labels.finish(src)
}
