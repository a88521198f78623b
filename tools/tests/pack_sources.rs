//! `pack` from the sources besides ImageFolder: a directory of
//! WebDataset-style files (no image needed) and CSV/JSONL listings, read
//! back shard by shard with the exact bytes of every field.

use std::path::Path;
use std::sync::Arc;

use bytes::Bytes;
use tributary_common::format::shard::{chunk_range, decode_chunks};
use tributary_common::manifest::{Compression, Manifest};
use tributary_io::{Dataset, Location, StoreOptions};
use tributary_tools::pack::listing::{classes, Row};
use tributary_tools::pack::{
    detect, pack, FieldData, PackOptions, PackSummary, Source, SourceField, SourceFormat,
    SourceSample, VecSource,
};
use tributary_tools::progress::NoProgress;
use tributary_tools::ToolsError;

const JPEG: &[u8] = b"\xFF\xD8\xFF\xE0not really a jpeg";
const PNG: &[u8] = b"\x89PNG\r\n\x1a\nnot really a png";

/// `(key, [(extension, bytes)])` per sample, in dataset order.
type Samples = Vec<(String, Vec<(String, Vec<u8>)>)>;

fn write(path: &Path, bytes: &[u8]) {
    std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
    std::fs::write(path, bytes).expect("write");
}

async fn pack_to(
    src: &Path,
    dest: &Path,
    options: &PackOptions,
) -> Result<PackSummary, ToolsError> {
    let location = Location::open(&dest.display().to_string(), &StoreOptions::default(), true)
        .expect("open the destination");
    pack(src, &location, options, Arc::new(NoProgress)).await
}

/// The manifest and every sample of the dataset at `dest`, read from its
/// shard files and checked against the manifest's checksums.
fn read_back(dest: &Path) -> (Manifest, Samples) {
    let manifest =
        Manifest::from_json(&std::fs::read(dest.join("manifest.json")).expect("manifest"))
            .expect("valid manifest");
    let mut samples = Vec::new();
    for (i, entry) in manifest.shards.iter().enumerate() {
        let index = entry.index().expect("pack writes version 2");
        let bytes = std::fs::read(dest.join(&index.name)).expect("index");
        let shard = &tributary_common::manifest::index::decode(
            &bytes,
            index,
            entry.summary(),
            manifest.compression,
        )
        .expect("valid index");
        let data = Bytes::from(std::fs::read(dest.join(&shard.name)).expect("shard"));
        let range = chunk_range(shard, 0..shard.samples);
        let stored = data.slice(range.bytes.start as usize..range.bytes.end as usize);
        let mut out = Vec::new();
        decode_chunks(
            shard,
            manifest.compression,
            &range,
            &stored,
            manifest.shard_start(i),
            0..shard.samples,
            &mut out,
        )
        .expect("decode the shard");
        samples.extend(out.into_iter().map(|sample| {
            let fields = sample
                .fields
                .into_iter()
                .map(|f| (f.ext, f.data.to_vec()))
                .collect();
            (sample.key, fields)
        }));
    }
    (manifest, samples)
}

fn sample(key: &str, fields: &[(&str, &[u8])]) -> (String, Vec<(String, Vec<u8>)>) {
    (
        key.to_owned(),
        fields
            .iter()
            .map(|(ext, data)| ((*ext).to_owned(), data.to_vec()))
            .collect(),
    )
}

#[tokio::test]
async fn a_text_only_webdataset_directory_packs_and_reads_back_byte_for_byte() {
    let dir = tempfile::tempdir().expect("tempdir");
    let src = dir.path().join("src");
    write(&src.join("0001.txt"), "a caption, with ünïcode".as_bytes());
    write(&src.join("0001.json"), br#"{"id": 1}"#);
    write(&src.join("0003.meta.json"), br#"{"id": 3, "meta": true}"#);
    write(&src.join("0003.txt"), b"");
    write(&src.join("part/0002.json"), br#"{"id": 2}"#);
    write(&src.join("part/0002.txt"), b"third");
    write(&src.join(".hidden.txt"), b"never packed");
    let options = PackOptions {
        max_samples: 2,
        compression: Compression::ZSTD,
        ..PackOptions::default()
    };
    let summary = pack_to(&src, &dir.path().join("ds"), &options)
        .await
        .expect("pack");
    assert_eq!(summary.format, SourceFormat::WebDataset);
    assert_eq!(
        (summary.samples, summary.shards, summary.classes),
        (3, 2, 0)
    );
    let (manifest, samples) = read_back(&dir.path().join("ds"));
    assert_eq!(manifest.fields, ["json", "meta.json", "txt"]);
    assert!(manifest.classes.is_empty());
    assert_eq!(
        samples,
        vec![
            sample(
                "0001",
                &[
                    ("json", br#"{"id": 1}"#),
                    ("txt", "a caption, with ünïcode".as_bytes())
                ]
            ),
            sample(
                "0003",
                &[("meta.json", br#"{"id": 3, "meta": true}"#), ("txt", b"")]
            ),
            sample("part/0002", &[("json", br#"{"id": 2}"#), ("txt", b"third")]),
        ]
    );
    let url = dir.path().join("ds").display().to_string();
    let dataset = Dataset::open(&url, &StoreOptions::default())
        .await
        .expect("the loader opens a dataset without images");
    assert_eq!(dataset.manifest.samples, 3);
}

#[tokio::test]
async fn an_npy_only_dataset_packs_with_its_cls_and_shards_planned_from_every_field() {
    let dir = tempfile::tempdir().expect("tempdir");
    let src = dir.path().join("src");
    let npy = |i: u8| {
        let mut bytes = b"\x93NUMPY\x01\x00".to_vec();
        bytes.extend(vec![i; 1000]);
        bytes
    };
    for i in 0..9u8 {
        write(&src.join(format!("tokens/{i:04}.npy")), &npy(i));
        write(
            &src.join(format!("tokens/{i:04}.cls")),
            format!("{}\n", i % 3).as_bytes(),
        );
    }
    // Three samples of two entries each (a 1008-byte npy: 512 + 1024; a cls:
    // 512 + 512) fill a shard; counting the npy alone would fit five.
    let options = PackOptions {
        max_bytes: 3 * (1536 + 1024),
        ..PackOptions::default()
    };
    let summary = pack_to(&src, &dir.path().join("ds"), &options)
        .await
        .expect("pack");
    assert_eq!(
        (summary.samples, summary.shards, summary.classes),
        (9, 3, 0)
    );
    let (manifest, samples) = read_back(&dir.path().join("ds"));
    assert_eq!(manifest.fields, ["cls", "npy"]);
    assert!(manifest.shards.iter().all(|s| s.samples == 3));
    for (i, (key, fields)) in samples.iter().enumerate() {
        assert_eq!(key, &format!("tokens/{i:04}"));
        let i = i as u8;
        assert_eq!(
            fields,
            &vec![
                ("cls".to_owned(), format!("{}\n", i % 3).into_bytes()),
                ("npy".to_owned(), npy(i)),
            ]
        );
    }
}

#[tokio::test]
async fn a_csv_listing_with_quoted_captions_packs_labels_captions_and_classes() {
    let dir = tempfile::tempdir().expect("tempdir");
    write(&dir.path().join("imgs/a.jpg"), JPEG);
    // A PNG named .jpg is a `png` field: the bytes decide.
    write(&dir.path().join("imgs/b.jpg"), PNG);
    write(&dir.path().join("imgs/c.JPEG"), JPEG);
    write(&dir.path().join("elsewhere/d.npy"), b"\x93NUMPY");
    let absolute = dir.path().join("elsewhere/d.npy");
    let listing = dir.path().join("train.csv");
    let text = format!(
        "path,label,caption\r\n\
         imgs/a.jpg,dog,\"a dog, \"\"very\"\" good\non two lines\"\r\n\
         imgs/b.jpg,cat,plain\r\n\
         \r\n\
         imgs/c.JPEG,,\"\"\r\n\
         \"{}\",dog,\"ünïcode, too\"\r\n",
        absolute.display()
    );
    write(&listing, text.as_bytes());
    let summary = pack_to(&listing, &dir.path().join("ds"), &PackOptions::default())
        .await
        .expect("pack");
    assert_eq!(summary.format, SourceFormat::Listing);
    assert_eq!((summary.samples, summary.classes), (4, 2));
    let (manifest, samples) = read_back(&dir.path().join("ds"));
    assert_eq!(manifest.classes, ["cat", "dog"]);
    assert_eq!(manifest.fields, ["cls", "jpg", "npy", "png", "txt"]);
    assert_eq!(
        samples,
        vec![
            sample(
                "00000000",
                &[
                    ("cls", b"1"),
                    ("jpg", JPEG),
                    ("txt", b"a dog, \"very\" good\non two lines")
                ]
            ),
            sample(
                "00000001",
                &[("cls", b"0"), ("png", PNG), ("txt", b"plain")]
            ),
            sample("00000002", &[("jpg", JPEG), ("txt", b"")]),
            sample(
                "00000003",
                &[
                    ("cls", b"1"),
                    ("npy", b"\x93NUMPY"),
                    ("txt", "ünïcode, too".as_bytes())
                ]
            ),
        ]
    );
}

#[tokio::test]
async fn integer_labels_are_class_indices_so_a_split_missing_a_class_keeps_its_numbering() {
    let dir = tempfile::tempdir().expect("tempdir");
    write(&dir.path().join("a.jpg"), JPEG);
    let listing = dir.path().join("val.csv");
    write(&listing, b"path,label\na.jpg,5\na.jpg,2\na.jpg,0\n");
    let summary = pack_to(&listing, &dir.path().join("ds"), &PackOptions::default())
        .await
        .expect("pack");
    assert_eq!(summary.classes, 6);
    let (manifest, samples) = read_back(&dir.path().join("ds"));
    assert_eq!(manifest.classes, ["0", "1", "2", "3", "4", "5"]);
    let labels: Vec<&[u8]> = samples.iter().map(|(_, f)| &f[0].1[..]).collect();
    assert_eq!(labels, [&b"5"[..], b"2", b"0"]);
}

#[test]
fn labels_that_are_not_all_integers_are_names_sorted_by_their_bytes() {
    let row = |line: usize, label: Option<&str>| Row {
        line,
        path: "x.jpg".into(),
        label: label.map(str::to_owned),
        caption: None,
    };
    let rows = [
        row(2, Some("10")),
        row(3, Some("2")),
        row(4, Some("x")),
        row(5, None),
        row(6, Some("2")),
    ];
    let (names, index) = classes(Path::new("l.csv"), &rows).expect("classes");
    assert_eq!(names, ["10", "2", "x"]);
    assert_eq!((index["10"], index["2"], index["x"]), (0, 1, 2));
    // A leading zero makes a label a name, not an index.
    let (names, _) =
        classes(Path::new("l.csv"), &[row(2, Some("01")), row(3, Some("1"))]).expect("classes");
    assert_eq!(names, ["01", "1"]);
    let error = classes(Path::new("l.csv"), &[row(7, Some("2000000"))]).expect_err("too big");
    assert!(error.to_string().contains("l.csv line 7"), "{error}");
}

#[tokio::test]
async fn a_jsonl_listing_packs_paths_labels_and_captions() {
    let dir = tempfile::tempdir().expect("tempdir");
    write(&dir.path().join("d/a.npy"), b"\x93NUMPY a");
    write(&dir.path().join("d/b.png"), PNG);
    let listing = dir.path().join("d/pairs.jsonl");
    write(
        &listing,
        "{\"path\": \"a.npy\", \"label\": 1, \"caption\": \"snow ☃\"}\n\
         \n\
         {\"path\": \"b.png\", \"label\": null}\n\
         {\"path\": \"b.png\", \"label\": \"0\", \"caption\": null}\n"
            .as_bytes(),
    );
    let summary = pack_to(&listing, &dir.path().join("ds"), &PackOptions::default())
        .await
        .expect("pack");
    assert_eq!((summary.samples, summary.classes), (3, 2));
    let (manifest, samples) = read_back(&dir.path().join("ds"));
    assert_eq!(manifest.classes, ["0", "1"]);
    assert_eq!(manifest.fields, ["cls", "npy", "png", "txt"]);
    assert_eq!(
        samples,
        vec![
            sample(
                "00000000",
                &[
                    ("cls", b"1"),
                    ("npy", b"\x93NUMPY a"),
                    ("txt", "snow ☃".as_bytes())
                ]
            ),
            sample("00000001", &[("png", PNG)]),
            sample("00000002", &[("cls", b"0"), ("png", PNG)]),
        ]
    );
}

/// Packs `src` as `format` and returns the error.
async fn pack_error(src: &Path, format: SourceFormat) -> String {
    let dest = src.with_extension("out");
    let options = PackOptions {
        format,
        ..PackOptions::default()
    };
    let error = pack_to(src, &dest, &options)
        .await
        .expect_err("must fail")
        .to_string();
    assert!(
        !dest.join("manifest.json").exists(),
        "{error}: a manifest was written"
    );
    error
}

#[tokio::test]
async fn a_listed_file_that_is_missing_is_named_with_its_listing_line() {
    let dir = tempfile::tempdir().expect("tempdir");
    write(&dir.path().join("a.jpg"), JPEG);
    let listing = dir.path().join("l.csv");
    write(&listing, b"path,label\na.jpg,x\n\"gone\nb.jpg\",y\n");
    let error = pack_error(&listing, SourceFormat::Auto).await;
    assert!(error.contains("l.csv line 3"), "{error}");
    assert!(error.contains("gone\nb.jpg"), "{error}");
}

#[tokio::test]
async fn malformed_listings_are_errors_naming_the_listing_and_line() {
    let dir = tempfile::tempdir().expect("tempdir");
    write(&dir.path().join("a.jpg"), JPEG);
    for (name, text, words) in [
        (
            "quote.csv",
            &b"path\na.jpg\n\"a.jpg\n"[..],
            "line 3: a quoted field is never closed",
        ),
        (
            "stray.csv",
            b"path,label\na.jpg,x\"y\n",
            "line 2: a `\"` inside an unquoted field",
        ),
        (
            "count.csv",
            b"path,label\na.jpg\n",
            "line 2: 1 fields, the header has 2",
        ),
        (
            "header.csv",
            b"path,class\na.jpg,x\n",
            "line 1: unknown column `class`",
        ),
        (
            "nopath.csv",
            b"label\nx\n",
            "line 1: the header has no `path` column",
        ),
        ("empty.csv", b"path,label\n", "a listing without rows"),
        (
            "key.jsonl",
            b"{\"path\": \"a.jpg\"}\n{\"path\": \"a.jpg\", \"lable\": 1}\n",
            "line 2: not a listing object",
        ),
        (
            "float.jsonl",
            b"{\"path\": \"a.jpg\", \"label\": 1.5}\n",
            "line 1: not a listing object",
        ),
        ("blank.csv", b"path\n\n", "a listing without rows"),
    ] {
        let listing = dir.path().join(name);
        write(&listing, text);
        let error = pack_error(&listing, SourceFormat::Auto).await;
        assert!(error.contains(name), "{name}: {error}");
        assert!(error.contains(words), "{name}: {error}");
    }
}

#[tokio::test]
async fn a_cls_file_that_is_not_an_integer_is_named() {
    let dir = tempfile::tempdir().expect("tempdir");
    let src = dir.path().join("src");
    write(&src.join("0001.txt"), b"one");
    write(&src.join("0001.cls"), b"1");
    write(&src.join("0002.txt"), b"two");
    write(&src.join("0002.cls"), b"two");
    let error = pack_error(&src, SourceFormat::WebDataset).await;
    assert!(error.contains("0002.cls"), "{error}");
    assert!(error.contains("decimal integer"), "{error}");
}

#[tokio::test]
async fn two_images_that_would_share_a_key_are_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let src = dir.path().join("src");
    write(&src.join("a/x.y.jpg"), JPEG);
    write(&src.join("a/x_y.jpg"), JPEG);
    let error = pack_error(&src, SourceFormat::ImageFolder).await;
    assert!(error.contains("would both be sample `a/x_y`"), "{error}");
}

#[test]
fn every_source_is_checked_for_duplicate_keys_and_field_order() {
    let field = |ext: &str| SourceField {
        ext: ext.into(),
        data: FieldData::Inline(Vec::new()),
        size: 0,
    };
    let source = |samples: Vec<SourceSample>| VecSource {
        format: SourceFormat::WebDataset,
        classes: Vec::new(),
        samples,
        skipped: 0,
    };
    let one = |key: &str, exts: &[&str]| SourceSample {
        key: key.into(),
        fields: exts.iter().map(|ext| field(ext)).collect(),
    };
    let src = Path::new("src");
    let ok = source(vec![one("a", &["cls", "txt"]), one("b", &["txt"])]);
    ok.check(src).expect("valid");
    for (bad, words) in [
        (
            source(vec![one("a", &["txt"]), one("a", &["json"])]),
            "two samples have key `a`",
        ),
        (
            source(vec![one("a", &["txt", "cls"])]),
            "out of order or twice",
        ),
        (
            source(vec![one("a", &["txt", "txt"])]),
            "out of order or twice",
        ),
        (source(vec![one("a.b", &["txt"])]), "a `.` in the file name"),
        (source(vec![one("a", &[])]), "has 0 fields"),
        (source(vec![one("a", &["t\nxt"])]), "has field `t\\nxt`"),
        (source(Vec::new()), "no samples to pack"),
    ] {
        let error = bad.check(src).expect_err(words).to_string();
        assert!(error.contains(words), "{error}");
    }
}

#[tokio::test]
async fn empty_and_ambiguous_sources_are_refused_by_name() {
    let dir = tempfile::tempdir().expect("tempdir");
    let empty = dir.path().join("empty");
    std::fs::create_dir_all(&empty).expect("mkdir");
    let error = pack_error(&empty, SourceFormat::Auto).await;
    assert!(
        error.contains("empty") && error.contains("empty directory"),
        "{error}"
    );

    let mixed = dir.path().join("mixed");
    write(&mixed.join("cat/1.jpg"), JPEG);
    write(&mixed.join("labels.csv"), b"path\n");
    let error = pack_error(&mixed, SourceFormat::Auto).await;
    assert!(
        error.contains("mixed") && error.contains("ambiguous"),
        "{error}"
    );
    assert!(error.contains("--format"), "{error}");

    let file = dir.path().join("notes.txt");
    write(&file, b"hello");
    let error = pack_error(&file, SourceFormat::Auto).await;
    assert!(
        error.contains("notes.txt") && error.contains("not a .csv or .jsonl"),
        "{error}"
    );

    // Only files without an extension: no samples.
    let bare = dir.path().join("bare");
    write(&bare.join("README"), b"hello");
    let error = pack_error(&bare, SourceFormat::Auto).await;
    assert!(
        error.contains("bare") && error.contains("no samples"),
        "{error}"
    );
}

#[test]
fn auto_tells_imagefolder_trees_from_webdataset_directories() {
    let dir = tempfile::tempdir().expect("tempdir");
    let folder = dir.path().join("folder");
    write(&folder.join("cat/1.jpg"), JPEG);
    write(&folder.join("dog/2.PNG"), PNG);
    write(&folder.join("dog/notes.txt"), b"a stray file, skipped");
    assert_eq!(detect(&folder).expect("detect"), SourceFormat::ImageFolder);

    // An image sharing its key with another file is a WebDataset sample.
    let wds = dir.path().join("wds");
    write(&wds.join("part0/0001.jpg"), JPEG);
    write(&wds.join("part0/0001.cls"), b"3");
    assert_eq!(detect(&wds).expect("detect"), SourceFormat::WebDataset);

    let flat = dir.path().join("flat");
    write(&flat.join("0001.jpg"), JPEG);
    assert_eq!(detect(&flat).expect("detect"), SourceFormat::WebDataset);

    let text = dir.path().join("text");
    write(&text.join("a/0001.txt"), b"no images at all");
    assert_eq!(detect(&text).expect("detect"), SourceFormat::WebDataset);

    for name in ["l.csv", "l.JSONL", "l.ndjson"] {
        write(&dir.path().join(name), b"");
        assert_eq!(
            detect(&dir.path().join(name)).expect(name),
            SourceFormat::Listing
        );
    }
}
