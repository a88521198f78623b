//! How a member identifies itself when it joins a job: the one type the
//! worker sends, the coordinator checks and stores, and the protocol carries
//! (as `JoinRequest.identity`; conversions in [`crate::proto`]).
//!
//! The serde form is what the coordinator stores in each member's record
//! (`{"torchrun":{"rank":0,"world":2,"run_id":"r","restart":0}}` or
//! `{"name":"a"}`): it must not change. A rank of a data-parallel group
//! adds `"dp":{"rank":0,"size":2}`, absent otherwise, so records stored
//! before groups existed read as they were.

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
        /// The rank's data-parallel group, when the world is split into
        /// groups of peers (tensor, pipeline or context parallel) that read
        /// identical batches; `None`: every rank is a group of its own.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        dp: Option<DataParallel>,
    },
    /// A free-form member name (dynamic jobs).
    Name(String),
}

/// A rank's data-parallel coordinate: its group (`rank`, the part of the
/// data it reads) among `size` groups. The ranks of one group receive
/// identical batches; the groups receive disjoint parts. A world of `W`
/// ranks holds `size` groups of `W / size` peers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct DataParallel {
    pub rank: u32,
    pub size: u32,
}

/// A data-parallel coordinate that does not fit its world. The messages
/// name the fields; callers say where they came from
/// (`data_parallel=(..)`, `torchrun.dp_rank`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DataParallelError {
    #[error("dp_size must be at least 1 (dp_rank {rank}, dp_size 0)")]
    NoGroups { rank: u32 },
    #[error("dp_rank {rank} must be below dp_size {size}")]
    RankOutside { rank: u32, size: u32 },
    #[error("dp_size {size} exceeds world_size {world}: a group holds at least one rank")]
    MoreGroupsThanRanks { size: u32, world: u32 },
    #[error(
        "world_size {world} is not a multiple of dp_size {size}: every group \
         holds world_size / dp_size ranks"
    )]
    UnequalGroups { size: u32, world: u32 },
}

impl DataParallel {
    /// Checks the coordinate against a torchrun world of `world` ranks:
    /// `1 <= size <= world`, `rank < size`, `world % size == 0`. Errors
    /// name the field (`dp_rank`, `dp_size`, `world_size`).
    pub fn check(self, world: u32) -> Result<(), DataParallelError> {
        let Self { rank, size } = self;
        if size == 0 {
            return Err(DataParallelError::NoGroups { rank });
        }
        if rank >= size {
            return Err(DataParallelError::RankOutside { rank, size });
        }
        if size > world {
            return Err(DataParallelError::MoreGroupsThanRanks { size, world });
        }
        if !world.is_multiple_of(size) {
            return Err(DataParallelError::UnequalGroups { size, world });
        }
        Ok(())
    }
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
            dp: None,
        }))
    }

    /// The part of the data a torchrun rank reads and how many parts the
    /// data is split into: its data-parallel group and the number of
    /// groups, or (without groups) its rank and world. `None` for a name.
    pub fn part(&self) -> Option<DataParallel> {
        match self {
            Identity::Torchrun {
                rank, world, dp, ..
            } => Some(dp.unwrap_or(DataParallel {
                rank: *rank,
                size: *world,
            })),
            Identity::Name(_) => None,
        }
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
            dp: None,
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
                restart: 2,
                dp: None,
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
    fn a_data_parallel_identity_stores_its_group_and_older_records_read_without_one() {
        let grouped = Identity::Torchrun {
            rank: 3,
            world: 4,
            run_id: "r".into(),
            restart: 0,
            dp: Some(DataParallel { rank: 1, size: 2 }),
        };
        let json = serde_json::to_string(&grouped).expect("json");
        assert_eq!(
            json,
            r#"{"torchrun":{"rank":3,"world":4,"run_id":"r","restart":0,"dp":{"rank":1,"size":2}}}"#
        );
        assert_eq!(
            serde_json::from_str::<Identity>(&json).expect("parse"),
            grouped
        );
        assert_eq!(grouped.part(), Some(DataParallel { rank: 1, size: 2 }));
        let old: Identity =
            serde_json::from_str(r#"{"torchrun":{"rank":1,"world":2,"run_id":"r","restart":0}}"#)
                .expect("a record stored before groups");
        assert_eq!(old.part(), Some(DataParallel { rank: 1, size: 2 }));
        assert_eq!(Identity::Name("a".into()).part(), None);
    }

    #[test]
    fn a_data_parallel_coordinate_must_fit_its_world_and_errors_name_the_field() {
        let check = |rank, size, world| DataParallel { rank, size }.check(world);
        assert_eq!(check(1, 2, 4), Ok(()));
        assert_eq!(check(0, 1, 2), Ok(()));
        assert_eq!(check(3, 4, 4), Ok(()));
        let error = |rank, size, world| check(rank, size, world).expect_err("bad").to_string();
        assert!(error(0, 0, 4).contains("dp_size must be at least 1"));
        assert!(error(2, 2, 4).contains("dp_rank 2 must be below dp_size 2"));
        assert!(error(0, 8, 4).contains("dp_size 8 exceeds world_size 4"));
        assert!(error(0, 3, 4).contains("world_size 4 is not a multiple of dp_size 3"));
    }

    #[test]
    fn a_rank_beyond_u32_is_an_error_not_a_truncated_rank() {
        let error =
            Identity::from_torchrun_env(&env(&[("RANK", "4294967296"), ("WORLD_SIZE", "1")]))
                .expect_err("too large");
        assert!(error.to_string().contains("RANK"), "{error}");
    }
}
