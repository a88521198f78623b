//! How a member identifies itself when it joins a job: the one type the
//! worker sends, the coordinator checks and stores, and the protocol carries
//! (as `JoinRequest.identity`; conversions in [`crate::proto`]).
//!
//! The serde form is what the coordinator stores in each member's record
//! (`{"torchrun":{"rank":0,"world":2,"run_id":"r","restart":0}}` or
//! `{"name":"a"}`): it must not change.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

/// How a member identifies itself.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Identity {
    /// A torchrun rank: `RANK`, `WORLD_SIZE`, `TORCHELASTIC_RUN_ID`,
    /// `TORCHELASTIC_RESTART_COUNT`.
    Torchrun {
        rank: u32,
        world: u32,
        run_id: String,
        restart: u64,
    },
    /// A free-form member name (dynamic jobs).
    Name(String),
}

/// A torchrun variable that is missing or does not hold what it must.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EnvError {
    #[error("RANK is set but {var} is not")]
    Missing { var: &'static str },
    #[error("{var}={value:?} is not a number")]
    NotANumber { var: &'static str, value: String },
    #[error("{var}={value:?} is beyond {max}")]
    TooLarge {
        var: &'static str,
        value: String,
        max: u64,
    },
}

/// The run id torchrun's identity has when `TORCHELASTIC_RUN_ID` is unset.
pub const DEFAULT_RUN_ID: &str = "none";

impl Identity {
    /// The torchrun identity in `env` (passed in, read once at the edge), or
    /// `None` when `RANK` is unset. Errors name the bad variable.
    pub fn from_torchrun_env(env: &HashMap<String, String>) -> Result<Option<Self>, EnvError> {
        let Some(rank) = env.get("RANK") else {
            return Ok(None);
        };
        let world = env
            .get("WORLD_SIZE")
            .ok_or(EnvError::Missing { var: "WORLD_SIZE" })?;
        let restart = match env.get("TORCHELASTIC_RESTART_COUNT") {
            Some(v) => number("TORCHELASTIC_RESTART_COUNT", v)?,
            None => 0,
        };
        Ok(Some(Self::Torchrun {
            rank: small("RANK", rank)?,
            world: small("WORLD_SIZE", world)?,
            run_id: env
                .get("TORCHELASTIC_RUN_ID")
                .cloned()
                .unwrap_or_else(|| DEFAULT_RUN_ID.into()),
            restart,
        }))
    }
}

fn number(var: &'static str, value: &str) -> Result<u64, EnvError> {
    value.trim().parse().map_err(|_| EnvError::NotANumber {
        var,
        value: value.to_owned(),
    })
}

fn small(var: &'static str, value: &str) -> Result<u32, EnvError> {
    u32::try_from(number(var, value)?).map_err(|_| EnvError::TooLarge {
        var,
        value: value.to_owned(),
        max: u64::from(u32::MAX),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(vars: &[(&str, &str)]) -> HashMap<String, String> {
        vars.iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn the_stored_form_of_an_identity_is_unchanged() {
        let torchrun = Identity::Torchrun {
            rank: 1,
            world: 2,
            run_id: "r".into(),
            restart: 3,
        };
        let json = serde_json::to_string(&torchrun).expect("json");
        assert_eq!(
            json,
            r#"{"torchrun":{"rank":1,"world":2,"run_id":"r","restart":3}}"#
        );
        let name = serde_json::to_string(&Identity::Name("a".into())).expect("json");
        assert_eq!(name, r#"{"name":"a"}"#);
        let back: Identity = serde_json::from_str(&json).expect("parse");
        assert_eq!(back, torchrun);
    }

    #[test]
    fn torchrun_variables_are_read_and_a_bad_one_is_named() {
        assert_eq!(Identity::from_torchrun_env(&env(&[])), Ok(None));
        let ok = Identity::from_torchrun_env(&env(&[
            ("RANK", "1"),
            ("WORLD_SIZE", " 4 "),
            ("TORCHELASTIC_RUN_ID", "job7"),
            ("TORCHELASTIC_RESTART_COUNT", "2"),
        ]));
        assert_eq!(
            ok,
            Ok(Some(Identity::Torchrun {
                rank: 1,
                world: 4,
                run_id: "job7".into(),
                restart: 2
            }))
        );
        let defaults = Identity::from_torchrun_env(&env(&[("RANK", "0"), ("WORLD_SIZE", "1")]));
        assert!(
            matches!(defaults, Ok(Some(Identity::Torchrun { ref run_id, restart: 0, .. })) if run_id == DEFAULT_RUN_ID)
        );
        let missing = Identity::from_torchrun_env(&env(&[("RANK", "0")])).expect_err("missing");
        assert!(missing.to_string().contains("WORLD_SIZE"), "{missing}");
        let bad = Identity::from_torchrun_env(&env(&[("RANK", "x"), ("WORLD_SIZE", "1")]))
            .expect_err("bad");
        assert_eq!(bad.to_string(), r#"RANK="x" is not a number"#);
    }

    #[test]
    fn a_rank_beyond_u32_is_an_error_not_a_truncated_rank() {
        let error =
            Identity::from_torchrun_env(&env(&[("RANK", "4294967296"), ("WORLD_SIZE", "1")]))
                .expect_err("too large");
        assert!(error.to_string().contains("RANK"), "{error}");
    }
}
