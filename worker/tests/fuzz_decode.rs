//! Fuzz test of the image decode path the loader runs on every sample
//! (`BatchDecoder::decode`: libjpeg-turbo for JPEG, the image crate for PNG
//! and what turbo refuses, then crop, resize and normalise). Mutated JPEGs
//! and PNGs (bit flips, truncation, splices, huge dimensions) and random
//! bytes must give an error, never a panic or an allocation over 1 GiB. The
//! knobs are those of `common/tests/fuzz_harness/mod.rs`
//! (`TRIBUTARY_FUZZ_SECS`, `_CASES`, `_SEED`, `_CASE`).

#![allow(unsafe_code)] // the capped allocator of the harness, and only it

#[path = "../../common/tests/fuzz_harness/mod.rs"]
mod harness;

use std::sync::atomic::Ordering;

use bytes::Bytes;
use image::codecs::png::PngEncoder;
use image::{ExtendedColorType, ImageEncoder};
use proptest::prelude::*;
use std::sync::Arc;
use tributary_common::sample::{Field, Sample};
use tributary_worker::pipeline::cut::SampleBatch;
use tributary_worker::{Fields, Preset, Size, Transform};

use object_store::memory::InMemory;
use tributary_common::format::shard::ShardWriter;
use tributary_common::manifest::Compression;
use tributary_common::manifest::Manifest;
use tributary_worker::pipeline::decode::pixels::{DecodeLimits, PixelBudget};
use tributary_worker::pipeline::decode::{BatchDecoder, DecodeSetup};
use tributary_worker::{Dataset, Location, OnError};

use harness::{fuzz, inputs, CappedAlloc, ALLOCATION_CAP};

#[global_allocator]
static ALLOC: CappedAlloc = CappedAlloc;

/// The largest single allocation while decoding a fuzzed image: above the
/// image crate's own 512 MiB default limit, far below a 65535 x 65535 image.
const CAP: usize = 1 << 30;

fn pixels(width: u32, height: u32) -> Vec<u8> {
    (0..width * height * 3)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 24) as u8)
        .collect()
}

fn jpeg(width: u16, height: u16) -> Vec<u8> {
    let mut out = Vec::new();
    jpeg_encoder::Encoder::new(&mut out, 85)
        .encode(
            &pixels(u32::from(width), u32::from(height)),
            width,
            height,
            jpeg_encoder::ColorType::Rgb,
        )
        .expect("encode jpeg");
    out
}

fn png(width: u32, height: u32) -> Vec<u8> {
    let mut out = Vec::new();
    PngEncoder::new(&mut out)
        .write_image(
            &pixels(width, height),
            width,
            height,
            ExtendedColorType::Rgb8,
        )
        .expect("encode png");
    out
}

/// CRC-32 (IEEE) of PNG chunks.
fn png_crc(bytes: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &b in bytes {
        crc ^= u32::from(b);
        for _ in 0..8 {
            crc = if crc & 1 == 1 {
                (crc >> 1) ^ 0xedb8_8320
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

/// `image` with the dimensions in its header replaced (JPEG SOF0, PNG IHDR
/// with its CRC fixed): the image claims far more pixels than it holds.
fn claiming(mut image: Vec<u8>, width: u32, height: u32) -> Vec<u8> {
    if image.starts_with(b"\x89PNG") {
        image[16..20].copy_from_slice(&width.to_be_bytes());
        image[20..24].copy_from_slice(&height.to_be_bytes());
        let crc = png_crc(&image[12..29]);
        image[29..33].copy_from_slice(&crc.to_be_bytes());
    } else if let Some(sof) = image.windows(2).position(|w| w == [0xff, 0xc0]) {
        let (w, h) = (width.min(65535) as u16, height.min(65535) as u16);
        image[sof + 5..sof + 7].copy_from_slice(&h.to_be_bytes());
        image[sof + 7..sof + 9].copy_from_slice(&w.to_be_bytes());
    }
    image
}

#[test]
fn fuzz_image_decode_path() {
    let mut seeds = vec![jpeg(48, 40), jpeg(17, 9), png(40, 33), png(5, 64)];
    for (w, h) in [(65535, 65535), (65535, 1), (1, 65535), (20000, 20000)] {
        seeds.push(claiming(jpeg(48, 40), w, h));
        seeds.push(claiming(png(40, 33), w, h));
    }
    ALLOCATION_CAP.store(CAP, Ordering::Relaxed);
    let config = Transform {
        size: Size::square(16),
        ..Transform::default()
    };
    let limits = DecodeLimits::default();
    // Bad samples name their shard: a one-sample shard to name.
    let mut writer = ShardWriter::new("shard-000000.tar", Compression::NONE);
    writer
        .push("k/0", &[("cls", b"1"), ("jpg", &jpeg(8, 8))])
        .expect("push");
    let shard = writer.finish().expect("finish");
    let manifest = Manifest::new(
        Compression::NONE.kind,
        vec!["cls".into(), "jpg".into()],
        Vec::new(),
        vec![shard.meta],
    )
    .expect("manifest");
    let setup = DecodeSetup {
        seed: 7,
        epoch: 0,
        keep_buffers: 2,
        limits,
        budget: Arc::new(PixelBudget::new(limits.max_pixels_in_flight)),
        on_error: OnError::Raise,
        max_batch_bytes: u64::MAX,
        datasets: Dataset::new(
            Location::from_store(Arc::new(InMemory::new()), "", "memory:///"),
            Arc::new(manifest),
        )
        .into(),
    };
    // Every preset: the bytes reach each one's plan and renderer.
    let decoders: Vec<BatchDecoder> = [Preset::Train, Preset::Eval, Preset::Resize, Preset::None]
        .into_iter()
        .map(|preset| {
            let transform = Transform {
                preset,
                keep_aspect: preset == Preset::Resize,
                ..config.clone()
            };
            BatchDecoder::new(&transform, &Fields::default(), setup.clone())
        })
        .collect();
    let strategy = (inputs(seeds, 2048), any::<bool>(), any::<u64>());
    fuzz("image decode", strategy, |(bytes, as_png, id)| {
        let sample = Sample {
            id: *id,
            key: "k/0".into(),
            fields: vec![
                Field {
                    ext: if *as_png { "png" } else { "jpg" }.into(),
                    data: Bytes::copy_from_slice(bytes),
                },
                Field {
                    ext: "cls".into(),
                    data: Bytes::from_static(b"1"),
                },
            ],
        };
        let batch = SampleBatch {
            index: 0,
            samples: vec![sample],
            padded: 0,
        };
        let preset = (*id % 4) as usize;
        if let Ok(decoded) = decoders[preset].decode(&batch) {
            assert_eq!(decoded.batch.len(), 1);
            if preset < 3 {
                assert_eq!(decoded.batch.images().expect("images").1, [1, 3, 16, 16]);
            }
        }
    });
}
