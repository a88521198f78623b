//! `tributary read` and `bench` with the evaluation and field flags: an
//! unshuffled split over ranks reads every sample once, a text-only dataset
//! reads, and the transform flags reach the loader.

use std::collections::BTreeSet;
use std::path::Path;

mod common;

use common::tributary;

fn ok(args: &[&str]) -> String {
    let output = tributary(args);
    assert!(output.status.success(), "{args:?}: {output:?}");
    String::from_utf8(output.stdout).expect("utf-8")
}

fn synth_and_pack(dir: &Path, images: usize) -> String {
    let src = dir.join("imgs").display().to_string();
    let dest = dir.join("ds").display().to_string();
    ok(&[
        "synth",
        &src,
        "--images",
        &images.to_string(),
        "--classes",
        "3",
    ]);
    ok(&["pack", &src, &dest, "--max-samples", "7"]);
    dest
}

#[test]
fn an_unshuffled_split_reads_every_sample_once_and_marks_padding() {
    let dir = tempfile::tempdir().expect("tempdir");
    let ds = synth_and_pack(dir.path(), 20);
    for tail in ["uneven", "pad"] {
        let mut real = Vec::new();
        let mut lengths = Vec::new();
        for rank in 0..3 {
            let out = ok(&[
                "read",
                &ds,
                "--rank",
                &rank.to_string(),
                "--world",
                "3",
                "--no-shuffle",
                "--tail",
                tail,
                "--transform",
                "eval",
                "--image-size",
                "16",
                "--batch-size",
                "4",
            ]);
            let lines: Vec<&str> = out.lines().collect();
            lengths.push(lines.len());
            let ids: Vec<u64> = lines
                .iter()
                .filter(|line| !line.ends_with("\tpad"))
                .map(|line| {
                    line.split('\t')
                        .next()
                        .and_then(|id| id.parse().ok())
                        .expect("id")
                })
                .collect();
            assert!(
                ids.windows(2).all(|w| w[0] + 1 == w[1]),
                "contiguous, in order: {ids:?}"
            );
            real.extend(ids);
        }
        real.sort_unstable();
        assert_eq!(real, (0..20).collect::<Vec<u64>>(), "{tail}");
        let expected = if tail == "pad" {
            vec![7, 7, 7]
        } else {
            vec![7, 7, 6]
        };
        assert_eq!(lengths, expected, "{tail}");
    }
}

#[test]
fn a_text_only_dataset_reads_with_its_fields_and_bad_flags_are_one_line_errors() {
    let dir = tempfile::tempdir().expect("tempdir");
    let src = dir.path().join("records");
    std::fs::create_dir_all(&src).expect("mkdir");
    for i in 0..5 {
        std::fs::write(src.join(format!("{i:03}.txt")), format!("line {i}")).expect("write");
        std::fs::write(src.join(format!("{i:03}.json")), format!("{{\"i\": {i}}}")).expect("write");
    }
    let ds = dir.path().join("ds").display().to_string();
    ok(&["pack", &src.display().to_string(), &ds]);
    let out = ok(&[
        "read",
        &ds,
        "--fields",
        "txt,json",
        "--no-shuffle",
        "--batch-size",
        "2",
    ]);
    let keys: BTreeSet<&str> = out
        .lines()
        .map(|l| l.split('\t').nth(1).expect("key"))
        .collect();
    assert_eq!(keys.len(), 5);
    // Without the field flags the default wants an image: a bad sample named.
    let output = tributary(&["read", &ds]);
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("has no `image` field"), "{stderr}");
    for (flag, value, words) in [
        ("--transform", "crop", "train, eval, resize, none"),
        ("--dtype", "int8", "dtype"),
        ("--fields", "jpg;txt", "mixes decoders"),
        ("--image-size", "0x4", "not in 1..="),
        ("--mean", "1,2", "3 numbers"),
        ("--tail", "even", "tail"),
    ] {
        let output = tributary(&["read", &ds, flag, value]);
        assert_eq!(output.status.code(), Some(2), "{flag} {value}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(
            stderr.contains(words) && stderr.lines().count() == 1,
            "{stderr}"
        );
    }
}

#[test]
fn bench_runs_the_eval_preset_in_uint8() {
    let dir = tempfile::tempdir().expect("tempdir");
    let ds = synth_and_pack(dir.path(), 12);
    let out = ok(&[
        "bench",
        &ds,
        "--transform",
        "eval",
        "--dtype",
        "uint8",
        "--layout",
        "nhwc",
        "--image-size",
        "32",
        "--threads",
        "1",
    ]);
    assert!(
        out.contains("transform            eval 32, uint8 NHWC"),
        "{out}"
    );
    assert!(out.contains("samples              12"), "{out}");
}

#[test]
fn bench_rounds_alternate_the_phases_and_report_the_median_and_steady_ratios() {
    let dir = tempfile::tempdir().expect("tempdir");
    let ds = synth_and_pack(dir.path(), 12);
    let bench = |extra: &[&str]| {
        let mut args = vec!["bench", &ds, "--image-size", "32", "--threads", "1"];
        args.extend_from_slice(extra);
        ok(&args)
    };
    let out = bench(&["--rounds", "3"]);
    let rounds: Vec<&str> = out
        .lines()
        .filter(|line| line.trim_start().starts_with("round "))
        .collect();
    assert_eq!(rounds.len(), 3, "{out}");
    for (i, line) in rounds.iter().enumerate() {
        assert!(
            line.trim_start().starts_with(&format!("round {}", i + 1))
                && line.contains("pipeline")
                && line.contains("ceiling")
                && line.contains("ratio"),
            "{out}"
        );
    }
    assert!(
        out.contains("median of the 3 rounds' ratios") && out.contains("median of 3 rounds"),
        "{out}"
    );
    // The token bench has no ceiling: --rounds is refused there, not ignored.
    let tokens = tributary(&["bench", &ds, "--sequence-length", "8", "--rounds", "2"]);
    let stderr = String::from_utf8_lossy(&tokens.stderr);
    assert_eq!(tokens.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("--rounds") && stderr.contains("--sequence-length"),
        "{stderr}"
    );
    // One round (the default) prints no round lines; one batch, no steady
    // rate (there is nothing after the first batch).
    let single = bench(&[]);
    assert!(
        !single.contains("round")
            && single.contains("pipeline / ceiling")
            && !single.contains("steady"),
        "{single}"
    );
    // Three batches a round: the steady rate from the first to the last,
    // in each round's line, with its median and its ratio to the ceiling.
    let batches = bench(&["--batch-size", "4", "--rounds", "2"]);
    let rounds = batches.lines().filter(|l| l.contains(", steady "));
    assert_eq!(rounds.count(), 2, "{batches}");
    assert!(
        batches.contains("steady rate") && batches.contains("steady / ceiling"),
        "{batches}"
    );
}
