//! Synthetic, photo-like ImageFolder datasets for benchmarks and tests.
//!
//! `tributary synth` needs data whose *decode cost and compressed size* match
//! real photographs, otherwise a loader benchmark measures the wrong thing:
//! flat colours compress to nothing and decode too fast, while white noise is
//! far larger and slower than any photo. So each image is painted like a
//! (very abstract) photo: a smooth multi-colour gradient background, a handful
//! of soft-edged ellipses and convex polygons with their own shading, a box
//! blur for lens softness, multi-scale texture (value noise plus oriented
//! waves, "grass" and "fabric"), and a little sensor noise. Sizes follow
//! ImageNet (long side at most 500 px, short side 300-400 px, landscape,
//! portrait and square); JPEG quality is 85-95 with mixed chroma subsampling,
//! and about one image in 50 is a PNG. The class of image `i` is
//! `i % classes` and sets the palette, shape mix and texture grain, so classes
//! differ visually.
//!
//! Image `i` is a pure function of `(seed, i, classes)`: everything is drawn
//! from [`seed::rng`]`(Domain::Synth, ..)` and integer mixing, with no
//! platform maths (`sin` is a local polynomial), so the bytes are the same on
//! any machine and for any number of threads.

use std::cell::RefCell;
use std::f32::consts::{FRAC_PI_2, PI, TAU};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use image::codecs::png::{CompressionType, FilterType, PngEncoder};
use image::{ExtendedColorType, ImageEncoder};
use jpeg_encoder::{ColorType, Encoder, SamplingFactor};
use rand_core::Rng;
use rayon::prelude::*;
use tributary_common::seed::{self, Domain};

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
    #[error("cannot write {}: {source}", path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
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
/// to at least three digits and to the width of the largest class index.
pub fn class_dir_name(c: usize, classes: usize) -> String {
    let digits = classes.saturating_sub(1).max(1).ilog10() as usize + 1;
    format!("class_{c:0width$}", width = digits.max(3))
}

/// Renders image `index` of a dataset with `classes` classes (pure, deterministic).
pub fn render(seed: u64, index: usize, classes: usize) -> Result<SynthImage, SynthError> {
    if classes == 0 {
        return Err(SynthError::InvalidOptions(
            "classes must be at least 1".into(),
        ));
    }
    let class = index % classes;
    let mut rng = seed::rng(Domain::Synth, &[seed, index as u64]);
    let png = seed::below(&mut rng, 50) == 0;
    let (w, h) = pick_size(&mut rng);
    let style = class_style(seed, class);
    let mut bytes = Vec::with_capacity(w * h * if png { 3 } else { 1 });
    let encoded = CANVAS.with_borrow_mut(|canvas| {
        paint(&mut rng, &style, w, h, canvas);
        if png {
            PngEncoder::new_with_quality(&mut bytes, CompressionType::Fast, FilterType::Adaptive)
                .write_image(&canvas.rgb, w as u32, h as u32, ExtendedColorType::Rgb8)
                .map_err(|e| e.to_string())
        } else {
            let quality = 85 + seed::below(&mut rng, 11) as u8;
            let sampling = match unit(&mut rng) {
                u if u < 0.60 => SamplingFactor::R_4_2_0,
                u if u < 0.85 => SamplingFactor::R_4_4_4,
                _ => SamplingFactor::R_4_2_2,
            };
            let mut encoder = Encoder::new(&mut bytes, quality);
            encoder.set_sampling_factor(sampling);
            encoder
                .encode(&canvas.rgb, w as u16, h as u16, ColorType::Rgb)
                .map_err(|e| e.to_string())
        }
    });
    encoded.map_err(|message| SynthError::Encode { index, message })?;
    Ok(SynthImage {
        class,
        file_name: format!("{index:06}.{}", if png { "png" } else { "jpg" }),
        width: w as u32,
        height: h as u32,
        bytes,
    })
}

/// Writes the ImageFolder tree under `dir` (created if missing), in parallel on the current rayon pool.
/// `progress(bytes_of_one_image)` is called once per image written (from any thread) so the CLI can drive a progress bar.
pub fn write_image_folder(
    dir: &Path,
    options: &SynthOptions,
    progress: &(dyn Fn(u64) + Sync),
) -> Result<SynthSummary, SynthError> {
    let SynthOptions {
        images,
        classes,
        seed,
    } = *options;
    if images == 0 {
        return Err(SynthError::InvalidOptions(
            "images must be at least 1".into(),
        ));
    }
    if classes == 0 {
        return Err(SynthError::InvalidOptions(
            "classes must be at least 1".into(),
        ));
    }
    if classes > images {
        return Err(SynthError::InvalidOptions(format!(
            "classes ({classes}) must not exceed images ({images}), or some classes would be empty"
        )));
    }
    let class_dirs: Vec<PathBuf> = (0..classes)
        .map(|c| dir.join(class_dir_name(c, classes)))
        .collect();
    for path in &class_dirs {
        std::fs::create_dir_all(path).map_err(|source| SynthError::Io {
            path: path.clone(),
            source,
        })?;
    }
    let (bytes, pngs) = (AtomicU64::new(0), AtomicUsize::new(0));
    let (widths, heights) = (AtomicU64::new(0), AtomicU64::new(0));
    (0..images).into_par_iter().try_for_each(|index| {
        let image = render(seed, index, classes)?;
        let path = class_dirs[image.class].join(&image.file_name);
        std::fs::write(&path, &image.bytes).map_err(|source| SynthError::Io { path, source })?;
        let len = image.bytes.len() as u64;
        bytes.fetch_add(len, Ordering::Relaxed);
        pngs.fetch_add(
            usize::from(image.file_name.ends_with(".png")),
            Ordering::Relaxed,
        );
        widths.fetch_add(u64::from(image.width), Ordering::Relaxed);
        heights.fetch_add(u64::from(image.height), Ordering::Relaxed);
        progress(len);
        Ok(())
    })?;
    Ok(SynthSummary {
        images,
        bytes: bytes.into_inner(),
        pngs: pngs.into_inner(),
        mean_width: widths.into_inner() as f64 / images as f64,
        mean_height: heights.into_inner() as f64 / images as f64,
    })
}

/// What a class looks like: a dominant hue, a preference between round and
/// angular shapes, and the orientation and grain of its texture.
#[derive(Debug)]
struct Style {
    hue: f32,
    ellipse_share: f32,
    wave_angle: f32,
    wave_period: f32,
    clutter: f32,
}

fn class_style(seed: u64, class: usize) -> Style {
    // A three-part path never collides with the two-part per-image paths.
    let mut rng = seed::rng(Domain::Synth, &[seed, u64::MAX, class as u64]);
    Style {
        hue: unit(&mut rng),
        ellipse_share: uniform(&mut rng, 0.15, 0.85),
        wave_angle: uniform(&mut rng, 0.0, PI),
        wave_period: uniform(&mut rng, 3.0, 14.0),
        clutter: uniform(&mut rng, 0.0, 1.0),
    }
}

/// ImageNet-like `(width, height)`: the long side at most 500 px, the short
/// side 300-400 px skewed low; means come to about 400 x 358.
fn pick_size(rng: &mut impl Rng) -> (usize, usize) {
    // (long / short, portrait, cumulative probability)
    const ASPECTS: [(f32, bool, f32); 5] = [
        (4.0 / 3.0, false, 0.45),
        (1.5, false, 0.60),
        (1.0, false, 0.75),
        (4.0 / 3.0, true, 0.95),
        (1.5, true, 1.0),
    ];
    let u = unit(rng);
    let (ratio, portrait, _) = *ASPECTS
        .iter()
        .find(|a| u < a.2)
        .unwrap_or(&ASPECTS[ASPECTS.len() - 1]);
    let max_short = (500.0 / ratio).min(400.0);
    let v = unit(rng);
    let short = 300.0 + (max_short - 300.0) * v * v.sqrt();
    let long = (short * ratio).round().min(500.0);
    let (short, long) = (short.round() as usize, long as usize);
    if portrait {
        (short, long)
    } else {
        (long, short)
    }
}

/// Working memory of one thread, reused from image to image so that
/// rendering does not fault in and zero fresh megabytes every time.
#[derive(Default)]
struct Canvas {
    /// Red, green and blue planes of `w * h` values each (planar, so the
    /// inner loops vectorise).
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

/// Entries in each precomputed noise table; a row reads `w` of them from a
/// random offset.
const NOISE_LEN: usize = 4096;

/// Paints one `w` x `h` image into `canvas.rgb`.
#[inline(never)]
fn paint(rng: &mut impl Rng, style: &Style, w: usize, h: usize, canvas: &mut Canvas) {
    let n = w * h;
    let short = w.min(h) as f32;
    let Canvas {
        planes,
        gain,
        scratch,
        rgb,
    } = canvas;
    // Background: a coarse lattice of colours, smoothly interpolated.
    let cell = short * uniform(rng, 0.35, 0.8);
    let lattice: Vec<[f32; 3]> = (0..lattice_len(w, h, cell))
        .map(|_| colour(rng, style))
        .collect();
    reset(planes, 3 * n);
    for (c, plane) in planes.chunks_exact_mut(n).enumerate() {
        add_value_noise(plane, w, cell, |k| lattice[k][c]);
    }
    gain.clear();
    gain.resize(n, uniform(rng, 0.5, 1.0));
    // Clutter (pebbles, leaves) under a few large shapes.
    for _ in 0..(style.clutter * 300.0 * unit(rng)) as usize {
        draw_shape(rng, style, w, planes, gain, (0.01, 0.05));
    }
    for _ in 0..3 + seed::below(rng, 6) {
        draw_shape(rng, style, w, planes, gain, (0.08, 0.45));
    }
    reset(scratch, 3 * n);
    let radius = seed::below(rng, 3) as usize;
    if radius > 0 {
        box_blur(planes, scratch, w, radius);
    }
    // Texture: fractal value noise (illumination, then four octaves from a
    // few pixels up), oriented waves and pixel-scale grain, applied through
    // `gain` by lightening towards white or darkening towards black.
    let mut mix = Mix(rng.next_u64());
    let detail = uniform(rng, 0.6, 1.4);
    let tex = &mut scratch[..n];
    tex.fill(0.0);
    let (fine, amp) = (uniform(rng, 2.0, 3.0), 0.4 * detail);
    let octaves = [
        (short * uniform(rng, 1.0, 3.0), 0.25),
        (fine, amp),
        (2.0 * fine, 0.8 * amp),
        (4.0 * fine, 0.64 * amp),
        (8.0 * fine, 0.5 * amp),
    ];
    for (cell, amp) in octaves {
        let lattice: Vec<f32> = (0..lattice_len(w, h, cell))
            .map(|_| (mix.unit() * 2.0 - 1.0) * amp)
            .collect();
        add_value_noise(tex, w, cell, |k| lattice[k]);
    }
    add_waves(rng, style, tex, w, 0.1 * detail);
    // Noise tables: sensor noise per channel (triangular luma, weaker uniform
    // chroma) and grain, all from one 64-bit draw per entry.
    let luma_sigma = uniform(rng, 1.5, 3.0);
    let (luma_k, chroma_k) = (luma_sigma / 104.1, luma_sigma * 0.35 / 73.9);
    let grain_k = 0.8 * detail / 255.0;
    let mut noise = vec![0f32; 4 * NOISE_LEN];
    for i in 0..NOISE_LEN {
        let r = mix.next();
        let byte = |k: usize| ((r >> (8 * k)) & 0xff) as f32;
        let luma = byte(0) + byte(1) - 255.0;
        for c in 0..3 {
            noise[c * NOISE_LEN + i] = luma * luma_k + (byte(2 + c) - 127.5) * chroma_k + 0.5;
        }
        noise[3 * NOISE_LEN + i] = (byte(5) + byte(6) - 255.0) * grain_k;
    }
    rgb.clear();
    rgb.resize(3 * n, 0);
    let mut m = vec![0f32; w];
    for (y, out) in rgb.chunks_exact_mut(3 * w).enumerate() {
        let at = y * w;
        let (z, e) = (
            (mix.next() % (NOISE_LEN - w) as u64) as usize,
            (mix.next() % (NOISE_LEN - w) as u64) as usize,
        );
        let texture = tex[at..at + w]
            .iter()
            .zip(&gain[at..at + w])
            .zip(&noise[3 * NOISE_LEN + e..]);
        for (m, ((&t, &g), &e)) in m.iter_mut().zip(texture) {
            *m = (g * (t + e)).clamp(-1.0, 1.0);
        }
        let channel = |c: usize| {
            planes[c * n + at..c * n + at + w]
                .iter()
                .zip(&noise[c * NOISE_LEN + z..])
        };
        let pixels = out
            .chunks_exact_mut(3)
            .zip(&m)
            .zip(channel(0).zip(channel(1)).zip(channel(2)));
        for ((o, &m), (((r, zr), (g, zg)), (b, zb))) in pixels {
            let (up, down) = (m.max(0.0), m.min(0.0));
            o[0] = (r + up * (255.0 - r) + down * r + zr) as u8;
            o[1] = (g + up * (255.0 - g) + down * g + zg) as u8;
            o[2] = (b + up * (255.0 - b) + down * b + zb) as u8;
        }
    }
}

/// Empties `buffer` and refills it with `len` zeros, keeping its allocation.
fn reset(buffer: &mut Vec<f32>, len: usize) {
    buffer.clear();
    buffer.resize(len, 0.0);
}

/// Composites one soft-edged, shaded, filled ellipse or convex polygon into
/// the planar image (`planes` holds three `gain`-sized planes).
#[inline(never)]
fn draw_shape(
    rng: &mut impl Rng,
    style: &Style,
    w: usize,
    planes: &mut [f32],
    gain: &mut [f32],
    size: (f32, f32),
) {
    let (n, h) = (gain.len(), gain.len() / w);
    let a = w.min(h) as f32 * uniform(rng, size.0, size.1);
    let b = a * uniform(rng, 0.35, 1.0);
    let (cx, cy) = (
        uniform(rng, -0.1, 1.1) * w as f32,
        uniform(rng, -0.1, 1.1) * h as f32,
    );
    let fill = colour(rng, style);
    let texture_gain = uniform(rng, 0.0, 1.3);
    let soft = if unit(rng) < 0.15 {
        uniform(rng, 6.0, 25.0)
    } else {
        uniform(rng, 0.6, 2.5)
    }
    .min(0.5 * a)
    .max(0.5);
    let shade = uniform(rng, -0.5, 0.5) / a;
    let (sin, cos) = sin_cos(uniform(rng, 0.0, TAU));
    // Convex polygons: vertices on the ellipse, in angular order; edges as
    // half-planes (unit normal, offset) so `max(n.p - c)` is a distance.
    let mut edges = Vec::new();
    if unit(rng) >= style.ellipse_share {
        let sides = 3 + seed::below(rng, 5) as usize;
        let jitter = if sides == 4 && unit(rng) < 0.5 {
            0.0
        } else {
            0.3
        };
        let vertices: Vec<(f32, f32)> = (0..sides)
            .map(|k| {
                let (s, c) =
                    sin_cos((k as f32 + 0.5 + uniform(rng, -jitter, jitter)) * TAU / sides as f32);
                let (u, v) = (a * c, b * s);
                (u * cos - v * sin, u * sin + v * cos)
            })
            .collect();
        for (k, &(x0, y0)) in vertices.iter().enumerate() {
            let (x1, y1) = vertices[(k + 1) % sides];
            let len = (x1 - x0).hypot(y1 - y0).max(1e-3);
            let (mut nx, mut ny) = ((y1 - y0) / len, (x0 - x1) / len);
            if nx * x0 + ny * y0 < 0.0 {
                (nx, ny) = (-nx, -ny);
            }
            edges.push((nx, ny, nx * x0 + ny * y0));
        }
    }
    // A pixel is touched where distance < reach; the ellipse distance is
    // (sqrt(q) - 1) * b, q being the squared normalised radius, quadratic in x.
    let (reach, inv_soft, inv_a, inv_b) = (0.5 * soft, 1.0 / soft, 1.0 / a, 1.0 / b);
    let big = 1.0 + reach * inv_b;
    let (ia2, ib2) = (inv_a * inv_a, inv_b * inv_b);
    let (qa, qb, qc) = (
        cos * cos * ia2 + sin * sin * ib2,
        2.0 * cos * sin * (ia2 - ib2),
        sin * sin * ia2 + cos * cos * ib2,
    );
    let extent = a * big + 1.0;
    let (y0, y1) = (
        (cy - extent).max(0.0) as usize,
        ((cy + extent).max(0.0) as usize).min(h),
    );
    let (mut alpha, mut lit) = (vec![0f32; w], vec![0f32; w]);
    for y in y0..y1 {
        let py = y as f32 + 0.5 - cy;
        // The span of `px = x + 0.5 - cx` where the pixel is touched.
        let (mut lo, mut hi) = (f32::MIN, f32::MAX);
        if edges.is_empty() {
            let (b1, c1) = (qb * py, qc * py * py - big * big);
            let disc = b1 * b1 - 4.0 * qa * c1;
            if disc <= 0.0 {
                continue;
            }
            (lo, hi) = (
                (-b1 - disc.sqrt()) / (2.0 * qa),
                (-b1 + disc.sqrt()) / (2.0 * qa),
            );
        }
        for &(nx, ny, c) in &edges {
            let m = reach + c - ny * py;
            if nx > 1e-6 {
                hi = hi.min(m / nx);
            } else if nx < -1e-6 {
                lo = lo.max(m / nx);
            } else if m <= 0.0 {
                hi = lo;
            }
        }
        let x0 = (cx + lo - 0.5).clamp(0.0, w as f32).ceil() as usize;
        let x1 = ((cx + hi - 0.5).clamp(-1.0, w as f32 - 1.0).floor() + 1.0) as usize;
        if x0 >= x1 {
            continue;
        }
        let (alpha, lit) = (&mut alpha[x0..x1], &mut lit[x0..x1]);
        let px0 = x0 as f32 + 0.5 - cx;
        for (k, (d, l)) in alpha.iter_mut().zip(lit.iter_mut()).enumerate() {
            let px = px0 + k as f32;
            let u = px * cos + py * sin;
            *l = 1.0 + shade * u.clamp(-a, a);
            *d = if edges.is_empty() {
                let v = py * cos - px * sin;
                (((u * inv_a) * (u * inv_a) + (v * inv_b) * (v * inv_b)).sqrt() - 1.0) * b
            } else {
                f32::MIN
            };
        }
        for &(nx, ny, c) in &edges {
            for (k, d) in alpha.iter_mut().enumerate() {
                *d = d.max(nx * (px0 + k as f32) + ny * py - c);
            }
        }
        alpha
            .iter_mut()
            .for_each(|d| *d = (0.5 - *d * inv_soft).clamp(0.0, 1.0));
        let row = y * w + x0..y * w + x1;
        for (c, plane) in planes.chunks_exact_mut(n).enumerate() {
            for ((p, &l), &a) in plane[row.clone()]
                .iter_mut()
                .zip(lit.iter())
                .zip(alpha.iter())
            {
                *p += (fill[c] * l - *p) * a;
            }
        }
        for (g, &a) in gain[row].iter_mut().zip(alpha.iter()) {
            *g += (texture_gain - *g) * a;
        }
    }
}

/// Box blur of radius `r` over every plane (rows of `w`; `tmp` as large as
/// `planes`), edges clamped: direct sums, which vectorise, for small radii.
#[inline(never)]
fn box_blur(planes: &mut [f32], tmp: &mut [f32], w: usize, r: usize) {
    let norm = 1.0 / ((2 * r + 1) * (2 * r + 1)) as f32;
    let mut padded = vec![0f32; w + 2 * r];
    for (src, dst) in planes.chunks_exact(w).zip(tmp.chunks_exact_mut(w)) {
        padded[..r].fill(src[0]);
        padded[r..r + w].copy_from_slice(src);
        padded[r + w..].fill(src[w - 1]);
        dst.copy_from_slice(&padded[..w]);
        for k in 1..=2 * r {
            dst.iter_mut().zip(&padded[k..]).for_each(|(d, &s)| *d += s);
        }
    }
    let h = planes.len() / w / 3;
    for (src, dst) in tmp.chunks_exact(w * h).zip(planes.chunks_exact_mut(w * h)) {
        for (y, out) in dst.chunks_exact_mut(w).enumerate() {
            out.fill(0.0);
            for k in 0..=2 * r {
                let from = (y + k).saturating_sub(r).min(h - 1) * w;
                out.iter_mut()
                    .zip(&src[from..from + w])
                    .for_each(|(o, &s)| *o += s);
            }
            out.iter_mut().for_each(|o| *o *= norm);
        }
    }
}

/// Number of lattice nodes `add_value_noise` needs for a `w` x `h` plane.
fn lattice_len(w: usize, h: usize, cell: f32) -> usize {
    ((w as f32 / cell) as usize + 2) * ((h as f32 / cell) as usize + 2)
}

/// Adds value noise to `plane` (rows of `w`): `node(k)` is the value of
/// lattice node `k` (row-major, `lattice_len` nodes, one every `cell`
/// pixels), smoothstep-interpolated in between.
#[inline(never)]
fn add_value_noise(plane: &mut [f32], w: usize, cell: f32, node: impl Fn(usize) -> f32) {
    let inv = 1.0 / cell;
    let gw = (w as f32 * inv) as usize + 2;
    let smooth = |t: f32| t * t * (3.0 - 2.0 * t);
    let weights: Vec<f32> = (0..w).map(|x| smooth((x as f32 * inv).fract())).collect();
    // Runs of pixels between the same two lattice columns: (column, start, end).
    let mut runs: Vec<(usize, usize, usize)> = Vec::new();
    for x in 0..w {
        let i = (x as f32 * inv) as usize;
        match runs.last_mut() {
            Some(run) if run.0 == i => run.2 = x + 1,
            _ => runs.push((i, x, x + 1)),
        }
    }
    let mut row = vec![0f32; gw];
    for (y, line) in plane.chunks_exact_mut(w).enumerate() {
        let f = y as f32 * inv;
        let (gy, t) = (f as usize, smooth(f.fract()));
        for (i, r) in row.iter_mut().enumerate() {
            *r = lerp(node(gy * gw + i), node((gy + 1) * gw + i), t);
        }
        for &(i, start, end) in &runs {
            let (p, d) = (row[i], row[i + 1] - row[i]);
            for (v, &t) in line[start..end].iter_mut().zip(&weights[start..end]) {
                *v += p + d * t;
            }
        }
    }
}

/// Adds three plane waves near the class's texture orientation and period
/// ("fabric"), using `sin(a + b) = sin a cos b + cos a sin b` so the inner
/// loop is two multiply-adds per pixel.
#[inline(never)]
fn add_waves(rng: &mut impl Rng, style: &Style, tex: &mut [f32], w: usize, amp: f32) {
    let mut sines = vec![0f32; w];
    let mut cosines = vec![0f32; w];
    for _ in 0..3 {
        let (ky, kx) = sin_cos(style.wave_angle + uniform(rng, -0.4, 0.4));
        let k = TAU / (style.wave_period * uniform(rng, 0.6, 1.6));
        let (phase, a) = (uniform(rng, 0.0, TAU), amp * uniform(rng, 0.3, 1.0));
        for (x, (s, c)) in sines.iter_mut().zip(cosines.iter_mut()).enumerate() {
            let (sx, cx) = sin_cos(k * kx * x as f32 + phase);
            (*s, *c) = (sx * a, cx * a);
        }
        for (y, line) in tex.chunks_exact_mut(w).enumerate() {
            let (sy, cy) = sin_cos(k * ky * y as f32);
            for ((v, &s), &c) in line.iter_mut().zip(&sines).zip(&cosines) {
                *v += s * cy + c * sy;
            }
        }
    }
}

/// A colour near the class hue (sometimes any hue), as 0-255 RGB.
fn colour(rng: &mut impl Rng, style: &Style) -> [f32; 3] {
    let hue = if unit(rng) < 0.7 {
        style.hue + uniform(rng, -0.08, 0.08)
    } else {
        unit(rng)
    };
    let (sat, val) = (uniform(rng, 0.2, 0.75), uniform(rng, 0.3, 0.8) * 255.0);
    let h6 = (hue - hue.floor()) * 6.0;
    let f = h6 - h6.floor();
    let (p, q, t) = (
        val * (1.0 - sat),
        val * (1.0 - sat * f),
        val * (1.0 - sat * (1.0 - f)),
    );
    match h6 as u32 {
        0 => [val, t, p],
        1 => [q, val, p],
        2 => [p, val, t],
        3 => [p, q, val],
        4 => [t, p, val],
        _ => [val, p, q],
    }
}

/// `(sin x, cos x)` from a Taylor polynomial (error below 1e-5), so images do
/// not depend on the platform's libm.
fn sin_cos(x: f32) -> (f32, f32) {
    fn sin(x: f32) -> f32 {
        let mut x = x - TAU * (x / TAU).round();
        if x > FRAC_PI_2 {
            x = PI - x;
        } else if x < -FRAC_PI_2 {
            x = -PI - x;
        }
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

/// SplitMix64, for the bulk values (lattices, pixel noise) where a ChaCha
/// draw each would dominate the cost; seeded from the image's ChaCha stream.
struct Mix(u64);

impl Mix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn unit(&mut self) -> f32 {
        (self.next() >> 40) as f32 * (1.0 / (1u64 << 24) as f32)
    }
}
