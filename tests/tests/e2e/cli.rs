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
