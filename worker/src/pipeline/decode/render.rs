//! Rendering one decoded image into its slot of a batch: resample the
//! plan's source rectangle (antialiased bilinear, SIMD, `fast_image_resize`)
//! into the plan's part of the output, flip, pad the rest, and write it as
//! `u8` or normalised `f32`, NCHW or NHWC.

use std::cell::RefCell;

use fast_image_resize::images::Image;
use fast_image_resize::{PixelType, Resizer};

use super::pixels::ImageKind;
pub use super::place::NormLut;
use super::place::{mirror, normalised, placed_u8};
use super::resample::resample;
use super::transform::{Layout, Plan, Transform};

/// A decoded RGB8 image.
#[derive(Debug, Clone)]
pub struct Rgb {
    pub width: u32,
    pub height: u32,
    pub pixels: Vec<u8>,
}

/// Decodes JPEG, PNG or WebP bytes to RGB8 with the `image` crate, the
/// format chosen by the bytes' magic numbers (not by any file or field
/// name).
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

    pub fn len(&self) -> usize {
        match self {
            Slot::F32(out) => out.len(),
            Slot::U8(out) => out.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

thread_local! {
    /// The resizer, the resampled image of the paths that write it
    /// through [`write_rows`], and the rows a horizontal-first resample
    /// passes between its two passes.
    static SCRATCH: RefCell<(Resizer, Vec<u8>, Vec<u8>)> =
        RefCell::new((Resizer::new(), Vec::new(), Vec::new()));
}

/// Renders `plan.src` of the RGB8 view `(width, height, pixels)` into
/// `slot` (`3 x plan.out` values): resampled into `plan.dst`, flipped with
/// `plan.flip`, the rest filled with `config.fill`. A source rectangle of
/// exactly the destination's size at whole-pixel offsets is copied, not
/// resampled.
pub fn render(
    (width, height, pixels): (u32, u32, &[u8]),
    plan: &Plan,
    config: &Transform,
    lut: &NormLut,
    mut slot: Slot<'_>,
) -> Result<(), String> {
    let (out_w, out_h) = plan.out;
    if slot.len() != 3 * out_w as usize * out_h as usize {
        return Err(format!(
            "an output slot of {} values for a {out_w}x{out_h} image",
            slot.len()
        ));
    }
    let (_, _, dw, dh) = plan.dst;
    if !plan.fills() {
        match slot.reborrow() {
            Slot::U8(out) => out.fill(config.fill),
            Slot::F32(out) => match config.layout {
                Layout::Nhwc => out.chunks_exact_mut(3).for_each(|px| {
                    for (c, v) in px.iter_mut().enumerate() {
                        *v = lut.value(c, config.fill);
                    }
                }),
                Layout::Nchw => {
                    for (c, plane) in out
                        .chunks_exact_mut(out_w as usize * out_h as usize)
                        .enumerate()
                    {
                        plane.fill(lut.value(c, config.fill));
                    }
                }
            },
        }
    }
    let src = plan.src;
    let copy = src.x.fract() == 0.0
        && src.y.fract() == 0.0
        && src.width == f64::from(dw)
        && src.height == f64::from(dh);
    if copy {
        let (x0, y0) = (src.x as usize, src.y as usize);
        if x0 + dw as usize > width as usize || y0 + dh as usize > height as usize {
            return Err(format!(
                "a {dw}x{dh} copy at ({x0}, {y0}) of a {width}x{height} image"
            ));
        }
        let pitch = 3 * width as usize;
        let rows = (0..dh as usize).map(|y| {
            let start = (y0 + y) * pitch + 3 * x0;
            &pixels[start..start + 3 * dw as usize]
        });
        write_rows(rows, plan, config, lut, slot);
        return Ok(());
    }
    let image = (width, height, pixels);
    // uint8 NHWC filled by the image: resampled straight into its slot,
    // then mirrored in place; no pass through a scratch buffer.
    if let (Slot::U8(out), Layout::Nhwc, true) = (slot.reborrow(), config.layout, plan.fills()) {
        return SCRATCH.with(|scratch| {
            let (resizer, _, rows) = &mut *scratch.borrow_mut();
            let mut dst = Image::from_slice_u8(out_w, out_h, out, PixelType::U8x3)
                .map_err(|e| format!("bad output slot: {e}"))?;
            resample(resizer, rows, image, src, &mut dst)?;
            if plan.flip {
                for row in out.chunks_exact_mut(3 * out_w as usize) {
                    mirror(row);
                }
            }
            Ok(())
        });
    }
    SCRATCH.with(|scratch| {
        let mut scratch = scratch.borrow_mut();
        let (resizer, buf, rows) = &mut *scratch;
        buf.resize(3 * dw as usize * dh as usize, 0);
        let mut dst = Image::from_slice_u8(dw, dh, buf, PixelType::U8x3)
            .map_err(|e| format!("bad output buffer: {e}"))?;
        resample(resizer, rows, image, src, &mut dst)?;
        write_rows(buf.chunks_exact(3 * dw as usize), plan, config, lut, slot);
        Ok(())
    })
}

/// Writes the `plan.dst`-sized RGB8 `rows` into their place in `slot`,
/// normalised for `f32` ([`normalised`]), planar for NCHW, mirrored with
/// `plan.flip`.
fn write_rows<'a>(
    rows: impl Iterator<Item = &'a [u8]>,
    plan: &Plan,
    config: &Transform,
    lut: &NormLut,
    slot: Slot<'_>,
) {
    match slot {
        Slot::U8(out) => placed_u8(rows, plan, config.layout, out),
        Slot::F32(out) => normalised(rows, plan, config, lut, out),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pipeline::decode::transform::{Dtype, Preset, Rect, Size};

    fn gradient(width: u32, height: u32) -> Rgb {
        let mut pixels = Vec::new();
        for y in 0..height {
            for x in 0..width {
                pixels.extend_from_slice(&[(x * 4) as u8, (y * 6) as u8, 128]);
            }
        }
        Rgb {
            width,
            height,
            pixels,
        }
    }

    fn plan(src: Rect, side: u32, flip: bool) -> Plan {
        Plan {
            src,
            out: (side, side),
            dst: (0, 0, side, side),
            flip,
        }
    }

    #[test]
    fn flipped_output_mirrors_unflipped() {
        let image = gradient(60, 40);
        let config = Transform {
            size: Size::square(16),
            dtype: Dtype::U8,
            layout: Layout::Nhwc,
            ..Transform::default()
        };
        let lut = NormLut::new(&config);
        let src = Rect {
            x: 5.0,
            y: 5.0,
            width: 30.0,
            height: 30.0,
        };
        let view = (image.width, image.height, image.pixels.as_slice());
        let mut plain = vec![0u8; config.image_len()];
        let mut flipped = vec![0u8; config.image_len()];
        render(
            view,
            &plan(src, 16, false),
            &config,
            &lut,
            Slot::U8(&mut plain),
        )
        .expect("render");
        render(
            view,
            &plan(src, 16, true),
            &config,
            &lut,
            Slot::U8(&mut flipped),
        )
        .expect("render");
        for y in 0..16 {
            for x in 0..16 {
                let a = &plain[(y * 16 + x) * 3..][..3];
                let b = &flipped[(y * 16 + 15 - x) * 3..][..3];
                assert_eq!(a, b);
            }
        }
        // Red grows left to right in the source, so it does in the output.
        assert!(plain[3 * 15] > plain[0]);
        // NHWC uint8 is resampled into its slot and mirrored there; NCHW
        // goes through the scratch buffer: the same pixels, flipped or not.
        let planar = Transform {
            layout: Layout::Nchw,
            ..config.clone()
        };
        for (flip, nhwc) in [(false, &plain), (true, &flipped)] {
            let mut out = vec![0u8; config.image_len()];
            render(
                view,
                &plan(src, 16, flip),
                &planar,
                &lut,
                Slot::U8(&mut out),
            )
            .expect("render");
            for (i, v) in nhwc.iter().enumerate() {
                let (pixel, c) = (i / 3, i % 3);
                assert_eq!(out[c * 256 + pixel], *v, "flip {flip}, pixel {pixel}");
            }
        }
    }

    #[test]
    fn every_dtype_and_layout_holds_the_same_pixels() {
        let image = gradient(50, 30);
        let view = (image.width, image.height, image.pixels.as_slice());
        let base = Transform {
            preset: Preset::Resize,
            size: Size {
                height: 12,
                width: 20,
            },
            keep_aspect: true,
            fill: 7,
            ..Transform::default()
        };
        let p = base.plan(0, 0, 0, 50, 30);
        let mut reference = vec![0u8; base.image_len()];
        let u8_nhwc = Transform {
            dtype: Dtype::U8,
            layout: Layout::Nhwc,
            ..base.clone()
        };
        let lut = NormLut::new(&base);
        render(view, &p, &u8_nhwc, &lut, Slot::U8(&mut reference)).expect("render");
        let at = |y: usize, x: usize, c: usize| reference[(y * 20 + x) * 3 + c];
        // Letterboxed: 50x30 into 20x12 is 20x12 exactly; into 20 wide and
        // the padding rows hold the fill.
        for layout in [Layout::Nchw, Layout::Nhwc] {
            let u8s = Transform {
                dtype: Dtype::U8,
                layout,
                ..base.clone()
            };
            let mut out = vec![0u8; base.image_len()];
            render(view, &p, &u8s, &lut, Slot::U8(&mut out)).expect("render");
            let mut f32s = vec![0f32; base.image_len()];
            let floats = Transform {
                layout,
                ..base.clone()
            };
            render(view, &p, &floats, &lut, Slot::F32(&mut f32s)).expect("render");
            for y in 0..12 {
                for x in 0..20 {
                    for c in 0..3 {
                        let i = match layout {
                            Layout::Nhwc => (y * 20 + x) * 3 + c,
                            Layout::Nchw => c * 240 + y * 20 + x,
                        };
                        assert_eq!(out[i], at(y, x, c));
                        assert_eq!(f32s[i], lut.value(c, at(y, x, c)));
                    }
                }
            }
        }
        let tall_image = gradient(30, 50);
        let tall = base.plan(0, 0, 0, 30, 50);
        assert_eq!(tall.dst, (6, 0, 7, 12), "{tall:?}");
        let mut out = vec![0u8; base.image_len()];
        let tall_view = (30, 50, tall_image.pixels.as_slice());
        render(tall_view, &tall, &u8_nhwc, &lut, Slot::U8(&mut out)).expect("render");
        assert_eq!(&out[..3], &[7, 7, 7], "padding holds the fill");
    }
}
