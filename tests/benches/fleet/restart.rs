//! After a sync run: every rank restarts (torchrun's restart count + 1) and
//! joins again. The new generation must resume from the group's commit: its
//! parts, taken together, hold each sample once, and as many as the epoch
//! less what every rank had read up to the commit.

use std::sync::Arc;

use tonic::transport::Channel;
use tributary_common::proto::v1::{self, coordinator_client::CoordinatorClient};
use tributary_tests::coordinator::{torchrun_join, MemberCalls};

/// Joins `world` ranks of `job` as restart 1 over `channels` and returns
/// the spans (shard, start, end) of the generation they were given, after
/// checking that they all got the same generation, newer than 0.
async fn rejoin(job: &str, digest: &str, world: u32, channels: &[Channel]) -> Vec<(u32, u32, u32)> {
    let job: Arc<str> = job.into();
    let digest: Arc<str> = digest.into();
    let tasks: Vec<_> = (0..world)
        .map(|rank| {
            let mut client =
                CoordinatorClient::new(channels[rank as usize % channels.len()].clone());
            let (job, digest) = (Arc::clone(&job), Arc::clone(&digest));
            tokio::spawn(async move {
                let join = v1::JoinRequest {
                    manifest_sha256: digest.to_string(),
                    ..torchrun_join(&job, rank, world, 1)
                };
                let joined = client
                    .join(join)
                    .await
                    .expect("a restarted rank joins")
                    .into_inner();
                let calls = MemberCalls::own(&job, &joined);
                let part = client
                    .get_assignment(calls.assignment(joined.epoch))
                    .await
                    .expect("a restarted rank's part")
                    .into_inner();
                (joined.generation, part.spans)
            })
        })
        .collect();
    let mut generations = std::collections::BTreeSet::new();
    let mut spans = Vec::new();
    for task in tasks {
        let (generation, part) = task.await.expect("rank task");
        generations.insert(generation);
        spans.extend(part.iter().map(|s| (s.shard, s.start, s.end)));
    }
    assert_eq!(
        generations.len(),
        1,
        "one generation for the restart: {generations:?}"
    );
    assert!(generations.iter().all(|&g| g > 0), "{generations:?}");
    spans
}

/// Restarts every rank after the group committed `committed` samples per
/// rank of epoch 0's generation, and checks the resumed split (see the
/// module's docs). Panics if it is not exact.
pub async fn check(
    job: &str,
    digest: &str,
    world: u32,
    samples: u32,
    committed: u64,
    channels: &[Channel],
) {
    let spans = rejoin(job, digest, world, channels).await;
    let (given, distinct) = super::rank::samples_in(&spans);
    let rest = u64::from(samples) - u64::from(world) * committed;
    assert_eq!(
        (given as u64, distinct as u64),
        (rest, rest),
        "{world} ranks restarted after a commit at {committed} samples each: the epoch's other \
         {rest} samples, each once"
    );
    println!(
        "  {world} ranks restarted: the resumed generation holds the epoch's other {rest} samples, each once"
    );
}
