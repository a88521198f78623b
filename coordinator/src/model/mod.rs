//! The coordinator's model of each job: what is in the metadata store, held
//! in memory by the leader. Every change is a method here that updates the
//! model and returns the store operations that make it durable; the caller
//! writes them (through the group-commit writer) before answering. A new
//! leader rebuilds the model from the store with [`Job::load`].

mod dynamic;
pub mod sync;

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use tokio::sync::broadcast;
use tributary_common::proto::v1;

use crate::config::{JobConfig, Mode};
use crate::error::{CoordError, Result};
use crate::keys;
use crate::store::{KeyValue, LeaseId, Op};

pub use dynamic::DynModel;
pub use sync::{GenMeta, SyncModel};

/// What the store keeps about a job besides its progress.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoredJob {
    pub config: JobConfig,
    /// crc32c of the manifest's canonical JSON when the job was created.
    pub manifest_crc32c: u32,
    /// SHA-256 (hex) of the same: the digest a loaded job is checked
    /// against. Absent in jobs created before it was recorded, which are
    /// checked by their crc32c.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub manifest_sha256: Option<String>,
    pub samples: u64,
    pub shards: u32,
}

/// How a member identified itself.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Identity {
    Torchrun {
        rank: u32,
        world: u32,
        run_id: String,
        restart: u64,
    },
    Name(String),
}

/// A member, stored under its lease.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemberRecord {
    pub identity: Identity,
    pub lease: LeaseId,
    /// SHA-256 (hex) of the secret the member got at Join; every
    /// member-scoped call must carry the secret. Empty in records written
    /// before secrets existed: such a member must join again.
    #[serde(default)]
    pub secret_sha256: String,
}

/// The dataset facts planning needs.
#[derive(Debug, Clone)]
pub struct Dataset {
    pub shard_samples: Arc<Vec<u32>>,
}

/// One job, as the leader holds it.
#[derive(Debug)]
pub struct Job {
    pub name: String,
    pub stored: StoredJob,
    pub dataset: Dataset,
    pub members: BTreeMap<String, MemberRecord>,
    pub state: State,
    pub events: broadcast::Sender<v1::JobEvent>,
}

#[derive(Debug)]
pub enum State {
    Sync(SyncModel),
    Dynamic(DynModel),
}

fn json<T: Serialize>(value: &T) -> Vec<u8> {
    serde_json::to_vec(value).unwrap_or_default()
}

fn parse<T: for<'de> Deserialize<'de>>(kv: &KeyValue) -> Result<T> {
    serde_json::from_slice(&kv.value)
        .map_err(|e| CoordError::Corrupt(format!("the value at {}: {e}", kv.key)))
}

/// A put without a lease.
fn put(key: String, value: Vec<u8>) -> Op {
    Op::Put {
        key,
        value,
        lease: None,
    }
}

impl Job {
    /// A new job; returns it and the ops that store it.
    pub fn create(name: &str, stored: StoredJob, dataset: Dataset) -> (Self, Vec<Op>) {
        let mut ops = vec![put(keys::config(name), json(&stored))];
        let state = match stored.config.mode {
            Mode::Sync => State::Sync(SyncModel::default()),
            Mode::Dynamic => State::Dynamic(DynModel::new(&stored.config, &dataset, 0)),
        };
        if let State::Dynamic(_) = state {
            ops.push(put(keys::dyn_epoch(name), json(&0u64)));
        }
        (Self::new(name, stored, dataset, state), ops)
    }

    fn new(name: &str, stored: StoredJob, dataset: Dataset, state: State) -> Self {
        Self {
            name: name.to_owned(),
            stored,
            dataset,
            members: BTreeMap::new(),
            state,
            events: broadcast::channel(256).0,
        }
    }

    /// The stored job record, if `kvs` (every key under the job's prefix)
    /// has one.
    pub fn stored_of(name: &str, kvs: &[KeyValue]) -> Result<Option<StoredJob>> {
        let key = keys::config(name);
        let Some(kv) = kvs.iter().find(|kv| kv.key == key) else {
            return Ok(None);
        };
        let stored: StoredJob = parse(kv)?;
        stored
            .config
            .validate()
            .map_err(|e| CoordError::Corrupt(format!("the stored config of job {name:?}: {e}")))?;
        Ok(Some(stored))
    }

    /// Rebuilds a job from every key under its prefix.
    pub fn load(name: &str, stored: StoredJob, dataset: Dataset, kvs: &[KeyValue]) -> Result<Self> {
        let prefix = keys::job(name);
        let mut members = BTreeMap::new();
        let mut gens = Vec::new();
        let mut commit = None;
        let mut dyn_epoch = 0u64;
        let mut leased = Vec::new();
        let mut acked = Vec::new();
        for kv in kvs {
            let Some(rest) = kv.key.strip_prefix(&prefix) else {
                continue;
            };
            let parts: Vec<&str> = rest.split('/').collect();
            match parts.as_slice() {
                ["members", member] => {
                    members.insert((*member).to_owned(), parse::<MemberRecord>(kv)?);
                }
                ["sync", "gen", _] => gens.push(parse::<GenMeta>(kv)?),
                ["sync", "commit"] => commit = Some(parse(kv)?),
                ["dyn", "epoch"] => dyn_epoch = parse(kv)?,
                ["dyn", epoch, kind @ ("leased" | "acked"), unit] => {
                    let epoch: u64 = epoch.parse().unwrap_or(u64::MAX);
                    let unit: u32 = unit.parse().unwrap_or(u32::MAX);
                    let member: String = parse(kv)?;
                    if *kind == "leased" {
                        leased.push((epoch, unit, member));
                    } else {
                        acked.push((epoch, unit, member));
                    }
                }
                _ => {}
            }
        }
        let state = match stored.config.mode {
            Mode::Sync => State::Sync(SyncModel::load(gens, commit)?),
            Mode::Dynamic => {
                let mut model = DynModel::new(&stored.config, &dataset, dyn_epoch);
                for (epoch, unit, member) in acked.into_iter().filter(|a| a.0 == dyn_epoch) {
                    model.restore_acked(epoch, unit, &member);
                }
                for (epoch, unit, member) in leased.into_iter().filter(|a| a.0 == dyn_epoch) {
                    if members.contains_key(&member) {
                        model.restore_leased(epoch, unit, &member);
                    }
                }
                State::Dynamic(model)
            }
        };
        let mut job = Self::new(name, stored, dataset, state);
        job.members = members;
        Ok(job)
    }

    /// The member's record, or `UnknownMember`.
    pub fn member(&self, member: &str) -> Result<&MemberRecord> {
        self.members
            .get(member)
            .ok_or_else(|| CoordError::UnknownMember {
                job: self.name.clone(),
                member: member.to_owned(),
            })
    }

    /// The member's record when `secret` is the one its Join returned:
    /// `UnknownMember` for a member the job does not have,
    /// `PermissionDenied` for anyone else speaking for it.
    pub fn authorize(&self, member: &str, secret: &str) -> Result<&MemberRecord> {
        let record = self.member(member)?;
        if record.secret_sha256.is_empty()
            || crate::auth::secret_digest(secret) != record.secret_sha256
        {
            return Err(CoordError::PermissionDenied(format!(
                "member {member:?} of job {:?}: the call does not carry the member's secret",
                self.name
            )));
        }
        Ok(record)
    }

    /// Adds a member under `lease`; returns the op that stores it.
    pub fn add_member(&mut self, member: &str, record: MemberRecord) -> Op {
        let op = Op::Put {
            key: keys::member(&self.name, member),
            value: json(&record),
            lease: Some(record.lease),
        };
        self.members.insert(member.to_owned(), record);
        op
    }

    /// Forgets a member (it left, or its lease expired); its leased units
    /// return to the pool. Returns the ops to store, and whether anything
    /// changed.
    pub fn remove_member(&mut self, member: &str) -> (Vec<Op>, bool) {
        if self.members.remove(member).is_none() {
            return (Vec::new(), false);
        }
        let mut ops = vec![Op::Delete {
            key: keys::member(&self.name, member),
        }];
        if let State::Dynamic(model) = &mut self.state {
            let returned = model.release(member);
            ops.extend(returned.iter().map(|&unit| Op::Delete {
                key: keys::leased(&self.name, model.epoch(), unit),
            }));
            if !returned.is_empty() {
                let _ = self.events.send(v1::JobEvent {
                    event: Some(v1::job_event::Event::PoolChanged(model.epoch())),
                });
            }
        }
        (ops, true)
    }

    pub fn status(&self, leader: &str) -> v1::JobStatus {
        let mut status = v1::JobStatus {
            config: Some(self.stored.config.to_proto()),
            members: self.members.keys().cloned().collect(),
            leader: leader.to_owned(),
            ..v1::JobStatus::default()
        };
        match &self.state {
            State::Sync(model) => model.fill_status(&mut status, self.stored.config.epochs),
            State::Dynamic(model) => model.fill_status(&mut status),
        }
        status
    }
}
