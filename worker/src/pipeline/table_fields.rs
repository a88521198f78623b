//! Fields over Parquet datasets: a field names a column (`image`,
//! `label`, `text`, `input_ids`), and takes the decoder its column's kind
//! calls for, so that `fields=["image", "label"]` reads a Hugging Face
//! image dataset's `Image` struct as images and its `ClassLabel` as int64
//! labels. A field may name a tar extension and a column as alternatives
//! (`jpg;image`, `cls;label`) to read a mix of both kinds of dataset.
//! Without fields given, a Parquet dataset reads all its columns.

use tributary_common::manifest::ColumnKind;
use tributary_io::Dataset;

use super::datasets::Projection;
use super::decode::fields::{Decoder, FieldSpec, Fields};
use crate::error::{Result, WorkerError};

/// The decoder a column of `kind` takes.
fn decoder_of(kind: ColumnKind) -> Decoder {
    match kind {
        ColumnKind::Image => Decoder::Image,
        ColumnKind::Label => Decoder::Label,
        ColumnKind::Text => Decoder::Text,
        ColumnKind::Bytes => Decoder::Bytes,
        ColumnKind::Array => Decoder::Npy,
        ColumnKind::Json => Decoder::Json,
    }
}

/// `fields` resolved against `datasets`: each field that names a column
/// of a Parquet dataset takes that column's decoder (a field named by an
/// unknown extension, such as `label`, adopts it; one whose extension says
/// otherwise must agree), and finds the column by name in the samples; and
/// the columns to read from each dataset. Errors name the field, the
/// dataset and its columns.
pub fn resolve_fields(datasets: &[Dataset], fields: &Fields) -> Result<(Fields, Vec<Projection>)> {
    let tables: Vec<bool> = datasets.iter().map(|d| d.manifest.is_table()).collect();
    if !tables.contains(&true) {
        return Ok((
            fields.clone(),
            datasets.iter().map(|_| Projection::from([])).collect(),
        ));
    }
    let fields = if *fields == Fields::default() && !tables.contains(&false) {
        all_columns(&datasets[0])?
    } else {
        fields.clone()
    };
    let mut projections: Vec<Vec<(String, ColumnKind)>> = vec![Vec::new(); datasets.len()];
    let mut resolved = Vec::with_capacity(fields.0.len());
    for spec in fields.0 {
        let mut spec = spec;
        let mut decoder = None;
        for (d, dataset) in datasets.iter().enumerate() {
            if !tables[d] {
                continue;
            }
            let manifest = &dataset.manifest;
            let bare = spec.name.trim_end_matches('?');
            let column = bare
                .split(';')
                .chain(spec.extensions.iter().map(String::as_str))
                .find_map(|name| manifest.column(name));
            let Some(column) = column else {
                if spec.optional {
                    continue;
                }
                let columns: Vec<String> = manifest
                    .columns
                    .iter()
                    .map(|c| format!("{} ({})", c.name, c.parquet_type))
                    .collect();
                return Err(WorkerError::Config(format!(
                    "field `{}`: {} has no such column; its columns: {} \
                     (name a column, or mark the field optional with `?`)",
                    spec.name,
                    dataset.location.url_of(""),
                    columns.join(", ")
                )));
            };
            let wanted = decoder_of(column.kind);
            let agrees = spec.decoder == wanted
                || spec.decoder == Decoder::Bytes
                || (spec.decoder == Decoder::Image && column.kind == ColumnKind::Bytes);
            let chosen = if spec.decoder == Decoder::Bytes {
                wanted
            } else {
                spec.decoder
            };
            if !agrees || decoder.is_some_and(|d| d != chosen) {
                return Err(WorkerError::Config(format!(
                    "field `{}` decodes as {:?}, but column `{}` of {} is {} ({}); name the \
                     column alone to read it as its kind",
                    spec.name,
                    decoder.unwrap_or(spec.decoder),
                    column.name,
                    dataset.location.url_of(""),
                    column.kind.as_str(),
                    column.parquet_type
                )));
            }
            decoder = Some(chosen);
            if !spec
                .extensions
                .iter()
                .any(|e| e.eq_ignore_ascii_case(&column.name))
            {
                spec.extensions.push(column.name.clone());
            }
            if !projections[d].iter().any(|(name, _)| *name == column.name) {
                projections[d].push((column.name.clone(), column.kind));
            }
        }
        if let Some(decoder) = decoder {
            spec.decoder = decoder;
        }
        resolved.push(spec);
    }
    Ok((
        Fields(resolved),
        projections.into_iter().map(Projection::from).collect(),
    ))
}

/// A field for every column of a Parquet dataset (optional but for
/// images: a null is then `None`, or -1 for a label).
fn all_columns(dataset: &Dataset) -> Result<Fields> {
    let names: Vec<String> = dataset
        .manifest
        .columns
        .iter()
        .map(|c| {
            if c.kind == ColumnKind::Image {
                c.name.clone()
            } else {
                format!("{}?", c.name)
            }
        })
        .collect();
    let specs = names
        .iter()
        .map(|name| name.parse::<FieldSpec>())
        .collect::<std::result::Result<Vec<_>, _>>()
        .map_err(|e| {
            WorkerError::Config(format!(
                "{}: {e}; pass fields naming the columns to read",
                dataset.location.url_of("")
            ))
        })?;
    Ok(Fields(specs))
}
