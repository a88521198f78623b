use super::*;

fn raw() -> v1::JobConfig {
    v1::JobConfig {
        manifest_url: "memory:///d/manifest.json".into(),
        batch_size: 32,
        epochs: 2,
        ..v1::JobConfig::default()
    }
}

fn rejected(raw: v1::JobConfig) -> String {
    match JobSpec::try_from(raw) {
        Err(e) => e.to_string(),
        Ok(spec) => panic!("expected an error, got {spec:?}"),
    }
}

#[test]
fn every_field_is_bounded_and_the_error_names_field_and_limit() {
    type Spoil = fn(&mut v1::JobConfig);
    let cases: [(&str, Spoil); 7] = [
        ("shuffle_buffer", |c| c.shuffle_buffer = u32::MAX),
        ("batch_size", |c| c.batch_size = u32::MAX),
        ("batch_size", |c| c.batch_size = 0),
        ("epochs", |c| c.epochs = u64::MAX),
        ("unit_samples", |c| c.unit_samples = u32::MAX),
        ("member_ttl_s", |c| c.member_ttl_s = 3601),
        ("manifest_url", |c| c.manifest_url = "s3://b/".repeat(1000)),
    ];
    for (name, spoil) in cases {
        let mut config = raw();
        spoil(&mut config);
        let message = rejected(config);
        assert!(message.starts_with(name), "{message}");
    }
    assert!(rejected({
        let mut c = raw();
        c.shuffle_buffer = u32::MAX;
        c
    })
    .contains("1048576"));
    let mut zero = raw();
    zero.batch_size = 0;
    assert_eq!(rejected(zero), "batch_size must be at least 1");
}

#[test]
fn defaults_and_the_largest_allowed_values_pass() {
    let spec = JobSpec::try_from(raw()).expect("valid");
    assert_eq!(
        (spec.shuffle_buffer, spec.unit_samples, spec.member_ttl_s),
        (
            DEFAULT_SHUFFLE_BUFFER,
            DEFAULT_UNIT_SAMPLES,
            DEFAULT_MEMBER_TTL_S
        )
    );
    let mut config = raw();
    config.shuffle_buffer = MAX_SHUFFLE_BUFFER;
    config.batch_size = MAX_BATCH_SIZE;
    config.epochs = MAX_EPOCHS;
    config.unit_samples = MAX_UNIT_SAMPLES;
    config.member_ttl_s = MAX_MEMBER_TTL_S;
    assert!(JobSpec::try_from(config).is_ok());
    JobSpec::new("s3://b/d").validate().expect("the defaults");
}

#[test]
fn unknown_enum_values_are_named() {
    let mut bad_mode = raw();
    bad_mode.mode = 42;
    assert_eq!(rejected(bad_mode), "mode: unknown mode 42");
    let mut bad_remainder = raw();
    bad_remainder.remainder = 9;
    assert_eq!(rejected(bad_remainder), "remainder: unknown policy 9");
}

#[test]
fn errors_name_the_field_as_the_caller_calls_it() {
    let error = JobSpec {
        epochs: Some(0),
        ..JobSpec::new("s3://b/d")
    }
    .validate()
    .expect_err("zero epochs");
    assert_eq!(error.field, Field::Epochs);
    assert_eq!(error.message("epochs="), "epochs= must be at least 1");
}

fn source(url: &str, take: Option<v1::source::Take>) -> v1::Source {
    v1::Source {
        manifest_url: url.into(),
        take,
    }
}

#[test]
fn mixed_sources_are_bounded_and_round_trip() {
    use v1::source::Take as T;
    let mut mixed = raw();
    mixed.manifest_url.clear();
    mixed.sources = vec![
        source("s3://b/a", Some(T::Weight(0.7))),
        source("s3://b/c", Some(T::Weight(0.3))),
    ];
    mixed.epoch_samples = 1000;
    let spec = JobSpec::try_from(mixed.clone()).expect("valid mix");
    assert_eq!(spec.manifest_urls(), ["s3://b/a", "s3://b/c"]);
    assert_eq!(spec.sources[0].take, Take::Weight(0.7));
    assert_eq!(
        JobSpec::try_from(v1::JobConfig::from(&spec)).expect("again"),
        spec
    );
    let unset = JobSpec::try_from(v1::JobConfig {
        sources: vec![source("s3://b/a", None)],
        epoch_samples: 0,
        ..mixed.clone()
    })
    .expect("one pass");
    assert_eq!(unset.sources[0].take, Take::Repeat(1.0));

    type Spoil = fn(&mut v1::JobConfig);
    let cases: [(&str, Spoil); 6] = [
        ("manifest_url: must be empty", |c| {
            c.manifest_url = "s3://b/x".into()
        }),
        ("sources[1].manifest_url: is empty", |c| {
            c.sources[1].manifest_url.clear()
        }),
        ("sources[0]: weight NaN", |c| {
            c.sources[0].take = Some(T::Weight(f64::NAN))
        }),
        ("sources[1]: samples 0", |c| {
            c.sources[1].take = Some(T::Samples(0))
        }),
        ("sources: lists 257 datasets", |c| {
            c.sources = vec![source("s3://b/a", None); 257]
        }),
        ("epoch_samples: 18446744073709551615 is outside", |c| {
            c.epoch_samples = u64::MAX
        }),
    ];
    for (want, spoil) in cases {
        let mut config = mixed.clone();
        spoil(&mut config);
        let message = rejected(config);
        assert!(message.starts_with(want), "{want}: {message}");
    }
    let mut single = raw();
    single.epoch_samples = 5;
    assert!(rejected(single).contains("epoch_samples: is for mixed sources only"));
}

#[test]
fn a_source_parses_from_url_and_take() {
    let source: Source = "s3://b/a=weight:0.5".parse().expect("valid");
    assert_eq!(source.manifest_url, "s3://b/a");
    assert_eq!(source.take, Take::Weight(0.5));
    assert!("=weight:1".parse::<Source>().is_err());
    assert!("s3://b/a=weight:x".parse::<Source>().is_err());
}

#[test]
fn epochs_default_unbounded_and_zero_in_the_protocol_means_unbounded() {
    // Rust's default: as many epochs as the ranks ask for.
    let spec = JobSpec::new("s3://b/d");
    assert_eq!(spec.epochs, None);
    spec.validate().expect("unbounded is valid");
    assert!(!spec.is_past_end(u64::MAX - 1) && !spec.is_last_epoch(0));
    // It crosses the protocol as 0 and comes back unbounded.
    let raw = v1::JobConfig::from(&spec);
    assert_eq!(raw.epochs, 0);
    assert_eq!(JobSpec::try_from(raw).expect("valid").epochs, None);
    // A finite job keeps its count, and knows its last epoch.
    let mut finite = self::raw();
    finite.epochs = 2;
    let finite = JobSpec::try_from(finite).expect("valid");
    assert_eq!(finite.epochs, Some(2));
    assert!(finite.is_last_epoch(1) && !finite.is_last_epoch(0));
    assert!(finite.is_past_end(2) && !finite.is_past_end(1));
    // A record stored before `epochs` could be unbounded still reads.
    let stored = serde_json::to_value(&finite).expect("json");
    assert_eq!(stored["epochs"], 2);
    let back: JobSpec = serde_json::from_value(stored).expect("reads");
    assert_eq!(back.epochs, Some(2));
}

#[test]
fn a_sequence_round_trips_is_bounded_and_packing_needs_a_length() {
    for (packing, expected) in [
        (v1::Packing::Unspecified, Packing::Concat),
        (v1::Packing::Concat, Packing::Concat),
        (v1::Packing::Bestfit, Packing::BestFit),
        (v1::Packing::None, Packing::None),
    ] {
        let spec = JobSpec::try_from(v1::JobConfig {
            sequence_length: 2048,
            packing: packing as i32,
            ..raw()
        })
        .expect("valid");
        let sequence = SequenceSpec {
            length: 2048,
            packing: expected,
        };
        assert_eq!(spec.sequence, Some(sequence));
        let back = JobSpec::try_from(v1::JobConfig::from(&spec)).expect("valid");
        assert_eq!(back, spec);
    }
    assert_eq!(JobSpec::try_from(raw()).expect("valid").sequence, None);
    let too_long = rejected(v1::JobConfig {
        sequence_length: MAX_SEQUENCE_LENGTH + 1,
        ..raw()
    });
    assert!(too_long.starts_with("sequence_length"), "{too_long}");
    let alone = rejected(v1::JobConfig {
        packing: v1::Packing::Bestfit as i32,
        ..raw()
    });
    assert_eq!(alone, "packing: is set but sequence_length is not");
    let unknown = rejected(v1::JobConfig {
        sequence_length: 8,
        packing: 99,
        ..raw()
    });
    assert!(unknown.starts_with("packing"), "{unknown}");
}
