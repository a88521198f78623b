//! Decoding and augmenting one image straight into its slot of a batch.
//!
//! RandomResizedCrop follows torchvision's `get_params` (ten tries at a random
//! area and log-uniform aspect ratio, then a centre crop), followed by an
//! optional horizontal flip, an antialiased bilinear resize to `size x size`
//! (SIMD, `fast_image_resize`) and per-channel normalisation. All randomness
//! comes from the ChaCha stream of `(seed, epoch, sample id)`, so a sample is
//! augmented the same way on any thread, in any run.

use std::cell::RefCell;

use fast_image_resize::images::{Image, ImageRef};
use fast_image_resize::{FilterType, PixelType, ResizeAlg, ResizeOptions, Resizer};
use tributary_common::seed::{self, Domain};

use crate::pipeline::decode::pixels::ImageKind;

/// Memory layout of a batch's images.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Layout {
    /// `N x 3 x S x S` normalised `f32` (PyTorch's layout).
    #[default]
    NchwF32,
    /// `N x S x S x 3` raw `u8` (normalise on the accelerator).
    NhwcU8,
}

/// Augmentation settings.
#[derive(Debug, Clone, PartialEq)]
pub struct AugmentConfig {
    /// Output side length.
    pub size: u32,
    /// Crop area range, as a fraction of the image area.
    pub scale: (f64, f64),
    /// Crop aspect-ratio range (width / height).
    pub ratio: (f64, f64),
    /// Flip horizontally with probability one half.
    pub flip: bool,
    /// Per-channel mean and standard deviation of `[0, 1]`-scaled pixels
    /// (`f32` layout only).
    pub mean: [f32; 3],
    pub std: [f32; 3],
    pub layout: Layout,
}

impl Default for AugmentConfig {
    /// ImageNet training defaults: 224 px, scale 0.08-1, ratio 3/4-4/3, flip,
    /// ImageNet mean and std, `f32` NCHW.
    fn default() -> Self {
        Self {
            size: 224,
            scale: (0.08, 1.0),
            ratio: (3.0 / 4.0, 4.0 / 3.0),
            flip: true,
            mean: [0.485, 0.456, 0.406],
            std: [0.229, 0.224, 0.225],
            layout: Layout::NchwF32,
        }
    }
}

impl AugmentConfig {
    /// Values per image in the output buffer.
    pub fn image_len(&self) -> usize {
        3 * self.size as usize * self.size as usize
    }

    /// Checks the settings, naming the bad one.
    pub fn validate(&self) -> Result<(), String> {
        let (s0, s1) = self.scale;
        let (r0, r1) = self.ratio;
        if self.size == 0 {
            return Err("image size must be at least 1".into());
        }
        if !(0.0 < s0 && s0 <= s1 && s1 <= 1.0) {
            return Err(format!(
                "crop scale ({s0}, {s1}) must satisfy 0 < min <= max <= 1"
            ));
        }
        if !(0.0 < r0 && r0 <= r1) {
            return Err(format!(
                "crop ratio ({r0}, {r1}) must satisfy 0 < min <= max"
            ));
        }
        if self.std.iter().any(|&s| s <= 0.0) {
            return Err(format!("normalisation std {:?} must be positive", self.std));
        }
        Ok(())
    }
}

/// A crop rectangle in source pixels, and whether to flip.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Crop {
    pub x: u32,
    pub y: u32,
    pub width: u32,
    pub height: u32,
    pub flip: bool,
}

/// torchvision's `RandomResizedCrop.get_params` plus a flip coin, drawn from
/// the stream of `(seed, epoch, id)`.
pub fn crop_params(
    config: &AugmentConfig,
    seed: u64,
    epoch: u64,
    id: u64,
    width: u32,
    height: u32,
) -> Crop {
    let mut rng = seed::rng(Domain::Augment, &[seed, epoch, id]);
    let flip = config.flip && seed::unit_f64(&mut rng) < 0.5;
    let area = f64::from(width) * f64::from(height);
    let (log_r0, log_r1) = (config.ratio.0.ln(), config.ratio.1.ln());
    for _ in 0..10 {
        let target =
            area * (config.scale.0 + (config.scale.1 - config.scale.0) * seed::unit_f64(&mut rng));
        let aspect = (log_r0 + (log_r1 - log_r0) * seed::unit_f64(&mut rng)).exp();
        let w = (target * aspect).sqrt().round();
        let h = (target / aspect).sqrt().round();
        if w >= 1.0 && h >= 1.0 && w <= f64::from(width) && h <= f64::from(height) {
            let (w, h) = (w as u32, h as u32);
            let y = seed::below(&mut rng, u64::from(height - h) + 1) as u32;
            let x = seed::below(&mut rng, u64::from(width - w) + 1) as u32;
            return Crop {
                x,
                y,
                width: w,
                height: h,
                flip,
            };
        }
    }
    // Fallback: the largest centred crop within the ratio bounds.
    let in_ratio = f64::from(width) / f64::from(height);
    let (w, h) = if in_ratio < config.ratio.0 {
        (
            width,
            ((f64::from(width) / config.ratio.0).round() as u32).clamp(1, height),
        )
    } else if in_ratio > config.ratio.1 {
        (
            ((f64::from(height) * config.ratio.1).round() as u32).clamp(1, width),
            height,
        )
    } else {
        (width, height)
    };
    Crop {
        x: (width - w) / 2,
        y: (height - h) / 2,
        width: w,
        height: h,
        flip,
    }
}

/// A decoded RGB8 image.
#[derive(Debug, Clone)]
pub struct Rgb {
    pub width: u32,
    pub height: u32,
    pub pixels: Vec<u8>,
}

/// Decodes JPEG or PNG bytes to RGB8, the format chosen by the bytes' magic
/// numbers (not by any file or field name).
pub fn decode(bytes: &[u8]) -> Result<Rgb, String> {
    let kind = ImageKind::of(bytes)?;
    let image = image::load_from_memory_with_format(bytes, kind.format())
        .map_err(|e| format!("the {} does not decode: {e}", kind.name()))?
        .into_rgb8();
    Ok(Rgb {
        width: image.width(),
        height: image.height(),
        pixels: image.into_raw(),
    })
}

/// Output slot of one image in a batch buffer.
#[derive(Debug)]
pub enum Slot<'a> {
    F32(&'a mut [f32]),
    U8(&'a mut [u8]),
}

impl Slot<'_> {
    /// The same slot, borrowed again (to try one writer, then another).
    pub fn reborrow(&mut self) -> Slot<'_> {
        match self {
            Slot::F32(out) => Slot::F32(out),
            Slot::U8(out) => Slot::U8(out),
        }
    }
}

thread_local! {
    static SCRATCH: RefCell<(Resizer, Vec<u8>)> = RefCell::new((Resizer::new(), Vec::new()));
}

/// A crop rectangle in (possibly fractional) pixel coordinates.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Rect {
    pub x: f64,
    pub y: f64,
    pub width: f64,
    pub height: f64,
}

impl From<Crop> for Rect {
    fn from(crop: Crop) -> Self {
        Self {
            x: f64::from(crop.x),
            y: f64::from(crop.y),
            width: f64::from(crop.width),
            height: f64::from(crop.height),
        }
    }
}

/// Crops, resizes, flips and normalises `image` into `slot`.
pub fn augment_into(
    image: &Rgb,
    crop: Crop,
    config: &AugmentConfig,
    lut: &NormLut,
    slot: Slot<'_>,
) -> Result<(), String> {
    let view = (image.width, image.height, image.pixels.as_slice());
    augment_rect_into(view, crop.into(), crop.flip, config, lut, slot)
}

/// [`augment_into`] for a `(width, height, RGB8 pixels)` view and a
/// fractional crop rectangle.
pub fn augment_rect_into(
    (width, height, pixels): (u32, u32, &[u8]),
    rect: Rect,
    flip: bool,
    config: &AugmentConfig,
    lut: &NormLut,
    slot: Slot<'_>,
) -> Result<(), String> {
    let size = config.size;
    let side = size as usize;
    let src = ImageRef::new(width, height, pixels, PixelType::U8x3)
        .map_err(|e| format!("bad image buffer: {e}"))?;
    SCRATCH.with(|scratch| {
        let mut scratch = scratch.borrow_mut();
        let (resizer, buf) = &mut *scratch;
        buf.resize(3 * side * side, 0);
        let mut dst = Image::from_slice_u8(size, size, buf, PixelType::U8x3)
            .map_err(|e| format!("bad output buffer: {e}"))?;
        let options = ResizeOptions::new()
            .crop(rect.x, rect.y, rect.width, rect.height)
            .resize_alg(ResizeAlg::Convolution(FilterType::Bilinear));
        resizer
            .resize(&src, &mut dst, &options)
            .map_err(|e| format!("resize failed: {e}"))?;
        let rows = buf.chunks_exact(3 * side);
        match slot {
            Slot::U8(out) => {
                for (row, out_row) in rows.zip(out.chunks_exact_mut(3 * side)) {
                    if flip {
                        for (dst_px, src_px) in
                            out_row.chunks_exact_mut(3).zip(row.chunks_exact(3).rev())
                        {
                            dst_px.copy_from_slice(src_px);
                        }
                    } else {
                        out_row.copy_from_slice(row);
                    }
                }
            }
            Slot::F32(out) => {
                // Planar f32 through the lookup table, a row at a time with
                // the flip decided once per row: no bounds checks inside.
                let (r_plane, rest) = out.split_at_mut(side * side);
                let (g_plane, b_plane) = rest.split_at_mut(side * side);
                let [lr, lg, lb] = &*lut.0;
                let planes = r_plane
                    .chunks_exact_mut(side)
                    .zip(g_plane.chunks_exact_mut(side))
                    .zip(b_plane.chunks_exact_mut(side));
                for (row, ((r, g), b)) in rows.zip(planes) {
                    let mut put = |(px, ((r, g), b)): (&[u8], ((&mut f32, &mut f32), &mut f32))| {
                        *r = lr[usize::from(px[0])];
                        *g = lg[usize::from(px[1])];
                        *b = lb[usize::from(px[2])];
                    };
                    let out = r.iter_mut().zip(g.iter_mut()).zip(b.iter_mut());
                    if flip {
                        row.chunks_exact(3).rev().zip(out).for_each(&mut put);
                    } else {
                        row.chunks_exact(3).zip(out).for_each(&mut put);
                    }
                }
            }
        }
        Ok(())
    })
}

/// Per-channel lookup table from a `u8` value to its normalised `f32`.
#[derive(Debug, Clone)]
pub struct NormLut(pub Box<[[f32; 256]; 3]>);

impl NormLut {
    pub fn new(config: &AugmentConfig) -> Self {
        let mut lut = Box::new([[0f32; 256]; 3]);
        for (c, table) in lut.iter_mut().enumerate() {
            for (v, out) in table.iter_mut().enumerate() {
                *out = (v as f32 / 255.0 - config.mean[c]) / config.std[c];
            }
        }
        Self(lut)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crops_stay_inside_the_image_and_respect_the_bounds() {
        let config = AugmentConfig::default();
        for id in 0..2000 {
            let (w, h) = (300 + (id as u32 * 7) % 300, 250 + (id as u32 * 13) % 300);
            let crop = crop_params(&config, 1, 0, id, w, h);
            assert!(crop.width >= 1 && crop.height >= 1);
            assert!(
                crop.x + crop.width <= w && crop.y + crop.height <= h,
                "{crop:?} in {w}x{h}"
            );
            assert_eq!(crop, crop_params(&config, 1, 0, id, w, h));
        }
        // Degenerate: a 1-pixel-high strip falls back to a centred crop.
        let crop = crop_params(&config, 1, 0, 0, 1000, 1);
        assert_eq!((crop.height, crop.y), (1, 0));
        assert!(crop.width <= 2);
    }

    #[test]
    fn flipped_output_mirrors_unflipped() {
        let mut pixels = Vec::new();
        for y in 0..40u32 {
            for x in 0..60u32 {
                pixels.extend_from_slice(&[(x * 4) as u8, (y * 6) as u8, 128]);
            }
        }
        let image = Rgb {
            width: 60,
            height: 40,
            pixels,
        };
        let config = AugmentConfig {
            size: 16,
            layout: Layout::NhwcU8,
            ..AugmentConfig::default()
        };
        let lut = NormLut::new(&config);
        let crop = Crop {
            x: 5,
            y: 5,
            width: 30,
            height: 30,
            flip: false,
        };
        let mut plain = vec![0u8; config.image_len()];
        let mut flipped = vec![0u8; config.image_len()];
        augment_into(&image, crop, &config, &lut, Slot::U8(&mut plain)).expect("augment");
        augment_into(
            &image,
            Crop { flip: true, ..crop },
            &config,
            &lut,
            Slot::U8(&mut flipped),
        )
        .expect("augment");
        for y in 0..16 {
            for x in 0..16 {
                let a = &plain[(y * 16 + x) * 3..][..3];
                let b = &flipped[(y * 16 + 15 - x) * 3..][..3];
                assert_eq!(a, b);
            }
        }
        // Red grows left to right in the source, so it does in the output.
        assert!(plain[3 * 15] > plain[0]);
    }
}
