//! What a batch's images become: a preset (how each image is cropped and
//! resized), the output size, element type and layout, and normalisation.
//! One definition for Rust, the command line (`--transform`, `--dtype`,
//! ...) and Python (`transform=`, `dtype=`, ...); each setting parses from
//! the same strings and is checked by [`Transform::validate`].
//!
//! Presets, with torchvision's semantics:
//!
//! - `train`: `RandomResizedCrop(size, scale, ratio)` and, with `flip`, a
//!   horizontal flip with probability one half. The randomness comes from
//!   the ChaCha stream of `(seed, epoch, sample id)`, so a sample is
//!   augmented the same way on any thread, in any run.
//! - `eval`: `Resize(floor(min(size) / crop_fraction))` (the shorter side;
//!   the longer one `int(R * long / short)`) then `CenterCrop(size)`, done as
//!   one resample of the source rectangle the centre crop covers (the same
//!   sampling grid as resizing the whole image then cropping). Where the
//!   resized image is smaller than the crop, it is centred and padded with
//!   `fill`, as `CenterCrop` pads.
//! - `resize`: the whole image to `size`; with `keep_aspect`, scaled to fit
//!   inside `size` and centred, the rest padded with `fill` (letterbox).
//! - `none`: the decoded pixels as they are, each image its own size.
//!
//! Resampling is antialiased bilinear (torchvision's `antialias=True`).

use std::fmt;
use std::str::FromStr;

use tributary_common::plan::seed::{self, Domain};

/// How each image is cropped and resized.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Preset {
    /// RandomResizedCrop + flip.
    #[default]
    Train,
    /// Resize the shorter side to `size / crop_fraction`, centre crop.
    Eval,
    /// The whole image to the output size (optionally keeping its aspect).
    Resize,
    /// Decoded pixels as they are.
    None,
}

/// Element type of a batch's images.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Dtype {
    /// `(v / 255 - mean) / std` per channel.
    #[default]
    F32,
    /// Raw pixel values (normalise on the accelerator: 4x less to copy).
    U8,
}

/// Memory layout of a batch's images.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Layout {
    /// `N x 3 x H x W` (PyTorch's default).
    #[default]
    Nchw,
    /// `N x H x W x 3` (channels last).
    Nhwc,
}

/// Output height and width.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Size {
    pub height: u32,
    pub width: u32,
}

impl Size {
    pub fn square(side: u32) -> Self {
        Self {
            height: side,
            width: side,
        }
    }

    pub fn pixels(self) -> usize {
        self.height as usize * self.width as usize
    }
}

impl fmt::Display for Size {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.height == self.width {
            write!(f, "{}", self.width)
        } else {
            write!(f, "{}x{}", self.height, self.width)
        }
    }
}

impl FromStr for Size {
    type Err = String;

    /// `224` or `HEIGHTxWIDTH` (`224x320`).
    fn from_str(text: &str) -> Result<Self, String> {
        let side = |part: &str| {
            part.trim()
                .parse::<u32>()
                .map_err(|_| format!("image size {text:?} is not N or HEIGHTxWIDTH"))
        };
        match text.split_once(['x', 'X']) {
            Some((h, w)) => Ok(Self {
                height: side(h)?,
                width: side(w)?,
            }),
            None => side(text).map(Self::square),
        }
    }
}

macro_rules! named {
    ($type:ty, $what:literal, [$($value:path => [$($name:literal),+]),+ $(,)?]) => {
        impl FromStr for $type {
            type Err = String;
            fn from_str(text: &str) -> Result<Self, String> {
                match text.to_ascii_lowercase().as_str() {
                    $($($name)|+ => Ok($value),)+
                    _ => Err(format!(
                        concat!($what, " must be one of {}, not {:?}"),
                        [$($($name),+),+].join(", "),
                        text
                    )),
                }
            }
        }
        impl fmt::Display for $type {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(match self { $($value => [$($name),+][0],)+ })
            }
        }
    };
}

named!(Preset, "transform", [
    Preset::Train => ["train"],
    Preset::Eval => ["eval"],
    Preset::Resize => ["resize"],
    Preset::None => ["none"],
]);
named!(Dtype, "dtype", [Dtype::F32 => ["float32", "f32"], Dtype::U8 => ["uint8", "u8"]]);
named!(Layout, "layout", [Layout::Nchw => ["nchw"], Layout::Nhwc => ["nhwc", "channels_last"]]);

/// Everything that turns a decoded image into its slot of a batch.
#[derive(Debug, Clone, PartialEq)]
pub struct Transform {
    pub preset: Preset,
    /// Output size (every preset but `none`).
    pub size: Size,
    /// `train`: crop area range, as a fraction of the image area.
    pub scale: (f64, f64),
    /// `train`: crop aspect-ratio range (width / height).
    pub ratio: (f64, f64),
    /// `train`: flip horizontally with probability one half.
    pub flip: bool,
    /// `eval`: the centre crop's share of the resized shorter side.
    pub crop_fraction: f64,
    /// `resize`: keep the aspect ratio, padding the rest with `fill`.
    pub keep_aspect: bool,
    /// `eval` and `resize`: decode a JPEG at a reduced DCT scale (1/2, 1/4
    /// or 1/8) where the part of it the output shows is at least twice the
    /// output on both sides, instead of at full size and then resizing all
    /// of it. Several times faster on large photos; the pixels differ
    /// slightly from a full decode's (as PIL's `draft` mode's do). Off by
    /// default, so that evaluation sees torchvision's pixels. `train`
    /// always does this: a random crop's pixels need match no one's.
    pub reduced_dct: bool,
    /// The pixel value (all three channels) of padding, before
    /// normalisation.
    pub fill: u8,
    pub dtype: Dtype,
    pub layout: Layout,
    /// Per-channel mean and standard deviation of `[0, 1]`-scaled pixels
    /// (`f32` only).
    pub mean: [f32; 3],
    pub std: [f32; 3],
}

/// ImageNet's per-channel mean and standard deviation.
pub const IMAGENET_MEAN: [f32; 3] = [0.485, 0.456, 0.406];
pub const IMAGENET_STD: [f32; 3] = [0.229, 0.224, 0.225];

impl Default for Transform {
    /// ImageNet training: `train` at 224 px, scale 0.08-1, ratio 3/4-4/3,
    /// flip, ImageNet mean and std, `f32` NCHW.
    fn default() -> Self {
        Self {
            preset: Preset::Train,
            size: Size::square(224),
            scale: (0.08, 1.0),
            ratio: (3.0 / 4.0, 4.0 / 3.0),
            flip: true,
            crop_fraction: 0.875,
            keep_aspect: false,
            reduced_dct: false,
            fill: 0,
            dtype: Dtype::F32,
            layout: Layout::Nchw,
            mean: IMAGENET_MEAN,
            std: IMAGENET_STD,
        }
    }
}

impl Transform {
    /// The defaults of `preset` (ImageNet normalisation, 224 px).
    pub fn preset(preset: Preset) -> Self {
        Self {
            preset,
            ..Self::default()
        }
    }

    /// Whether every image of a batch has the same shape (all presets but
    /// `none`), so a batch is one dense array.
    pub fn fixed_size(&self) -> bool {
        self.preset != Preset::None
    }

    /// Bytes per element.
    pub fn element_bytes(&self) -> usize {
        match self.dtype {
            Dtype::F32 => 4,
            Dtype::U8 => 1,
        }
    }

    /// Values per image of a fixed size.
    pub fn image_len(&self) -> usize {
        3 * self.size.pixels()
    }

    /// Bytes of `images` fixed-size images in this dtype.
    pub fn images_bytes(&self, images: u64) -> u64 {
        images * self.image_len() as u64 * self.element_bytes() as u64
    }

    /// The shape of one `height x width` image in this layout.
    pub fn image_shape(&self, height: usize, width: usize) -> [usize; 3] {
        match self.layout {
            Layout::Nchw => [3, height, width],
            Layout::Nhwc => [height, width, 3],
        }
    }

    /// Checks the settings, naming the bad one.
    pub fn validate(&self) -> Result<(), String> {
        let (s0, s1) = self.scale;
        let (r0, r1) = self.ratio;
        if self.size.height == 0 || self.size.width == 0 {
            return Err(format!(
                "image size {} must be at least 1 on both sides",
                self.size
            ));
        }
        if !(0.0 < s0 && s0 <= s1 && s1 <= 1.0) {
            return Err(format!(
                "crop scale ({s0}, {s1}) must satisfy 0 < min <= max <= 1"
            ));
        }
        if !(0.0 < r0 && r0 <= r1 && r1.is_finite()) {
            return Err(format!(
                "crop ratio ({r0}, {r1}) must satisfy 0 < min <= max"
            ));
        }
        if !(self.crop_fraction > 0.0 && self.crop_fraction <= 1.0) {
            return Err(format!(
                "crop_fraction {} must be in (0, 1]",
                self.crop_fraction
            ));
        }
        if self.std.iter().any(|&s| !(s > 0.0 && s.is_finite())) {
            return Err(format!("normalisation std {:?} must be positive", self.std));
        }
        if self.mean.iter().any(|m| !m.is_finite()) {
            return Err(format!("normalisation mean {:?} must be finite", self.mean));
        }
        Ok(())
    }

    /// Where image `id` (`width x height`) goes: the source rectangle, the
    /// output size and the part of it the rectangle fills, and the flip.
    /// Depends only on `(seed, epoch, id)` and the dimensions.
    pub fn plan(&self, seed: u64, epoch: u64, id: u64, width: u32, height: u32) -> Plan {
        let whole = Rect {
            x: 0.0,
            y: 0.0,
            width: f64::from(width),
            height: f64::from(height),
        };
        let (ow, oh) = (self.size.width, self.size.height);
        let full = |src: Rect, flip| Plan {
            src,
            out: (ow, oh),
            dst: (0, 0, ow, oh),
            flip,
        };
        match self.preset {
            Preset::None => Plan {
                src: whole,
                out: (width, height),
                dst: (0, 0, width, height),
                flip: false,
            },
            Preset::Train => {
                let crop = crop_params(self, seed, epoch, id, width, height);
                full(Rect::from(crop), crop.flip)
            }
            Preset::Resize if !self.keep_aspect => full(whole, false),
            Preset::Resize => {
                let scale =
                    (f64::from(ow) / f64::from(width)).min(f64::from(oh) / f64::from(height));
                let fit =
                    |side: u32, out: u32| ((f64::from(side) * scale).round() as u32).clamp(1, out);
                let (w, h) = (fit(width, ow), fit(height, oh));
                Plan {
                    src: whole,
                    out: (ow, oh),
                    dst: ((ow - w) / 2, (oh - h) / 2, w, h),
                    flip: false,
                }
            }
            Preset::Eval => {
                // torchvision's Resize(R) on the shorter side, then CenterCrop.
                let short_out = f64::from(ow.min(oh));
                let r = ((short_out / self.crop_fraction) + 1e-9).floor().max(1.0);
                let (short, long) = (width.min(height), width.max(height));
                let resized_long = (r * f64::from(long) / f64::from(short)).floor().max(1.0);
                let (rw, rh) = if width <= height {
                    (r, resized_long)
                } else {
                    (resized_long, r)
                };
                let (sx, x, dx, dw) = centre(f64::from(width), rw, ow);
                let (sy, y, dy, dh) = centre(f64::from(height), rh, oh);
                Plan {
                    src: Rect {
                        x,
                        y,
                        width: sx,
                        height: sy,
                    },
                    out: (ow, oh),
                    dst: (dx, dy, dw, dh),
                    flip: false,
                }
            }
        }
    }
}

/// One side of `CenterCrop(out)` of a source side `side` resized to
/// `resized`: `(source length, source offset, output offset, output
/// length)`. A crop larger than the resized side pads it, centred.
fn centre(side: f64, resized: f64, out: u32) -> (f64, f64, u32, u32) {
    let scale = side / resized;
    let out_f = f64::from(out);
    if resized >= out_f {
        // torchvision: int(round((resized - out) / 2.0)), ties to even.
        let offset = ((resized - out_f) / 2.0).round_ties_even();
        (out_f * scale, offset * scale, 0, out)
    } else {
        let resized_px = resized as u32;
        (side, 0.0, (out - resized_px) / 2, resized_px)
    }
}

/// Where one image goes in its slot.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Plan {
    /// Source rectangle, in source pixels (possibly fractional).
    pub src: Rect,
    /// Output `(width, height)`.
    pub out: (u32, u32),
    /// The part of the output the source fills: `(x, y, width, height)`;
    /// the rest is padding.
    pub dst: (u32, u32, u32, u32),
    /// Mirror the output horizontally.
    pub flip: bool,
}

impl Plan {
    /// Whether the source fills the whole output.
    pub fn fills(&self) -> bool {
        self.dst == (0, 0, self.out.0, self.out.1)
    }
}

/// A rectangle in (possibly fractional) pixel coordinates.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Rect {
    pub x: f64,
    pub y: f64,
    pub width: f64,
    pub height: f64,
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

/// torchvision's `RandomResizedCrop.get_params` plus a flip coin, drawn from
/// the stream of `(seed, epoch, id)`.
pub fn crop_params(
    config: &Transform,
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crops_stay_inside_the_image_and_respect_the_bounds() {
        let config = Transform::default();
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
    fn eval_covers_torchvisions_centre_crop_of_the_resized_image() {
        let eval = Transform::preset(Preset::Eval);
        // 500x375 -> Resize(256): 341x256 -> CenterCrop(224): left
        // round(58.5) = 58 (ties to even), top 16; each axis scaled by its
        // own resize factor, as torchvision's resize does.
        let plan = eval.plan(0, 0, 0, 500, 375);
        let (sx, sy) = (500.0 / 341.0, 375.0 / 256.0);
        assert_eq!(plan.out, (224, 224));
        assert!(plan.fills() && !plan.flip);
        assert!((plan.src.x - 58.0 * sx).abs() < 1e-9, "{plan:?}");
        assert!((plan.src.y - 16.0 * sy).abs() < 1e-9, "{plan:?}");
        assert!((plan.src.width - 224.0 * sx).abs() < 1e-9);
        assert!((plan.src.height - 224.0 * sy).abs() < 1e-9);
        // A resized side shorter than the crop (a wide crop of a square
        // image): centred, padded, as CenterCrop pads.
        let wide = Transform {
            size: Size {
                height: 224,
                width: 400,
            },
            ..eval.clone()
        };
        let padded = wide.plan(0, 0, 0, 100, 100);
        assert!(!padded.fills());
        assert_eq!(padded.dst, (72, 0, 256, 224), "{padded:?}");
        assert_eq!(padded.src.width, 100.0);
        let letterbox = Transform {
            keep_aspect: true,
            ..Transform::preset(Preset::Resize)
        }
        .plan(0, 0, 0, 400, 200);
        assert_eq!(letterbox.dst, (0, 56, 224, 112));
    }

    #[test]
    fn settings_parse_from_their_names_and_say_what_they_take() {
        assert_eq!("eval".parse::<Preset>(), Ok(Preset::Eval));
        assert_eq!("uint8".parse::<Dtype>(), Ok(Dtype::U8));
        assert_eq!("channels_last".parse::<Layout>(), Ok(Layout::Nhwc));
        assert_eq!(
            "224x320".parse::<Size>().map(|s| (s.height, s.width)),
            Ok((224, 320))
        );
        let error = "crop".parse::<Preset>().expect_err("no such preset");
        assert!(error.contains("train, eval, resize, none"), "{error}");
        let bad = Transform {
            crop_fraction: 1.5,
            ..Transform::default()
        };
        assert!(bad
            .validate()
            .expect_err("crop_fraction")
            .contains("crop_fraction"));
    }
}
