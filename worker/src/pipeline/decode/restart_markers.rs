//! Restart markers for the JPEGs `pack` stores, so that a loader's random
//! crop decodes only the part of the image it covers; the writing side of
//! [`restarts`](super::restarts), beside it. `tributary pack` takes it as
//! its `PackOptions::jpeg` (the dataset tools link no codec of the rank
//! pipeline).
//!
//! A lossless transcode (libjpeg-turbo's `tj3Transform`: the same DCT
//! coefficients, so the same pixels) that puts a restart marker after every
//! MCU, or, where that makes the JPEG larger than it was, every `k` MCUs,
//! `k` dividing an MCU row into at most [`SEGMENTS_PER_ROW`] equal
//! segments ([`intervals`]). The loader ([`restarts`](super::restarts))
//! then entropy-decodes only the segments a crop touches, where a plain
//! JPEG makes it decode every row above the crop and every column beside
//! it. A marker per MCU lets a crop's part end within an MCU (16 pixels of
//! 4:2:0) of the crop; the markers cost about 2.5 bytes per MCU, and no
//! decode time on the vendored libjpeg-turbo (third_party/README.md).
//! Huffman tables are optimised on the way, which pays for the markers'
//! bytes: a JPEG is kept as it was unless the new one is no larger (so a
//! shard never outgrows its plan, made from the source files' sizes), and
//! where anything else goes wrong (CMYK, 12-bit or lossless JPEGs, damaged
//! data, a warning) the original bytes are stored unchanged. A progressive
//! JPEG becomes a sequential one (faster to decode), when that is no
//! larger.

#![allow(
    unsafe_code,
    reason = "FFI to libjpeg-turbo; each block states its invariant"
)]

use std::cell::RefCell;

use turbojpeg_sys as tj;

use super::jpeg::MCU_WIDTH;

/// Restart segments per MCU row, at most, where a marker after every MCU
/// would make the JPEG larger: fewer markers, and still a crop skips most
/// of the columns beside it when the row's MCUs divide well.
pub const SEGMENTS_PER_ROW: u32 = 8;

/// A libjpeg-turbo transformer; one per packing thread.
struct Transformer(tj::tjhandle);

impl Drop for Transformer {
    fn drop(&mut self) {
        // SAFETY: the handle came from tj3Init and is destroyed once.
        unsafe { tj::tj3Destroy(self.0) }
    }
}

thread_local! {
    static TRANSFORMER: RefCell<Option<Transformer>> = const { RefCell::new(None) };
}

/// The restart intervals, in MCUs, to try, in order, for rows of `columns`
/// MCUs: every MCU, then the fewest MCUs that cut a row into equal segments
/// of at most [`SEGMENTS_PER_ROW`] (none where that is also 1).
pub fn intervals(columns: u32) -> impl Iterator<Item = u32> {
    let coarse = (1..=columns)
        .find(|&k| columns.is_multiple_of(k) && columns / k <= SEGMENTS_PER_ROW)
        .unwrap_or(columns.max(1));
    std::iter::once(1).chain((coarse > 1).then_some(coarse))
}

/// `jpeg` transcoded losslessly with restart markers, or `None` to store
/// it as it is (see the module docs).
pub fn with_restarts(jpeg: &[u8]) -> Option<Vec<u8>> {
    if !jpeg.starts_with(&[0xFF, 0xD8, 0xFF]) {
        return None;
    }
    with_transformer(|handle| {
        intervals(columns(handle, jpeg)?)
            .filter_map(|interval| transform(handle, jpeg, interval))
            .find(|out| out.len() <= jpeg.len())
    })
}

/// Runs `f` with this thread's transformer, made on first use; `None` if
/// libjpeg-turbo cannot make one.
fn with_transformer<T>(f: impl FnOnce(tj::tjhandle) -> Option<T>) -> Option<T> {
    TRANSFORMER.with(|cell| {
        let mut cell = cell.borrow_mut();
        if cell.is_none() {
            // SAFETY: tj3Init has no preconditions; a null handle is checked.
            let handle = unsafe { tj::tj3Init(tj::TJINIT_TJINIT_TRANSFORM as libc::c_int) };
            if handle.is_null() {
                return None;
            }
            *cell = Some(Transformer(handle));
        }
        f(cell.as_ref()?.0)
    })
}

/// The MCU columns of `jpeg`, if it is one `transform` can mark.
fn columns(handle: tj::tjhandle, jpeg: &[u8]) -> Option<u32> {
    // SAFETY: a valid handle; the pointer and length describe `jpeg`.
    let status =
        unsafe { tj::tj3DecompressHeader(handle, jpeg.as_ptr(), jpeg.len() as tj::size_t) };
    if status != 0 {
        return None;
    }
    // SAFETY: tj3Get/tj3Set read and write parameters of a valid handle.
    let get = |param| unsafe { tj::tj3Get(handle, param as libc::c_int) };
    let colorspace = get(tj::TJPARAM_TJPARAM_COLORSPACE);
    if get(tj::TJPARAM_TJPARAM_PRECISION) != 8
        || get(tj::TJPARAM_TJPARAM_LOSSLESS) != 0
        || get(tj::TJPARAM_TJPARAM_ARITHMETIC) != 0
        || colorspace == tj::TJCS_TJCS_CMYK as i32
        || colorspace == tj::TJCS_TJCS_YCCK as i32
    {
        return None;
    }
    let width = u32::try_from(get(tj::TJPARAM_TJPARAM_JPEGWIDTH)).ok()?;
    let mcu = *MCU_WIDTH.get(usize::try_from(get(tj::TJPARAM_TJPARAM_SUBSAMP)).ok()?)?;
    Some(width.div_ceil(mcu))
}

/// `jpeg` transcoded with a restart marker every `interval` MCUs (0: none),
/// Huffman tables optimised.
fn transform(handle: tj::tjhandle, jpeg: &[u8], interval: u32) -> Option<Vec<u8>> {
    let set = |param, value: u32| {
        // SAFETY: as above.
        unsafe { tj::tj3Set(handle, param as libc::c_int, value as libc::c_int) == 0 }
    };
    if !(set(tj::TJPARAM_TJPARAM_RESTARTBLOCKS, interval)
        && set(tj::TJPARAM_TJPARAM_STOPONWARNING, 1))
    {
        return None;
    }
    let transform = tj::tjtransform {
        r: tj::tjregion {
            x: 0,
            y: 0,
            w: 0,
            h: 0,
        },
        op: tj::TJXOP_TJXOP_NONE as libc::c_int,
        options: tj::TJXOPT_OPTIMIZE as libc::c_int,
        data: std::ptr::null_mut(),
        customFilter: None,
    };
    let mut out: *mut libc::c_uchar = std::ptr::null_mut();
    let mut size: tj::size_t = 0;
    // SAFETY: one transform; `out` is null, so libjpeg-turbo allocates the
    // destination (freed below with tj3Free) and sets `size`.
    let status = unsafe {
        tj::tj3Transform(
            handle,
            jpeg.as_ptr(),
            jpeg.len() as tj::size_t,
            1,
            &mut out,
            &mut size,
            &transform,
        )
    };
    let copied = (status == 0 && !out.is_null()).then(|| {
        // SAFETY: libjpeg-turbo wrote `size` bytes at `out`.
        unsafe { std::slice::from_raw_parts(out, size as usize) }.to_vec()
    });
    // SAFETY: `out` is null or came from libjpeg-turbo's allocator.
    unsafe { tj::tj3Free(out.cast()) };
    copied
}

#[cfg(test)]
mod tests {
    use super::*;

    fn jpeg(width: u16, height: u16, progressive: bool) -> Vec<u8> {
        let pixels: Vec<u8> = (0..3 * u32::from(width) * u32::from(height))
            .map(|i| ((i * 7919) % 251) as u8)
            .collect();
        let mut out = Vec::new();
        let mut encoder = jpeg_encoder::Encoder::new(&mut out, 90);
        encoder.set_progressive(progressive);
        encoder.set_sampling_factor(jpeg_encoder::SamplingFactor::F_2_2);
        encoder
            .encode(&pixels, width, height, jpeg_encoder::ColorType::Rgb)
            .expect("encode");
        out
    }

    fn pixels(jpeg: &[u8]) -> Vec<u8> {
        image::load_from_memory_with_format(jpeg, image::ImageFormat::Jpeg)
            .expect("decodes")
            .into_rgb8()
            .into_raw()
    }

    #[test]
    fn every_mcu_is_tried_first_then_equal_segments_of_at_most_eight() {
        let tried = |columns| intervals(columns).collect::<Vec<_>>();
        assert_eq!(tried(25), [1, 5]);
        assert_eq!(tried(24), [1, 3]);
        assert_eq!(tried(23), [1, 23]);
        assert_eq!(tried(8), [1]);
        assert_eq!(tried(1), [1]);
    }

    #[test]
    fn a_jpeg_gains_restart_markers_and_keeps_every_pixel() {
        let original = jpeg(400, 358, false);
        let marked = with_restarts(&original).expect("a baseline JPEG is transcoded");
        assert!(marked.len() <= original.len());
        // Optimised tables pay for a marker after every MCU.
        assert_eq!(restart_interval(&marked), 1);
        assert!(
            marked.windows(2).any(|w| w == [0xFF, 0xD7]),
            "markers cycle"
        );
        assert_eq!(pixels(&marked), pixels(&original));
    }

    /// The DRI segment's interval.
    fn restart_interval(jpeg: &[u8]) -> u8 {
        let dri = jpeg
            .windows(2)
            .position(|w| w == [0xFF, 0xDD])
            .expect("DRI");
        assert_eq!(jpeg[dri + 4], 0);
        jpeg[dri + 5]
    }

    #[test]
    fn where_a_marker_per_mcu_makes_it_larger_a_row_gets_a_few() {
        // A JPEG whose tables are optimised already, with bytes after its
        // end (which a transcode drops) to put its size between those of
        // a marker per MCU and one every 5 MCUs (400 px: 25 columns).
        let (optimised, fine, coarse) = with_transformer(|handle| {
            let optimised = transform(handle, &jpeg(400, 358, false), 0)?;
            let size = |interval| transform(handle, &optimised, interval).map(|out| out.len());
            let (fine, coarse) = (size(1)?, size(5)?);
            Some((optimised, fine, coarse))
        })
        .expect("transcoded");
        assert!(coarse < fine, "{coarse} against {fine} bytes");
        let mut original = optimised.clone();
        original.resize((fine + coarse) / 2, 0);
        let marked = with_restarts(&original).expect("transcoded");
        assert_eq!(marked.len(), coarse);
        assert_eq!(restart_interval(&marked), 5);
        assert_eq!(pixels(&marked), pixels(&original));
        // With no room for markers at all, it stays as it is.
        assert_eq!(with_restarts(&optimised), None);
    }

    #[test]
    fn what_cannot_be_transcoded_is_stored_as_it_is() {
        let progressive = jpeg(64, 48, true);
        if let Some(sequential) = with_restarts(&progressive) {
            assert_eq!(pixels(&sequential), pixels(&progressive));
        }
        assert_eq!(with_restarts(b"\x89PNG\r\n\x1a\n"), None);
        let mut cut = jpeg(64, 48, false);
        cut.truncate(cut.len() - 200);
        assert_eq!(with_restarts(&cut), None, "a truncated JPEG warns");
    }
}
