//! Members forgotten once they stop calling, a stalled leader giving them
//! the time it was away, and records under an earlier coordinator's lease.

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

#[test]
fn a_member_that_stops_calling_is_forgotten_after_its_ttl_with_its_units() {
    let (mut job, mut kv) = created(v1::Mode::Dynamic);
    let (a, b) = (MemberId::from("a"), MemberId::from("b"));
    let start = now();
    let ttl = job.member_ttl();
    let mut callers = Vec::new();
    for member in [&a, &b] {
        let name = Identity::Name(member.to_string());
        let (joined, effects) = job.join(joiner(name, member.clone(), ""), "c".repeat(32), start);
        kv.apply(&effects);
        callers.push(Caller {
            member: member.clone(),
            secret: joined.expect("join").secret,
        });
    }
    let (got, effects) = job.acquire(&callers[0], 2).expect("acquire");
    assert!(matches!(got, Acquired::Units { .. }), "{got:?}");
    kv.apply(&effects);
    // "b" calls half a TTL later; "a" never again.
    let half = start + ttl / 2;
    job.renew(&callers[1], half).expect("b is alive");
    assert!(!job.any_expired(start + ttl));
    let (gone, effects) = job.expire(start + ttl);
    assert!(gone.is_empty() && effects.ops.is_empty(), "{effects:?}");
    let later = start + ttl + Duration::from_millis(1);
    assert!(job.any_expired(later));
    let (gone, effects) = job.expire(later);
    assert_eq!(gone, std::slice::from_ref(&a));
    assert_eq!(effects.tally.leases_expired, 1);
    assert_eq!(effects.tally.units_reassigned, 2, "a's units return");
    assert!(effects.wake && effects.revoke.is_empty(), "{effects:?}");
    kv.apply(&effects);
    assert!(!job.members.contains_key(&a) && job.members.contains_key(&b));
    // The store holds what the model does: a's record and leases are gone.
    let loaded = kv.load(&job.name).expect("load");
    assert_eq!(loaded.members, job.members);
    assert_eq!(
        loaded.status().mode,
        job.status().mode,
        "a's units are in the pool"
    );
    // The member's calls are refused; it may join again.
    assert!(matches!(
        job.renew(&callers[0], later),
        Err(CoordError::UnknownMember { .. })
    ));
    // A leader that loads the job gives "b" a whole TTL from the load.
    assert!(!loaded.any_expired(now() + ttl / 2));
}

#[test]
fn a_store_lease_taking_a_record_forgets_only_a_member_under_one() {
    let (mut job, _) = created(v1::Mode::Dynamic);
    let (a, b) = (MemberId::from("a"), MemberId::from("b"));
    for member in [&a, &b] {
        let name = Identity::Name(member.to_string());
        let (joined, _) = job.join(joiner(name, member.clone(), ""), "c".repeat(32), now());
        joined.expect("join");
    }
    // "a" was admitted by an earlier coordinator, under a lease of its own.
    job.members.get_mut(&a).expect("a").lease = 7;
    assert!(job.lease_expired(&b).is_empty(), "b is the leader's alone");
    assert!(job.members.contains_key(&b));
    let effects = job.lease_expired(&a);
    assert!(effects.ops.is_empty() && effects.wake, "{effects:?}");
    assert!(!job.members.contains_key(&a));
}
