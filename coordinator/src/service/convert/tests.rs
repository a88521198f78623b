//! The request conversions' bounds and messages.

use super::*;

fn torchrun(rank: u32, world: u32, restart: u64) -> Option<v1::join_request::Identity> {
    Some(v1::join_request::Identity::Torchrun(v1::TorchrunIdentity {
        rank,
        world_size: world,
        run_id: "run".into(),
        restart_count: restart,
        ..v1::TorchrunIdentity::default()
    }))
}

fn member_call(job: &str, member: &str, secret: &str) -> Result<Call<()>> {
    Call::try_from(v1::MemberRequest {
        job: job.into(),
        member: member.into(),
        secret: secret.into(),
    })
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
    assert_eq!(member.as_str(), format!("run.{}.3", u64::MAX));
}

#[test]
fn oversized_fields_are_invalid_and_named() {
    assert!(member_call("job", "m", &"s".repeat(129))
        .expect_err("secret")
        .to_string()
        .contains("secret"));
    assert!(member_call("job", &"m".repeat(193), "").is_err());
    assert!(member_call("bad/job", "m", "").is_err());
    let many = v1::ReportRequest {
        job: "job".into(),
        member: "m".into(),
        acked: vec![v1::UnitRef::default(); MAX_ACKS_PER_REPORT + 1],
        ..v1::ReportRequest::default()
    };
    assert!(Call::<Report>::try_from(many)
        .expect_err("acks")
        .to_string()
        .contains("acked"));
    assert!(identity(None).is_err());
}

#[test]
fn a_resume_history_is_bounded_and_its_worlds_checked() {
    let record = |world| v1::PlanRecord {
        world,
        ..v1::PlanRecord::default()
    };
    let join = |history: Vec<v1::PlanRecord>| {
        Join::try_from(v1::JoinRequest {
            job: "job".into(),
            identity: torchrun(0, 1, 0),
            resume: Some(v1::Resume {
                generation: 0,
                samples: 4,
                history,
            }),
            ..v1::JoinRequest::default()
        })
    };
    let error = join(vec![record(1); MAX_HISTORY + 1]).expect_err("too long");
    assert!(error.to_string().contains("resume.history"), "{error}");
    let error = join(vec![record(0)]).expect_err("no ranks");
    assert!(error.to_string().contains("world of 0"), "{error}");
    let joined = join(vec![record(1)]).expect("ok");
    let resume = joined.joiner.resume.expect("resume");
    assert_eq!((resume.point.samples, resume.history.len()), (4, 1));
}

#[test]
fn an_acquire_asks_within_its_bounds() {
    let request = |wait_ms, max_units| v1::AcquireRequest {
        job: "job".into(),
        member: "m".into(),
        wait_ms,
        max_units,
        ..v1::AcquireRequest::default()
    };
    let call = Call::<Acquire>::try_from(request(u32::MAX, u32::MAX)).expect("ok");
    assert_eq!(call.args.wait, MAX_WAIT);
    assert_eq!(call.args.max, MAX_UNITS_PER_ACQUIRE as usize);
    let call = Call::<Acquire>::try_from(request(0, 0)).expect("ok");
    assert_eq!(call.args.max, 1);
}
