//! A job's spec: everything that defines a job (what it reads, how it
//! shuffles, batches and hands out work), checked by one [`JobSpec::validate`]
//! and converted to and from the protocol's `JobConfig` in one place.
//!
//! The coordinator stores and plans with it; a rank creates its job from it
//! (and holds it beside what is local to the rank); the bindings build it
//! from their arguments. Its errors ([`SpecError`]) carry the [`Field`] they
//! are about, so that each API names the field in its own vocabulary: the
//! [`Display`](std::fmt::Display) form uses the Rust field names, a binding
//! renders [`SpecError::message`] with its own.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::plan::mix::{Take, MAX_EPOCH_SAMPLES, MAX_SOURCES};
use crate::plan::Remainder;
use crate::proto::v1;
use crate::tokens::{Packing, SequenceSpec, MAX_SEQUENCE_LENGTH};

/// How a job hands out work.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// Equal parts per generation over a torchrun world (DDP).
    Sync,
    /// Units leased to whoever asks; expired leases return to the pool.
    Dynamic,
}

/// Everything that defines a job, as stored in the metadata store (this
/// form is the stored record: its serde names are part of the format).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobSpec {
    /// The dataset's manifest URL; empty when `sources` mixes several.
    pub manifest_url: String,
    pub seed: u64,
    pub batch_size: u32,
    /// How many epochs the job has: `Some(n)`, a finite job of `n` epochs
    /// (it finishes once every rank has read the last one); `None`, as many
    /// as the ranks ask for (it never finishes; the protocol's `epochs = 0`).
    #[serde(default)]
    pub epochs: Option<u64>,
    pub remainder: Remainder,
    pub mode: Mode,
    pub shuffle_buffer: u32,
    /// Dynamic: samples per leased unit.
    pub unit_samples: u32,
    /// Member lease time to live in seconds.
    pub member_ttl_s: u32,
    /// Several datasets mixed; then `manifest_url` is empty.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sources: Vec<Source>,
    /// The epoch of weighted sources (0: all their samples).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub epoch_samples: u64,
    /// A token job's rows: every dataset is a token dataset and every
    /// count of the job (batches, commits, units, a mix's takes) counts
    /// rows of `length` tokens ([`crate::tokens`]). `None`: samples.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sequence: Option<SequenceSpec>,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// One dataset of a mixed job: its manifest URL and what an epoch takes
/// from it (see [`crate::plan::mix`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Source {
    pub manifest_url: String,
    #[serde(default)]
    pub take: Take,
}

impl std::str::FromStr for Source {
    type Err = String;

    /// Parses `URL=TAKE` (split at the last `=`), TAKE as [`Take`] parses
    /// it: `weight:W`, `samples:N` or `repeat:R`.
    fn from_str(text: &str) -> Result<Self, String> {
        let (url, take) = text
            .rsplit_once('=')
            .filter(|(url, _)| !url.is_empty())
            .ok_or_else(|| {
                format!("{text:?} is not URL=TAKE (TAKE: weight:W, samples:N or repeat:R)")
            })?;
        Ok(Self {
            manifest_url: url.to_owned(),
            take: take.parse().map_err(|e| format!("{url}: {e}"))?,
        })
    }
}

/// What a field left at zero in a protocol `JobConfig` becomes.
pub const DEFAULT_SHUFFLE_BUFFER: u32 = 1024;
pub const DEFAULT_UNIT_SAMPLES: u32 = 256;
pub const DEFAULT_MEMBER_TTL_S: u32 = 10;

/// Bounds of every field. The coordinator allocates and loops by these
/// (a shuffle buffer is replayed to recompute a rank's emissions, a world
/// is split into parts), so each is far above any real job and far below
/// what would exhaust a replica.
pub const MAX_MANIFEST_URL_BYTES: usize = 4096;
pub const MAX_BATCH_SIZE: u32 = 65_536;
pub const MAX_EPOCHS: u64 = 1_000_000;
pub const MAX_SHUFFLE_BUFFER: u32 = 1 << 20;
pub const MAX_UNIT_SAMPLES: u32 = 1 << 20;
pub const MAX_MEMBER_TTL_S: u32 = 3600;

/// A field of a [`JobSpec`], for errors; displayed as its Rust name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Field {
    ManifestUrl,
    Sources,
    /// One source of the mix.
    Source(usize),
    /// One source's URL.
    SourceUrl(usize),
    EpochSamples,
    BatchSize,
    Epochs,
    Remainder,
    Mode,
    ShuffleBuffer,
    UnitSamples,
    MemberTtlS,
    SequenceLength,
    Packing,
}

impl fmt::Display for Field {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::ManifestUrl => f.write_str("manifest_url"),
            Self::Sources => f.write_str("sources"),
            Self::Source(i) => write!(f, "sources[{i}]"),
            Self::SourceUrl(i) => write!(f, "sources[{i}].manifest_url"),
            Self::EpochSamples => f.write_str("epoch_samples"),
            Self::BatchSize => f.write_str("batch_size"),
            Self::Epochs => f.write_str("epochs"),
            Self::Remainder => f.write_str("remainder"),
            Self::Mode => f.write_str("mode"),
            Self::ShuffleBuffer => f.write_str("shuffle_buffer"),
            Self::UnitSamples => f.write_str("unit_samples"),
            Self::MemberTtlS => f.write_str("member_ttl_s"),
            Self::SequenceLength => f.write_str("sequence_length"),
            Self::Packing => f.write_str("packing"),
        }
    }
}

/// What is wrong with a field.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Problem {
    /// A number outside `min..=max`.
    OutOfRange {
        value: u64,
        min: u64,
        max: u64,
    },
    Empty,
    /// A URL of this many bytes, over [`MAX_MANIFEST_URL_BYTES`].
    TooLong(usize),
    ControlCharacters,
    /// A mix of this many datasets, over [`MAX_SOURCES`].
    TooManySources(usize),
    /// `epoch_samples` without a mix.
    MixedOnly,
    /// A URL beside a mix.
    UrlAndSources,
    /// A source's take, and why it is refused.
    Take(String),
    /// A protocol enum value this build does not know.
    Unknown(i32),
    /// Set without the field it qualifies.
    Requires(Field),
}

/// A field of a [`JobSpec`] and what is wrong with it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", self.message(&self.field.to_string()))]
pub struct SpecError {
    pub field: Field,
    pub problem: Problem,
}

impl SpecError {
    fn new(field: Field, problem: Problem) -> Self {
        Self { field, problem }
    }

    /// The message, naming the field `name` (a binding passes its own name
    /// for [`SpecError::field`]; [`Display`](fmt::Display) the Rust one).
    pub fn message(&self, name: &str) -> String {
        match &self.problem {
            Problem::OutOfRange { value, min, .. } if value < min => {
                format!("{name} must be at least {min}")
            }
            Problem::OutOfRange { value, min, max } => {
                format!("{name}: {value} is outside the allowed range {min}..={max}")
            }
            Problem::Empty => format!("{name}: is empty"),
            Problem::TooLong(bytes) => {
                format!("{name}: is {bytes} bytes; the limit is {MAX_MANIFEST_URL_BYTES}")
            }
            Problem::ControlCharacters => format!("{name}: contains control characters"),
            Problem::TooManySources(count) => {
                format!("{name}: lists {count} datasets; the limit is {MAX_SOURCES}")
            }
            Problem::MixedOnly => format!("{name}: is for mixed sources only"),
            Problem::UrlAndSources => {
                format!("{name}: must be empty when sources are given (add the dataset to sources)")
            }
            Problem::Take(why) => format!("{name}: {why}"),
            Problem::Requires(other) => format!("{name}: is set but {other} is not"),
            Problem::Unknown(value) => match self.field {
                Field::Remainder => format!("{name}: unknown policy {value}"),
                _ => format!("{name}: unknown {name} {value}"),
            },
        }
    }
}

impl JobSpec {
    /// A sync job reading `manifest_url`: as many epochs as its ranks ask
    /// for (`epochs: None`), batches of 64, seed 0, drop-last, and the
    /// defaults of the other fields.
    pub fn new(manifest_url: impl Into<String>) -> Self {
        Self {
            manifest_url: manifest_url.into(),
            seed: 0,
            batch_size: 64,
            epochs: None,
            remainder: Remainder::Drop,
            mode: Mode::Sync,
            shuffle_buffer: DEFAULT_SHUFFLE_BUFFER,
            unit_samples: DEFAULT_UNIT_SAMPLES,
            member_ttl_s: DEFAULT_MEMBER_TTL_S,
            sources: Vec::new(),
            epoch_samples: 0,
            sequence: None,
        }
    }

    /// The spec with the fields the protocol leaves at zero for "the
    /// default" (`shuffle_buffer`, `unit_samples`, `member_ttl_s`) filled.
    #[must_use]
    pub fn with_defaults(mut self) -> Self {
        let or = |v: &mut u32, d: u32| {
            if *v == 0 {
                *v = d;
            }
        };
        or(&mut self.shuffle_buffer, DEFAULT_SHUFFLE_BUFFER);
        or(&mut self.unit_samples, DEFAULT_UNIT_SAMPLES);
        or(&mut self.member_ttl_s, DEFAULT_MEMBER_TTL_S);
        self
    }

    /// Checks every field against its bound. The coordinator runs it on
    /// every spec that comes in, and again on every spec read back from
    /// the store (a stored spec that fails fails its own job, never the
    /// replica); a rank runs it before it opens anything.
    pub fn validate(&self) -> Result<(), SpecError> {
        let bad = |field, problem| Err(SpecError::new(field, problem));
        if self.sources.is_empty() {
            check_url(Field::ManifestUrl, &self.manifest_url)?;
            if self.epoch_samples != 0 {
                return bad(Field::EpochSamples, Problem::MixedOnly);
            }
        } else {
            if !self.manifest_url.is_empty() {
                return bad(Field::ManifestUrl, Problem::UrlAndSources);
            }
            if self.sources.len() > MAX_SOURCES {
                return bad(Field::Sources, Problem::TooManySources(self.sources.len()));
            }
            for (i, source) in self.sources.iter().enumerate() {
                check_url(Field::SourceUrl(i), &source.manifest_url)?;
                if let Err(why) = source.take.check() {
                    return bad(Field::Source(i), Problem::Take(why));
                }
            }
            in_range(
                Field::EpochSamples,
                self.epoch_samples,
                0,
                MAX_EPOCH_SAMPLES,
            )?;
        }
        let u32_in_range =
            |field, value: u32, max: u32| in_range(field, value.into(), 1, max.into());
        u32_in_range(Field::BatchSize, self.batch_size, MAX_BATCH_SIZE)?;
        if let Some(epochs) = self.epochs {
            in_range(Field::Epochs, epochs, 1, MAX_EPOCHS)?;
        }
        u32_in_range(
            Field::ShuffleBuffer,
            self.shuffle_buffer,
            MAX_SHUFFLE_BUFFER,
        )?;
        u32_in_range(Field::UnitSamples, self.unit_samples, MAX_UNIT_SAMPLES)?;
        if let Some(sequence) = self.sequence {
            u32_in_range(Field::SequenceLength, sequence.length, MAX_SEQUENCE_LENGTH)?;
        }
        u32_in_range(Field::MemberTtlS, self.member_ttl_s, MAX_MEMBER_TTL_S)
    }

    /// Whether `epoch` (counted from 0) is past the job's last epoch: never
    /// for an unbounded job.
    pub fn is_past_end(&self, epoch: u64) -> bool {
        self.epochs.is_some_and(|epochs| epoch >= epochs)
    }

    /// Whether `epoch` (counted from 0) is the job's last: never for an
    /// unbounded job.
    pub fn is_last_epoch(&self, epoch: u64) -> bool {
        self.epochs == Some(epoch + 1)
    }

    /// The number of epochs for messages: `N`, or `unbounded`.
    pub fn describe_epochs(&self) -> String {
        self.epochs
            .map_or_else(|| "unbounded".to_owned(), |n| n.to_string())
    }

    /// The datasets' manifest URLs: `manifest_url`, or each source's.
    pub fn manifest_urls(&self) -> Vec<&str> {
        if self.sources.is_empty() {
            vec![self.manifest_url.as_str()]
        } else {
            self.sources
                .iter()
                .map(|s| s.manifest_url.as_str())
                .collect()
        }
    }

    /// What the job reads, for messages: its manifest URL, or its mix.
    pub fn describe_data(&self) -> String {
        if self.sources.is_empty() {
            self.manifest_url.clone()
        } else {
            format!("a mix of {}", self.manifest_urls().join(", "))
        }
    }

    /// The fields in which `other` differs, for a conflict message.
    pub fn diff(&self, other: &Self) -> String {
        let mut out = Vec::new();
        macro_rules! cmp {
            ($($f:ident),*) => {$(
                if self.$f != other.$f {
                    out.push(format!("{} is {:?}, not {:?}", stringify!($f), self.$f, other.$f));
                }
            )*};
        }
        cmp!(
            manifest_url,
            seed,
            batch_size,
            epochs,
            remainder,
            mode,
            shuffle_buffer,
            unit_samples,
            member_ttl_s,
            sources,
            epoch_samples,
            sequence
        );
        out.join("; ")
    }
}

fn check_url(field: Field, url: &str) -> Result<(), SpecError> {
    if url.trim().is_empty() {
        return Err(SpecError::new(field, Problem::Empty));
    }
    if url.len() > MAX_MANIFEST_URL_BYTES {
        return Err(SpecError::new(field, Problem::TooLong(url.len())));
    }
    if url.chars().any(char::is_control) {
        return Err(SpecError::new(field, Problem::ControlCharacters));
    }
    Ok(())
}

fn in_range(field: Field, value: u64, min: u64, max: u64) -> Result<(), SpecError> {
    if (min..=max).contains(&value) {
        Ok(())
    } else {
        Err(SpecError::new(
            field,
            Problem::OutOfRange { value, min, max },
        ))
    }
}

/// The protocol's message: fields at zero become their defaults
/// ([`JobSpec::with_defaults`]), then [`JobSpec::validate`] checks it.
impl TryFrom<v1::JobConfig> for JobSpec {
    type Error = SpecError;

    fn try_from(raw: v1::JobConfig) -> Result<Self, SpecError> {
        let remainder = match v1::RemainderPolicy::try_from(raw.remainder) {
            Ok(v1::RemainderPolicy::RemainderUnspecified | v1::RemainderPolicy::RemainderDrop) => {
                Remainder::Drop
            }
            Ok(v1::RemainderPolicy::RemainderPad) => Remainder::Pad,
            Err(_) => {
                return Err(SpecError::new(
                    Field::Remainder,
                    Problem::Unknown(raw.remainder),
                ))
            }
        };
        let mode = match v1::Mode::try_from(raw.mode) {
            Ok(v1::Mode::Unspecified | v1::Mode::Sync) => Mode::Sync,
            Ok(v1::Mode::Dynamic) => Mode::Dynamic,
            Err(_) => return Err(SpecError::new(Field::Mode, Problem::Unknown(raw.mode))),
        };
        let sequence = match (raw.sequence_length, v1::Packing::try_from(raw.packing)) {
            (_, Err(_)) => {
                return Err(SpecError::new(
                    Field::Packing,
                    Problem::Unknown(raw.packing),
                ))
            }
            (0, Ok(v1::Packing::Unspecified)) => None,
            (0, Ok(_)) => {
                return Err(SpecError::new(
                    Field::Packing,
                    Problem::Requires(Field::SequenceLength),
                ))
            }
            (length, Ok(packing)) => Some(SequenceSpec {
                length,
                packing: match packing {
                    v1::Packing::Unspecified | v1::Packing::Concat => Packing::Concat,
                    v1::Packing::Bestfit => Packing::BestFit,
                    v1::Packing::None => Packing::None,
                },
            }),
        };
        if raw.sources.len() > MAX_SOURCES {
            // Checked before the list is converted.
            return Err(SpecError::new(
                Field::Sources,
                Problem::TooManySources(raw.sources.len()),
            ));
        }
        let spec = Self {
            manifest_url: raw.manifest_url,
            seed: raw.seed,
            batch_size: raw.batch_size,
            // 0: unbounded (see `JobConfig.epochs` in the .proto).
            epochs: (raw.epochs != 0).then_some(raw.epochs),
            remainder,
            mode,
            shuffle_buffer: raw.shuffle_buffer,
            unit_samples: raw.unit_samples,
            member_ttl_s: raw.member_ttl_s,
            sources: raw
                .sources
                .into_iter()
                .map(|source| Source {
                    take: Take::from_proto(source.take),
                    manifest_url: source.manifest_url,
                })
                .collect(),
            epoch_samples: raw.epoch_samples,
            sequence,
        }
        .with_defaults();
        spec.validate()?;
        Ok(spec)
    }
}

impl From<Mode> for v1::Mode {
    fn from(mode: Mode) -> Self {
        match mode {
            Mode::Sync => Self::Sync,
            Mode::Dynamic => Self::Dynamic,
        }
    }
}

impl From<&JobSpec> for v1::JobConfig {
    fn from(spec: &JobSpec) -> Self {
        Self {
            manifest_url: spec.manifest_url.clone(),
            seed: spec.seed,
            batch_size: spec.batch_size,
            epochs: spec.epochs.unwrap_or(0),
            remainder: v1::RemainderPolicy::from(spec.remainder) as i32,
            mode: v1::Mode::from(spec.mode) as i32,
            shuffle_buffer: spec.shuffle_buffer,
            unit_samples: spec.unit_samples,
            member_ttl_s: spec.member_ttl_s,
            sources: spec
                .sources
                .iter()
                .map(|s| s.take.to_source(&s.manifest_url))
                .collect(),
            epoch_samples: spec.epoch_samples,
            sequence_length: spec.sequence.map_or(0, |s| s.length),
            packing: spec
                .sequence
                .map_or(v1::Packing::Unspecified, |s| match s.packing {
                    Packing::Concat => v1::Packing::Concat,
                    Packing::BestFit => v1::Packing::Bestfit,
                    Packing::None => v1::Packing::None,
                }) as i32,
        }
    }
}

#[cfg(test)]
mod tests;
