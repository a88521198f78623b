//! What comes in over the wire, checked before a handler acts on it: names,
//! identities and counts, each against its bound, with errors naming the
//! field.

use crate::config::MAX_WORLD;
use crate::error::{CoordError, Result};
use crate::keys;
use crate::model::Identity;
use tributary_common::proto::v1;

/// The most units one Report may acknowledge.
pub const MAX_ACKS_PER_REPORT: usize = 4096;
/// The most units one Acquire may lease.
pub const MAX_UNITS_PER_ACQUIRE: u32 = 1024;
/// The longest a member secret may be.
const MAX_SECRET_BYTES: usize = 128;

/// `name` as a job or member name, or INVALID_ARGUMENT naming `field`.
pub fn name(field: &str, name: &str) -> Result<()> {
    if keys::valid_name(name) {
        return Ok(());
    }
    let shown: String = name.chars().take(64).collect();
    Err(CoordError::Invalid(format!(
        "{field} {shown:?} must be 1-128 characters of [A-Za-z0-9_.-], not starting with '.'"
    )))
}

/// The identity of a Join and the member name it stands for.
pub fn identity(raw: Option<v1::join_request::Identity>) -> Result<(Identity, String)> {
    match raw {
        Some(v1::join_request::Identity::Torchrun(t)) => {
            name("torchrun.run_id", &t.run_id)?;
            if !(1..=MAX_WORLD).contains(&t.world_size) {
                return Err(CoordError::Invalid(format!(
                    "torchrun.world_size {} is outside 1..={MAX_WORLD}",
                    t.world_size
                )));
            }
            if t.rank >= t.world_size {
                return Err(CoordError::RankOutOfRange {
                    rank: t.rank,
                    world: t.world_size,
                });
            }
            let member = format!("{}.{}.{}", t.run_id, t.restart_count, t.rank);
            // run_id (128) + two numbers: the member name can exceed what
            // a name may be; it is a key segment, so check it as one.
            if member.len() > 192 {
                return Err(CoordError::Invalid(format!(
                    "torchrun identity makes a member name of {} bytes",
                    member.len()
                )));
            }
            let identity = Identity::Torchrun {
                rank: t.rank,
                world: t.world_size,
                run_id: t.run_id,
                restart: t.restart_count,
            };
            Ok((identity, member))
        }
        Some(v1::join_request::Identity::Name(member)) => {
            name("name", &member)?;
            Ok((Identity::Name(member.clone()), member))
        }
        None => Err(CoordError::Invalid("identity is missing".into())),
    }
}

/// A member-scoped request's job, member and secret, bounded.
pub fn member_call(job: &str, member: &str, secret: &str) -> Result<()> {
    name("job", job)?;
    if member.is_empty() || member.len() > 192 {
        return Err(CoordError::Invalid(format!(
            "member must be 1-192 bytes, not {}",
            member.len()
        )));
    }
    bounded_secret(secret)
}

/// A secret, bounded.
pub fn bounded_secret(secret: &str) -> Result<()> {
    if secret.len() > MAX_SECRET_BYTES {
        return Err(CoordError::Invalid(format!(
            "secret is {} bytes; the limit is {MAX_SECRET_BYTES}",
            secret.len()
        )));
    }
    Ok(())
}

/// Whether a Join's secret can serve as a new member's: 32 to 128 hex
/// digits (128 random bits or more), as `secrets.token_hex(16)` makes.
pub fn chosen_secret(secret: &str) -> bool {
    (32..=MAX_SECRET_BYTES).contains(&secret.len()) && secret.bytes().all(|b| b.is_ascii_hexdigit())
}

/// A Report's acks, bounded.
pub fn acks(acked: &[v1::UnitRef]) -> Result<()> {
    if acked.len() > MAX_ACKS_PER_REPORT {
        return Err(CoordError::Invalid(format!(
            "acked lists {} units; the limit is {MAX_ACKS_PER_REPORT} per report",
            acked.len()
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn torchrun(rank: u32, world: u32, restart: u64) -> Option<v1::join_request::Identity> {
        Some(v1::join_request::Identity::Torchrun(v1::TorchrunIdentity {
            rank,
            world_size: world,
            run_id: "run".into(),
            restart_count: restart,
        }))
    }

    #[test]
    fn a_world_beyond_the_bound_is_refused_before_anything_is_sized_by_it() {
        let error = identity(torchrun(0, u32::MAX, 0)).expect_err("huge world");
        assert!(error.to_string().contains("torchrun.world_size"), "{error}");
        assert!(identity(torchrun(0, 0, 0)).is_err());
        assert!(matches!(
            identity(torchrun(4, 4, 0)),
            Err(CoordError::RankOutOfRange { .. })
        ));
        let (_, member) = identity(torchrun(3, 4, u64::MAX)).expect("ok");
        assert_eq!(member, format!("run.{}.3", u64::MAX));
    }

    #[test]
    fn oversized_fields_are_invalid_and_named() {
        assert!(member_call("job", "m", &"s".repeat(129))
            .expect_err("secret")
            .to_string()
            .contains("secret"));
        assert!(member_call("job", &"m".repeat(193), "").is_err());
        assert!(member_call("bad/job", "m", "").is_err());
        let many = vec![v1::UnitRef::default(); MAX_ACKS_PER_REPORT + 1];
        assert!(acks(&many).expect_err("acks").to_string().contains("acked"));
        assert!(identity(None).is_err());
    }
}
