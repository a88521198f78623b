//! Manifest version 1 (every chunk inline) against version 2 (a binary
//! index per shard) for an ImageNet-sized dataset, measured in the same run.
//!
//! Builds one real uncompressed shard of `--per-shard` samples (small
//! synthesized JPEGs, one chunk per sample as in an ImageNet pack), links
//! it under `--shards` names (hard links: every shard is real and readable,
//! the disk holds one), and writes the same dataset's manifest both ways.
//! Then prints, for each version: the manifest's bytes (and the indexes'),
//! the median time to parse and validate it, the coordinator's job-open
//! time (`open_dataset`: read, parse, digest), and the time to first batch
//! (open the dataset, build a `Loader`, take its first batch), the two
//! versions measured alternately.
//!
//! ```text
//! cargo bench -p tributary-tests --bench manifest_index
//! cargo bench -p tributary-tests --bench manifest_index -- --shards 100 --per-shard 1281 --repeats 3
//! ```

#![allow(clippy::print_stdout, reason = "a benchmark prints its figures")]

use std::path::Path;
use std::time::{Duration, Instant};

use tributary_common::format::shard::ShardWriter;
use tributary_common::ids::JobId;
use tributary_common::manifest::{Compression, Manifest, ShardMeta, MANIFEST_NAME};
use tributary_io::{write_manifest, ManifestDraft, ManifestVersion};
use tributary_tools::synth;
use tributary_worker::{
    Dataset, DecodeConfig, Loader, LoaderConfig, Location, PlanConfig, Size, StoreOptions,
    Transform,
};

struct Args {
    shards: usize,
    per_shard: u32,
    repeats: usize,
}

fn parse_args() -> Args {
    let mut args = Args {
        shards: 1000,
        per_shard: 1281,
        repeats: 5,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || -> usize {
            it.next()
                .and_then(|v| v.parse().ok())
                .unwrap_or_else(|| panic!("{flag} needs a positive number"))
        };
        match flag.as_str() {
            "--shards" => args.shards = value().max(1),
            "--per-shard" => args.per_shard = value().clamp(1, 1 << 20) as u32,
            "--repeats" => args.repeats = value().max(1),
            // `cargo bench` passes `--bench`.
            _ => {}
        }
    }
    args
}

fn median(mut times: Vec<Duration>) -> Duration {
    times.sort();
    times[times.len() / 2]
}

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1e3)
}

/// One shard of `samples` small JPEGs (16 distinct ones, cycled).
fn shard(samples: u32) -> (Vec<u8>, ShardMeta) {
    let images: Vec<synth::SynthImage> = (0..16)
        .map(|i| synth::render(7, i, 10).expect("render"))
        .collect();
    let mut writer = ShardWriter::new("base.tar", Compression::NONE);
    for i in 0..samples as usize {
        let image = &images[i % images.len()];
        let cls = image.class.to_string();
        writer
            .push(
                &format!("c{}/{i:07}", image.class),
                &[("cls", cls.as_bytes()), ("jpg", &image.bytes)],
            )
            .expect("push");
    }
    let shard = writer.finish().expect("finish");
    (shard.data, shard.meta)
}

/// `base` linked as `shards` shards into `dir`; their manifest entries.
fn link_shards(base: &Path, dir: &Path, meta: &ShardMeta, shards: usize) -> Vec<ShardMeta> {
    std::fs::create_dir_all(dir).expect("mkdir");
    (0..shards)
        .map(|s| {
            let name = format!("shard-{s:06}.tar");
            std::fs::hard_link(base, dir.join(&name)).expect("hard link");
            ShardMeta {
                name,
                ..meta.clone()
            }
        })
        .collect()
}

async fn time_to_first_batch(url: &str) -> Duration {
    let started = Instant::now();
    let dataset = Dataset::open(url, &StoreOptions::default())
        .await
        .expect("open");
    let config = LoaderConfig {
        plan: PlanConfig::default(),
        decode: DecodeConfig {
            decode_threads: 2,
            transform: Transform {
                size: Size::square(64),
                ..Transform::default()
            },
            ..DecodeConfig::default()
        },
    };
    let mut loader = Loader::builder(dataset)
        .config(config)
        .build()
        .await
        .expect("loader");
    let batch = loader.next().await.expect("a batch").expect("read");
    assert!(!batch.is_empty());
    started.elapsed()
}

async fn job_open(url: &str) -> Duration {
    let config =
        tributary_coordinator::config::job_spec(Some(tributary_common::proto::v1::JobConfig {
            manifest_url: url.to_owned(),
            batch_size: 1,
            epochs: 1,
            ..Default::default()
        }))
        .expect("config");
    let started = Instant::now();
    tributary_coordinator::datasets::Manifests::new(StoreOptions::default(), Default::default())
        .open(&JobId::from("bench"), &config)
        .await
        .expect("open the dataset");
    started.elapsed()
}

#[tokio::main]
async fn main() {
    let args = parse_args();
    let tmp = tempfile::tempdir().expect("tempdir");
    let started = Instant::now();
    let (data, meta) = shard(args.per_shard);
    let base = tmp.path().join("base.tar");
    std::fs::write(&base, &data).expect("write shard");
    let (v1_dir, v2_dir) = (tmp.path().join("v1"), tmp.path().join("v2"));
    let draft = |dir: &Path| ManifestDraft {
        compression: meta_compression(),
        fields: vec!["cls".into(), "jpg".into()],
        classes: (0..10).map(|c| format!("class{c}")).collect(),
        shards: link_shards(&base, dir, &meta, args.shards),
    };
    let v1 = write_manifest(
        &local(&v1_dir),
        draft(&v1_dir),
        ManifestVersion::Inline,
        None,
    )
    .await
    .expect("v1");
    let v2 = write_manifest(
        &local(&v2_dir),
        draft(&v2_dir),
        ManifestVersion::Indexed,
        None,
    )
    .await
    .expect("v2");
    let v1_json = std::fs::read(v1_dir.join(MANIFEST_NAME)).expect("v1 manifest");
    let v2_json = std::fs::read(v2_dir.join(MANIFEST_NAME)).expect("v2 manifest");
    let index_bytes: u64 = v2
        .shards
        .iter()
        .filter_map(|s| s.index())
        .map(|i| i.bytes)
        .sum();
    println!(
        "dataset: {} shards x {} samples = {} samples, shard {:.1} MB (linked), built in {:.1} s",
        args.shards,
        args.per_shard,
        v1.samples,
        data.len() as f64 / 1e6,
        started.elapsed().as_secs_f64()
    );

    let parse = |json: &[u8]| {
        median(
            (0..args.repeats)
                .map(|_| {
                    let t = Instant::now();
                    std::hint::black_box(Manifest::from_json(json).expect("parse"));
                    t.elapsed()
                })
                .collect(),
        )
    };
    let (parse_v1, parse_v2) = (parse(&v1_json), parse(&v2_json));

    let (url1, url2) = (v1_dir.display().to_string(), v2_dir.display().to_string());
    let (mut open1, mut open2, mut first1, mut first2) = (vec![], vec![], vec![], vec![]);
    for _ in 0..args.repeats {
        open1.push(job_open(&url1).await);
        open2.push(job_open(&url2).await);
        first1.push(time_to_first_batch(&url1).await);
        first2.push(time_to_first_batch(&url2).await);
    }
    println!("                      v1 (inline)     v2 (indexes)");
    println!(
        "manifest bytes        {:<15} {} (+ {} in {} index objects)",
        v1_json.len(),
        v2_json.len(),
        index_bytes,
        args.shards
    );
    println!(
        "parse + validate      {:<15} {}",
        ms(parse_v1),
        ms(parse_v2)
    );
    println!(
        "coordinator job open  {:<15} {}",
        ms(median(open1)),
        ms(median(open2))
    );
    println!(
        "time to first batch   {:<15} {}",
        ms(median(first1)),
        ms(median(first2))
    );
    println!("(medians of {} runs, alternating v1 and v2)", args.repeats);
}

fn meta_compression() -> tributary_common::manifest::CompressionKind {
    Compression::NONE.kind
}

fn local(dir: &Path) -> Location {
    Location::open(&dir.display().to_string(), &StoreOptions::default(), true).expect("location")
}
