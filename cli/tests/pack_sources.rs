//! `tributary pack` from a listing and a WebDataset directory, and its
//! `--format` flag.

use std::path::Path;

mod common;

use common::tributary;

fn write(path: &Path, bytes: &[u8]) {
    std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
    std::fs::write(path, bytes).expect("write");
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn pack_takes_a_csv_listing() {
    let dir = tempfile::tempdir().expect("tempdir");
    write(&dir.path().join("imgs/a.jpg"), b"\xFF\xD8\xFF\xE0 jpeg");
    write(&dir.path().join("imgs/b.npy"), b"\x93NUMPY");
    let listing = dir.path().join("train.csv");
    write(
        &listing,
        b"path,label,caption\nimgs/a.jpg,cat,\"hi, \"\"there\"\"\"\nimgs/b.npy,dog,\n",
    );
    let dest = dir.path().join("ds");
    let output = tributary(&[
        "pack",
        &listing.display().to_string(),
        &dest.display().to_string(),
    ]);
    assert!(output.status.success(), "{output:?}");
    let stdout = text(&output.stdout);
    assert!(
        stdout.contains("packed 2 samples of 2 classes into 1 shards"),
        "{stdout}"
    );
    assert!(stdout.contains("(listing source, "), "{stdout}");
    let manifest = text(&std::fs::read(dest.join("manifest.json")).expect("manifest"));
    assert!(
        manifest.contains(r#""classes":["cat","dog"]"#),
        "{manifest}"
    );
    assert!(
        manifest.contains(r#""fields":["cls","jpg","npy","txt"]"#),
        "{manifest}"
    );
}

#[test]
fn pack_format_picks_the_reading_and_a_bad_one_is_a_one_line_error() {
    let dir = tempfile::tempdir().expect("tempdir");
    let src = dir.path().join("src");
    // Auto reads this as an ImageFolder tree (class `part0`); the flag says
    // the files are WebDataset samples with no class.
    write(&src.join("part0/0001.jpg"), b"\xFF\xD8\xFF\xE0 jpeg");
    let dest = dir.path().join("ds");
    let (src, dest) = (src.display().to_string(), dest.display().to_string());
    let output = tributary(&["pack", &src, &dest, "--format", "webdataset"]);
    assert!(output.status.success(), "{output:?}");
    let stdout = text(&output.stdout);
    assert!(
        stdout.contains("packed 1 samples of 0 classes") && stdout.contains("(webdataset source, "),
        "{stdout}"
    );

    let output = tributary(&["pack", &src, &dest, "--format=csv"]);
    assert_eq!(output.status.code(), Some(2), "{output:?}");
    let stderr = text(&output.stderr);
    let lines: Vec<&str> = stderr.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(lines.len(), 1, "{stderr}");
    assert!(
        lines[0].contains("--format") && lines[0].contains("unknown source format `csv`"),
        "{stderr}"
    );
}

#[test]
fn pack_of_a_jsonl_listing_documents_its_keys_in_help_and_names_them_on_a_wrong_one() {
    let output = tributary(&["pack", "--help"]);
    assert!(output.status.success(), "{output:?}");
    let help = text(&output.stdout);
    for needle in [
        "JSONL listing",
        "`path` (a string",
        "`label` (a string, a non-negative integer or null)",
        "`caption` (a string or null)",
        "other keys are refused",
        "`path` (required), `label`, `caption`",
    ] {
        assert!(
            help.contains(needle),
            "`pack --help` lacks {needle:?}:\n{help}"
        );
    }

    let dir = tempfile::tempdir().expect("tempdir");
    write(&dir.path().join("imgs/a.jpg"), b"\xFF\xD8\xFF\xE0 jpeg");
    let listing = dir.path().join("train.jsonl");
    write(
        &listing,
        b"{\"path\": \"imgs/a.jpg\", \"label\": \"cat\", \"caption\": \"a cat\"}\n",
    );
    let dest = dir.path().join("ds");
    let output = tributary(&[
        "pack",
        &listing.display().to_string(),
        &dest.display().to_string(),
    ]);
    assert!(output.status.success(), "{output:?}");

    let wrong = dir.path().join("wrong.jsonl");
    write(&wrong, b"{\"image\": \"imgs/a.jpg\"}\n");
    let output = tributary(&[
        "pack",
        &wrong.display().to_string(),
        &dir.path().join("ds2").display().to_string(),
    ]);
    assert!(!output.status.success());
    let stderr = text(&output.stderr);
    assert!(stderr.contains("unknown field `image`"), "{stderr}");
    assert!(stderr.contains("`path`, `label`, `caption`"), "{stderr}");
}
