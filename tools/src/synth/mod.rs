//! Synthetic, photo-like ImageFolder datasets for benchmarks and tests.
//!
//! A loader benchmark needs images whose *decode cost and compressed size*
//! match real photographs: flat colours compress to nothing and decode too
//! fast, while white noise is larger and slower than any photo. So each image
//! is painted like an (abstract) detailed photo: a smooth multi-colour
//! gradient background, soft-edged shaded ellipses and convex polygons (a
//! scatter of small "pebbles" under a few large shapes), a box blur for lens
//! softness, fractal value-noise texture ("gravel", "lichen") whose strength
//! varies from shape to shape, fine grain, and a little sensor noise.
//!
//! Sizes follow ImageNet (long side at most 500 px, short side 300-400 px;
//! landscape, portrait and square; mean about 400 x 358). JPEG quality is
//! 85-95 with 4:2:0, 4:4:4 or 4:2:2 chroma subsampling, giving about 100 KB
//! per JPEG on average; one image in 50 is a PNG. Image `i` belongs to class
//! `i % classes`, which sets its hue, shape mix and amount of clutter.
//!
//! Image `i` is a pure function of `(seed, i, classes)`: every choice comes
//! from [`seed::rng`]`(Domain::Synth, ..)` or from integer mixing seeded by
//! it, and `sin` is a local polynomial rather than the platform's libm, so
//! the bytes are the same on any machine and for any number of threads (given
//! the same `jpeg-encoder` and `png` versions, and `jpeg-encoder` without its
//! `simd` feature, whose AVX2 path encodes differently).

use std::cell::RefCell;
use std::f32::consts::{FRAC_PI_2, PI, TAU};
use std::path::{Path, PathBuf};

use image::codecs::png::{CompressionType::Fast, FilterType::Adaptive, PngEncoder};
use image::{ExtendedColorType, ImageEncoder};
use jpeg_encoder::{ColorType, Encoder, SamplingFactor};
use rand_core::Rng;
use rayon::prelude::*;
use tributary_common::plan::seed::{self, Domain};

/// Options for [`write_image_folder`].
#[derive(Debug, Clone)]
pub struct SynthOptions {
    pub images: usize,
    pub classes: usize,
    pub seed: u64,
}

/// One generated image.
#[derive(Debug, Clone)]
pub struct SynthImage {
    pub class: usize,
    /// File name within its class directory, e.g. `000123.jpg`.
    pub file_name: String,
    pub width: u32,
    pub height: u32,
    /// The encoded JPEG or PNG file.
    pub bytes: Vec<u8>,
}

#[derive(Debug, thiserror::Error)]
pub enum SynthError {
    #[error("cannot write {}: {error}", path.display())]
    Io {
        path: PathBuf,
        error: std::io::Error,
    },
    #[error("cannot encode synthetic image {index}: {message}")]
    Encode { index: usize, message: String },
    #[error("invalid synth options: {0}")]
    InvalidOptions(String),
}

/// Summary of a [`write_image_folder`] run.
#[derive(Debug, Clone, Default)]
pub struct SynthSummary {
    pub images: usize,
    /// Total size of the files written.
    pub bytes: u64,
    pub pngs: usize,
    pub mean_width: f64,
    pub mean_height: f64,
}

/// Class directory name for class `c` of `classes`: `class_007`, zero-padded
/// to three digits, or to the width of the largest class index if wider.
pub fn class_dir_name(c: usize, classes: usize) -> String {
    let digits = classes.saturating_sub(1).max(1).ilog10() as usize + 1;
    format!("class_{c:0width$}", width = digits.max(3))
}

/// Renders image `index` of a dataset with `classes` classes (pure, deterministic).
pub fn render(seed: u64, index: usize, classes: usize) -> Result<SynthImage, SynthError> {
    if classes == 0 {
        return Err(SynthError::InvalidOptions(
            "at least one class is needed".into(),
        ));
    }
    let class = index % classes;
    let mut rng = seed::rng(Domain::Synth, &[seed, index as u64]);
    let png = seed::below(&mut rng, 50) == 0; // The first draw; a test relies on it.
    let (w, h) = pick_size(&mut rng);
    let style = class_style(seed, class);
    let mut bytes = Vec::with_capacity(w * h * if png { 3 } else { 1 });
    let encoded = CANVAS.with_borrow_mut(|canvas| {
        paint(&mut rng, &style, w, h, canvas);
        let (rgb, w, h) = (&canvas.rgb, w as u16, h as u16);
        if png {
            let encoder = PngEncoder::new_with_quality(&mut bytes, Fast, Adaptive);
            let encoded = encoder.write_image(rgb, w.into(), h.into(), ExtendedColorType::Rgb8);
            return encoded.map_err(|e| e.to_string());
        }
        let mut encoder = Encoder::new(&mut bytes, 85 + seed::below(&mut rng, 11) as u8);
        encoder.set_sampling_factor(match unit(&mut rng) {
            u if u < 0.60 => SamplingFactor::R_4_2_0,
            u if u < 0.85 => SamplingFactor::R_4_4_4,
            _ => SamplingFactor::R_4_2_2,
        });
        let encoded = encoder.encode(rgb, w, h, ColorType::Rgb);
        encoded.map_err(|e| e.to_string())
    });
    encoded.map_err(|message| SynthError::Encode { index, message })?;
    let file_name = format!("{index:06}.{}", if png { "png" } else { "jpg" });
    let (width, height) = (w as u32, h as u32);
    Ok(SynthImage {
        class,
        file_name,
        width,
        height,
        bytes,
    })
}

/// The most images [`write_image_folder`] writes in one run.
pub const MAX_IMAGES: usize = 100_000_000;
/// The most classes [`write_image_folder`] writes in one run.
pub const MAX_CLASSES: usize = 1_000_000;

fn check(images: usize, classes: usize) -> Result<(), SynthError> {
    let problem = match (images, classes) {
        (0, _) => "at least one image is needed",
        (_, 0) => "at least one class is needed",
        _ if images > MAX_IMAGES => "too many images (the limit is 100000000)",
        _ if classes > MAX_CLASSES => "too many classes (the limit is 1000000)",
        _ if classes > images => "every class needs an image, so classes cannot exceed images",
        _ => return Ok(()),
    };
    let message = format!("{problem} (got {images} images, {classes} classes)");
    Err(SynthError::InvalidOptions(message))
}

/// Writes the ImageFolder tree under `dir` (created if missing), in parallel on the current rayon pool.
/// `progress(bytes_of_one_image)` is called once per image written (from any thread) so the CLI can drive a progress bar.
pub fn write_image_folder(
    dir: &Path,
    options: &SynthOptions,
    progress: &(dyn Fn(u64) + Sync),
) -> Result<SynthSummary, SynthError> {
    let (images, classes, seed) = (options.images, options.classes, options.seed);
    check(images, classes)?;
    let class_dirs: Vec<PathBuf> = (0..classes)
        .map(|c| dir.join(class_dir_name(c, classes)))
        .collect();
    for path in &class_dirs {
        std::fs::create_dir_all(path).map_err(io_error(path.clone()))?;
    }
    // Per image: [bytes, is PNG, width, height], summed.
    let totals = (0..images).into_par_iter().map(|index| {
        let image = render(seed, index, classes)?;
        let path = class_dirs[image.class].join(&image.file_name);
        std::fs::write(&path, &image.bytes).map_err(io_error(path))?;
        let (len, png) = (image.bytes.len() as u64, image.file_name.ends_with(".png"));
        progress(len);
        Ok([len, png.into(), image.width.into(), image.height.into()])
    });
    let [bytes, pngs, widths, heights] =
        totals.try_reduce(|| [0; 4], |a, b| Ok(std::array::from_fn(|k| a[k] + b[k])))?;
    let mean = |sum: u64| sum as f64 / images as f64;
    let (mean_width, mean_height) = (mean(widths), mean(heights));
    Ok(SynthSummary {
        images,
        bytes,
        pngs: pngs as usize,
        mean_width,
        mean_height,
    })
}

fn io_error(path: PathBuf) -> impl FnOnce(std::io::Error) -> SynthError {
    |error| SynthError::Io { path, error }
}

/// What a class looks like: a dominant hue, round versus angular shapes,
/// how much small clutter, and the grain of its texture.
#[derive(Debug)]
struct Style {
    hue: f32,
    ellipse_share: f32,
    clutter: f32,
    grain: f32,
}

fn class_style(seed: u64, class: usize) -> Style {
    // A three-part path, apart from the two-part per-image paths.
    let mut rng = seed::rng(Domain::Synth, &[seed, u64::MAX, class as u64]);
    let (hue, ellipse_share) = (unit(&mut rng), uniform(&mut rng, 0.15, 0.85));
    let (clutter, grain) = (unit(&mut rng), uniform(&mut rng, 2.0, 3.0));
    Style {
        hue,
        ellipse_share,
        clutter,
        grain,
    }
}

/// ImageNet-like `(width, height)`: long side at most 500, short side
/// 300-400 skewed low; landscape 4:3 and 3:2, square, portrait 3:4 and 2:3.
fn pick_size(rng: &mut impl Rng) -> (usize, usize) {
    let (ratio, portrait) = match unit(rng) {
        u if u < 0.45 => (4.0 / 3.0_f32, false),
        u if u < 0.60 => (1.5, false),
        u if u < 0.75 => (1.0, false),
        u if u < 0.95 => (4.0 / 3.0, true),
        _ => (1.5, true),
    };
    let v = unit(rng);
    let short = 300.0 + ((500.0 / ratio).min(400.0) - 300.0) * v * v.sqrt();
    let long = ((short * ratio).round() as usize).min(500);
    let short = short.round() as usize;
    [(long, short), (short, long)][usize::from(portrait)]
}

/// Working memory of one thread, reused from image to image so rendering
/// does not fault in and zero several fresh megabytes every time.
#[derive(Default)]
struct Canvas {
    /// Red, green and blue planes of `w * h` values (planar, so loops vectorise).
    planes: Vec<f32>,
    /// How strongly the texture shows at each pixel.
    gain: Vec<f32>,
    /// Blur rows, then the texture plane.
    scratch: Vec<f32>,
    /// The finished image, packed 8-bit RGB.
    rgb: Vec<u8>,
}

thread_local! {
    static CANVAS: RefCell<Canvas> = RefCell::default();
}

/// Entries per precomputed noise table; each row reads from a random offset.
const NOISE_LEN: usize = 4096;

/// Paints one `w` x `h` image into `canvas.rgb`.
fn paint(rng: &mut impl Rng, style: &Style, w: usize, h: usize, canvas: &mut Canvas) {
    let (n, short) = (w * h, w.min(h) as f32);
    let (planes, gain, scratch) = (&mut canvas.planes, &mut canvas.gain, &mut canvas.scratch);
    // Background: a coarse lattice of colours, smoothly interpolated.
    let cell = short * uniform(rng, 0.35, 0.8);
    let lattice: Vec<[f32; 3]> = (0..lattice_len(w, h, cell))
        .map(|_| colour(rng, style))
        .collect();
    planes.clear();
    planes.resize(3 * n, 0.0);
    for (c, plane) in planes.chunks_exact_mut(n).enumerate() {
        add_value_noise(plane, w, cell, |k| lattice[k][c]);
    }
    gain.clear();
    gain.resize(n, uniform(rng, 0.5, 1.0));
    let centres: Vec<f32> = (0..w).map(|x| x as f32 + 0.5).collect();
    for _ in 0..(style.clutter * 300.0 * unit(rng)) as usize {
        draw_shape(rng, style, &centres, planes, gain, (0.01, 0.05));
    }
    for _ in 0..3 + seed::below(rng, 6) {
        draw_shape(rng, style, &centres, planes, gain, (0.08, 0.45));
    }
    // `scratch` and `rgb` are fully overwritten before they are read.
    scratch.resize(3 * n, 0.0);
    scratch.truncate(3 * n);
    let radius = seed::below(rng, 3) as usize;
    if radius > 0 {
        box_blur(planes, scratch, w, radius);
    }
    // Texture: illumination plus four octaves of value noise from the class
    // grain up, and per-pixel grain; applied through `gain` by lightening
    // towards white or darkening towards black, so it never clips.
    let mut mix = Mix(rng.next_u64());
    let detail = uniform(rng, 0.6, 1.4);
    let tex = &mut scratch[..n];
    tex.fill(0.0);
    let (fine, amp) = (style.grain * uniform(rng, 0.8, 1.2), 0.45 * detail);
    let illumination = short * uniform(rng, 1.0, 3.0);
    for (cell, amp) in [
        (illumination, 0.25),
        (fine, amp),
        (2.0 * fine, 0.8 * amp),
        (4.0 * fine, 0.64 * amp),
        (8.0 * fine, 0.5 * amp),
    ] {
        let lattice: Vec<f32> = (0..lattice_len(w, h, cell))
            .map(|_| (mix.unit() * 2.0 - 1.0) * amp)
            .collect();
        add_value_noise(tex, w, cell, |k| lattice[k]);
    }
    // Noise tables: sensor noise per channel (triangular luma, weaker uniform
    // chroma) and grain, all from one 64-bit draw per entry.
    let luma_sigma = uniform(rng, 1.5, 3.0);
    let (luma_k, chroma_k) = (luma_sigma / 104.1, luma_sigma * 0.35 / 73.9);
    let grain_k = detail / 255.0;
    let mut noise = vec![0f32; 4 * NOISE_LEN];
    for i in 0..NOISE_LEN {
        let r = mix.next();
        let byte = |k: usize| ((r >> (8 * k)) & 0xff) as f32;
        for c in 0..3 {
            noise[c * NOISE_LEN + i] =
                (byte(0) + byte(1) - 255.0) * luma_k + (byte(2 + c) - 127.5) * chroma_k;
        }
        noise[3 * NOISE_LEN + i] = (byte(5) + byte(6) - 255.0) * grain_k;
    }
    let rgb = &mut canvas.rgb;
    rgb.resize(3 * n, 0);
    rgb.truncate(3 * n);
    let (mut rows, mut m) = (vec![0u8; 3 * w], vec![0f32; w]);
    for (y, out) in rgb.chunks_exact_mut(3 * w).enumerate() {
        let at = y * w;
        let z = (mix.next() % (NOISE_LEN - w) as u64) as usize;
        let e = 3 * NOISE_LEN + (mix.next() % (NOISE_LEN - w) as u64) as usize;
        let texture = tex[at..at + w].iter().zip(&gain[at..]).zip(&noise[e..]);
        for (m, ((&t, &g), &e)) in m.iter_mut().zip(texture) {
            *m = (g * (t + e)).clamp(-1.0, 1.0);
        }
        for (c, row) in rows.chunks_exact_mut(w).enumerate() {
            let sources = planes[c * n + at..c * n + at + w]
                .iter()
                .zip(&noise[c * NOISE_LEN + z..]);
            for ((o, &m), (&p, &z)) in row.iter_mut().zip(&m).zip(sources) {
                let v = (p + m.max(0.0) * (255.0 - p) + m.min(0.0) * p + z).clamp(0.0, 255.0);
                // Adding 2^23 leaves round(v) in the low mantissa bits: a
                // conversion that vectorises, unlike `as u8`.
                *o = (v + 8_388_608.0).to_bits() as u8;
            }
        }
        let (r, gb) = rows.split_at(w);
        let pixels = out
            .chunks_exact_mut(3)
            .zip(r.iter().zip(&gb[..w]).zip(&gb[w..]));
        for (o, ((&r, &g), &b)) in pixels {
            o.copy_from_slice(&[r, g, b]);
        }
    }
}

/// Composites one soft-edged, shaded ellipse or convex polygon, with its own
/// texture gain, into the planar image (`centres` are the pixel centres of a row).
fn draw_shape(
    rng: &mut impl Rng,
    style: &Style,
    centres: &[f32],
    planes: &mut [f32],
    gain: &mut [f32],
    size: (f32, f32),
) {
    let (n, w) = (gain.len(), centres.len());
    let h = n / w;
    let a = w.min(h) as f32 * uniform(rng, size.0, size.1);
    let b = a * uniform(rng, 0.35, 1.0);
    let cx = uniform(rng, -0.1, 1.1) * w as f32;
    let cy = uniform(rng, -0.1, 1.1) * h as f32;
    let (fill, texture_gain) = (colour(rng, style), uniform(rng, 0.0, 1.3));
    let soft = if unit(rng) < 0.15 { 12.0 } else { 1.2 } * uniform(rng, 0.5, 2.0);
    let soft = soft.min(0.5 * a).max(0.5);
    let shade = uniform(rng, -0.5, 0.5) / a;
    let (sin, cos) = sin_cos(uniform(rng, 0.0, TAU));
    // Work in the shape's frame scaled to the unit circle, where a polygon
    // is inscribed in the circle (convex; four sides make a rectangle) and
    // each edge is a half-plane n.p <= c, so max(n.p - c) is a distance; the
    // normals are mapped back to pixel space and distances scaled by `b`.
    let sides = usize::from(unit(rng) > style.ellipse_share) * (3 + seed::below(rng, 5) as usize);
    let step = TAU / sides as f32;
    let jitter = if sides == 4 { 0.0 } else { 0.6 * step };
    let corners: Vec<f32> = (0..sides)
        .map(|k| (k as f32 + 0.5) * step + jitter * (unit(rng) - 0.5))
        .collect();
    let edges: Vec<[f32; 3]> = (0..sides)
        .map(|k| {
            let next = corners.get(k + 1).copied().unwrap_or(corners[0] + TAU);
            let (s, c) = sin_cos(0.5 * (corners[k] + next));
            let (nx, ny) = (c * cos / a - s * sin / b, c * sin / a + s * cos / b);
            [b * nx, b * ny, b * sin_cos(0.5 * (next - corners[k])).1]
        })
        .collect();
    let lo = |c: f32| (c - a - soft).max(0.0) as usize;
    let hi = |c: f32, len: usize| ((c + a + soft).max(0.0) as usize).min(len);
    let (x0, x1, y0, y1) = (lo(cx), hi(cx, w), lo(cy), hi(cy, h));
    let mut alpha = vec![0f32; x1.saturating_sub(x0)];
    let mut lit = alpha.clone();
    for y in (y0..y1).filter(|_| x0 < x1) {
        let py = y as f32 + 0.5 - cy;
        for ((d, l), &x) in alpha.iter_mut().zip(lit.iter_mut()).zip(&centres[x0..x1]) {
            let (u, v) = ((x - cx) * cos + py * sin, py * cos - (x - cx) * sin);
            *l = 1.0 + shade * u.clamp(-a, a);
            let radius = ((u / a) * (u / a) + (v / b) * (v / b)).sqrt();
            *d = if sides == 0 {
                (radius - 1.0) * b
            } else {
                f32::MIN
            };
        }
        for &[nx, ny, c] in &edges {
            for (d, &x) in alpha.iter_mut().zip(&centres[x0..x1]) {
                *d = d.max(nx * (x - cx) + ny * py - c);
            }
        }
        alpha
            .iter_mut()
            .for_each(|d| *d = (0.5 - *d / soft).clamp(0.0, 1.0));
        // Blend only the span the shape covers in this row.
        let first = alpha.iter().position(|&d| d > 0.0).unwrap_or(alpha.len());
        let last = alpha
            .iter()
            .rposition(|&d| d > 0.0)
            .map_or(first, |k| k + 1);
        let (lit, alpha) = (&lit[first..last], &alpha[first..last]);
        let row = y * w + x0 + first..y * w + x0 + last;
        for (c, plane) in planes.chunks_exact_mut(n).enumerate() {
            for ((p, &l), &d) in plane[row.clone()].iter_mut().zip(lit).zip(alpha) {
                *p += (fill[c] * l - *p) * d;
            }
        }
        for (g, &d) in gain[row].iter_mut().zip(alpha) {
            *g += (texture_gain - *g) * d;
        }
    }
}

/// Box blur of radius `r` over every row-of-`w` plane in `planes` (`tmp` is
/// as large), edges clamped; direct sums, which vectorise for small radii.
fn box_blur(planes: &mut [f32], tmp: &mut [f32], w: usize, r: usize) {
    let mut padded = vec![0f32; w + 2 * r];
    for (src, dst) in planes.chunks_exact(w).zip(tmp.chunks_exact_mut(w)) {
        padded[..r].fill(src[0]);
        padded[r..r + w].copy_from_slice(src);
        padded[r + w..].fill(src[w - 1]);
        dst.copy_from_slice(&padded[..w]);
        (1..=2 * r).for_each(|k| dst.iter_mut().zip(&padded[k..]).for_each(|(d, &s)| *d += s));
    }
    let h = planes.len() / w / 3;
    let norm = 1.0 / ((2 * r + 1) * (2 * r + 1)) as f32;
    for (src, dst) in tmp.chunks_exact(w * h).zip(planes.chunks_exact_mut(w * h)) {
        for (y, out) in dst.chunks_exact_mut(w).enumerate() {
            out.copy_from_slice(&src[y.saturating_sub(r) * w..][..w]);
            for k in 1..=2 * r {
                let from = (y + k).saturating_sub(r).min(h - 1) * w;
                out.iter_mut()
                    .zip(&src[from..from + w])
                    .for_each(|(o, &s)| *o += s);
            }
            out.iter_mut().for_each(|o| *o *= norm);
        }
    }
}

/// Number of lattice nodes `add_value_noise` reads for a `w` x `h` plane.
fn lattice_len(w: usize, h: usize, cell: f32) -> usize {
    ((w as f32 / cell) as usize + 2) * ((h as f32 / cell) as usize + 2)
}

/// Adds value noise to `plane` (rows of `w`): `node(k)` is lattice node `k`
/// (row-major, one every `cell` pixels), smoothstep-interpolated. Lattice
/// rows are expanded to full width once, so each image row is one blend.
fn add_value_noise(plane: &mut [f32], w: usize, cell: f32, node: impl Fn(usize) -> f32) {
    let (inv, smooth) = (1.0 / cell, |t: f32| t * t * (3.0 - 2.0 * t));
    let gw = (w as f32 * inv) as usize + 2;
    let columns: Vec<(usize, f32)> = (0..w)
        .map(|x| ((x as f32 * inv) as usize, smooth((x as f32 * inv).fract())))
        .collect();
    let expand = |gy: usize, out: &mut [f32]| {
        for (o, &(i, t)) in out.iter_mut().zip(&columns) {
            *o = lerp(node(gy * gw + i), node(gy * gw + i + 1), t);
        }
    };
    let (mut top, mut bottom, mut current) = (vec![0f32; w], vec![0f32; w], None);
    for (y, line) in plane.chunks_exact_mut(w).enumerate() {
        let (gy, t) = ((y as f32 * inv) as usize, smooth((y as f32 * inv).fract()));
        if current != Some(gy) {
            if current == Some(gy.wrapping_sub(1)) {
                std::mem::swap(&mut top, &mut bottom);
            } else {
                expand(gy, &mut top);
            }
            expand(gy + 1, &mut bottom);
            current = Some(gy);
        }
        for ((v, &p), &q) in line.iter_mut().zip(&top).zip(&bottom) {
            *v += lerp(p, q, t);
        }
    }
}

/// A colour near the class hue (sometimes any hue) as 0-255 RGB, from a
/// cosine hue wheel.
fn colour(rng: &mut impl Rng, style: &Style) -> [f32; 3] {
    let other = if unit(rng) < 0.3 { unit(rng) } else { 0.0 };
    let hue = style.hue + other + uniform(rng, -0.08, 0.08);
    let (sat, val) = (uniform(rng, 0.2, 0.75), uniform(rng, 0.3, 0.8) * 255.0);
    let wheel = |c: usize| 0.5 - 0.5 * sin_cos(TAU * (hue + c as f32 / 3.0)).1;
    std::array::from_fn(|c| val * (1.0 - sat * wheel(c)))
}

/// `(sin x, cos x)` from a Taylor polynomial (error below 1e-5), so images do
/// not depend on the platform's libm.
fn sin_cos(x: f32) -> (f32, f32) {
    fn sin(x: f32) -> f32 {
        let x = x - TAU * (x / TAU).round();
        let x = if x.abs() > FRAC_PI_2 {
            PI.copysign(x) - x
        } else {
            x
        };
        let x2 = x * x;
        x * (1.0 - x2 / 6.0 * (1.0 - x2 / 20.0 * (1.0 - x2 / 42.0 * (1.0 - x2 / 72.0))))
    }
    (sin(x), sin(x + FRAC_PI_2))
}

fn lerp(a: f32, b: f32, t: f32) -> f32 {
    a + (b - a) * t
}

fn unit(rng: &mut impl Rng) -> f32 {
    seed::unit_f64(rng) as f32
}

fn uniform(rng: &mut impl Rng, lo: f32, hi: f32) -> f32 {
    lo + (hi - lo) * unit(rng)
}

/// SplitMix64 for bulk values (lattices, noise tables, offsets), where a
/// ChaCha draw each would cost too much; seeded from the image's stream.
struct Mix(u64);

impl Mix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let z = (self.0 ^ (self.0 >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        let z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn unit(&mut self) -> f32 {
        (self.next() >> 40) as f32 / (1u64 << 24) as f32
    }
}

#[cfg(test)]
mod tests;
