//! Resampling a source rectangle of an RGB8 image into an output image:
//! antialiased bilinear (`fast_image_resize`), its two passes in the
//! cheaper order for the rectangle.

use fast_image_resize::images::{Image, ImageRef};
use fast_image_resize::{FilterType, PixelType, ResizeAlg, ResizeOptions, Resizer};

use super::transform::Rect;

/// Resamples `src` of the RGB8 image `(width, height, pixels)` into `dst`
/// (antialiased bilinear).
///
/// fast_image_resize runs the vertical pass of a `u8` image first, so its
/// horizontal pass (the costlier: three interleaved channels) always runs
/// over the output's rows. Where the source rectangle has fewer rows than
/// the output (an upscale: 48% of `train`'s crops of a 400x300 image at
/// 224, 27% of a 500x375 one), the horizontal pass runs first here, over
/// the rows the vertical filter reaches, then the vertical pass: 25-40%
/// less time for such a crop. The filter windows and weights are the same
/// either way; only the rounding between the passes differs, and this is
/// the order of torchvision's kernel: its pixels exactly in the upscales
/// of `python/tests/test_transforms.py`, where the vertical-first order is
/// off by up to a level (0.2 on average).
pub(super) fn resample(
    resizer: &mut Resizer,
    rows: &mut Vec<u8>,
    (width, height, pixels): (u32, u32, &[u8]),
    src: Rect,
    dst: &mut Image<'_>,
) -> Result<(), String> {
    let bilinear = |x, y, width, height| {
        ResizeOptions::new()
            .crop(x, y, width, height)
            .resize_alg(ResizeAlg::Convolution(FilterType::Bilinear))
    };
    let (dw, dh) = (dst.width(), dst.height());
    // An upscale's filter reaches one source row either way of its centre.
    let first = (src.y - 1.0).floor().max(0.0) as u32;
    let end = (src.y + src.height + 1.0).ceil().min(f64::from(height)) as u32;
    let band = end.saturating_sub(first);
    let horizontal = src.width != f64::from(dw) || src.x.fract() != 0.0;
    if !horizontal || band == 0 || band >= dh {
        let view = ImageRef::new(width, height, pixels, PixelType::U8x3)
            .map_err(|e| format!("bad image buffer: {e}"))?;
        return resizer
            .resize(&view, dst, &bilinear(src.x, src.y, src.width, src.height))
            .map_err(|e| format!("resize failed: {e}"));
    }
    let pitch = 3 * width as usize;
    let source_rows = pixels
        .get(first as usize * pitch..end as usize * pitch)
        .ok_or_else(|| format!("rows {first}-{end} of a {width}x{height} image"))?;
    let view = ImageRef::new(width, band, source_rows, PixelType::U8x3)
        .map_err(|e| format!("bad image buffer: {e}"))?;
    // Grown only past the largest band so far: zeroing what the pass
    // overwrites anyway took 1% of the decode threads' time.
    let len = 3 * dw as usize * band as usize;
    if rows.len() < len {
        rows.resize(len, 0);
    }
    let mut resized = Image::from_slice_u8(dw, band, &mut rows[..len], PixelType::U8x3)
        .map_err(|e| format!("bad rows buffer: {e}"))?;
    resizer
        .resize(
            &view,
            &mut resized,
            &bilinear(src.x, 0.0, src.width, f64::from(band)),
        )
        .map_err(|e| format!("resize failed: {e}"))?;
    let down = bilinear(0.0, src.y - f64::from(first), f64::from(dw), src.height);
    resizer
        .resize(&resized, dst, &down)
        .map_err(|e| format!("resize failed: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_horizontal_first_upscale_matches_one_pass_within_a_level() {
        // Noise, so that rounding differs wherever it can.
        let (width, height) = (120u32, 90u32);
        let pixels: Vec<u8> = (0..3 * width * height)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
            .collect();
        let one_pass = |src: Rect, out: &mut [u8]| {
            let view = ImageRef::new(width, height, &pixels, PixelType::U8x3).expect("view");
            let mut dst = Image::from_slice_u8(64, 64, out, PixelType::U8x3).expect("dst");
            let options = ResizeOptions::new()
                .crop(src.x, src.y, src.width, src.height)
                .resize_alg(ResizeAlg::Convolution(FilterType::Bilinear));
            Resizer::new()
                .resize(&view, &mut dst, &options)
                .expect("resize");
        };
        // Upscales (fewer rows than the output) at both edges and inside,
        // at fractional offsets; a downscale and an exact height, which
        // take the one pass.
        let crops = [
            (0.0, 0.0, 40.0, 30.0),
            (10.5, 3.25, 50.0, 40.7),
            (70.0, 60.0, 50.0, 30.0),
            (0.3, 89.0 - 20.5, 33.3, 20.5),
            (5.0, 5.0, 100.0, 80.0),
            (5.5, 7.0, 100.0, 64.0),
        ];
        let mut rows = Vec::new();
        for (x, y, w, h) in crops {
            let src = Rect {
                x,
                y,
                width: w,
                height: h,
            };
            let (mut ours, mut theirs) = (vec![0u8; 64 * 64 * 3], vec![0u8; 64 * 64 * 3]);
            rows.clear();
            one_pass(src, &mut theirs);
            let mut dst = Image::from_slice_u8(64, 64, &mut ours, PixelType::U8x3).expect("dst");
            resample(
                &mut Resizer::new(),
                &mut rows,
                (width, height, &pixels),
                src,
                &mut dst,
            )
            .expect("resample");
            let worst = ours.iter().zip(&theirs).map(|(a, b)| a.abs_diff(*b)).max();
            assert!(worst <= Some(1), "{src:?}: {worst:?}");
            // The rows between the passes are used for an upscale only.
            assert_eq!(rows.is_empty(), h >= 64.0, "{src:?}");
            if h >= 64.0 {
                assert_eq!(ours, theirs, "{src:?} takes the one pass");
            }
        }
    }
}
