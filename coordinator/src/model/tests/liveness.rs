//! A stalled leader gives its members the time it was away.

use super::*;

#[test]
fn a_stall_of_the_leader_is_given_back_to_every_member() {
    let (mut job, _) = created(v1::Mode::Dynamic);
    let start = now();
    let ttl = job.member_ttl();
    let name = Identity::Name("a".into());
    let (joined, _) = job.join(joiner(name, MemberId::from("a"), ""), "c".repeat(32), start);
    joined.expect("join");
    let stalled = Duration::from_secs(5);
    job.grace(stalled);
    let after = start + ttl + Duration::from_millis(1);
    assert!(!job.any_expired(after), "the stall counts as calls");
    let (gone, _) = job.expire(after);
    assert!(gone.is_empty());
    let (gone, _) = job.expire(after + stalled);
    assert_eq!(
        gone,
        [MemberId::from("a")],
        "silent past its TTL and the stall"
    );
}
