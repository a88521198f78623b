//! Data-parallel groups on the path without a coordinator (an unshuffled,
//! evaluation read): the peers of a group read their group's part, the
//! groups disjoint parts, and together every sample once.

use tributary_tests::dataset::{small_loader_config, tiny_dataset};
use tributary_worker::coordinated::{DataParallel, Identity};
use tributary_worker::rank::{Coordinator, JobSpec, Rank, RankConfig};
use tributary_worker::DecodeConfig;

/// The ids rank `rank` of 4 in group `rank / 2` of 2 reads in one pass,
/// and what it says of itself.
async fn read(url: &str, rank: u32) -> (Vec<u64>, tributary_worker::rank::Description) {
    let identity = Identity::Torchrun {
        rank,
        world: 4,
        run_id: "r".into(),
        restart: 0,
        dp: Some(DataParallel {
            rank: rank / 2,
            size: 2,
        }),
    };
    let spec = JobSpec {
        batch_size: 8,
        ..JobSpec::new(url)
    };
    let mut config = RankConfig::new(spec, Coordinator::Shared(Vec::new()), "eval", identity);
    config.shuffle = false;
    config.decode = DecodeConfig {
        fields: "cls".parse().expect("fields"),
        ..small_loader_config().decode
    };
    let mut reader = Rank::start(config).await.expect("start");
    let mut ids = Vec::new();
    while let Some(batch) = reader.next().await {
        ids.extend(batch.expect("batch").ids);
    }
    (ids, reader.describe())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unshuffled_read_gives_peers_their_groups_part_and_every_sample_once() {
    let dir = tempfile::tempdir().expect("tempdir");
    let url = tiny_dataset(dir.path(), 45, 16).await;
    let mut parts = Vec::new();
    for rank in 0..4 {
        let (ids, place) = read(&url, rank).await;
        assert_eq!((place.rank, place.world), (rank, 4), "the torchrun rank");
        assert_eq!(
            place.data_parallel,
            DataParallel {
                rank: rank / 2,
                size: 2
            }
        );
        parts.push(ids);
    }
    assert_eq!(parts[0], parts[1], "group 0's peers read the same");
    assert_eq!(parts[2], parts[3], "group 1's peers read the same");
    assert_eq!(
        (parts[0].len(), parts[2].len()),
        (23, 22),
        "45 over 2 groups"
    );
    let mut all: Vec<u64> = parts[0].iter().chain(&parts[2]).copied().collect();
    all.sort_unstable();
    let expected: Vec<u64> = {
        let (mut a, mut b) = (parts[0].clone(), parts[2].clone());
        a.append(&mut b);
        a.sort_unstable();
        a.dedup();
        a
    };
    assert_eq!(all, expected, "no sample in both groups");
    assert_eq!(all.len(), 45, "every sample once");
}
