//! What an image is and how many pixels its decode may hold, decided before
//! anything is allocated for it.
//!
//! - The format comes from the bytes' magic numbers, never from the field's
//!   extension: ImageNet has PNGs named `.JPEG`, and a `png` field may hold
//!   a JPEG.
//! - Its dimensions come from the header alone, so an image over
//!   [`DecodeLimits::max_image_pixels`] is rejected before its decode
//!   allocates anything.
//! - The decode threads of a loader share a [`PixelBudget`] of pixels being
//!   decoded at once ([`DecodeLimits::max_pixels_in_flight`]): a thread takes
//!   an image's pixels from it before decoding and returns them after, so
//!   eight huge PNGs on eight threads take turns instead of multiplying the
//!   peak memory by eight. An image larger than the whole budget (but within
//!   the per-image limit) takes the whole budget and so runs alone; a thread
//!   never waits while holding pixels, so the budget cannot deadlock.

use std::io::Cursor;

use super::restarts::{header_segments, is_frame, u16_at};
use std::sync::{Condvar, Mutex, PoisonError};

/// An image format the decoders take.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ImageKind {
    Jpeg,
    Png,
    WebP,
}

impl ImageKind {
    /// The format of `bytes` by its magic numbers, or `None` for anything
    /// else.
    pub fn sniff(bytes: &[u8]) -> Option<Self> {
        if bytes.starts_with(&[0xFF, 0xD8, 0xFF]) {
            Some(Self::Jpeg)
        } else if bytes.starts_with(b"\x89PNG\r\n\x1a\n") {
            Some(Self::Png)
        } else if bytes.len() >= 12 && bytes.starts_with(b"RIFF") && &bytes[8..12] == b"WEBP" {
            Some(Self::WebP)
        } else {
            None
        }
    }

    /// The format of `bytes`, or an error that says what they start with.
    pub fn of(bytes: &[u8]) -> Result<Self, String> {
        Self::sniff(bytes).ok_or_else(|| {
            let head = &bytes[..bytes.len().min(8)];
            format!(
                "the image is not a JPEG, PNG or WebP (it starts with {head:02x?}, {} bytes in all)",
                bytes.len()
            )
        })
    }

    pub fn name(self) -> &'static str {
        match self {
            Self::Jpeg => "JPEG",
            Self::Png => "PNG",
            Self::WebP => "WebP",
        }
    }

    pub fn format(self) -> image::ImageFormat {
        match self {
            Self::Jpeg => image::ImageFormat::Jpeg,
            Self::Png => image::ImageFormat::Png,
            Self::WebP => image::ImageFormat::WebP,
        }
    }

    /// `(width, height)` from the header alone.
    pub fn dimensions(self, bytes: &[u8]) -> Result<(u32, u32), String> {
        if self == Self::Jpeg {
            if let Some(size) = jpeg_size(bytes) {
                return Ok(size);
            }
        }
        image::ImageReader::with_format(Cursor::new(bytes), self.format())
            .into_dimensions()
            .map_err(|e| format!("the {} header does not parse: {e}", self.name()))
    }
}

/// A JPEG's `(width, height)` from its frame header, reached by hopping
/// over the marker segments before it (the image crate's reader builds its
/// Huffman tables first); `None` if that fails or the frame gives no height
/// (the image crate then says what is wrong).
fn jpeg_size(bytes: &[u8]) -> Option<(u32, u32)> {
    let frame = header_segments(bytes).find(|s| is_frame(s.marker))?;
    let (height, width) = (
        u16_at(bytes, frame.body + 1)?,
        u16_at(bytes, frame.body + 3)?,
    );
    (height > 0).then_some((width, height))
}

/// Pixel limits of image decoding.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DecodeLimits {
    /// Largest image (width x height, from its header) a sample may hold;
    /// a larger one is a bad sample, rejected before it is decoded.
    pub max_image_pixels: u64,
    /// Pixels being decoded at once by all the threads of a loader
    /// (loaders that decode at the same time on a shared pool should share
    /// a [`PixelBudget`]). At about 7 bytes per pixel while the `image`
    /// crate decodes (its own buffer plus the RGB copy), the default bounds
    /// decode memory near 1.8 GB whatever the number of threads.
    pub max_pixels_in_flight: u64,
}

/// The largest `max_image_pixels` and `max_pixels_in_flight` accepted: 2^32
/// pixels (a 65536 x 65536 image), beyond which no decoder here goes.
pub const MAX_PIXELS_LIMIT: u64 = 1 << 32;

impl Default for DecodeLimits {
    /// 16384 x 16384 per image, and as many pixels in flight.
    fn default() -> Self {
        Self {
            max_image_pixels: 1 << 28,
            max_pixels_in_flight: 1 << 28,
        }
    }
}

impl DecodeLimits {
    /// Checks the limits, naming the bad one.
    pub fn validate(&self) -> Result<(), String> {
        for (name, value) in [
            ("max_image_pixels", self.max_image_pixels),
            ("max_pixels_in_flight", self.max_pixels_in_flight),
        ] {
            if !(1..=MAX_PIXELS_LIMIT).contains(&value) {
                return Err(format!(
                    "{name} is {value}; it must be between 1 and {MAX_PIXELS_LIMIT}"
                ));
            }
        }
        Ok(())
    }

    /// Checks an image's header dimensions against the per-image limit.
    pub fn check(&self, kind: ImageKind, (width, height): (u32, u32)) -> Result<u64, String> {
        let pixels = u64::from(width) * u64::from(height);
        if pixels == 0 {
            return Err(format!("the {} header says {width}x{height}", kind.name()));
        }
        if pixels > self.max_image_pixels {
            return Err(format!(
                "the {} is {width}x{height} = {pixels} pixels, over the limit of {} pixels per image (max_image_pixels)",
                kind.name(),
                self.max_image_pixels
            ));
        }
        Ok(pixels)
    }
}

/// Pixels that decode threads take before decoding and give back after.
#[derive(Debug)]
pub struct PixelBudget {
    total: u64,
    free: Mutex<u64>,
    returned: Condvar,
}

impl PixelBudget {
    /// A budget of `total` pixels (at least 1).
    pub fn new(total: u64) -> Self {
        let total = total.max(1);
        Self {
            total,
            free: Mutex::new(total),
            returned: Condvar::new(),
        }
    }

    pub fn total(&self) -> u64 {
        self.total
    }

    /// Pixels nobody holds now.
    pub fn free(&self) -> u64 {
        *self.free.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Takes `pixels` (at most the whole budget), waiting until they are
    /// free. The caller must hold no other permit of this budget.
    pub fn acquire(&self, pixels: u64) -> PixelPermit<'_> {
        let want = pixels.clamp(1, self.total);
        let free = self.free.lock().unwrap_or_else(PoisonError::into_inner);
        let mut free = self
            .returned
            .wait_while(free, |free| *free < want)
            .unwrap_or_else(PoisonError::into_inner);
        *free -= want;
        PixelPermit {
            budget: self,
            pixels: want,
        }
    }
}

/// Pixels held from a [`PixelBudget`]; given back when dropped (also when
/// the decode holding them panics).
#[derive(Debug)]
pub struct PixelPermit<'a> {
    budget: &'a PixelBudget,
    pixels: u64,
}

impl Drop for PixelPermit<'_> {
    fn drop(&mut self) {
        let mut free = self
            .budget
            .free
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        *free += self.pixels;
        drop(free);
        self.budget.returned.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::Arc;

    use super::*;

    fn png(width: u32, height: u32) -> Vec<u8> {
        let mut out = Vec::new();
        image::RgbImage::new(width, height)
            .write_to(&mut Cursor::new(&mut out), image::ImageFormat::Png)
            .expect("encode png");
        out
    }

    fn jpeg(width: u16, height: u16) -> Vec<u8> {
        let mut out = Vec::new();
        jpeg_encoder::Encoder::new(&mut out, 80)
            .encode(
                &vec![90; usize::from(width) * usize::from(height) * 3],
                width,
                height,
                jpeg_encoder::ColorType::Rgb,
            )
            .expect("encode jpeg");
        out
    }

    #[test]
    fn formats_come_from_magic_bytes() {
        assert_eq!(ImageKind::sniff(&png(3, 2)), Some(ImageKind::Png));
        assert_eq!(ImageKind::sniff(&jpeg(3, 2)), Some(ImageKind::Jpeg));
        assert_eq!(ImageKind::sniff(b"GIF89a..."), None);
        let error = ImageKind::of(b"GIF89a").expect_err("not an image");
        assert!(error.contains("not a JPEG, PNG or WebP"), "{error}");
    }

    #[test]
    fn a_jpegs_size_comes_from_its_frame_header_as_the_image_crate_reads_it() {
        for (w, h) in [(21, 5), (640, 480), (1, 1)] {
            let bytes = jpeg(w, h);
            let reader =
                image::ImageReader::with_format(Cursor::new(&bytes), image::ImageFormat::Jpeg);
            assert_eq!(
                jpeg_size(&bytes),
                Some(reader.into_dimensions().expect("dims"))
            );
        }
        let bytes = jpeg(64, 48);
        let sof = bytes
            .windows(2)
            .position(|w| w == [0xFF, 0xC0])
            .expect("SOF0");
        assert_eq!(
            jpeg_size(&bytes[..sof + 6]),
            None,
            "cut inside the frame header"
        );
        assert_eq!(jpeg_size(&bytes[..sof + 9]), Some((64, 48)));
        assert_eq!(jpeg_size(b"\xFF\xD8\xFF"), None);
    }

    #[test]
    fn dimensions_come_from_the_header_alone() {
        assert_eq!(ImageKind::Png.dimensions(&png(13, 7)), Ok((13, 7)));
        assert_eq!(ImageKind::Jpeg.dimensions(&jpeg(21, 5)), Ok((21, 5)));
        // A PNG header claiming 60000 x 60000 with no pixel data behind it.
        let mut huge = png(1, 1);
        huge[16..20].copy_from_slice(&60000u32.to_be_bytes());
        huge[20..24].copy_from_slice(&60000u32.to_be_bytes());
        let header = &huge[..33];
        let dims = ImageKind::Png.dimensions(header);
        // The IHDR checksum no longer matches: either an error or the claim.
        if let Ok(dims) = dims {
            assert_eq!(dims, (60000, 60000));
        }
    }

    #[test]
    fn an_image_over_the_pixel_limit_is_rejected_before_decoding() {
        let limits = DecodeLimits {
            max_image_pixels: 100,
            max_pixels_in_flight: 1000,
        };
        assert_eq!(limits.check(ImageKind::Png, (10, 10)), Ok(100));
        let error = limits
            .check(ImageKind::Png, (11, 10))
            .expect_err("over the limit");
        assert!(error.contains("11x10 = 110 pixels"), "{error}");
        assert!(error.contains("max_image_pixels"), "{error}");
        assert!(limits.check(ImageKind::Jpeg, (0, 10)).is_err());
        assert!(DecodeLimits {
            max_image_pixels: 0,
            ..limits
        }
        .validate()
        .is_err());
        assert!(DecodeLimits {
            max_pixels_in_flight: MAX_PIXELS_LIMIT + 1,
            ..limits
        }
        .validate()
        .is_err());
    }

    #[test]
    fn the_pixel_budget_bounds_pixels_held_at_once_and_lets_a_huge_image_run_alone() {
        let budget = Arc::new(PixelBudget::new(100));
        let (held, peak) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
        // 60-pixel images on 8 threads: never two at once. One 500-pixel
        // image (over the whole budget) takes it all and runs alone.
        let sizes: Vec<u64> = (0..40).map(|i| if i == 17 { 500 } else { 60 }).collect();
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(8)
            .build()
            .expect("pool");
        pool.install(|| {
            use rayon::prelude::*;
            sizes.par_iter().with_max_len(1).for_each(|&pixels| {
                let permit = budget.acquire(pixels);
                let now = held.fetch_add(permit.pixels, Ordering::SeqCst) + permit.pixels;
                peak.fetch_max(now, Ordering::SeqCst);
                std::thread::yield_now();
                held.fetch_sub(permit.pixels, Ordering::SeqCst);
            });
        });
        assert!(peak.load(Ordering::SeqCst) <= 100);
        assert_eq!(budget.free(), 100, "every permit came back");
    }
}
