//! Interoperability with the Python `webdataset` library, both ways.

use std::collections::BTreeSet;

use tributary_tests::cli::{parse_read, python, success_stdout, tributary, tributary_ok, Scratch};

fn class_index(key: &str, classes: &[&str]) -> i64 {
    let class = key.split('/').next().expect("class");
    classes
        .iter()
        .position(|c| *c == class)
        .expect("known class") as i64
}

#[test]
fn shards_written_by_webdataset_are_indexed_then_read() {
    let scratch = Scratch::new();
    let images = &scratch.synth("images", 30, 3);
    let wds = &scratch.path("wds");
    let written = python("make_wds.py", &[images, wds, "8"]);
    assert_eq!(written.trim(), "30");

    let out = tributary_ok(&["index", wds], &[]);
    assert!(out.contains("indexed 4 shards, 30 samples"), "{out}");
    assert!(out.contains("cls,jpg,json"), "{out}");
    let again = tributary(&["index", wds], &[]);
    assert!(!again.status.success());
    assert!(String::from_utf8_lossy(&again.stderr).contains("already exists"));
    let out = tributary_ok(&["inspect", wds], &[]);
    assert!(out.contains("checksums    ok"), "{out}");

    let rows = parse_read(&tributary_ok(&["read", wds, "--batch-size", "7"], &[]));
    assert_eq!(rows.len(), 30);
    tributary_common::invariants::check_exactly_once(0..30, rows.iter().map(|r| r.0))
        .expect("exactly once");
    let classes = ["class_000", "class_001", "class_002"];
    for (_, key, label) in &rows {
        assert_eq!(*label, class_index(key, &classes), "{key}");
    }
}

#[test]
fn webdataset_reads_tributary_shards_as_is() {
    let scratch = Scratch::new();
    let images = &scratch.synth("images", 25, 5);
    let shards_url = &scratch.path("shards");
    let shards = std::path::Path::new(shards_url);
    tributary_ok(&["pack", images, shards_url, "--max-samples", "10"], &[]);
    let mut tars: Vec<String> = std::fs::read_dir(shards)
        .expect("list shards")
        .map(|e| e.expect("entry").path().display().to_string())
        .filter(|p| p.ends_with(".tar"))
        .collect();
    tars.sort();
    assert_eq!(tars.len(), 3);
    let args: Vec<&str> = tars.iter().map(String::as_str).collect();
    let from_python: BTreeSet<(String, i64)> = python("read_wds.py", &args)
        .lines()
        .map(|line| {
            let (key, cls) = line.split_once('\t').expect("key\\tcls");
            (key.to_owned(), cls.parse().expect("cls"))
        })
        .collect();
    let from_tributary: BTreeSet<(String, i64)> =
        parse_read(&tributary_ok(&["read", shards_url], &[]))
            .into_iter()
            .map(|(_, key, label)| (key, label))
            .collect();
    assert_eq!(from_python.len(), 25);
    assert_eq!(from_python, from_tributary);

    // Plain `tar` lists them too: two entries (cls + image) per sample.
    let listed = std::process::Command::new("tar")
        .arg("tf")
        .arg(&tars[0])
        .output()
        .expect("run tar");
    let names = success_stdout("tar tf", listed);
    assert_eq!(names.lines().count(), 20, "{names}");
    assert!(
        names
            .lines()
            .all(|n| n.ends_with(".cls") || n.ends_with(".jpg") || n.ends_with(".png")),
        "{names}"
    );
}
