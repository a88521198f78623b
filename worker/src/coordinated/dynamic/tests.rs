use super::*;

#[test]
fn the_lookahead_defaults_to_the_pipeline_depth_and_never_starves_it() {
    let job = JobSpec {
        batch_size: 64,
        shuffle_buffer: 1024,
        unit_samples: 256,
        ..JobSpec::new("memory:///d")
    };
    let loader = DecodeConfig {
        prefetch_batches: 4,
        decode_batches_in_flight: 2,
        decode_threads: 2,
        ..DecodeConfig::default()
    };
    // The shuffle buffer, a batch, a unit, and the batches queued.
    assert_eq!(
        lookahead_samples(None, &job, &loader),
        1024 + 64 + 256 + 64 * 7
    );
    // 16 threads decode 6 batches at once (224 x 224 float32), not 2.
    let wide = DecodeConfig {
        decode_threads: 16,
        ..loader.clone()
    };
    assert_eq!(
        lookahead_samples(None, &job, &wide),
        1024 + 64 + 256 + 64 * 11
    );
    assert_eq!(lookahead_samples(Some(5000), &job, &loader), 5000);
    // Less would never fill a batch past the shuffle buffer: raised.
    assert_eq!(lookahead_samples(Some(10), &job, &loader), 1024 + 64 + 256);
}

#[test]
fn on_lease_lost_parses_rejoin_and_raise_and_names_anything_else() {
    assert_eq!(
        "rejoin".parse::<OnLeaseLost>().expect("rejoin"),
        OnLeaseLost::Rejoin
    );
    assert_eq!(
        "raise".parse::<OnLeaseLost>().expect("raise"),
        OnLeaseLost::Raise
    );
    assert_eq!(OnLeaseLost::default(), OnLeaseLost::Rejoin);
    let error = "retry".parse::<OnLeaseLost>().expect_err("unknown");
    assert!(error.to_string().contains("\"retry\""), "{error}");
}

#[test]
fn the_tracker_counts_owed_samples_and_readies_finished_units() {
    let mut tracker = Tracker::default();
    let unit = v1::UnitRef { epoch: 0, id: 3 };
    tracker.units.insert(10, (unit, 13, 3));
    tracker.owed = 3;
    for id in [10, 12, 99] {
        tracker.delivered(id);
    }
    assert_eq!((tracker.owed, tracker.ready.len()), (1, 0));
    tracker.delivered(11);
    assert_eq!((tracker.owed, tracker.ready.clone()), (0, vec![unit]));
}

#[test]
fn a_unit_without_a_span_backwards_or_outside_the_dataset_is_refused() {
    use tributary_common::format::shard::ShardWriter;
    use tributary_common::manifest::{Compression, CompressionKind, Manifest};
    let mut writer = ShardWriter::new("shard-000000.tar", Compression::NONE);
    for i in 0..4 {
        writer
            .push(&format!("s/{i}"), &[("cls", b"0")])
            .expect("push");
    }
    let shard = writer.finish().expect("finish");
    let manifest = Manifest::new(
        CompressionKind::None,
        vec!["cls".into()],
        Vec::new(),
        vec![shard.meta],
    )
    .expect("manifest");
    let manifest: Datasets = tributary_io::Dataset::new(
        tributary_io::Location::from_store(
            Arc::new(object_store::memory::InMemory::new()),
            "",
            "memory:///",
        ),
        Arc::new(manifest),
    )
    .into();
    let unit = |span: Option<(u32, u32, u32)>| v1::Unit {
        epoch: 2,
        id: 7,
        span: span.map(|(shard, start, end)| v1::Span { shard, start, end }),
    };
    assert_eq!(
        unit_span(&unit(Some((0, 1, 4))), &manifest).expect("inside"),
        Span::new(0, 1, 4)
    );
    for (bad, says) in [
        (unit(None), "has no span"),
        (unit(Some((0, 3, 1))), "ends before it starts"),
        (unit(Some((0, 1, 5))), "outside the dataset (1 shards)"),
        (unit(Some((9, 0, 1))), "outside the dataset (1 shards)"),
    ] {
        let message = unit_span(&bad, &manifest).expect_err(says).to_string();
        assert!(message.contains("unit 7 of epoch 2"), "{message}");
        assert!(message.contains(says), "{message}");
    }
}
