//! JPEG decoding with libjpeg-turbo 3 (built from source by `turbojpeg-sys`):
//! SIMD Huffman, IDCT and colour conversion, plus two savings a random crop
//! allows:
//!
//! - a reduced-size DCT (1/2, 1/4 or 1/8) when the crop is at least twice
//!   the output on both sides, so a 4x smaller image is never reconstructed
//!   at full size first;
//! - decoding the crop region only: rows below it are never decoded, rows
//!   above it are entropy-decoded and skipped, and columns outside it skip
//!   the IDCT and colour conversion.
//!
//! Where libjpeg-turbo cannot decode to RGB (CMYK), callers fall back to the
//! `image` crate.

#![allow(
    unsafe_code,
    reason = "FFI to libjpeg-turbo; each block states its invariant"
)]

use std::cell::RefCell;
use std::ffi::CStr;

use turbojpeg_sys as tj;

use super::restarts;
use crate::pipeline::decode::transform::{Plan, Rect};

/// iMCU width by subsampling (TJSAMP_444, 422, 420, GRAY, 440, 411, 441):
/// libjpeg-turbo's `tjMCUWidth`, copied to avoid reading an extern static.
pub(super) const MCU_WIDTH: [u32; 7] = [8, 16, 16, 8, 8, 32, 8];

/// (Scaled) pixels a crop's part of a restart-marked JPEG reaches past the
/// region decoded from it: upsampled chroma looks one chroma sample across,
/// and the part's edge has none beyond it (see [`restarts`]).
const CHROMA_CONTEXT: f64 = 2.0;

/// One libjpeg-turbo decompressor; keep one per thread.
#[derive(Debug)]
pub struct Decompressor {
    handle: tj::tjhandle,
}

// SAFETY: the handle is owned by this value and only used through `&mut self`;
// libjpeg-turbo handles may move between threads.
unsafe impl Send for Decompressor {}

impl Drop for Decompressor {
    fn drop(&mut self) {
        // SAFETY: the handle came from tj3Init and is destroyed once.
        unsafe { tj::tj3Destroy(self.handle) }
    }
}

/// A JPEG's dimensions and chroma subsampling.
#[derive(Debug, Clone, Copy)]
pub struct Header {
    pub width: u32,
    pub height: u32,
    subsamp: i32,
}

/// A decoded part of a JPEG: `width x height` RGB8 pixels in the caller's
/// buffer, and where the requested crop lies in them.
#[derive(Debug, Clone, Copy)]
pub struct Region {
    pub width: u32,
    pub height: u32,
    pub crop: Rect,
}

/// The reduced-DCT scale for a `crop` resized to `width x height`: the
/// smallest of 1, 1/2, 1/4 and 1/8 that keeps the scaled crop at least the
/// output on both sides.
pub fn scale_for(crop: Rect, (width, height): (u32, u32)) -> u32 {
    [8, 4, 2]
        .into_iter()
        .find(|&denom| {
            let d = f64::from(denom);
            crop.width / d >= f64::from(width) && crop.height / d >= f64::from(height)
        })
        .unwrap_or(1)
}

impl Decompressor {
    pub fn new() -> Result<Self, String> {
        // SAFETY: tj3Init has no preconditions; a null handle is checked.
        let handle = unsafe { tj::tj3Init(tj::TJINIT_TJINIT_DECOMPRESS as libc::c_int) };
        if handle.is_null() {
            return Err("libjpeg-turbo could not start a decompressor".into());
        }
        Ok(Self { handle })
    }

    fn error(&self) -> String {
        // SAFETY: tj3GetErrorStr returns a NUL-terminated string owned by the
        // library, valid until the next call on the handle.
        unsafe { CStr::from_ptr(tj::tj3GetErrorStr(self.handle)) }
            .to_string_lossy()
            .into_owned()
    }

    fn check(&self, status: libc::c_int) -> Result<(), String> {
        if status == 0 {
            Ok(())
        } else {
            Err(self.error())
        }
    }

    /// Reads the header of `jpeg`. Decoding must follow on the same bytes.
    pub fn header(&mut self, jpeg: &[u8]) -> Result<Header, String> {
        // SAFETY: the pointer and length describe `jpeg`, alive for the call.
        let status = unsafe {
            tj::tj3DecompressHeader(self.handle, jpeg.as_ptr(), jpeg.len() as tj::size_t)
        };
        self.check(status)?;
        // SAFETY: tj3Get reads a parameter of a valid handle.
        let get = |param| unsafe { tj::tj3Get(self.handle, param as libc::c_int) };
        let colorspace = get(tj::TJPARAM_TJPARAM_COLORSPACE);
        if colorspace == tj::TJCS_TJCS_CMYK as i32 || colorspace == tj::TJCS_TJCS_YCCK as i32 {
            return Err("a CMYK JPEG does not decode to RGB here".into());
        }
        let (width, height) = (
            get(tj::TJPARAM_TJPARAM_JPEGWIDTH),
            get(tj::TJPARAM_TJPARAM_JPEGHEIGHT),
        );
        if width <= 0 || height <= 0 {
            return Err(format!("the JPEG header says {width}x{height}"));
        }
        Ok(Header {
            width: width as u32,
            height: height as u32,
            subsamp: get(tj::TJPARAM_TJPARAM_SUBSAMP),
        })
    }

    /// Decodes the part of `jpeg` (whose header was just read) that holds
    /// `crop` and `margin` (scaled) pixels around it, the resampling
    /// filter's reach, at the DCT scale 1/`denom`, into the first
    /// `3 x width x height` bytes of `pixels` (grown to fit, never shrunk).
    pub fn decode(
        &mut self,
        jpeg: &[u8],
        header: Header,
        crop: Rect,
        denom: u32,
        margin: f64,
        pixels: &mut Vec<u8>,
    ) -> Result<Region, String> {
        let factor = tj::tjscalingfactor {
            num: 1,
            denom: denom as libc::c_int,
        };
        // SAFETY: a valid handle whose header has been read.
        self.check(unsafe { tj::tj3SetScalingFactor(self.handle, factor) })?;
        let scaled = |side: u32| side.div_ceil(denom);
        let (full_w, full_h) = (scaled(header.width), scaled(header.height));
        let s = 1.0 / f64::from(denom);
        let (x0, y0) = (crop.x * s, crop.y * s);
        let (x1, y1) = ((crop.x + crop.width) * s, (crop.y + crop.height) * s);
        // The region's left edge must fall on a (scaled) iMCU column.
        let mcu = usize::try_from(header.subsamp)
            .ok()
            .and_then(|i| MCU_WIDTH.get(i).copied())
            .map(|w| w.div_ceil(denom));
        let (rx, ry, out_w, out_h, region) = match mcu {
            Some(mcu) => {
                let (mx0, my0) = ((x0 - margin).max(0.0), (y0 - margin).max(0.0));
                let (rx, ry) = ((mx0 as u32) / mcu * mcu, my0 as u32);
                let rw = ((x1 + margin).ceil() as u32).min(full_w) - rx;
                let rh = ((y1 + margin).ceil() as u32).min(full_h) - ry;
                let region = tj::tjregion {
                    x: rx as libc::c_int,
                    y: ry as libc::c_int,
                    w: rw as libc::c_int,
                    h: rh as libc::c_int,
                };
                (rx, ry, rw, rh, region)
            }
            // Unknown subsampling: the whole (scaled) image, uncropped.
            None => {
                let whole = tj::tjregion {
                    x: 0,
                    y: 0,
                    w: 0,
                    h: 0,
                };
                (0, 0, full_w, full_h, whole)
            }
        };
        // SAFETY: a valid handle; the region lies inside the scaled image.
        self.check(unsafe { tj::tj3SetCroppingRegion(self.handle, region) })?;
        let pitch = 3 * out_w as usize;
        // Grown only past the largest region so far (the decoder writes
        // every byte of the region; zeroing them first cost 1% of the
        // decode threads' time).
        let len = pitch * out_h as usize;
        if pixels.len() < len {
            pixels.resize(len, 0);
        }
        // SAFETY: `pixels` holds at least `len = pitch * out_h` bytes, which is what
        // libjpeg-turbo writes for this cropping region and scale; `jpeg` is
        // alive for the call.
        let status = unsafe {
            tj::tj3Decompress8(
                self.handle,
                jpeg.as_ptr(),
                jpeg.len() as tj::size_t,
                pixels.as_mut_ptr(),
                pitch as libc::c_int,
                tj::TJPF_TJPF_RGB as libc::c_int,
            )
        };
        self.check(status)?;
        // The region starts at or before the crop (rx, ry <= x0, y0).
        let (cx, cy) = (x0 - f64::from(rx), y0 - f64::from(ry));
        Ok(Region {
            width: out_w,
            height: out_h,
            crop: Rect {
                x: cx,
                y: cy,
                width: (crop.width * s).min(f64::from(out_w) - cx),
                height: (crop.height * s).min(f64::from(out_h) - cy),
            },
        })
    }
}

thread_local! {
    /// Each decode thread's decompressor and buffers, reused per image.
    static DECODER: RefCell<Option<Scratch>> = const { RefCell::new(None) };
}

/// A decode thread's decompressor, its pixel buffer, and the buffer a
/// crop's part of a restart-marked JPEG is copied into.
struct Scratch {
    decoder: Decompressor,
    pixels: Vec<u8>,
    part: Vec<u8>,
}

/// Runs `f` with this thread's decompressor and buffers.
fn with_decoder<T, E: From<String>>(f: impl FnOnce(&mut Scratch) -> Result<T, E>) -> Result<T, E> {
    DECODER.with(|cell| {
        let mut cell = cell.borrow_mut();
        if cell.is_none() {
            *cell = Some(Scratch {
                decoder: Decompressor::new().map_err(E::from)?,
                pixels: Vec::new(),
                part: Vec::new(),
            });
        }
        f(cell.as_mut().expect("set above"))
    })
}

/// The part of a restart-marked `jpeg` that holds `crop` and `reach`
/// pixels around it (see [`restarts`]), written into `part`, and where that
/// part starts in the whole image; `None` where the JPEG has no usable
/// restart segments or the part would be all of it.
fn crop_part(jpeg: &[u8], crop: Rect, reach: f64, part: &mut Vec<u8>) -> Option<(u32, u32)> {
    let frame = restarts::frame(jpeg)?;
    let mcu_h = f64::from(frame.mcu.1);
    let (per_row, rows) = (frame.segments_per_row(), frame.mcus().1);
    let segment = f64::from(frame.interval) * f64::from(frame.mcu.0);
    let (x0, y0) = (crop.x - reach, crop.y - reach);
    let (x1, y1) = (crop.x + crop.width + reach, crop.y + crop.height + reach);
    let first_row = (y0.max(0.0) / mcu_h) as u32;
    let end_row = ((y1 / mcu_h).ceil() as u32).min(rows);
    let first_column = (x0.max(0.0) / segment) as u32;
    let end_column = ((x1 / segment).ceil() as u32).min(per_row);
    if first_row == 0 && end_row == rows && first_column == 0 && end_column == per_row {
        return None;
    }
    restarts::sub_jpeg(
        jpeg,
        &frame,
        first_row..end_row,
        first_column..end_column,
        part,
    )
}

/// Decodes the JPEG `bytes` for the plan `plan_for(width, height)` makes
/// from its header, and hands the decoded part and the plan within it to
/// `then`: only the region holding the plan's source rectangle (and the
/// filter's reach around it) is decoded, with `dct_scaling` at a reduced
/// DCT size where that is at least twice the output on both sides (a few
/// levels off a full decode: for random training crops, not for evaluation).
pub fn decode_for<T>(
    bytes: &[u8],
    dct_scaling: bool,
    plan_for: impl FnOnce(u32, u32) -> Plan,
    then: impl FnOnce((u32, u32, &[u8]), &Plan) -> Result<T, String>,
) -> Result<T, Failure> {
    with_decoder(|scratch| {
        let Scratch {
            decoder,
            pixels,
            part,
        } = scratch;
        let header = decoder.header(bytes).map_err(Failure::Unsupported)?;
        // A crop may end before the bytes do: the decoder would not read
        // far enough to warn that they end early.
        complete(bytes).map_err(Failure::Corrupt)?;
        let plan = plan_for(header.width, header.height);
        let (_, _, dw, dh) = plan.dst;
        let denom = if dct_scaling {
            scale_for(plan.src, (dw, dh))
        } else {
            1
        };
        // Bilinear reaches one output pixel's footprint around each sample.
        let footprint = (plan.src.width / f64::from(denom.max(1)) / f64::from(dw.max(1)))
            .max(plan.src.height / f64::from(denom.max(1)) / f64::from(dh.max(1)))
            .max(1.0);
        let margin = footprint.ceil() + 1.0;
        // With restart markers, only the segments the crop covers are
        // entropy-decoded: they make a smaller JPEG of their own, which
        // reaches two (scaled) pixels past the decoded region, so that no
        // pixel the resampler reads takes its chroma from beyond the part
        // (see `restarts`).
        let reach = (margin + CHROMA_CONTEXT) * f64::from(denom);
        let (jpeg, header, crop) = match crop_part(bytes, plan.src, reach, part) {
            Some((x, y)) => {
                let header = decoder.header(part).map_err(Failure::Corrupt)?;
                let crop = Rect {
                    x: plan.src.x - f64::from(x),
                    y: plan.src.y - f64::from(y),
                    ..plan.src
                };
                (part.as_slice(), header, crop)
            }
            None => (bytes, header, plan.src),
        };
        // An error here, a warning included ("Premature end of JPEG
        // file"), is the data's: no other decoder is to guess the rest.
        let region = decoder
            .decode(jpeg, header, crop, denom, margin, pixels)
            .map_err(Failure::Corrupt)?;
        let len = 3 * region.width as usize * region.height as usize;
        let view = (region.width, region.height, &pixels[..len]);
        then(
            view,
            &Plan {
                src: region.crop,
                ..plan
            },
        )
        .map_err(Failure::Unsupported)
    })
}

/// Why [`decode_for`] did not give an image.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Failure {
    /// libjpeg-turbo does not take this JPEG (CMYK, its header): another
    /// decoder may.
    Unsupported(String),
    /// The JPEG's data is damaged (truncated, corrupt): a bad sample.
    Corrupt(String),
}

impl From<String> for Failure {
    fn from(reason: String) -> Self {
        Self::Unsupported(reason)
    }
}

/// Whether `jpeg` ends as a whole JPEG does: an end-of-image marker after
/// its last scan. (Entropy-coded data stuffs every 0xFF, so neither marker
/// appears inside a scan; a thumbnail's markers come before the image's.)
pub fn complete(jpeg: &[u8]) -> Result<(), String> {
    // From the end, the first of the two markers met decides (usually in
    // the last few bytes).
    for at in memchr::memrchr_iter(0xFF, jpeg) {
        match jpeg.get(at + 1) {
            Some(0xD9) => return Ok(()),
            Some(0xDA) => {
                return Err(
                    "premature end of JPEG data: no end-of-image marker after the last scan \
                     (a truncated file)"
                        .into(),
                )
            }
            _ => {}
        }
    }
    // No scan at all: the decoder says what is wrong.
    Ok(())
}

/// Decodes the whole JPEG at full size, and nothing else: the decode-only
/// ceiling `tributary bench` compares the loader with. Returns its size.
pub fn decode_whole(bytes: &[u8]) -> Result<(u32, u32), String> {
    with_decoder(|scratch| {
        let Scratch {
            decoder, pixels, ..
        } = scratch;
        let header = decoder.header(bytes)?;
        let whole = Rect {
            x: 0.0,
            y: 0.0,
            width: f64::from(header.width),
            height: f64::from(header.height),
        };
        decoder.decode(bytes, header, whole, 1, 0.0, pixels)?;
        Ok((header.width, header.height))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pipeline::decode::render::{decode, render, NormLut, Slot};
    use crate::pipeline::decode::transform::{Crop, Dtype, Layout, Size, Transform};

    /// A smooth 4:2:0 JPEG, `width x height`.
    fn jpeg(width: u16, height: u16) -> Vec<u8> {
        let mut pixels = Vec::new();
        for y in 0..u32::from(height) {
            for x in 0..u32::from(width) {
                let (fx, fy) = (f64::from(x) / 37.0, f64::from(y) / 23.0);
                pixels.extend([
                    (128.0 + 100.0 * fx.sin()) as u8,
                    (128.0 + 100.0 * fy.cos()) as u8,
                    ((x + y) / 4 % 256) as u8,
                ]);
            }
        }
        let mut out = Vec::new();
        jpeg_encoder::Encoder::new(&mut out, 90)
            .encode(&pixels, width, height, jpeg_encoder::ColorType::Rgb)
            .expect("encode");
        out
    }

    #[test]
    fn the_dct_scale_keeps_the_crop_at_least_the_output() {
        let rect = |w: f64, h: f64| Rect {
            x: 0.0,
            y: 0.0,
            width: w,
            height: h,
        };
        assert_eq!(scale_for(rect(300.0, 400.0), (224, 224)), 1);
        assert_eq!(scale_for(rect(448.0, 500.0), (224, 224)), 2);
        assert_eq!(scale_for(rect(1000.0, 900.0), (224, 224)), 4);
        assert_eq!(scale_for(rect(4000.0, 1800.0), (224, 224)), 8);
        assert_eq!(scale_for(rect(4000.0, 1700.0), (224, 224)), 4);
    }

    /// Mean absolute difference, in u8 levels, between libjpeg-turbo's
    /// region decode and the image crate's whole decode of the same crop.
    fn difference(bytes: &[u8], crop: Crop, size: u32) -> f64 {
        let config = Transform {
            size: Size::square(size),
            dtype: Dtype::U8,
            layout: Layout::Nhwc,
            ..Transform::default()
        };
        let lut = NormLut::new(&config);
        let mut turbo = vec![0u8; config.image_len()];
        let mut reference = vec![0u8; config.image_len()];
        let plan = Plan {
            src: Rect::from(crop),
            out: (size, size),
            dst: (0, 0, size, size),
            flip: crop.flip,
        };
        decode_for(
            bytes,
            true,
            |_, _| plan,
            |view, plan| render(view, plan, &config, &lut, Slot::U8(&mut turbo)),
        )
        .expect("decode");
        let whole = decode(bytes).expect("image crate");
        let view = (whole.width, whole.height, whole.pixels.as_slice());
        render(view, &plan, &config, &lut, Slot::U8(&mut reference)).expect("render");
        let sum: f64 = turbo
            .iter()
            .zip(&reference)
            .map(|(a, b)| f64::from(a.abs_diff(*b)))
            .sum();
        sum / turbo.len() as f64
    }

    #[test]
    fn region_decodes_match_a_whole_decode_of_the_crop() {
        let bytes = jpeg(500, 375);
        let crop = |x, y, width, height| Crop {
            x,
            y,
            width,
            height,
            flip: false,
        };
        // Full scale, edges off the 16-pixel iMCU grid.
        for c in [
            crop(0, 0, 500, 375),
            crop(37, 21, 201, 150),
            crop(299, 200, 201, 175),
        ] {
            let d = difference(&bytes, c, 112);
            assert!(d < 1.5, "{c:?}: {d:.2} levels");
        }
        // Half and quarter scale DCT (crops at least 2x and 4x the output).
        for (c, size) in [(crop(13, 7, 460, 360), 112), (crop(3, 9, 480, 350), 80)] {
            let denom = scale_for(Rect::from(c), (size, size));
            assert!(denom > 1);
            let d = difference(&bytes, c, size);
            assert!(d < 3.0, "{c:?} at 1/{denom}: {d:.2} levels");
        }
    }

    #[test]
    fn bad_bytes_are_an_error_not_a_crash() {
        let mut decoder = Decompressor::new().expect("decompressor");
        assert!(decoder.header(b"not a jpeg").is_err());
        let mut bytes = jpeg(64, 48);
        bytes.truncate(bytes.len() - 100);
        let header = decoder.header(&bytes).expect("the header survives");
        let whole = Rect {
            x: 0.0,
            y: 0.0,
            width: 64.0,
            height: 48.0,
        };
        // libjpeg-turbo warns on a truncated stream; either way, no crash.
        let _ = decoder.decode(&bytes, header, whole, 1, 0.0, &mut Vec::new());
    }

    #[test]
    fn a_truncated_jpeg_is_a_bad_sample_even_when_the_crop_ends_before_the_cut() {
        let whole = jpeg(64, 48);
        assert_eq!(complete(&whole), Ok(()));
        let mut cut = whole.clone();
        cut.truncate(whole.len() - 40);
        let top_left = |_w, _h| Plan {
            src: Rect {
                x: 0.0,
                y: 0.0,
                width: 16.0,
                height: 8.0,
            },
            dst: (0, 0, 16, 8),
            out: (16, 8),
            flip: false,
        };
        let render = |_view: (u32, u32, &[u8]), _plan: &Plan| Ok(());
        assert_eq!(decode_for(&whole, false, top_left, render), Ok(()));
        let error = decode_for(&cut, false, top_left, render).expect_err("truncated");
        let Failure::Corrupt(reason) = error else {
            panic!("{error:?} would fall back to another decoder")
        };
        assert!(reason.contains("premature end"), "{reason}");
    }
}
