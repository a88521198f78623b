use std::collections::HashMap;

use proptest::prelude::*;

use super::*;

fn shape(shard_samples: &[u32], take: Take) -> SourceShape {
    SourceShape {
        shard_samples: shard_samples.to_vec(),
        take,
    }
}

/// How many times each (dataset, shard, index) was read.
type Reads = HashMap<(usize, u32, u32), u32>;

/// Samples per dataset in an epoch's spans, and the reads of each sample.
fn tally(layout: &Layout, spans: &SpanSet) -> (Vec<u64>, Reads) {
    let mut per_source = vec![0u64; layout.sources()];
    let mut reads = HashMap::new();
    for (shard, index) in spans.samples() {
        let (source, local) = layout.resolve(shard);
        per_source[source] += 1;
        *reads.entry((source, local, index)).or_insert(0) += 1;
    }
    (per_source, reads)
}

#[test]
fn weights_split_the_epoch_exactly() {
    let layout = Layout::mixed(
        &[
            shape(&[100, 100, 50], Take::Weight(0.7)),
            shape(&[30, 30], Take::Weight(0.2)),
            shape(&[10], Take::Weight(0.1)),
        ],
        1000,
    )
    .expect("valid mix");
    assert_eq!(layout.epoch_samples(), 1000);
    assert_eq!(
        (0..3).map(|d| layout.source_samples(d)).collect::<Vec<_>>(),
        [700, 200, 100]
    );
    for epoch in 0..3 {
        let spans = layout.epoch_spans(5, epoch);
        let (counts, reads) = tally(&layout, &spans);
        assert_eq!(counts, [700, 200, 100], "epoch {epoch}");
        // 700 of 250: two passes and 200 more; 200 of 60: three passes and
        // 20; 100 of 10: ten passes. No sample more often than its passes
        // allow, and no virtual sample twice.
        let most = |d: usize| {
            reads
                .iter()
                .filter(|(k, _)| k.0 == d)
                .map(|(_, &n)| n)
                .max()
        };
        assert_eq!(most(0), Some(3));
        assert_eq!(most(1), Some(4));
        assert_eq!(most(2), Some(10));
        let mut ids: Vec<u64> = spans
            .samples()
            .map(|(shard, index)| layout.shard_start(shard) + u64::from(index))
            .collect();
        let n = ids.len();
        ids.sort_unstable();
        ids.dedup();
        assert_eq!(ids.len(), n, "virtual ids are unique within an epoch");
    }
    assert_eq!(layout.epoch_spans(5, 1), layout.epoch_spans(5, 1));
    assert_ne!(layout.epoch_spans(5, 1), layout.epoch_spans(5, 2));
    assert_ne!(layout.epoch_spans(5, 1), layout.epoch_spans(6, 1));
}

#[test]
fn samples_and_repeat_fix_counts_and_choose_different_samples_each_epoch() {
    let layout = Layout::mixed(
        &[
            shape(&[40, 40, 40, 40], Take::Samples(50)),
            shape(&[7, 7], Take::Repeat(2.5)),
        ],
        0,
    )
    .expect("valid mix");
    assert_eq!(layout.source_samples(0), 50);
    assert_eq!(layout.source_samples(1), 35);
    let first = tally(&layout, &layout.epoch_spans(1, 0));
    let second = tally(&layout, &layout.epoch_spans(1, 1));
    assert_eq!(first.0, [50, 35]);
    assert_eq!(second.0, [50, 35]);
    let chosen = |reads: &Reads| {
        let mut keys: Vec<_> = reads.keys().filter(|k| k.0 == 0).copied().collect();
        keys.sort_unstable();
        keys
    };
    assert_ne!(
        chosen(&first.1),
        chosen(&second.1),
        "a subset drawn per epoch"
    );
}

#[test]
fn takes_parse_and_are_checked() {
    assert_eq!("weight:0.5".parse(), Ok(Take::Weight(0.5)));
    assert_eq!("samples:10".parse(), Ok(Take::Samples(10)));
    assert_eq!("repeat:2.5".parse(), Ok(Take::Repeat(2.5)));
    for bad in [
        "weight",
        "weight:x",
        "twice:2",
        "samples:-1",
        "repeat:inf",
        "weight:0",
    ] {
        assert!(bad.parse::<Take>().is_err(), "{bad}");
    }
}

#[test]
fn weights_apportion_by_largest_remainder() {
    assert_eq!(apportion(10, &[1.0, 1.0, 1.0]), [4, 3, 3]);
    assert_eq!(apportion(7, &[0.5, 0.25, 0.25]), [3, 2, 2]);
    assert_eq!(apportion(0, &[1.0, 2.0]), [0, 0]);
    assert_eq!(apportion(1 << 40, &[1.0, 3.0]), [1 << 38, 3 << 38]);
}

#[test]
fn a_single_layout_plans_as_before_and_ids_match_the_manifest() {
    let counts = vec![5, 0, 7, 3];
    let layout = Layout::single(counts.clone());
    assert!(!layout.is_mixed());
    for epoch in 0..4 {
        assert_eq!(layout.epoch_spans(9, epoch), epoch_spans(&counts, 9, epoch));
    }
    assert_eq!(layout.shards(), 4);
    assert_eq!(layout.shard_start(2), 5);
    assert_eq!(layout.locate(6), Some((2, 1)));
    assert_eq!(layout.locate(15), None);
    assert_eq!(layout.resolve(3), (0, 3));
    assert_eq!(layout.shard_samples(4), None);
}

#[test]
fn bad_mixes_are_refused_naming_the_field() {
    let error = |sources: &[SourceShape], epoch: u64| {
        Layout::mixed(sources, epoch)
            .expect_err("invalid mix")
            .to_string()
    };
    assert!(error(&[], 0).starts_with("sources: lists no dataset"));
    let half = [
        shape(&[4], Take::Weight(1.0)),
        shape(&[4], Take::Samples(3)),
    ];
    assert!(error(&half, 0).contains("weight every dataset, or none"));
    for bad in [f64::NAN, f64::INFINITY, -1.0, 0.0, 1e10] {
        let text = error(&[shape(&[4], Take::Weight(bad))], 0);
        assert!(text.starts_with("sources[0]: weight"), "{text}");
        let text = error(
            &[
                shape(&[4], Take::Samples(2)),
                shape(&[4], Take::Repeat(bad)),
            ],
            0,
        );
        assert!(text.starts_with("sources[1]: repeat"), "{text}");
    }
    assert!(error(&[shape(&[4], Take::Samples(0))], 0).starts_with("sources[0]: samples 0"));
    assert!(error(&[shape(&[0, 0], Take::Samples(1))], 0).contains("no samples"));
    assert!(error(&[shape(&[4], Take::Samples(2))], 10).starts_with("epoch_samples"));
    let tiny = [
        shape(&[4], Take::Weight(1.0)),
        shape(&[4], Take::Weight(1e-6)),
    ];
    assert!(error(&tiny, 100).starts_with("sources[1]: gives no sample"));
    // Planning is bounded before it allocates: a billion passes is refused.
    let text = error(&[shape(&[1, 1], Take::Repeat(1e9))], 0);
    assert!(text.contains("shard passes"), "{text}");
}

proptest! {
    #[test]
    fn every_mix_takes_exactly_its_counts_and_reads_each_virtual_sample_once(
        datasets in proptest::collection::vec(
            (proptest::collection::vec(0u32..20, 1..6), 1u64..60), 1..5),
        seed in any::<u64>(), epoch in 0u64..4,
    ) {
        let sources: Vec<SourceShape> = datasets
            .iter()
            .map(|(shards, n)| shape(shards, Take::Samples(*n)))
            .collect();
        match Layout::mixed(&sources, 0) {
            Err(error) => prop_assert!(error.to_string().contains("no samples")),
            Ok(layout) => {
                let spans = layout.epoch_spans(seed, epoch);
                // The bound callers check before they build an epoch holds.
                prop_assert!(spans.spans().len() as u64 <= layout.max_epoch_spans());
                let (counts, _) = tally(&layout, &spans);
                let want: Vec<u64> = datasets.iter().map(|(_, n)| *n).collect();
                prop_assert_eq!(counts, want);
                let mut seen = std::collections::HashSet::new();
                for (shard, index) in spans.samples() {
                    prop_assert!(index < layout.shard_samples(shard).expect("inside"));
                    let id = layout.shard_start(shard) + u64::from(index);
                    prop_assert_eq!(layout.locate(id), Some((shard, index)));
                    prop_assert!(seen.insert(id));
                }
            }
        }
    }
}

#[test]
fn every_stretch_of_a_mixed_epoch_holds_each_dataset_in_proportion() {
    // Shards of 5,000 samples, far larger than a shuffle buffer: still,
    // every 1,024 consecutive samples of the epoch hold the 3:1 mix.
    let layout = Layout::mixed(
        &[
            shape(&[5000; 6], Take::Weight(3.0)),
            shape(&[5000; 4], Take::Weight(1.0)),
        ],
        20_000,
    )
    .expect("valid mix");
    for epoch in 0..3 {
        let sources: Vec<usize> = layout
            .epoch_spans(11, epoch)
            .samples()
            .map(|(shard, _)| layout.resolve(shard).0)
            .collect();
        assert_eq!(sources.len(), 20_000);
        let window = 1024;
        let mut first = sources[..window].iter().filter(|&&d| d == 0).count() as i64;
        for start in 0..=sources.len() - window {
            if start > 0 {
                first += i64::from(sources[start + window - 1] == 0);
                first -= i64::from(sources[start - 1] == 0);
            }
            // 768 expected; pieces of 64 samples move it by at most two
            // pieces' worth.
            assert!(
                (first - 768).abs() <= 2 * MIX_PIECE as i64,
                "epoch {epoch}, samples {start}..: {first} of dataset 0"
            );
        }
    }
    // A shard's pieces are read in order (consecutive ones merge).
    let spans = layout.epoch_spans(11, 0);
    let mut next: HashMap<u32, u32> = HashMap::new();
    for span in spans.spans() {
        let at = next.entry(span.shard).or_insert(0);
        assert_eq!(span.start, *at, "{span:?}");
        *at = span.end;
    }
}

#[test]
fn a_huge_mixed_epoch_is_cut_into_a_bounded_number_of_pieces() {
    let layout = Layout::mixed(
        &[
            shape(&[u32::MAX; 4], Take::Weight(1.0)),
            shape(&[u32::MAX; 4], Take::Weight(1.0)),
        ],
        0,
    )
    .expect("valid mix");
    let spans = layout.epoch_spans(1, 0);
    assert_eq!(spans.len(), layout.epoch_samples());
    assert!(spans.spans().len() as u64 <= layout.max_epoch_spans());
    assert!(
        spans.spans().len() as u64 <= MAX_MIX_PIECES + 8,
        "{}",
        spans.spans().len()
    );
}
