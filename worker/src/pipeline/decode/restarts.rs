//! Skipping the entropy decoding of what a crop leaves out, where the JPEG
//! has restart markers.
//!
//! A baseline JPEG's entropy-coded data is one bit stream: to reach the
//! rows of a crop a decoder must Huffman-decode every row above them, and
//! every column beside them, which is most of a JPEG's decoding time. A
//! restart marker (`RSTn`, every `DRI` MCUs) resets the stream: the data
//! between two markers decodes on its own. `tributary pack` rewrites JPEGs
//! losslessly with markers that cut every MCU row into a few segments (the
//! same DCT coefficients, so the same pixels; see `worker/src/pipeline/decode/restart_markers.rs`).
//! Then a crop needs only the segments it covers: [`sub_jpeg`] copies them,
//! with the header, into a smaller JPEG of its own (its frame's size and
//! the markers' numbers rewritten), and libjpeg-turbo decodes that.
//!
//! Chroma upsampling looks one chroma sample across: a pixel on a part's
//! edge takes its chroma from beyond the edge, which the part does not
//! have (libjpeg-turbo repeats the edge's sample). Only that outermost
//! pixel row or column depends on it, so the part kept reaches two
//! (scaled) pixels past the region the decoder is asked for (the crop and
//! its resampling margin): every pixel the resampler reads is that of a
//! decode of the whole JPEG, bit for bit.
//!
//! Anything but a single-scan baseline (SOF0/SOF1) JPEG whose restart
//! interval divides its MCU rows, with exactly the markers that interval
//! implies, in order, is left to the whole-stream decode.

use std::ops::Range;

/// Zeros after a part's end-of-image marker (see [`sub_jpeg`]): libjpeg-
/// turbo's fast path wants `512 x blocks per MCU` bytes ahead, at most 10
/// blocks.
const TAIL_PADDING: usize = 512 * 10;

/// Where a restart-marked JPEG's parts are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame {
    pub width: u32,
    pub height: u32,
    /// An MCU's size in pixels.
    pub mcu: (u32, u32),
    /// MCUs between restart markers.
    pub interval: u32,
    /// Offset of the frame header's height field (width follows).
    size_at: usize,
    /// Offset of the first entropy-coded byte (after the scan header).
    scan_at: usize,
}

impl Frame {
    /// MCUs per row and rows of MCUs.
    pub fn mcus(&self) -> (u32, u32) {
        (
            self.width.div_ceil(self.mcu.0),
            self.height.div_ceil(self.mcu.1),
        )
    }

    /// Restart segments per MCU row.
    pub fn segments_per_row(&self) -> u32 {
        self.mcus().0 / self.interval
    }
}

/// The big-endian 16-bit value at `at`, if `bytes` hold it.
pub fn u16_at(bytes: &[u8], at: usize) -> Option<u32> {
    Some(u32::from(u16::from_be_bytes([
        *bytes.get(at)?,
        *bytes.get(at + 1)?,
    ])))
}

/// A marker segment of a JPEG's header: its marker, where its body starts,
/// and its length (the two length bytes included, as the format counts).
#[derive(Debug, Clone, Copy)]
pub struct Segment {
    pub marker: u8,
    pub body: usize,
    pub len: usize,
}

/// The marker segments of `jpeg` from its start to its first scan header
/// (`SOS`, the last one given), hopping by their lengths: a few steps, none
/// into the entropy data. Ends early at anything that is not a segment.
pub fn header_segments(jpeg: &[u8]) -> impl Iterator<Item = Segment> + '_ {
    let mut at = jpeg.starts_with(&[0xFF, 0xD8]).then_some(2);
    std::iter::from_fn(move || {
        let mut here = at.take()?;
        // Markers may be preceded by fill bytes (0xFF).
        while jpeg.get(here) == Some(&0xFF) && jpeg.get(here + 1) == Some(&0xFF) {
            here += 1;
        }
        if *jpeg.get(here)? != 0xFF {
            return None;
        }
        let marker = *jpeg.get(here + 1)?;
        let len = u16_at(jpeg, here + 2)? as usize;
        if len < 2 {
            return None;
        }
        if marker != 0xDA {
            at = Some(here + 2 + len);
        }
        Some(Segment {
            marker,
            body: here + 4,
            len,
        })
    })
}

/// Whether `marker` starts a frame (`SOFn`).
pub fn is_frame(marker: u8) -> bool {
    matches!(marker, 0xC0..=0xC3 | 0xC5..=0xC7 | 0xC9..=0xCB | 0xCD..=0xCF)
}

/// The frame of `jpeg` if it is a single-scan baseline JPEG with restart
/// segments that tile its MCU rows; `None` otherwise. Reads the marker
/// segments before the scan only, never the entropy data.
pub fn frame(jpeg: &[u8]) -> Option<Frame> {
    let (mut interval, mut sof) = (0, None);
    for Segment { marker, body, len } in header_segments(jpeg) {
        match marker {
            // Baseline or extended sequential, Huffman-coded.
            0xC0 | 0xC1 => sof = Some((body, *jpeg.get(body)?)),
            // Any other frame type: progressive, lossless, arithmetic.
            m if is_frame(m) => return None,
            0xDD => interval = u16_at(jpeg, body)?,
            0xDA => {
                let (sof_at, precision) = sof?;
                if precision != 8 {
                    return None;
                }
                let components = usize::from(*jpeg.get(sof_at + 5)?);
                // One scan holding every component.
                if components == 0 || usize::from(*jpeg.get(body)?) != components {
                    return None;
                }
                let (mut h, mut v) = (1, 1);
                for c in 0..components {
                    let sampling = *jpeg.get(sof_at + 6 + 3 * c + 1)?;
                    h = h.max(u32::from(sampling >> 4));
                    v = v.max(u32::from(sampling & 15));
                }
                // A single component's scan is not interleaved: its MCU is
                // one block whatever its sampling factors.
                let mcu = if components == 1 {
                    (8, 8)
                } else {
                    (8 * h, 8 * v)
                };
                let (height, width) = (u16_at(jpeg, sof_at + 1)?, u16_at(jpeg, sof_at + 3)?);
                let frame = Frame {
                    width,
                    height,
                    mcu,
                    interval,
                    size_at: sof_at + 1,
                    scan_at: body - 2 + len,
                };
                let tiles = interval > 0
                    && width > 0
                    && height > 0
                    && frame.mcus().0.is_multiple_of(interval)
                    && frame.scan_at < jpeg.len();
                return tiles.then_some(frame);
            }
            _ => {}
        }
    }
    None
}

/// The byte ranges of the restart segments of `frame`'s scan, in order,
/// up to segment `last` (inclusive), or `None` when the entropy data does
/// not hold the markers the frame implies, in order.
fn segments(jpeg: &[u8], frame: &Frame, last: usize) -> Option<Vec<Range<usize>>> {
    let (columns, rows) = frame.mcus();
    let total = (columns * rows).div_ceil(frame.interval) as usize;
    if last >= total {
        return None;
    }
    let mut found = Vec::with_capacity(last + 1);
    let mut start = frame.scan_at;
    for at in memchr::memchr_iter(0xFF, &jpeg[frame.scan_at..]) {
        let at = frame.scan_at + at;
        let next = *jpeg.get(at + 1)?;
        match next {
            // Stuffed 0xFF, or a fill byte before a marker.
            0x00 | 0xFF => continue,
            0xD0..=0xD7 => {
                if usize::from(next - 0xD0) != found.len() % 8 {
                    return None;
                }
                found.push(start..at);
                if found.len() > last {
                    return Some(found);
                }
                start = at + 2;
            }
            // The end of the image ends the last segment.
            0xD9 if found.len() + 1 == total => {
                found.push(start..at);
                return Some(found);
            }
            // A marker where a segment should go on (DNL, a second scan,
            // damage): not a layout to take apart.
            _ => return None,
        }
    }
    None
}

/// A smaller JPEG of the MCU rows `rows` and restart-segment columns
/// `columns` of `jpeg` (laid out as `frame`), written into `out`, and the
/// position of its top-left pixel in the whole image; `None` if the entropy
/// data does not match the frame.
pub fn sub_jpeg(
    jpeg: &[u8],
    frame: &Frame,
    rows: Range<u32>,
    columns: Range<u32>,
    out: &mut Vec<u8>,
) -> Option<(u32, u32)> {
    let per_row = frame.segments_per_row();
    let (mcu_w, mcu_h) = frame.mcu;
    if rows.is_empty() || columns.is_empty() || columns.end > per_row {
        return None;
    }
    let last = ((rows.end - 1) * per_row + columns.end - 1) as usize;
    let found = segments(jpeg, frame, last)?;
    let (x0, y0) = (columns.start * frame.interval * mcu_w, rows.start * mcu_h);
    let width = (frame.width - x0).min((columns.end - columns.start) * frame.interval * mcu_w);
    let height = (frame.height - y0).min((rows.end - rows.start) * mcu_h);
    out.clear();
    out.extend_from_slice(&jpeg[..frame.scan_at]);
    let size = u16::try_from(height).ok()?.to_be_bytes();
    out[frame.size_at..frame.size_at + 2].copy_from_slice(&size);
    let size = u16::try_from(width).ok()?.to_be_bytes();
    out[frame.size_at + 2..frame.size_at + 4].copy_from_slice(&size);
    let mut written = 0u32;
    for row in rows {
        for column in columns.clone() {
            if written > 0 {
                // RST0 follows the first segment, RST1 the second, ...
                out.extend_from_slice(&[0xFF, 0xD0 + ((written - 1) % 8) as u8]);
            }
            let segment = &found[(row * per_row + column) as usize];
            out.extend_from_slice(&jpeg[segment.clone()]);
            written += 1;
        }
    }
    out.extend_from_slice(&[0xFF, 0xD9]);
    // libjpeg-turbo's fast Huffman path needs 512 bytes per block of an MCU
    // still in its buffer: the last few KiB of a JPEG decode on the slow
    // path, a larger share of a part than of a whole image. A decoder
    // stops at the end-of-image marker and never reads what follows.
    out.resize(out.len() + TAIL_PADDING, 0);
    Some((x0, y0))
}

#[cfg(test)]
mod tests {
    use jpeg_encoder::{ColorType, Encoder, SamplingFactor};
    use rand_chacha::ChaCha8Rng;
    use rand_core::{Rng, SeedableRng};

    use super::*;
    use crate::pipeline::decode::jpeg::decode_for;
    use crate::pipeline::decode::render::{render, NormLut, Slot};
    use crate::pipeline::decode::transform::{Dtype, Layout, Plan, Rect, Size, Transform};

    /// Uniform in `lo..hi`.
    fn uniform(rng: &mut ChaCha8Rng, lo: f64, hi: f64) -> f64 {
        lo + (hi - lo) * (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// A noisy `width x height` JPEG (sharp chroma edges everywhere, so an
    /// upsampler that saw other neighbours would show it), restart-marked
    /// every `interval` MCUs (0: none).
    fn jpeg(width: u16, height: u16, sampling: SamplingFactor, interval: u16) -> Vec<u8> {
        let mut rng = ChaCha8Rng::seed_from_u64(u64::from(width) << 16 | u64::from(height));
        let pixels: Vec<u8> = (0..3 * usize::from(width) * usize::from(height))
            .map(|i| {
                ((i / 3 % 7) as u8)
                    .wrapping_mul(31)
                    .wrapping_add((rng.next_u32() % 64) as u8)
            })
            .collect();
        let mut out = Vec::new();
        let mut encoder = Encoder::new(&mut out, 85);
        encoder.set_sampling_factor(sampling);
        encoder.set_restart_interval(interval);
        encoder
            .encode(&pixels, width, height, ColorType::Rgb)
            .expect("encode");
        out
    }

    /// `crop` of `bytes` rendered to `size x size` u8 (bilinear, as the
    /// train preset), at a reduced DCT scale where it allows.
    fn render_crop(bytes: &[u8], crop: Rect, size: u32, flip: bool) -> Vec<u8> {
        let config = Transform {
            size: Size::square(size),
            dtype: Dtype::U8,
            layout: Layout::Nhwc,
            ..Transform::default()
        };
        let lut = NormLut::new(&config);
        let mut out = vec![0u8; config.image_len()];
        let plan = Plan {
            src: crop,
            out: (size, size),
            dst: (0, 0, size, size),
            flip,
        };
        decode_for(
            bytes,
            true,
            |_, _| plan,
            |view, plan| render(view, plan, &config, &lut, Slot::U8(&mut out)),
        )
        .expect("decode");
        out
    }

    #[test]
    fn the_frame_of_a_restart_marked_jpeg_is_read_and_others_are_left_alone() {
        // 4:2:0, 16x16 MCUs: 300 px is 19 columns, not a multiple of 4.
        let marked = frame(&jpeg(160, 120, SamplingFactor::F_2_2, 5)).expect("10 columns, 5 each");
        assert_eq!(
            (marked.mcu, marked.interval, marked.mcus()),
            ((16, 16), 5, (10, 8))
        );
        assert_eq!(marked.segments_per_row(), 2);
        assert_eq!(frame(&jpeg(160, 120, SamplingFactor::F_2_2, 0)), None);
        assert_eq!(frame(&jpeg(304, 120, SamplingFactor::F_2_2, 4)), None);
        let gray = frame(&jpeg(64, 40, SamplingFactor::F_1_1, 8)).expect("4:4:4");
        assert_eq!((gray.mcu, gray.mcus()), ((8, 8), (8, 5)));
        assert_eq!(frame(b"\xFF\xD8\xFF"), None);
    }

    #[test]
    fn a_crops_part_decodes_to_the_very_pixels_of_the_whole_stream() {
        let mut rng = ChaCha8Rng::seed_from_u64(7);
        for (width, height, sampling, interval) in [
            (400, 358, SamplingFactor::F_2_2, 5),
            (333, 250, SamplingFactor::F_2_1, 3),
            (500, 375, SamplingFactor::F_1_1, 7),
            (1000, 700, SamplingFactor::F_2_2, 9),
            (400, 358, SamplingFactor::F_2_2, 1),
            (320, 250, SamplingFactor::F_2_1, 2),
        ] {
            let plain = jpeg(width, height, sampling, 0);
            let marked = jpeg(width, height, sampling, interval);
            assert!(frame(&marked).is_some(), "{width}x{height} / {interval}");
            let (w, h) = (f64::from(width), f64::from(height));
            for i in 0..80 {
                let (cw, ch) = (uniform(&mut rng, 8.0, w), uniform(&mut rng, 8.0, h));
                let mut crop = Rect {
                    x: uniform(&mut rng, 0.0, w - cw),
                    y: uniform(&mut rng, 0.0, h - ch),
                    width: cw,
                    height: ch,
                };
                // Half on whole pixels: a part's edges then fall on every
                // offset from an MCU's edge, the nearest ones included.
                if i % 2 == 1 {
                    crop = Rect {
                        x: crop.x.floor(),
                        y: crop.y.floor(),
                        width: crop.width.floor(),
                        height: crop.height.floor(),
                    };
                }
                let size = [32, 112, 224][(rng.next_u32() % 3) as usize];
                let flip = rng.next_u32() % 2 == 0;
                assert!(
                    render_crop(&marked, crop, size, flip) == render_crop(&plain, crop, size, flip),
                    "{width}x{height}, {crop:?} to {size}: other pixels"
                );
            }
        }
    }

    /// Every pixel of `bytes`, decoded whole by libjpeg-turbo (the
    /// loader's `jpeg::decode_whole` keeps them in its scratch buffer).
    fn whole_pixels(bytes: &[u8]) -> Vec<u8> {
        let mut decoder = crate::pipeline::decode::jpeg::Decompressor::new().expect("decoder");
        let header = decoder.header(bytes).expect("a JPEG");
        let whole = Rect {
            x: 0.0,
            y: 0.0,
            width: f64::from(header.width),
            height: f64::from(header.height),
        };
        let mut pixels = Vec::new();
        let region = decoder
            .decode(bytes, header, whole, 1, 0.0, &mut pixels)
            .expect("decodes");
        assert_eq!((region.width, region.height), (header.width, header.height));
        pixels
    }

    /// The vendored libjpeg-turbo takes its fast Huffman path inside a
    /// restart interval and up to its marker (third_party/README.md):
    /// whatever the interval (1: every MCU is an interval's last), each
    /// subsampling and sizes off the MCU grid decode to the pixels of the
    /// same coefficients without markers.
    #[test]
    fn restart_marked_streams_decode_to_the_pixels_of_unmarked_ones() {
        for sampling in [
            SamplingFactor::F_1_1,
            SamplingFactor::F_2_1,
            SamplingFactor::F_1_2,
            SamplingFactor::F_2_2,
        ] {
            for (width, height) in [(400, 358), (97, 61), (1000, 40)] {
                let plain = whole_pixels(&jpeg(width, height, sampling, 0));
                for interval in [1, 2, 3, 5, 7, 13, 64, 1000] {
                    let marked = jpeg(width, height, sampling, interval);
                    assert!(
                        whole_pixels(&marked) == plain,
                        "{width}x{height}, {sampling:?}, a marker every {interval} MCUs"
                    );
                }
            }
        }
    }

    /// The fast path keeps an MCU that met its interval's marker only if
    /// it took none of the zero bits filled in after the marker: a segment
    /// cut short (its last bytes lost, so its last MCUs run into the marker)
    /// is decoded again by the slow path, which warns, and the decode
    /// fails.
    #[test]
    fn a_segment_cut_short_fails_the_decode_and_is_never_zero_filled_in_silence() {
        let bytes = jpeg(400, 358, SamplingFactor::F_2_2, 5);
        let frame = frame(&bytes).expect("frame");
        let markers: Vec<usize> = bytes[frame.scan_at..]
            .windows(2)
            .enumerate()
            .filter(|(_, w)| w[0] == 0xFF && (0xD0..=0xD7).contains(&w[1]))
            .map(|(at, _)| frame.scan_at + at)
            .collect();
        assert!(markers.len() > 100, "{} markers", markers.len());
        for (nth, cut) in [(10, 1), (11, 2), (40, 3), (41, 7), (90, 30)] {
            let at = markers[nth];
            // Not a stuffed 0xFF 0x00 being cut in half.
            let mut damaged = bytes[..at - cut].to_vec();
            assert!(!damaged.ends_with(&[0xFF]), "segment {nth} ends in 0xFF");
            damaged.extend_from_slice(&bytes[at..]);
            let Err(error) = crate::pipeline::decode::jpeg::decode_whole(&damaged) else {
                panic!("segment {nth}, {cut} bytes short, decodes");
            };
            assert!(error.contains("premature end"), "{error}");
        }
    }

    #[test]
    fn a_part_holds_the_segments_asked_for_and_damage_is_left_to_the_decoder() {
        let bytes = jpeg(320, 96, SamplingFactor::F_2_2, 5);
        let frame = frame(&bytes).expect("frame");
        let mut part = Vec::new();
        let at = sub_jpeg(&bytes, &frame, 2..4, 1..3, &mut part).expect("a part");
        assert_eq!(at, (80, 32));
        let mut decoder = crate::pipeline::decode::jpeg::Decompressor::new().expect("decoder");
        let header = decoder.header(&part).expect("the part is a JPEG");
        assert_eq!((header.width, header.height), (160, 32));
        // Two of six rows, two of four segments: a sixth of the data, and
        // the zeros that keep the fast path going to the end.
        let data = part.len() - TAIL_PADDING;
        assert!(data < bytes.len() / 3, "{data} of {}", bytes.len());
        assert_eq!(&part[data - 2..data], &[0xFF, 0xD9]);
        // Past the image, or markers out of order: no part.
        assert_eq!(sub_jpeg(&bytes, &frame, 5..7, 0..1, &mut part), None);
        let rst = bytes[frame.scan_at..]
            .windows(2)
            .position(|w| w == [0xFF, 0xD0])
            .expect("a marker");
        let mut damaged = bytes.clone();
        damaged[frame.scan_at + rst + 1] = 0xD3;
        assert_eq!(sub_jpeg(&damaged, &frame, 2..4, 0..1, &mut part), None);
    }
}
