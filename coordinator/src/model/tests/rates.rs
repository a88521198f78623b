//! Members' rates in a job's summary (and so in `/metrics`): a member that
//! acks far faster than its peers stands out.

use std::time::{Duration, Instant};

use super::*;
use crate::model::Progress;

#[test]
fn a_member_acking_far_faster_than_its_peers_is_the_jobs_fastest_beside_their_median() {
    let (mut job, mut kv) = created(v1::Mode::Dynamic);
    let members: Vec<MemberId> = ["a", "b", "c", "drainer"].map(MemberId::from).into();
    for member in &members {
        let name = Identity::Name(member.to_string());
        let (joined, effects) = job.join(joiner(name, member.clone(), ""), "f".repeat(32), now());
        joined.expect("join");
        kv.apply(&effects);
    }
    let start = Instant::now();
    let at = |ms: u64| start + Duration::from_millis(ms);
    // Three readers ack a unit of 8 samples a second; the drainer acks 40
    // units in 0.3 s.
    for second in 0..3 {
        for member in &members[..3] {
            job.touch(member, at(second * 1000), Progress::Acked(8));
        }
    }
    for i in 0..40 {
        job.touch(&members[3], at(2000 + i * 7), Progress::Acked(8));
    }
    let rates = job.rates(at(2300));
    let (fastest, rate) = rates.fastest.clone().expect("members reported");
    assert_eq!(fastest, members[3]);
    assert!((rates.median - 8.0).abs() < 1e-9, "{rates:?}");
    assert!(rate > 1000.0, "{rates:?}");
    assert_eq!(rates.members, 4);
    // Rates older than RATE_FRESH no longer count.
    let later = job.rates(at(2000 + 11_000));
    assert_eq!(later, Rates::default());
}
