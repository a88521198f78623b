//! Writing a resampled image into its slot of a batch: as `u8` or as
//! normalised `f32`, NCHW or NHWC, mirrored for a flip. The two passes the
//! compiler vectorises only when told the CPU's features (the flip's byte
//! shuffles, the normalisation's eight lanes) are compiled for them behind
//! a runtime check, with the portable code beside them for other CPUs.

use super::transform::{Layout, Plan, Transform};

/// Per-channel lookup table from a `u8` value to its normalised `f32`:
/// the padding's value, and what `normalised` computes for each value,
/// bit for bit. It also holds the faster arithmetic `normalised` may use
/// where that arithmetic gives the table's bits for all 768 values.
#[derive(Debug, Clone)]
pub struct NormLut {
    table: Box<[[f32; 256]; 3]>,
    fused: Option<FusedNorm>,
}

impl NormLut {
    pub fn new(config: &Transform) -> Self {
        let mut table = Box::new([[0f32; 256]; 3]);
        for (c, values) in table.iter_mut().enumerate() {
            for (out, v) in values.iter_mut().zip(0..=u8::MAX) {
                *out = divided(v, config.mean[c], config.std[c]);
            }
        }
        let fused = FusedNorm::new(config);
        let exact = table.iter().enumerate().all(|(c, values)| {
            values
                .iter()
                .zip(0..=u8::MAX)
                .all(|(out, v)| fused.value(c, v).to_bits() == out.to_bits())
        });
        Self {
            table,
            fused: exact.then_some(fused),
        }
    }

    /// Channel `c`'s value `v`, normalised.
    pub fn value(&self, c: usize, v: u8) -> f32 {
        self.table[c][usize::from(v)]
    }
}

/// A division `a / b` as a multiply by `b`'s reciprocal and a correction
/// by two fused multiply-adds (Markstein's), cheaper than the division
/// (see [`normalised`]). The result is the division's bits for most `b`
/// and `a`; [`NormLut::new`] checks every value it will be used for.
#[derive(Debug, Clone, Copy)]
struct Divisor {
    b: f32,
    inv: f32,
}

impl Divisor {
    fn new(b: f32) -> Self {
        Self { b, inv: 1.0 / b }
    }

    #[inline(always)]
    fn divide(self, a: f32) -> f32 {
        let q = a * self.inv;
        let residual = (-q).mul_add(self.b, a);
        residual.mul_add(self.inv, q)
    }
}

/// The normalisation's two divisions (by 255, then by the channel's
/// standard deviation) as [`Divisor`]s.
#[derive(Debug, Clone, Copy)]
struct FusedNorm {
    by_255: Divisor,
    mean: [f32; 3],
    by_std: [Divisor; 3],
}

impl FusedNorm {
    fn new(config: &Transform) -> Self {
        Self {
            by_255: Divisor::new(255.0),
            mean: config.mean,
            by_std: config.std.map(Divisor::new),
        }
    }

    #[inline(always)]
    fn value(&self, c: usize, v: u8) -> f32 {
        self.by_std[c].divide(self.by_255.divide(f32::from(v)) - self.mean[c])
    }
}

/// Reverses the order of the RGB pixels of `row` in place (a flip of the
/// uint8 NHWC output). Where the CPU has SSSE3 (every x86-64 server of the
/// last 15 years) the same code is compiled to byte shuffles: a 224x224
/// image in 4.5 us against 45 us without them.
pub(super) fn mirror(row: &mut [u8]) {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("ssse3") {
        #[allow(unsafe_code)]
        // SAFETY: the only requirement of a `target_feature` function is
        // that the CPU has the feature, checked just above.
        unsafe {
            mirror_ssse3(row);
        }
        return;
    }
    mirror_blocks(row);
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "ssse3")]
fn mirror_ssse3(row: &mut [u8]) {
    mirror_blocks(row);
}

/// Pixel `15 - j / 3`, channel `j % 3` of a block of 16 RGB pixels: where
/// byte `j` of the reversed block comes from.
const REVERSED: [usize; 48] = {
    let mut from = [0; 48];
    let mut j = 0;
    while j < 48 {
        from[j] = (15 - j / 3) * 3 + j % 3;
        j += 1;
    }
    from
};

/// [`mirror`]'s body: blocks of 16 pixels from each end, each reversed by
/// the fixed permutation [`REVERSED`] (which the compiler turns into
/// shuffles where it may) and swapped, then the middle pixel by pixel.
#[inline(always)]
fn mirror_blocks(row: &mut [u8]) {
    const BLOCK: usize = 48;
    let len = row.len() / 3 * 3;
    let row = &mut row[..len];
    let pairs = len / BLOCK / 2;
    let reversed =
        |block: &[u8; BLOCK]| -> [u8; BLOCK] { std::array::from_fn(|j| block[REVERSED[j]]) };
    for k in 0..pairs {
        let (head, tail) = row.split_at_mut(len - BLOCK * (k + 1));
        let (Some(left), Some(right)) = (
            head[BLOCK * k..].first_chunk_mut::<BLOCK>(),
            tail.first_chunk_mut::<BLOCK>(),
        ) else {
            unreachable!("both spans are BLOCK bytes long");
        };
        let (l, r) = (reversed(left), reversed(right));
        *left = r;
        *right = l;
    }
    row[BLOCK * pairs..len - BLOCK * pairs]
        .as_chunks_mut::<3>()
        .0
        .reverse();
}

/// `render`'s `write_rows` for `f32`: each value `(v / 255 - mean) / std`, the
/// arithmetic of torchvision's `to_tensor` and `normalize` and of
/// [`NormLut`], so the very same bits. Where the CPU has AVX2 the same code
/// is compiled to eight values an instruction: a 224x224 image in 65-80 us
/// (flipped or not), against 90-110 us through the lookup table (one load
/// per value) or the same arithmetic without AVX2, most of it the two
/// divisions. Where it also has FMA and `lut` found [`FusedNorm`]'s
/// arithmetic exact for this mean and std, that arithmetic: 40-45 us.
pub(super) fn normalised<'a>(
    rows: impl Iterator<Item = &'a [u8]>,
    plan: &Plan,
    config: &Transform,
    lut: &NormLut,
    out: &mut [f32],
) {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        if let (Some(fused), true) = (lut.fused, std::arch::is_x86_feature_detected!("fma")) {
            #[allow(unsafe_code)]
            // SAFETY: the only requirement of a `target_feature` function
            // is that the CPU has the features, checked just above.
            unsafe {
                normalised_fused(rows, plan, config.layout, &fused, out);
            }
            return;
        }
        #[allow(unsafe_code)]
        // SAFETY: the only requirement of a `target_feature` function is
        // that the CPU has the feature, checked just above.
        unsafe {
            normalised_avx2(rows, plan, config, out);
        }
        return;
    }
    normalised_values(rows, plan, config, out);
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn normalised_avx2<'a>(
    rows: impl Iterator<Item = &'a [u8]>,
    plan: &Plan,
    config: &Transform,
    out: &mut [f32],
) {
    normalised_values(rows, plan, config, out);
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
fn normalised_fused<'a>(
    rows: impl Iterator<Item = &'a [u8]>,
    plan: &Plan,
    layout: Layout,
    fused: &FusedNorm,
    out: &mut [f32],
) {
    place(rows, plan, layout, out, |c, v| fused.value(c, v));
}

/// [`normalised`]'s body.
#[inline(always)]
fn normalised_values<'a>(
    rows: impl Iterator<Item = &'a [u8]>,
    plan: &Plan,
    config: &Transform,
    out: &mut [f32],
) {
    let (mean, std) = (config.mean, config.std);
    place(rows, plan, config.layout, out, |c, v| {
        divided(v, mean[c], std[c])
    });
}

/// torchvision's `to_tensor` and `normalize` of one value, with its two
/// divisions: the table's and the divided paths' arithmetic.
#[inline(always)]
fn divided(v: u8, mean: f32, std: f32) -> f32 {
    (f32::from(v) / 255.0 - mean) / std
}

/// Where a plan's resampled part goes in its output, in pixels: the
/// output's size, and the part's first column and row and its width. With
/// a flip, destination column `x` holds source column `dw - 1 - x` of the
/// part, mirrored about the output's centre, so `dx` is mirrored too.
struct Placing {
    out_w: usize,
    out_h: usize,
    dx: usize,
    dy: usize,
    dw: usize,
}

impl Placing {
    fn of(plan: &Plan) -> Self {
        let out_w = plan.out.0 as usize;
        let (dx, dw) = (plan.dst.0 as usize, plan.dst.2 as usize);
        Self {
            out_w,
            out_h: plan.out.1 as usize,
            dx: if plan.flip { out_w - dx - dw } else { dx },
            dy: plan.dst.1 as usize,
            dw,
        }
    }
}

/// `render`'s `write_rows` for `u8`: NHWC rows copied whole (and mirrored
/// in place for a flip), 10 us for a 224x224 image; NCHW, which splits
/// each pixel's three bytes among the planes, through [`place`] compiled
/// for AVX2 where the CPU has it (byte shuffles): 12-19 us, against 60 us
/// compiled for the baseline x86-64.
pub(super) fn placed_u8<'a>(
    rows: impl Iterator<Item = &'a [u8]>,
    plan: &Plan,
    layout: Layout,
    out: &mut [u8],
) {
    match layout {
        Layout::Nhwc => {
            let Placing {
                out_w, dx, dy, dw, ..
            } = Placing::of(plan);
            for (y, row) in rows.enumerate() {
                let start = ((dy + y) * out_w + dx) * 3;
                let out_row = &mut out[start..start + 3 * dw];
                out_row.copy_from_slice(row);
                if plan.flip {
                    mirror(out_row);
                }
            }
        }
        Layout::Nchw => {
            #[cfg(target_arch = "x86_64")]
            if std::arch::is_x86_feature_detected!("avx2") {
                #[allow(unsafe_code)]
                // SAFETY: the only requirement of a `target_feature`
                // function is that the CPU has the feature, checked just
                // above.
                unsafe {
                    planar_u8_avx2(rows, plan, out);
                }
                return;
            }
            place(rows, plan, layout, out, |_, v| v);
        }
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn planar_u8_avx2<'a>(rows: impl Iterator<Item = &'a [u8]>, plan: &Plan, out: &mut [u8]) {
    place(rows, plan, Layout::Nchw, out, |_, v| v);
}

/// The one writer behind `render`'s `write_rows`, for each element type:
/// [`normalised`]'s and [`placed_u8`]'s body.
#[inline(always)]
fn place<'a, T: Copy>(
    rows: impl Iterator<Item = &'a [u8]>,
    plan: &Plan,
    layout: Layout,
    out: &mut [T],
    value: impl Fn(usize, u8) -> T,
) {
    let Placing {
        out_w,
        out_h,
        dx,
        dy,
        dw,
    } = Placing::of(plan);
    match layout {
        Layout::Nhwc => {
            for (y, row) in rows.enumerate() {
                let start = ((dy + y) * out_w + dx) * 3;
                let out_row = &mut out[start..start + 3 * dw];
                // `for` loops, not `for_each`: the zip's `fold` would be a
                // function of its own, outside `normalised_avx2`'s AVX2.
                let out_px = out_row.chunks_exact_mut(3);
                if plan.flip {
                    for (o, px) in out_px.zip(row.chunks_exact(3).rev()) {
                        o[0] = value(0, px[0]);
                        o[1] = value(1, px[1]);
                        o[2] = value(2, px[2]);
                    }
                } else {
                    for (o, px) in out_px.zip(row.chunks_exact(3)) {
                        o[0] = value(0, px[0]);
                        o[1] = value(1, px[1]);
                        o[2] = value(2, px[2]);
                    }
                }
            }
        }
        Layout::Nchw => {
            let plane = out_w * out_h;
            let (r_plane, rest) = out.split_at_mut(plane);
            let (g_plane, b_plane) = rest.split_at_mut(plane);
            for (y, row) in rows.enumerate() {
                let start = (dy + y) * out_w + dx;
                let span = start..start + dw;
                let planes = r_plane[span.clone()]
                    .iter_mut()
                    .zip(g_plane[span.clone()].iter_mut())
                    .zip(b_plane[span].iter_mut());
                if plan.flip {
                    for (((r, g), b), px) in planes.zip(row.chunks_exact(3).rev()) {
                        *r = value(0, px[0]);
                        *g = value(1, px[1]);
                        *b = value(2, px[2]);
                    }
                } else {
                    for (((r, g), b), px) in planes.zip(row.chunks_exact(3)) {
                        *r = value(0, px[0]);
                        *g = value(1, px[1]);
                        *b = value(2, px[2]);
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pipeline::decode::transform::Rect;

    /// A plan that places the whole `width x height` source, unscaled, at
    /// `at` in an output of size `out`.
    fn whole(width: u32, height: u32, out: (u32, u32), at: (u32, u32), flip: bool) -> Plan {
        Plan {
            src: Rect {
                x: 0.0,
                y: 0.0,
                width: f64::from(width),
                height: f64::from(height),
            },
            out,
            dst: (at.0, at.1, width, height),
            flip,
        }
    }

    #[test]
    fn mirror_reverses_the_pixels_of_rows_of_every_length() {
        for pixels in 0..100usize {
            let row: Vec<u8> = (0..3 * pixels).map(|i| (i % 251) as u8).collect();
            let expected: Vec<u8> = row.chunks_exact(3).rev().flatten().copied().collect();
            // Through the CPU's fastest path and through the portable one.
            for mirror in [mirror, mirror_blocks] {
                let mut mirrored = row.clone();
                mirror(&mut mirrored);
                assert_eq!(mirrored, expected, "{pixels} pixels");
            }
        }
    }

    #[test]
    fn normalised_values_are_the_lookup_tables_bits_on_every_path() {
        let config = Transform {
            mean: [0.485, 0.456, 0.406],
            std: [0.229, 0.224, 0.225],
            ..Transform::default()
        };
        let lut = NormLut::new(&config);
        assert!(
            lut.fused.is_some(),
            "ImageNet's mean and std divide exactly fused"
        );
        // The fused arithmetic where the CPU has it, the divisions (AVX2
        // or not) where it does not, and the portable code.
        let unfused = NormLut {
            fused: None,
            ..lut.clone()
        };
        // Widths around the 8 and 16 lanes of a vector, both layouts, both
        // flips, every byte value on the way.
        for width in [1u32, 7, 8, 9, 17, 31, 33, 100] {
            let height = 3u32;
            let pixels: Vec<u8> = (0..3 * width * height)
                .map(|i| (i * 37 % 256) as u8)
                .collect();
            let at = |y: u32, x: u32, c: u32| pixels[(3 * (y * width + x) + c) as usize];
            for (layout, flip) in [Layout::Nchw, Layout::Nhwc]
                .into_iter()
                .flat_map(|layout| [(layout, false), (layout, true)])
            {
                let config = Transform {
                    layout,
                    ..config.clone()
                };
                let p = whole(width, height, (width, height), (0, 0), flip);
                let len = (3 * width * height) as usize;
                let rows = || pixels.chunks_exact(3 * width as usize);
                let (mut fastest, mut divided, mut portable) =
                    (vec![0f32; len], vec![0f32; len], vec![0f32; len]);
                normalised(rows(), &p, &config, &lut, &mut fastest);
                normalised(rows(), &p, &config, &unfused, &mut divided);
                normalised_values(rows(), &p, &config, &mut portable);
                for y in 0..height {
                    for x in 0..width {
                        let from = if flip { width - 1 - x } else { x };
                        for c in 0..3 {
                            let i = match layout {
                                Layout::Nhwc => 3 * (y * width + x) + c,
                                Layout::Nchw => c * width * height + y * width + x,
                            } as usize;
                            let expected = lut.value(c as usize, at(y, from, c));
                            for out in [&fastest, &divided, &portable] {
                                assert_eq!(out[i].to_bits(), expected.to_bits(), "{width} {i}");
                            }
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn fused_division_is_used_only_where_it_gives_the_divisions_bits() {
        // Common means and stds (ImageNet's, CLIP's, 0.5, none): the fused
        // arithmetic holds for all their values.
        for (mean, std) in [
            ([0.485, 0.456, 0.406], [0.229, 0.224, 0.225]),
            (
                [0.481_454_66, 0.457_827_5, 0.408_210_73],
                [0.268_629_54, 0.261_302_6, 0.275_777_1],
            ),
            ([0.5; 3], [0.5; 3]),
            ([0.0; 3], [1.0; 3]),
        ] {
            let lut = NormLut::new(&Transform {
                mean,
                std,
                ..Transform::default()
            });
            assert!(lut.fused.is_some(), "{mean:?} {std:?}");
        }
        // A subnormal std: its reciprocal loses bits, so the fused
        // arithmetic is off the division for some values, and `normalised`
        // divides.
        let config = Transform {
            std: [1e-39; 3],
            ..Transform::default()
        };
        let lut = NormLut::new(&config);
        assert!(lut.fused.is_none());
        let row: Vec<u8> = (0..=u8::MAX).collect();
        let plan = whole(85, 1, (85, 1), (0, 0), false);
        let mut out = vec![0f32; 255];
        normalised([&row[..255]].into_iter(), &plan, &config, &lut, &mut out);
        for (x, value) in out[..85].iter().enumerate() {
            assert_eq!(value.to_bits(), lut.value(0, row[3 * x]).to_bits());
        }
    }

    #[test]
    fn placed_u8_holds_the_generic_writers_bytes_on_every_path() {
        // Widths around 16 and 32 lanes, placed at an offset in a larger
        // output (padding around it), both layouts, both flips.
        for width in [1u32, 7, 15, 16, 17, 31, 33, 100] {
            let height = 3u32;
            let (out_w, out_h) = (width + 5, height + 2);
            let pixels: Vec<u8> = (0..3 * width * height)
                .map(|i| (i * 37 % 256) as u8)
                .collect();
            for layout in [Layout::Nchw, Layout::Nhwc] {
                for flip in [false, true] {
                    let plan = whole(width, height, (out_w, out_h), (2, 1), flip);
                    let rows = || pixels.chunks_exact(3 * width as usize);
                    let len = (3 * out_w * out_h) as usize;
                    let (mut fast, mut generic) = (vec![9u8; len], vec![9u8; len]);
                    placed_u8(rows(), &plan, layout, &mut fast);
                    place(rows(), &plan, layout, &mut generic, |_, v| v);
                    assert_eq!(fast, generic, "{width} {layout:?} flip {flip}");
                    assert_ne!(fast, vec![9u8; len]);
                }
            }
        }
    }
}
