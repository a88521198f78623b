//! Which fields of a sample a batch carries, and how each becomes a column.
//!
//! A field is named as in WebDataset: by its extension (`jpg`, `cls`,
//! `txt`, `seg.png`), with `;` between alternatives (`jpg;png`: the first
//! the sample has) and a trailing `?` when a sample may lack it (then it is
//! `None`, or -1 for a label). `image` stands for `jpg;jpeg;png;webp`.
//! Extensions match without regard to case (ImageNet's `.JPEG`).
//!
//! The decoder follows the extension (the last dot-separated part):
//!
//! | extension | column |
//! |---|---|
//! | `jpg`, `jpeg`, `png`, `webp`, `image` | images, through the [`Transform`](super::transform::Transform) (the format from the bytes, not the name) |
//! | `cls` | int64 labels |
//! | `txt` | UTF-8 strings |
//! | `json` | parsed JSON values |
//! | `npy` | arrays: stacked when every dtype and shape agree, else a list |
//! | anything else | the raw bytes, sharing the buffer they were read in |

use std::fmt;
use std::str::FromStr;

use bytes::Bytes;
use tributary_common::sample::{Field, Sample};

use super::npy;
use crate::pipeline::output::Images;
// The columns live in the pipeline's output types; re-exported where they
// have always been named.
pub use crate::pipeline::output::{Array, Arrays, Column};

/// Fields a batch may carry at most.
pub const MAX_FIELDS: usize = 64;
/// The longest field name.
pub const MAX_NAME: usize = 128;
/// Extensions `image` stands for.
pub const IMAGE_EXTENSIONS: [&str; 4] = ["jpg", "jpeg", "png", "webp"];

/// How a field's bytes become values of a column.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decoder {
    Image,
    Label,
    Text,
    Json,
    Npy,
    Bytes,
}

impl Decoder {
    /// The decoder of an extension: by its last dot-separated part.
    pub fn of(ext: &str) -> Self {
        let last = ext.rsplit('.').next().unwrap_or(ext).to_ascii_lowercase();
        match last.as_str() {
            "jpg" | "jpeg" | "png" | "webp" | "image" => Self::Image,
            "cls" => Self::Label,
            "txt" => Self::Text,
            "json" => Self::Json,
            "npy" => Self::Npy,
            _ => Self::Bytes,
        }
    }
}

/// One field of a batch: what it is called, the extensions it takes, its
/// decoder, and whether samples may lack it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldSpec {
    /// As written (`jpg;png`, `txt?`).
    pub name: String,
    pub extensions: Vec<String>,
    pub decoder: Decoder,
    pub optional: bool,
}

impl FromStr for FieldSpec {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        let bad = |why: &str| Err(format!("field {text:?} {why}"));
        if text.len() > MAX_NAME {
            return bad(&format!("is longer than {MAX_NAME} bytes"));
        }
        if text
            .chars()
            .any(|c| c.is_control() || c.is_whitespace() || c == ',')
        {
            return bad("holds a space, comma or control character");
        }
        let (body, optional) = match text.strip_suffix('?') {
            Some(body) => (body, true),
            None => (text, false),
        };
        let mut extensions = Vec::new();
        for part in body.split(';') {
            if part.is_empty() || part.starts_with('.') || part.ends_with('.') {
                return bad("has an empty extension");
            }
            if part.eq_ignore_ascii_case("image") {
                extensions.extend(IMAGE_EXTENSIONS.iter().map(|e| (*e).to_owned()));
            } else {
                extensions.push(part.to_owned());
            }
        }
        // The first alternative that says how it decodes; one that does
        // not (an unknown extension, or a Parquet column's name such as
        // `label`) goes with it.
        let typed = extensions
            .iter()
            .find(|e| Decoder::of(e) != Decoder::Bytes)
            .unwrap_or(&extensions[0]);
        let decoder = Decoder::of(typed);
        if let Some(other) = extensions
            .iter()
            .find(|e| Decoder::of(e) != decoder && Decoder::of(e) != Decoder::Bytes)
        {
            return bad(&format!(
                "mixes decoders: `{typed}` and `{other}` do not decode alike"
            ));
        }
        if optional && decoder == Decoder::Image {
            return bad(
                "is an image and cannot be optional (`?`): every sample of a batch needs its image",
            );
        }
        Ok(Self {
            name: text.to_owned(),
            extensions,
            decoder,
            optional,
        })
    }
}

impl fmt::Display for FieldSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name)
    }
}

impl FieldSpec {
    /// The sample's field this names: the first alternative it has.
    pub fn find<'s>(&self, sample: &'s Sample) -> Option<&'s Field> {
        self.extensions.iter().find_map(|ext| {
            sample
                .fields
                .iter()
                .find(|f| f.ext.eq_ignore_ascii_case(ext))
        })
    }
}

/// The fields of a batch, in order: `image,cls?` by default.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fields(pub Vec<FieldSpec>);

impl Default for Fields {
    fn default() -> Self {
        Self::parse(["image", "cls?"]).expect("valid defaults")
    }
}

impl FromStr for Fields {
    type Err = String;

    /// A comma-separated list (`image,cls?`).
    fn from_str(text: &str) -> Result<Self, String> {
        Self::parse(text.split(',').map(str::trim))
    }
}

impl fmt::Display for Fields {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<&str> = self.0.iter().map(|s| s.name.as_str()).collect();
        f.write_str(&names.join(","))
    }
}

impl Fields {
    /// Fields from their names, checked: at least one, at most
    /// [`MAX_FIELDS`], none twice.
    pub fn parse<'a>(names: impl IntoIterator<Item = &'a str>) -> Result<Self, String> {
        let specs = names
            .into_iter()
            .take(MAX_FIELDS + 1)
            .map(str::parse)
            .collect::<Result<Vec<FieldSpec>, _>>()?;
        if specs.is_empty() {
            return Err("fields must name at least one field".into());
        }
        if specs.len() > MAX_FIELDS {
            return Err(format!("fields names more than {MAX_FIELDS} fields"));
        }
        for (i, spec) in specs.iter().enumerate() {
            if specs[..i].iter().any(|s| s.name == spec.name) {
                return Err(format!("field {:?} is named twice", spec.name));
            }
        }
        Ok(Self(specs))
    }

    /// How many image fields there are.
    pub fn images(&self) -> usize {
        self.0
            .iter()
            .filter(|s| s.decoder == Decoder::Image)
            .count()
    }
}

/// One sample's value of one field, before the batch's columns are made.
#[derive(Debug)]
pub enum Value {
    /// Written into the sample's slot of the batch's image buffer.
    InSlot,
    Image(Images, [usize; 3]),
    Label(i64),
    Text(Option<String>),
    Json(Option<serde_json::Value>),
    Array(Option<Array>),
    Bytes(Option<Bytes>),
}

/// The value of a field that is not an image (`None`: the sample lacks
/// it). Errors say what is wrong with the bytes.
pub fn decode_value(decoder: Decoder, field: Option<&Field>) -> Result<Value, String> {
    let Some(field) = field else {
        return Ok(match decoder {
            Decoder::Label => Value::Label(-1),
            Decoder::Text => Value::Text(None),
            Decoder::Json => Value::Json(None),
            Decoder::Npy => Value::Array(None),
            Decoder::Bytes | Decoder::Image => Value::Bytes(None),
        });
    };
    let data = &field.data;
    Ok(match decoder {
        Decoder::Label => Value::Label(
            std::str::from_utf8(data)
                .ok()
                .and_then(|text| text.trim().parse().ok())
                .ok_or_else(|| {
                    format!(
                        "`{}` field {:?} is not an integer",
                        field.ext,
                        String::from_utf8_lossy(&data[..data.len().min(64)])
                    )
                })?,
        ),
        Decoder::Text => Value::Text(Some(
            std::str::from_utf8(data)
                .map_err(|e| format!("`{}` field is not UTF-8: {e}", field.ext))?
                .to_owned(),
        )),
        Decoder::Json => Value::Json(Some(
            serde_json::from_slice(data)
                .map_err(|e| format!("`{}` field is not JSON: {e}", field.ext))?,
        )),
        Decoder::Npy => {
            let parsed = npy::parse(data).map_err(|e| format!("`{}` field: {e}", field.ext))?;
            Value::Array(Some(Array {
                dtype: parsed.dtype,
                shape: parsed.shape,
                data: data.slice_ref(parsed.data),
            }))
        }
        Decoder::Bytes | Decoder::Image => Value::Bytes(Some(data.clone())),
    })
}

/// The column of one field from the kept samples' values, in order.
pub fn column(values: Vec<Value>, dense: Option<(Images, [usize; 4])>) -> Column {
    if let Some((images, shape)) = dense {
        return Column::Images(images, shape);
    }
    let first = values.first();
    match first {
        Some(Value::Label(_)) => Column::Labels(
            values
                .into_iter()
                .map(|v| if let Value::Label(l) = v { l } else { -1 })
                .collect(),
        ),
        Some(Value::Text(_)) => Column::Text(
            values
                .into_iter()
                .map(|v| if let Value::Text(t) = v { t } else { None })
                .collect(),
        ),
        Some(Value::Json(_)) => Column::Json(
            values
                .into_iter()
                .map(|v| if let Value::Json(j) = v { j } else { None })
                .collect(),
        ),
        Some(Value::Array(_)) => Column::Arrays(stack(
            values
                .into_iter()
                .map(|v| if let Value::Array(a) = v { a } else { None })
                .collect(),
        )),
        Some(Value::Image(..)) => Column::ImageList(
            values
                .into_iter()
                .filter_map(|v| match v {
                    Value::Image(images, shape) => Some((images, shape)),
                    _ => None,
                })
                .collect(),
        ),
        Some(Value::Bytes(_) | Value::InSlot) | None => Column::Bytes(
            values
                .into_iter()
                .map(|v| if let Value::Bytes(b) = v { b } else { None })
                .collect(),
        ),
    }
}

/// One `N x shape` array when every sample has an array of one dtype and
/// shape; the list otherwise.
fn stack(arrays: Vec<Option<Array>>) -> Arrays {
    let uniform = arrays.first().and_then(Option::as_ref).filter(|first| {
        arrays.iter().all(|a| {
            a.as_ref()
                .is_some_and(|a| a.dtype == first.dtype && a.shape == first.shape)
        })
    });
    let Some(first) = uniform else {
        return Arrays::List(arrays);
    };
    let (dtype, shape) = (first.dtype, first.shape.clone());
    let mut data = Vec::with_capacity(first.data.len() * arrays.len());
    for array in arrays.iter().flatten() {
        data.extend_from_slice(&array.data);
    }
    Arrays::Stacked {
        dtype,
        shape,
        count: arrays.len(),
        data,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(fields: &[(&str, &[u8])]) -> Sample {
        Sample {
            id: 3,
            key: "k/3".into(),
            fields: fields
                .iter()
                .map(|(ext, data)| Field {
                    ext: (*ext).into(),
                    data: Bytes::copy_from_slice(data),
                })
                .collect(),
        }
    }

    #[test]
    fn names_parse_into_alternatives_decoders_and_optionality() {
        let fields: Fields = "image,cls?,seg.png,txt,meta.json?,tokens.npy,wav"
            .parse()
            .expect("valid");
        let decoders: Vec<Decoder> = fields.0.iter().map(|f| f.decoder).collect();
        use Decoder::*;
        assert_eq!(decoders, [Image, Label, Image, Text, Json, Npy, Bytes]);
        assert_eq!(fields.0[0].extensions, IMAGE_EXTENSIONS);
        assert!(fields.0[1].optional && !fields.0[3].optional);
        assert_eq!(fields.images(), 2);
        assert_eq!(
            fields.to_string(),
            "image,cls?,seg.png,txt,meta.json?,tokens.npy,wav"
        );
        for (bad, why) in [
            ("jpg;txt", "mixes decoders"),
            ("jpg?", "cannot be optional"),
            ("txt,txt", "named twice"),
            ("a b", "space"),
            ("", "empty extension"),
            ("x;", "empty extension"),
        ] {
            let error = bad.parse::<Fields>().expect_err(bad);
            assert!(error.contains(why), "{bad}: {error}");
        }
        let many = vec!["a"; MAX_FIELDS + 1].join(",");
        assert!(many.parse::<Fields>().is_err());
    }

    #[test]
    fn alternatives_find_the_first_present_extension_in_any_case() {
        let s = sample(&[("JPEG", b"x"), ("png", b"y")]);
        let image: FieldSpec = "image".parse().expect("valid");
        assert_eq!(&image.find(&s).expect("found").data[..], b"x");
        let png: FieldSpec = "png;jpg".parse().expect("valid");
        assert_eq!(&png.find(&s).expect("found").data[..], b"y");
        assert!("txt"
            .parse::<FieldSpec>()
            .expect("valid")
            .find(&s)
            .is_none());
    }

    #[test]
    fn values_decode_by_extension_and_bad_bytes_say_why() {
        let s = sample(&[
            ("cls", b" 7\n"),
            ("txt", "héllo".as_bytes()),
            ("json", b"{\"a\": [1, 2]}"),
            ("bin", b"\x00\x01"),
        ]);
        let value =
            |ext: &str, decoder| decode_value(decoder, s.fields.iter().find(|f| f.ext == ext));
        assert!(matches!(value("cls", Decoder::Label), Ok(Value::Label(7))));
        assert!(matches!(value("txt", Decoder::Text), Ok(Value::Text(Some(t))) if t == "héllo"));
        assert!(matches!(value("json", Decoder::Json), Ok(Value::Json(Some(j))) if j["a"][1] == 2));
        assert!(
            matches!(value("bin", Decoder::Bytes), Ok(Value::Bytes(Some(b))) if b[..] == [0, 1])
        );
        assert!(matches!(
            value("none", Decoder::Label),
            Ok(Value::Label(-1))
        ));
        assert!(matches!(
            value("none", Decoder::Text),
            Ok(Value::Text(None))
        ));
        let bad = sample(&[("txt", b"\xff\xfe"), ("json", b"{oops"), ("cls", b"seven")]);
        for (ext, decoder, why) in [
            ("txt", Decoder::Text, "not UTF-8"),
            ("json", Decoder::Json, "not JSON"),
            ("cls", Decoder::Label, "not an integer"),
        ] {
            let error =
                decode_value(decoder, bad.fields.iter().find(|f| f.ext == ext)).expect_err(ext);
            assert!(error.contains(why), "{error}");
        }
    }
}
