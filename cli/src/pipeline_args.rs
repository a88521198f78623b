//! Loader flags shared by the commands that run the pipeline. Each numeric
//! flag is ranged with the loader's own limits, so a typo is a one-line
//! error naming the flag, never an allocation the machine cannot make.

use clap::builder::RangedU64ValueParser;
use tributary_common::tokens::rows::IdType;
use tributary_common::tokens::{Packing, SequenceSpec, MAX_SEQUENCE_LENGTH};
use tributary_worker::pipeline::decode::pixels::{DecodeLimits, MAX_PIXELS_LIMIT};
use tributary_worker::pipeline::fetch::FetchConfig;
use tributary_worker::pipeline::{limits, machine_batch_bytes};
use tributary_worker::{
    DecodeConfig, Dtype, Fields, Layout, LoaderConfig, OnError, PlanConfig, Preset, Size, Tail,
    Transform,
};

/// A `usize` flag between `min` and `max`.
pub fn usize_in(min: usize, max: usize) -> RangedU64ValueParser<usize> {
    RangedU64ValueParser::new().range(min as u64..=max as u64)
}

/// A `u64` flag between `min` and `max`.
pub fn u64_in(min: u64, max: u64) -> RangedU64ValueParser<u64> {
    RangedU64ValueParser::new().range(min..=max)
}

/// A `u32` flag between `min` and `max`.
pub fn u32_in(min: u32, max: u32) -> RangedU64ValueParser<u32> {
    RangedU64ValueParser::new().range(u64::from(min)..=u64::from(max))
}

/// A fraction between 0 and 1.
fn fraction(text: &str) -> Result<f64, String> {
    let value: f64 = text
        .parse()
        .map_err(|_| format!("{text:?} is not a number"))?;
    if (0.0..=1.0).contains(&value) {
        Ok(value)
    } else {
        Err(format!("{value} is not between 0 and 1"))
    }
}

/// An image size: `N` or `HEIGHTxWIDTH`, each side 1 to the limit.
fn image_size(text: &str) -> Result<Size, String> {
    let size: Size = text.parse()?;
    for side in [size.height, size.width] {
        if !(1..=limits::MAX_IMAGE_SIZE).contains(&side) {
            return Err(format!("{side} is not in 1..={}", limits::MAX_IMAGE_SIZE));
        }
    }
    Ok(size)
}

/// `N` finite numbers separated by commas.
fn numbers<const N: usize>(text: &str) -> Result<[f64; N], String> {
    let values: Vec<f64> = text
        .split(',')
        .map(|part| part.trim().parse::<f64>().ok().filter(|v| v.is_finite()))
        .collect::<Option<_>>()
        .ok_or_else(|| format!("{text:?} is not {N} numbers separated by commas"))?;
    values
        .try_into()
        .map_err(|_| format!("{text:?} is not {N} numbers separated by commas"))
}

fn pair(text: &str) -> Result<(f64, f64), String> {
    numbers::<2>(text).map(|[a, b]| (a, b))
}

fn triple(text: &str) -> Result<[f32; 3], String> {
    numbers::<3>(text).map(|v| v.map(|x| x as f32))
}

/// How a token dataset is read: rows of `--sequence-length` tokens.
#[derive(Debug, Clone, clap::Args)]
pub struct SequenceArgs {
    /// Read a token dataset as rows of this many tokens (then
    /// --batch-size and every count are in rows).
    #[arg(long, value_parser = u32_in(1, MAX_SEQUENCE_LENGTH))]
    pub sequence_length: Option<u32>,
    /// How documents become rows: concat (across document boundaries),
    /// bestfit (whole documents packed, padded) or none (one per row).
    #[arg(long, default_value = "concat", requires = "sequence_length")]
    pub packing: Packing,
    /// The id columns' type: int64 or int32.
    #[arg(long, default_value = "int64", value_parser = id_type)]
    pub token_dtype: IdType,
}

impl SequenceArgs {
    pub fn sequence(&self) -> Option<SequenceSpec> {
        self.sequence_length.map(|length| SequenceSpec {
            length,
            packing: self.packing,
        })
    }
}

fn id_type(text: &str) -> Result<IdType, String> {
    match text {
        "int64" => Ok(IdType::I64),
        "int32" => Ok(IdType::I32),
        _ => Err(format!("{text:?} is not int64 or int32")),
    }
}

#[derive(Debug, Clone, clap::Args)]
pub struct PipelineArgs {
    #[arg(long, default_value_t = 64, value_parser = usize_in(1, limits::MAX_BATCH_SIZE))]
    pub batch_size: usize,
    /// Samples held by the shuffle buffer.
    #[arg(long, default_value_t = 1024, value_parser = usize_in(0, limits::MAX_SHUFFLE_BUFFER))]
    pub shuffle_buffer: usize,
    /// Read in manifest order, no shuffle buffer, the whole dataset split
    /// into contiguous parts by --rank/--world with none dropped
    /// (evaluation reading).
    #[arg(long)]
    pub no_shuffle: bool,
    /// With --no-shuffle: `uneven` (the first N % world ranks read one
    /// sample more) or `pad` (equal counts; padding marked `pad`).
    #[arg(long, default_value_t = Tail::Uneven, value_parser = str::parse::<Tail>)]
    pub tail: Tail,
    /// The fields a batch carries, comma-separated: `image` (jpg, jpeg,
    /// png or webp), `cls`, `txt`, `json`, `npy`, any extension; `a;b` for
    /// alternatives, `name?` where samples may lack it.
    #[arg(long, default_value = "image,cls?", value_parser = str::parse::<Fields>)]
    pub fields: Fields,
    /// Image preset: train (RandomResizedCrop + flip), eval (resize the
    /// shorter side to size / crop-fraction, centre crop), resize, none.
    #[arg(long, default_value_t = Preset::Train, value_parser = str::parse::<Preset>)]
    pub transform: Preset,
    /// Output size: N or HEIGHTxWIDTH.
    #[arg(long, default_value = "224", value_parser = image_size)]
    pub image_size: Size,
    /// train: crop area range, MIN,MAX (fractions of the image).
    #[arg(long, default_value = "0.08,1", value_parser = pair)]
    pub scale: (f64, f64),
    /// train: crop aspect-ratio range, MIN,MAX (width / height).
    #[arg(long, default_value = "0.75,1.3333333333333333", value_parser = pair)]
    pub ratio: (f64, f64),
    /// train: no horizontal flip.
    #[arg(long)]
    pub no_flip: bool,
    /// eval: the centre crop's share of the resized shorter side.
    #[arg(long, default_value_t = Transform::default().crop_fraction)]
    pub crop_fraction: f64,
    /// resize: keep the aspect ratio, padding the rest with --fill.
    #[arg(long)]
    pub keep_aspect: bool,
    /// eval, resize: decode JPEGs at a reduced DCT scale (1/2, 1/4, 1/8)
    /// where the part shown is at least twice the output size: several
    /// times faster on large photos, pixels slightly off a full decode's
    /// (train always does).
    #[arg(long)]
    pub reduced_dct: bool,
    /// Pixel value of padding (all channels, before normalisation).
    #[arg(long, default_value_t = 0)]
    pub fill: u8,
    /// float32 (normalised with --mean/--std) or uint8.
    #[arg(long, default_value_t = Dtype::F32, value_parser = str::parse::<Dtype>)]
    pub dtype: Dtype,
    /// nchw or nhwc (channels last).
    #[arg(long, default_value_t = Layout::Nchw, value_parser = str::parse::<Layout>)]
    pub layout: Layout,
    /// Per-channel mean of [0, 1] pixels, R,G,B (float32 only).
    #[arg(long, default_value = "0.485,0.456,0.406", value_parser = triple)]
    pub mean: [f32; 3],
    /// Per-channel standard deviation, R,G,B (float32 only).
    #[arg(long, default_value = "0.229,0.224,0.225", value_parser = triple)]
    pub std: [f32; 3],
    /// Shorthand for --dtype uint8 --layout nhwc.
    #[arg(long)]
    pub u8: bool,
    /// Decode threads (default: all cores).
    #[arg(long, value_parser = usize_in(1, limits::MAX_QUEUE))]
    pub threads: Option<usize>,
    /// Range requests in flight at once.
    #[arg(long, default_value_t = FetchConfig::default().max_requests,
          value_parser = usize_in(1, limits::MAX_REQUESTS))]
    pub max_requests: usize,
    /// Largest range request, in KiB.
    #[arg(long, default_value_t = FetchConfig::default().max_read_bytes >> 10,
          value_parser = u64_in(1, limits::MAX_READ_BYTES >> 10))]
    pub max_read_kib: u64,
    /// Bytes fetched and not yet in the shuffle buffer, in MiB.
    #[arg(long, default_value_t = FetchConfig::default().max_bytes_in_flight >> 20,
          value_parser = u64_in(1, limits::MAX_BYTES_IN_FLIGHT >> 20))]
    pub max_in_flight_mib: u64,
    /// Largest image, in pixels (width x height from its header); a larger
    /// one is a bad sample.
    #[arg(long, default_value_t = DecodeLimits::default().max_image_pixels,
          value_parser = u64_in(1, MAX_PIXELS_LIMIT))]
    pub max_image_pixels: u64,
    /// Pixels all decode threads may hold at once (an image larger than
    /// this decodes alone).
    #[arg(long, default_value_t = DecodeLimits::default().max_pixels_in_flight,
          value_parser = u64_in(1, MAX_PIXELS_LIMIT))]
    pub max_decode_pixels: u64,
    /// Bytes of one batch at most, in MiB: its images (batch size x image
    /// size^2 x 3 x element size), checked before reading, and the bytes
    /// its samples carry into their fields, checked per batch (the loader
    /// holds several batches).
    /// Default: 2 GiB or an eighth of the machine's memory, the smaller.
    #[arg(long, value_parser = u64_in(1, limits::MAX_BATCH_BYTES >> 20))]
    pub max_batch_mib: Option<u64>,
    /// What a sample that cannot be decoded does: `raise` (end with an error
    /// naming its shard and offset) or `skip` (leave it out of its batch,
    /// which comes out one sample short, and log it).
    #[arg(long, default_value_t = OnError::Raise, value_parser = str::parse::<OnError>)]
    pub on_error: OnError,
    /// With `--on-error skip`, the largest fraction of the samples that may
    /// be skipped before the run fails.
    #[arg(long, default_value_t = DecodeConfig::default().max_bad_fraction, value_parser = fraction)]
    pub max_bad_fraction: f64,
}

impl PipelineArgs {
    /// The image transform these flags describe.
    pub fn transform(&self) -> Transform {
        let (dtype, layout) = if self.u8 {
            (Dtype::U8, Layout::Nhwc)
        } else {
            (self.dtype, self.layout)
        };
        Transform {
            preset: self.transform,
            size: self.image_size,
            scale: self.scale,
            ratio: self.ratio,
            flip: !self.no_flip,
            crop_fraction: self.crop_fraction,
            keep_aspect: self.keep_aspect,
            reduced_dct: self.reduced_dct,
            fill: self.fill,
            dtype,
            layout,
            mean: self.mean,
            std: self.std,
        }
    }

    /// One line: preset, size, dtype and layout, fields.
    pub fn describe(&self) -> String {
        let t = self.transform();
        let size = if t.fixed_size() {
            format!(" {}", t.size)
        } else {
            String::new()
        };
        format!(
            "{}{size}, {} {}, fields {}",
            t.preset,
            t.dtype,
            t.layout.to_string().to_uppercase(),
            self.fields
        )
    }

    /// The loader configuration these flags describe.
    pub fn config(&self) -> LoaderConfig {
        let defaults = LoaderConfig::default();
        LoaderConfig {
            plan: PlanConfig {
                batch_size: self.batch_size,
                shuffle_buffer: self.shuffle_buffer,
                shuffle: !self.no_shuffle,
                tail: self.tail,
                ..defaults.plan
            },
            decode: DecodeConfig {
                decode_threads: self.threads.unwrap_or(defaults.decode.decode_threads),
                fields: self.fields.clone(),
                transform: self.transform(),
                fetch: FetchConfig {
                    max_requests: self.max_requests,
                    max_read_bytes: self.max_read_kib << 10,
                    max_bytes_in_flight: self.max_in_flight_mib << 20,
                    ..FetchConfig::default()
                },
                decode_limits: DecodeLimits {
                    max_image_pixels: self.max_image_pixels,
                    max_pixels_in_flight: self.max_decode_pixels,
                },
                on_error: self.on_error,
                max_bad_fraction: self.max_bad_fraction,
                max_batch_bytes: self
                    .max_batch_mib
                    .map_or_else(machine_batch_bytes, |mib| mib << 20),
                ..defaults.decode
            },
        }
    }
}
