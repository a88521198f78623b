//! A job's configuration: raw protocol message in, validated struct out.

use serde::{Deserialize, Serialize};
use tributary_common::plan::mix::{Take, MAX_EPOCH_SAMPLES, MAX_SOURCES};
use tributary_common::plan::Remainder;
use tributary_common::proto::v1;

use crate::error::{CoordError, Result};

/// How a job hands out work.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// Equal parts per generation over a torchrun world (DDP).
    Sync,
    /// Units leased to whoever asks; expired leases return to the pool.
    Dynamic,
}

/// A validated job configuration, as stored in the metadata store.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobConfig {
    pub manifest_url: String,
    pub seed: u64,
    pub batch_size: u32,
    pub epochs: u64,
    pub remainder: Remainder,
    pub mode: Mode,
    pub shuffle_buffer: u32,
    pub unit_samples: u32,
    pub member_ttl_s: u32,
    /// Several datasets mixed; then `manifest_url` is empty.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sources: Vec<SourceConfig>,
    /// The epoch of weighted sources (0: all their samples).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub epoch_samples: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// One dataset of a mixed job.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SourceConfig {
    pub manifest_url: String,
    #[serde(default)]
    pub take: Take,
}

impl SourceConfig {
    fn from_proto(raw: v1::Source) -> Self {
        Self {
            take: Take::from_proto(raw.take),
            manifest_url: raw.manifest_url,
        }
    }

    fn to_proto(&self) -> v1::Source {
        self.take.to_source(&self.manifest_url)
    }
}

/// Defaults for fields left at zero.
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
/// The most ranks a torchrun world may have.
pub const MAX_WORLD: u32 = 65_536;

impl JobConfig {
    /// Validates a raw config, filling defaults; errors name the field.
    pub fn from_proto(raw: Option<v1::JobConfig>) -> Result<Self> {
        let raw = raw.ok_or_else(|| CoordError::Invalid("config is missing".into()))?;
        let bad =
            |field: &str, why: &str| Err(CoordError::Invalid(format!("config.{field}: {why}")));
        let remainder = match v1::RemainderPolicy::try_from(raw.remainder) {
            Ok(v1::RemainderPolicy::RemainderUnspecified | v1::RemainderPolicy::RemainderDrop) => {
                Remainder::Drop
            }
            Ok(v1::RemainderPolicy::RemainderPad) => Remainder::Pad,
            Err(_) => return bad("remainder", &format!("unknown policy {}", raw.remainder)),
        };
        let mode = match v1::Mode::try_from(raw.mode) {
            Ok(v1::Mode::Unspecified | v1::Mode::Sync) => Mode::Sync,
            Ok(v1::Mode::Dynamic) => Mode::Dynamic,
            Err(_) => return bad("mode", &format!("unknown mode {}", raw.mode)),
        };
        let or = |v: u32, d: u32| if v == 0 { d } else { v };
        let config = Self {
            manifest_url: raw.manifest_url,
            seed: raw.seed,
            batch_size: raw.batch_size,
            epochs: raw.epochs,
            remainder,
            mode,
            shuffle_buffer: or(raw.shuffle_buffer, DEFAULT_SHUFFLE_BUFFER),
            unit_samples: or(raw.unit_samples, DEFAULT_UNIT_SAMPLES),
            member_ttl_s: or(raw.member_ttl_s, DEFAULT_MEMBER_TTL_S),
            sources: if raw.sources.len() > MAX_SOURCES {
                // Checked before the list is converted.
                return bad(
                    "sources",
                    &format!(
                        "lists {} datasets; the limit is {MAX_SOURCES}",
                        raw.sources.len()
                    ),
                );
            } else {
                raw.sources
                    .into_iter()
                    .map(SourceConfig::from_proto)
                    .collect()
            },
            epoch_samples: raw.epoch_samples,
        };
        config.validate()?;
        Ok(config)
    }

    /// Checks every field against its bound. Run on every config that comes
    /// in, and again on every config read back from the store: a stored
    /// config that fails fails its own job, never the replica.
    pub fn validate(&self) -> Result<()> {
        if self.sources.is_empty() {
            check_url("manifest_url", &self.manifest_url)?;
            if self.epoch_samples != 0 {
                return Err(field("epoch_samples", "is for mixed sources only"));
            }
        } else {
            if !self.manifest_url.is_empty() {
                return Err(field(
                    "manifest_url",
                    "must be empty when sources are given (add the dataset to sources)",
                ));
            }
            if self.sources.len() > MAX_SOURCES {
                return Err(field(
                    "sources",
                    &format!(
                        "lists {} datasets; the limit is {MAX_SOURCES}",
                        self.sources.len()
                    ),
                ));
            }
            for (i, source) in self.sources.iter().enumerate() {
                check_url(&format!("sources[{i}].manifest_url"), &source.manifest_url)?;
                source
                    .take
                    .check()
                    .map_err(|why| field(&format!("sources[{i}]"), &why))?;
            }
            in_range("epoch_samples", self.epoch_samples, 0, MAX_EPOCH_SAMPLES)?;
        }
        in_range(
            "batch_size",
            self.batch_size.into(),
            1,
            MAX_BATCH_SIZE.into(),
        )?;
        in_range("epochs", self.epochs, 1, MAX_EPOCHS)?;
        in_range(
            "shuffle_buffer",
            self.shuffle_buffer.into(),
            1,
            MAX_SHUFFLE_BUFFER.into(),
        )?;
        in_range(
            "unit_samples",
            self.unit_samples.into(),
            1,
            MAX_UNIT_SAMPLES.into(),
        )?;
        in_range(
            "member_ttl_s",
            self.member_ttl_s.into(),
            1,
            MAX_MEMBER_TTL_S.into(),
        )?;
        Ok(())
    }

    pub fn to_proto(&self) -> v1::JobConfig {
        v1::JobConfig {
            manifest_url: self.manifest_url.clone(),
            seed: self.seed,
            batch_size: self.batch_size,
            epochs: self.epochs,
            remainder: v1::RemainderPolicy::from(self.remainder) as i32,
            mode: match self.mode {
                Mode::Sync => v1::Mode::Sync,
                Mode::Dynamic => v1::Mode::Dynamic,
            } as i32,
            shuffle_buffer: self.shuffle_buffer,
            unit_samples: self.unit_samples,
            member_ttl_s: self.member_ttl_s,
            sources: self.sources.iter().map(SourceConfig::to_proto).collect(),
            epoch_samples: self.epoch_samples,
        }
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
            epoch_samples
        );
        out.join("; ")
    }
}

fn check_url(name: &str, url: &str) -> Result<()> {
    if url.trim().is_empty() {
        return Err(field(name, "is empty"));
    }
    if url.len() > MAX_MANIFEST_URL_BYTES {
        return Err(field(
            name,
            &format!(
                "is {} bytes; the limit is {MAX_MANIFEST_URL_BYTES}",
                url.len()
            ),
        ));
    }
    if url.chars().any(char::is_control) {
        return Err(field(name, "contains control characters"));
    }
    Ok(())
}

fn field(name: &str, why: &str) -> CoordError {
    CoordError::Invalid(format!("config.{name}: {why}"))
}

fn in_range(name: &str, value: u64, min: u64, max: u64) -> Result<()> {
    if (min..=max).contains(&value) {
        Ok(())
    } else {
        Err(field(
            name,
            &format!("{value} is outside the allowed range {min}..={max}"),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw() -> v1::JobConfig {
        v1::JobConfig {
            manifest_url: "memory:///d/manifest.json".into(),
            batch_size: 32,
            epochs: 2,
            ..v1::JobConfig::default()
        }
    }

    fn rejected(raw: v1::JobConfig) -> String {
        match JobConfig::from_proto(Some(raw)) {
            Err(e @ CoordError::Invalid(_)) => e.to_string(),
            other => panic!("expected INVALID_ARGUMENT, got {other:?}"),
        }
    }

    #[test]
    fn every_field_is_bounded_and_the_error_names_field_and_limit() {
        type Spoil = fn(&mut v1::JobConfig);
        let cases: [(&str, Spoil); 7] = [
            ("shuffle_buffer", |c| c.shuffle_buffer = u32::MAX),
            ("batch_size", |c| c.batch_size = u32::MAX),
            ("batch_size", |c| c.batch_size = 0),
            ("epochs", |c| c.epochs = u64::MAX),
            ("unit_samples", |c| c.unit_samples = u32::MAX),
            ("member_ttl_s", |c| c.member_ttl_s = 3601),
            ("manifest_url", |c| c.manifest_url = "s3://b/".repeat(1000)),
        ];
        for (name, spoil) in cases {
            let mut config = raw();
            spoil(&mut config);
            let message = rejected(config);
            assert!(message.contains(&format!("config.{name}")), "{message}");
        }
        assert!(rejected({
            let mut c = raw();
            c.shuffle_buffer = u32::MAX;
            c
        })
        .contains("1048576"));
    }

    #[test]
    fn defaults_and_the_largest_allowed_values_pass() {
        assert!(JobConfig::from_proto(Some(raw())).is_ok());
        let mut config = raw();
        config.shuffle_buffer = MAX_SHUFFLE_BUFFER;
        config.batch_size = MAX_BATCH_SIZE;
        config.epochs = MAX_EPOCHS;
        config.unit_samples = MAX_UNIT_SAMPLES;
        config.member_ttl_s = MAX_MEMBER_TTL_S;
        assert!(JobConfig::from_proto(Some(config)).is_ok());
    }

    fn source(url: &str, take: Option<v1::source::Take>) -> v1::Source {
        v1::Source {
            manifest_url: url.into(),
            take,
        }
    }

    #[test]
    fn mixed_sources_are_bounded_and_round_trip() {
        use v1::source::Take as T;
        let mut mixed = raw();
        mixed.manifest_url.clear();
        mixed.sources = vec![
            source("s3://b/a", Some(T::Weight(0.7))),
            source("s3://b/c", Some(T::Weight(0.3))),
        ];
        mixed.epoch_samples = 1000;
        let config = JobConfig::from_proto(Some(mixed.clone())).expect("valid mix");
        assert_eq!(config.manifest_urls(), ["s3://b/a", "s3://b/c"]);
        assert_eq!(config.sources[0].take, Take::Weight(0.7));
        assert_eq!(
            JobConfig::from_proto(Some(config.to_proto())).expect("again"),
            config
        );
        let unset = JobConfig::from_proto(Some(v1::JobConfig {
            sources: vec![source("s3://b/a", None)],
            epoch_samples: 0,
            ..mixed.clone()
        }))
        .expect("one pass");
        assert_eq!(unset.sources[0].take, Take::Repeat(1.0));

        type Spoil = fn(&mut v1::JobConfig);
        let cases: [(&str, Spoil); 6] = [
            ("config.manifest_url: must be empty", |c| {
                c.manifest_url = "s3://b/x".into()
            }),
            ("config.sources[1].manifest_url: is empty", |c| {
                c.sources[1].manifest_url.clear()
            }),
            ("config.sources[0]: weight NaN", |c| {
                c.sources[0].take = Some(T::Weight(f64::NAN))
            }),
            ("config.sources[1]: samples 0", |c| {
                c.sources[1].take = Some(T::Samples(0))
            }),
            ("config.sources: lists 257 datasets", |c| {
                c.sources = vec![source("s3://b/a", None); 257]
            }),
            (
                "config.epoch_samples: 18446744073709551615 is outside",
                |c| c.epoch_samples = u64::MAX,
            ),
        ];
        for (want, spoil) in cases {
            let mut config = mixed.clone();
            spoil(&mut config);
            let message = rejected(config);
            assert!(message.contains(want), "{want}: {message}");
        }
        let mut single = raw();
        single.epoch_samples = 5;
        assert!(rejected(single).contains("config.epoch_samples: is for mixed sources only"));
    }
}
