//! Which columns a Parquet file has, and how each is read: a top-level
//! column becomes a dataset column when one leaf holds its values.
//!
//! | Parquet | kind | read from |
//! |---|---|---|
//! | binary named like an image (`image`, `img`, `jpg`, `png`, `webp`...) or a Hugging Face `Image` feature | image | the column |
//! | struct with a binary `bytes` child (Hugging Face `Image`: `{bytes, path}`) | image | `NAME.bytes` |
//! | string, enum, JSON | text | the column |
//! | other binary | bytes | the column |
//! | int32, int64 | label (int64) | the column |
//! | list of int32/int64/float/double | array (one per row) | the list's element |
//! | boolean, float, double | JSON-like values | the column |
//! | any other nested column | JSON-like values | every leaf under it |
//!
//! A Hugging Face dataset's metadata (the `huggingface` key) names its
//! features: `Image` columns are images, and a `ClassLabel`'s names
//! become the dataset's classes. Other nested columns (structs, maps, lists
//! of strings or structs) are `json`: JSON-like values, assembled from
//! their whole column chunks.

use parquet::basic::{ConvertedType, LogicalType, Repetition, Type as Physical};
use parquet::file::metadata::KeyValue;
use parquet::schema::types::{SchemaDescriptor, Type};
use tributary_common::manifest::{ColumnKind, TableColumn};

/// Words that make a binary column an image column.
const IMAGE_NAMES: [&str; 8] = [
    "image", "img", "jpg", "jpeg", "png", "webp", "picture", "photo",
];

/// How one dataset column is read: which leaf holds its values, and how
/// they are laid out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ColumnRead {
    /// The dataset column's name (a top-level column).
    pub name: String,
    pub kind: ColumnKind,
    /// The leaf column's index in the schema.
    pub leaf: usize,
    /// One value per row (`false`), or a list of them (`true`).
    pub list: bool,
    /// The leaf's physical type.
    pub physical: Physical,
    /// A nested column read whole as JSON-like values: every leaf under it
    /// (the column chunks are read whole, the row group's rows assembled).
    pub nested: Vec<usize>,
}

/// The Hugging Face feature types of a file's columns, by name, and the
/// names of its first `ClassLabel`.
fn hf_features(metadata: Option<&Vec<KeyValue>>) -> (Vec<(String, String)>, Vec<String>) {
    let Some(value) = metadata
        .into_iter()
        .flatten()
        .find(|kv| kv.key == "huggingface")
        .and_then(|kv| kv.value.as_deref())
        .and_then(|v| serde_json::from_str::<serde_json::Value>(v).ok())
    else {
        return (Vec::new(), Vec::new());
    };
    let mut types = Vec::new();
    let mut classes = Vec::new();
    if let Some(features) = value["info"]["features"].as_object() {
        for (name, feature) in features {
            let kind = feature["_type"].as_str().unwrap_or_default().to_owned();
            if kind == "ClassLabel" && classes.is_empty() {
                classes = feature["names"]
                    .as_array()
                    .map(|names| {
                        names
                            .iter()
                            .filter_map(|n| n.as_str().map(str::to_owned))
                            .collect()
                    })
                    .unwrap_or_default();
            }
            types.push((name.clone(), kind));
        }
    }
    (types, classes)
}

/// The file's dataset columns (in schema order) and its classes (a
/// Hugging Face `ClassLabel`'s names, or none).
pub fn columns(
    schema: &SchemaDescriptor,
    metadata: Option<&Vec<KeyValue>>,
) -> (Vec<TableColumn>, Vec<String>) {
    let (features, classes) = hf_features(metadata);
    let columns = schema
        .root_schema()
        .get_fields()
        .iter()
        .map(|field| {
            let name = field.name().to_owned();
            let hf_image = features
                .iter()
                .any(|(n, kind)| *n == name && kind == "Image");
            let kind = read_plan(schema, &name, hf_image).map_or(ColumnKind::Json, |r| r.kind);
            TableColumn {
                parquet_type: type_name(field),
                name,
                kind,
            }
        })
        .collect();
    (columns, classes)
}

/// How column `name` is read (`hf_image`: its metadata says it is an
/// image), or why it cannot be.
pub fn read_plan(
    schema: &SchemaDescriptor,
    name: &str,
    hf_image: bool,
) -> Result<ColumnRead, String> {
    let field = schema
        .root_schema()
        .get_fields()
        .iter()
        .find(|f| f.name() == name)
        .ok_or_else(|| format!("the file has no column `{name}`"))?;
    let leaves: Vec<usize> = (0..schema.num_columns())
        .filter(|&i| schema.column(i).path().parts()[0] == name)
        .collect();
    let unsupported = || {
        format!(
            "column `{name}` ({}) is a nested type this build does not read yet \
             (it reads images, strings, binary, integers, floats, booleans and lists of numbers)",
            type_name(field)
        )
    };
    let plan = |leaf: usize, kind: ColumnKind, list: bool| ColumnRead {
        name: name.to_owned(),
        kind,
        leaf,
        list,
        physical: schema.column(leaf).physical_type(),
        nested: Vec::new(),
    };
    if field.is_primitive() {
        let leaf = *leaves.first().ok_or_else(unsupported)?;
        if field.get_basic_info().repetition() == Repetition::REPEATED {
            return numeric(field.get_physical_type())
                .then(|| plan(leaf, ColumnKind::Array, true))
                .ok_or_else(unsupported);
        }
        let image = hf_image || IMAGE_NAMES.iter().any(|w| name.eq_ignore_ascii_case(w));
        return Ok(plan(leaf, primitive_kind(field, image), false));
    }
    // A Hugging Face `Image`: `{bytes: binary, path: string}`.
    if let Some(leaf) = leaves.iter().copied().find(|&i| {
        let column = schema.column(i);
        column.path().parts() == [name, "bytes"]
            && column.physical_type() == Physical::BYTE_ARRAY
            && column.max_rep_level() == 0
    }) {
        return Ok(plan(leaf, ColumnKind::Image, false));
    }
    // A list of numbers: one leaf, repeated once.
    if let [leaf] = leaves[..] {
        let column = schema.column(leaf);
        if column.max_rep_level() == 1 && numeric(column.physical_type()) {
            return Ok(plan(leaf, ColumnKind::Array, true));
        }
    }
    // Anything else nested: JSON-like values, from every leaf under it.
    let first = *leaves.first().ok_or_else(unsupported)?;
    let mut read = plan(first, ColumnKind::Json, false);
    read.nested = leaves;
    Ok(read)
}

fn numeric(physical: Physical) -> bool {
    matches!(
        physical,
        Physical::INT32 | Physical::INT64 | Physical::FLOAT | Physical::DOUBLE
    )
}

fn primitive_kind(field: &Type, image: bool) -> ColumnKind {
    let info = field.get_basic_info();
    let text = matches!(
        info.logical_type_ref(),
        Some(LogicalType::String | LogicalType::Enum | LogicalType::Json)
    ) || matches!(
        info.converted_type(),
        ConvertedType::UTF8 | ConvertedType::ENUM | ConvertedType::JSON
    );
    match field.get_physical_type() {
        Physical::BYTE_ARRAY | Physical::FIXED_LEN_BYTE_ARRAY if text => ColumnKind::Text,
        Physical::BYTE_ARRAY | Physical::FIXED_LEN_BYTE_ARRAY if image => ColumnKind::Image,
        Physical::BYTE_ARRAY | Physical::FIXED_LEN_BYTE_ARRAY => ColumnKind::Bytes,
        Physical::INT32 | Physical::INT64 => ColumnKind::Label,
        Physical::BOOLEAN | Physical::FLOAT | Physical::DOUBLE | Physical::INT96 => {
            ColumnKind::Json
        }
    }
}

/// A type as people write it: `int64`, `string`, `list<int32>`,
/// `struct<bytes: binary, path: string>`.
pub fn type_name(field: &Type) -> String {
    let info = field.get_basic_info();
    if field.is_primitive() {
        let base = match (field.get_physical_type(), primitive_kind(field, false)) {
            (_, ColumnKind::Text) => "string".to_owned(),
            (Physical::BYTE_ARRAY | Physical::FIXED_LEN_BYTE_ARRAY, _) => "binary".to_owned(),
            (physical, _) => physical.to_string().to_lowercase(),
        };
        return if info.repetition() == Repetition::REPEATED {
            format!("list<{base}>")
        } else {
            base
        };
    }
    let fields = field.get_fields();
    let list = matches!(info.logical_type_ref(), Some(LogicalType::List))
        || info.converted_type() == ConvertedType::LIST;
    if list {
        // `list<element>` however the levels are written.
        let mut inner = fields.first();
        while let Some(t) = inner.filter(|t| t.is_group() && t.get_fields().len() == 1) {
            inner = t.get_fields().first();
        }
        return format!("list<{}>", inner.map_or("?".into(), |t| type_name(t)));
    }
    let parts: Vec<String> = fields
        .iter()
        .take(16)
        .map(|f| format!("{}: {}", f.name(), type_name(f)))
        .collect();
    let more = if fields.len() > 16 { ", ..." } else { "" };
    format!("struct<{}{more}>", parts.join(", "))
}
