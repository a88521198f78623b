//! The CLI end to end: the quickstart, and clear errors (never a panic) for
//! bad input.

use tributary_tests::cli::{tributary, tributary_ok, Scratch};

fn fails_with(args: &[&str], needles: &[&str]) {
    let output = tributary(args, &[]);
    assert!(!output.status.success(), "tributary {args:?} succeeded");
    let stderr = String::from_utf8_lossy(&output.stderr);
    for needle in needles {
        assert!(
            stderr.contains(needle),
            "tributary {args:?}: `{needle}` not in:\n{stderr}"
        );
    }
}

#[test]
fn quickstart_trains_every_sample_once_through_a_preemption() {
    let out = tributary_ok(
        &[
            "quickstart",
            "--images",
            "96",
            "--image-size",
            "64",
            "--batch-size",
            "16",
        ],
        &[],
    );
    assert!(
        out.contains("exactly once   ok: 96 of 96 samples trained once across 2 generations"),
        "{out}"
    );
    assert!(
        out.contains("samples/s")
            && out.contains("first batch")
            && out.contains("in-process at 127.0.0.1:")
            && out.contains(
                "generation 1: torchrun restarts 1 rank(s), resuming from the checkpoint"
            ),
        "{out}"
    );
}

#[test]
fn bad_input_gives_clear_errors() {
    let scratch = Scratch::new();
    let images = &scratch.path("images");
    let shards_url = &scratch.path("shards");
    let shards = std::path::Path::new(shards_url);

    fails_with(&["pack", images, shards_url], &[images]);
    tributary_ok(&["synth", images, "--images", "12", "--classes", "2"], &[]);
    fails_with(
        &["pack", images, shards_url, "--compression", "lz4"],
        &["unknown compression `lz4`"],
    );
    fails_with(
        &["read", shards_url],
        &["manifest.json", "not found", "tributary pack"],
    );
    tributary_ok(&["pack", images, shards_url, "--max-samples", "6"], &[]);
    fails_with(
        &["read", shards_url, "--rank", "2", "--world", "2"],
        &["rank 2 is outside a world of 2"],
    );
    fails_with(
        &["read", shards_url, "--batch-size", "0"],
        &["--batch-size", "0 is not in 1..=65536"],
    );
    fails_with(&["synth", images, "--images", "0"], &["images"]);

    // A flipped byte in the second shard: inspect and read both name it.
    let shard = shards.join("shard-000001.tar");
    let mut bytes = std::fs::read(&shard).expect("read shard");
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0x01;
    std::fs::write(&shard, &bytes).expect("write shard");
    fails_with(
        &["inspect", shards_url],
        &[
            "shard-000001.tar",
            "checksum mismatch",
            "1 of 2 shards failed",
        ],
    );
    fails_with(
        &["read", shards_url],
        &["shard-000001.tar", "checksum mismatch", "at byte"],
    );

    // A shard cut short.
    std::fs::write(&shard, &bytes[..middle]).expect("truncate shard");
    fails_with(&["read", shards_url], &["shard-000001.tar"]);
}

/// `(id, source)` of each line of `tributary read --mix`.
fn mixed_lines(out: &str) -> Vec<(u64, u32)> {
    out.lines()
        .map(|line| {
            let fields: Vec<&str> = line.split('\t').collect();
            let source = fields[3].strip_prefix("src=").expect("a src= field");
            (
                fields[0].parse().expect("id"),
                source.parse().expect("source"),
            )
        })
        .collect()
}

#[test]
fn read_mixes_datasets_by_weight_samples_and_repeat() {
    let scratch = Scratch::new();
    let (a, b) = (&scratch.path("a"), &scratch.path("b"));
    for (name, url, images) in [("ia", a, "40"), ("ib", b, "20")] {
        let images_dir = &scratch.path(name);
        tributary_ok(&["synth", images_dir, "--images", images], &[]);
        tributary_ok(&["pack", images_dir, url, "--max-samples", "10"], &[]);
    }
    let read = |mix: [String; 2], extra: &[&str]| {
        let mut args = vec!["read", "--batch-size", "4", "--image-size", "32"];
        args.extend(mix.iter().flat_map(|m| ["--mix", m.as_str()]));
        args.extend(extra);
        mixed_lines(&tributary_ok(&args, &[]))
    };
    let count = |lines: &[(u64, u32)], source| lines.iter().filter(|l| l.1 == source).count();
    for epoch in ["0", "1"] {
        // Weights 3:1 of 40 samples: exactly 30 and 10, each id once.
        let lines = read(
            [format!("{a}=weight:3"), format!("{b}=weight:1")],
            &["--epoch-samples", "40", "--epoch", epoch],
        );
        assert_eq!((count(&lines, 0), count(&lines, 1)), (30, 10));
        let ids: std::collections::BTreeSet<u64> = lines.iter().map(|l| l.0).collect();
        assert_eq!(ids.len(), 40, "an id delivered twice: {lines:?}");
    }
    // 5 samples of a, b twice over (each pass's samples under new ids).
    let lines = read([format!("{a}=samples:5"), format!("{b}=repeat:2")], &[]);
    assert_eq!((count(&lines, 0), count(&lines, 1)), (5, 40));
    let ids: std::collections::BTreeSet<u64> = lines.iter().map(|l| l.0).collect();
    assert_eq!(ids.len(), 45);

    fails_with(
        &["read", "--mix", &format!("{a}=weight:-1")],
        &[a, "weight -1 is not a number above 0"],
    );
    fails_with(&["read", "--mix", a], &["is not URL=TAKE"]);
    fails_with(
        &[
            "read",
            "--mix",
            &format!("{a}=weight:1"),
            "--mix",
            &format!("{b}=samples:3"),
        ],
        &["weights are given for some datasets but not all"],
    );
    fails_with(
        &["read", a, "--mix", &format!("{b}=weight:1")],
        &["cannot be used with"],
    );
}
