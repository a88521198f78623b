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

impl JobConfig {
    /// Validates a raw config, filling defaults; errors name the field.
    pub fn from_proto(raw: Option<v1::JobConfig>) -> Result<Self> {
        let raw = raw.ok_or_else(|| CoordError::Invalid("config is missing".into()))?;
        let bad =
            |field: &str, why: &str| Err(CoordError::Invalid(format!("config.{field}: {why}")));
        if raw.manifest_url.trim().is_empty() {
            return bad("manifest_url", "is empty");
        }
        if raw.batch_size == 0 {
            return bad("batch_size", "must be at least 1");
        }
        if raw.epochs == 0 {
            return bad("epochs", "must be at least 1");
        }
        if raw.member_ttl_s > 3600 {
            return bad("member_ttl_s", "must be at most 3600 seconds");
        }
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
        Ok(Self {
            manifest_url: raw.manifest_url,
            seed: raw.seed,
            batch_size: raw.batch_size,
            epochs: raw.epochs,
            remainder,
            mode,
            shuffle_buffer: or(raw.shuffle_buffer, DEFAULT_SHUFFLE_BUFFER),
            unit_samples: or(raw.unit_samples, DEFAULT_UNIT_SAMPLES),
            member_ttl_s: or(raw.member_ttl_s, DEFAULT_MEMBER_TTL_S),
        })
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
