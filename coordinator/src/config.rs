//! A job's configuration: raw protocol message in, validated struct out.

use serde::{Deserialize, Serialize};
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
        };
        config.validate()?;
        Ok(config)
    }

    /// Checks every field against its bound. Run on every config that comes
    /// in, and again on every config read back from the store: a stored
    /// config that fails fails its own job, never the replica.
    pub fn validate(&self) -> Result<()> {
        let url = self.manifest_url.trim();
        if url.is_empty() {
            return Err(field("manifest_url", "is empty"));
        }
        if self.manifest_url.len() > MAX_MANIFEST_URL_BYTES {
            return Err(field(
                "manifest_url",
                &format!(
                    "is {} bytes; the limit is {MAX_MANIFEST_URL_BYTES}",
                    self.manifest_url.len()
                ),
            ));
        }
        if self.manifest_url.chars().any(char::is_control) {
            return Err(field("manifest_url", "contains control characters"));
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
            member_ttl_s
        );
        out.join("; ")
    }
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
}
