//! Parquet datasets for the end-to-end tests: synthesized images written
//! as Hugging Face-style Parquet files by `pyarrow`
//! (`tests/python/make_parquet.py`), indexed with `tributary index`, and
//! served by a real S3-compatible server.

use std::path::Path;

use tributary_common::manifest::{Manifest, MANIFEST_NAME};
use tributary_io::Location;

use crate::cli::{python, tributary_ok, Scratch};
use crate::s3::S3Server;

/// Writes `images` synthesized images (4 classes) as Parquet files of
/// `per_file` rows in row groups of `per_group` into `dir`, and indexes
/// them: the manifest, and what `make_parquet.py` reports (per file: its
/// size and the byte ranges of its unprojected `blob` column).
pub fn write_parquet(
    scratch: &Scratch,
    dir: &str,
    images: usize,
    per_file: usize,
    per_group: usize,
) -> (Manifest, serde_json::Value) {
    let src = scratch.synth("images", images, 4);
    let report = python(
        "make_parquet.py",
        &[&src, dir, &per_file.to_string(), &per_group.to_string()],
    );
    let report: serde_json::Value = serde_json::from_str(&report).expect("a JSON report");
    let out = tributary_ok(&["index", dir], &[]);
    assert!(out.contains("Parquet files"), "{out}");
    let manifest = std::fs::read(Path::new(dir).join(MANIFEST_NAME)).expect("read manifest");
    let manifest = Manifest::from_json(&manifest).expect("parse manifest");
    (manifest, report)
}

/// An S3 server holding a Parquet dataset at `s3://data/pq`.
#[derive(Debug)]
pub struct S3Parquet {
    pub s3: S3Server,
    pub scratch: Scratch,
    /// `s3://data/pq`
    pub url: String,
    pub manifest: Manifest,
}

impl S3Parquet {
    /// Starts an S3 server and uploads a Parquet dataset of `images` rows
    /// ([`write_parquet`]) with its manifest to `s3://data/pq`.
    pub fn start(images: usize, per_file: usize, per_group: usize) -> Self {
        let scratch = Scratch::new();
        let dir = scratch.path("pq");
        let (manifest, _) = write_parquet(&scratch, &dir, images, per_file, per_group);
        let s3 = S3Server::start();
        s3.create_bucket("data");
        let url = "s3://data/pq".to_owned();
        let runtime = tokio::runtime::Runtime::new().expect("runtime");
        runtime.block_on(async {
            let location = Location::open(&url, &s3.options(), true).expect("location");
            for entry in std::fs::read_dir(&dir).expect("list") {
                let path = entry.expect("entry").path();
                let name = path
                    .file_name()
                    .expect("name")
                    .to_string_lossy()
                    .into_owned();
                let data = std::fs::read(&path).expect("read");
                location.put(&name, data.into()).await.expect("upload");
            }
        });
        Self {
            s3,
            scratch,
            url,
            manifest,
        }
    }

    pub fn endpoint(&self) -> &str {
        &self.s3.endpoint
    }
}
