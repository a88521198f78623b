//! Datasets packed for tests: tiny ones for a coordinator (which reads only
//! the manifest), image folders packed locally or into S3, and what tests
//! compute from a manifest.

use std::path::Path;
use std::sync::Arc;

use tributary_common::manifest::Manifest;
use tributary_common::plan::span::SpanSet;
use tributary_tools::pack::{pack, PackOptions};
use tributary_tools::progress::NoProgress;
use tributary_worker::{DecodeConfig, LoaderConfig, Location, PlanConfig, StoreOptions};
use tributary_worker::{Size, Transform};

use crate::cli::{tributary_ok, Scratch};
use crate::s3::S3Server;

/// Packs the image folder `src` into a new local dataset at `dest` with
/// `options`; returns its location.
pub async fn pack_local(src: &Path, dest: &Path, options: &PackOptions) -> Location {
    let location = Location::open(&dest.display().to_string(), &StoreOptions::default(), true)
        .expect("open the dataset location");
    pack(src, &location, options, Arc::new(NoProgress))
        .await
        .expect("pack");
    location
}

/// Synthesises `images` images of 4 classes (`seed`) under `dir/src` and
/// packs them into shards of `per_shard` at `dir/ds`; returns its URL.
pub async fn packed_images(dir: &Path, images: usize, per_shard: u32, seed: u64) -> String {
    let src = dir.join("src");
    let options = tributary_tools::synth::SynthOptions {
        images,
        classes: 4,
        seed,
    };
    tributary_tools::synth::write_image_folder(&src, &options, &|_| {}).expect("synth");
    let options = PackOptions {
        max_samples: per_shard,
        ..PackOptions::default()
    };
    pack_local(&src, &dir.join("ds"), &options).await;
    dir.join("ds").display().to_string()
}

/// Packs a dataset of `samples` tiny files (not images: a coordinator reads
/// only the manifest) into shards of `per_shard` under `dir`; returns its URL.
pub async fn tiny_dataset(dir: &Path, samples: u32, per_shard: u32) -> String {
    let src = dir.join("src");
    for i in 0..samples {
        let class = src.join(format!("c{}", i % 8));
        std::fs::create_dir_all(&class).expect("mkdir");
        std::fs::write(class.join(format!("{i:08}.jpg")), i.to_le_bytes()).expect("write");
    }
    let dest = dir.join("ds");
    let options = PackOptions {
        max_samples: per_shard,
        ..PackOptions::default()
    };
    pack_local(&src, &dest, &options).await;
    dest.display().to_string()
}

/// An S3 server holding a dataset of synthesized images, with the scratch
/// directory it was made in.
#[derive(Debug)]
pub struct S3Dataset {
    pub s3: S3Server,
    pub scratch: Scratch,
    /// `s3://data/ds`
    pub url: String,
    pub manifest: Manifest,
}

impl S3Dataset {
    /// Starts an S3 server, synthesizes `images` small images (4 classes)
    /// with the CLI and packs them into `s3://data/ds` in shards of
    /// `per_shard`.
    pub fn start(images: usize, per_shard: u32) -> Self {
        let s3 = S3Server::start();
        let scratch = Scratch::new();
        let src = scratch.synth("images", images, 4);
        s3.create_bucket("data");
        let url = "s3://data/ds".to_owned();
        let per_shard = per_shard.to_string();
        tributary_ok(
            &["pack", &src, &url, "--max-samples", &per_shard],
            &s3.env(),
        );
        // Packing is deterministic: a local copy has the same manifest.
        let local = scratch.path("local");
        tributary_ok(&["pack", &src, &local, "--max-samples", &per_shard], &[]);
        let manifest =
            Manifest::from_json(&std::fs::read(format!("{local}/manifest.json")).expect("read"))
                .expect("manifest");
        Self {
            s3,
            scratch,
            url,
            manifest,
        }
    }

    /// Packs another `images` synthetic images into
    /// `s3://data/NAME` beside the first dataset: its URL and manifest.
    pub fn another(&self, name: &str, images: usize, per_shard: u32) -> (String, Manifest) {
        let src = self.scratch.synth(&format!("images-{name}"), images, 4);
        let url = format!("s3://data/{name}");
        let per_shard = per_shard.to_string();
        tributary_ok(
            &["pack", &src, &url, "--max-samples", &per_shard],
            &self.s3.env(),
        );
        let local = self.scratch.path(&format!("local-{name}"));
        tributary_ok(&["pack", &src, &local, "--max-samples", &per_shard], &[]);
        let manifest =
            Manifest::from_json(&std::fs::read(format!("{local}/manifest.json")).expect("read"))
                .expect("manifest");
        (url, manifest)
    }

    /// The S3 server's endpoint.
    pub fn endpoint(&self) -> &str {
        &self.s3.endpoint
    }
}

/// The ids of the samples of `set`, in its order.
pub fn sample_ids(manifest: &Manifest, set: &SpanSet) -> Vec<u64> {
    set.samples()
        .map(|(shard, i)| manifest.sample_id(shard as usize, i))
        .collect()
}

/// Every shard's sample count, in manifest order.
pub fn shard_counts(manifest: &Manifest) -> Vec<u32> {
    manifest.shards.iter().map(|s| s.samples).collect()
}

/// A cheap loader for tests that count samples: one decode thread,
/// 16-pixel crops.
pub fn small_loader_config() -> LoaderConfig {
    let transform = Transform {
        size: Size::square(16),
        ..Transform::default()
    };
    LoaderConfig {
        plan: PlanConfig::default(),
        decode: DecodeConfig {
            decode_threads: 1,
            transform,
            ..DecodeConfig::default()
        },
    }
}
