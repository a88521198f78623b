//! What the coordinator adds to a job's spec ([`tributary_common::job`]):
//! the message a missing or invalid one gets, and the bound of a world.

use tributary_common::job::{JobSpec, SpecError};
use tributary_common::proto::v1;

use crate::error::{CoordError, Result};

/// The most ranks a torchrun world may have.
pub const MAX_WORLD: u32 = 65_536;

/// The most plan records a resume may carry: an epoch's generations from
/// its first to the committed one, one more per restart within the epoch.
pub const MAX_HISTORY: usize = 4096;

/// A spec as every caller sends it: the errors name `config.<field>`.
impl From<SpecError> for CoordError {
    fn from(error: SpecError) -> Self {
        CoordError::Invalid(format!("config.{error}"))
    }
}

/// Validates the `config` of a request, filling defaults; errors name the
/// field.
pub fn job_spec(raw: Option<v1::JobConfig>) -> Result<JobSpec> {
    let raw = raw.ok_or_else(|| CoordError::Invalid("config is missing".into()))?;
    Ok(JobSpec::try_from(raw)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_name_the_config_field_and_a_missing_config() {
        let zero_batch = v1::JobConfig {
            manifest_url: "memory:///d/manifest.json".into(),
            epochs: 1,
            ..v1::JobConfig::default()
        };
        let message = job_spec(Some(zero_batch))
            .expect_err("zero batch")
            .to_string();
        assert!(message.contains("config.batch_size"), "{message}");
        let message = job_spec(None).expect_err("missing").to_string();
        assert!(message.contains("config is missing"), "{message}");
    }
}
