//! A loader's configuration: what shapes its output (seed, epoch, rank,
//! batch size, order, fields, transform, stripe) and its resource bounds,
//! each checked against [`limits`] before it sizes anything.

pub use tributary_common::plan::assign::Tail;

use super::decode::bad_samples::{self, OnError};
use super::decode::fields::Fields;
use super::decode::pixels::DecodeLimits;
use super::decode::transform::Transform;
use super::fetch::FetchConfig;
use crate::error::{Result, WorkerError};
use tributary_common::tokens::rows::IdType;

/// Everything that shapes a loader's output and its resource bounds: the
/// plan (which samples, in which order and batches) and the decoding (what
/// a batch carries and the resources it takes). A rank under a coordinator
/// supplies only the [`DecodeConfig`]; the job and the assignment make the
/// [`PlanConfig`] (see [`crate::coordinated::loader_config`]).
#[derive(Debug, Clone, Default)]
pub struct LoaderConfig {
    pub plan: PlanConfig,
    pub decode: DecodeConfig,
}

/// Which samples a loader reads, in which order, in which batches.
#[derive(Debug, Clone)]
pub struct PlanConfig {
    pub seed: u64,
    pub epoch: u64,
    /// Membership generation (0 without a coordinator); seeds the shuffle.
    pub generation: u64,
    /// This rank, and the number of ranks sharing the epoch.
    pub rank: usize,
    pub world: usize,
    pub batch_size: usize,
    /// Drop the last batch of the epoch when it is short.
    pub drop_last: bool,
    /// Samples held by the shuffle buffer (0: no shuffling within shards).
    pub shuffle_buffer: usize,
    /// Bytes of the samples the shuffle buffer holds at most, and what
    /// happens beyond them ([`ShuffleBytes`]; default: samples given out
    /// early beyond [`DEFAULT_SHUFFLE_BYTES`]).
    pub shuffle_bytes: ShuffleBytes,
    /// `false`: read in manifest order, no shuffle buffer, and (without a
    /// coordinator) split the whole dataset into contiguous parts, one per
    /// rank, none dropped: evaluation reading.
    pub shuffle: bool,
    /// How an unshuffled split's uneven tail is handled.
    pub tail: Tail,
    /// Which of the epoch's batches this loader decodes and yields.
    pub stripe: Stripe,
}

/// What a batch carries, how its samples are decoded, and the resources
/// the decoding takes.
#[derive(Debug, Clone)]
pub struct DecodeConfig {
    /// Ready batches queued ahead of the consumer.
    pub prefetch_batches: usize,
    /// Batches being decoded at once, at least (keeps every core busy at
    /// batch ends); a loader decodes more where its threads need them
    /// ([`DecodeConfig::batches_in_flight`]).
    pub decode_batches_in_flight: usize,
    /// Threads of the decode pool, when the loader builds its own.
    pub decode_threads: usize,
    /// The fields a batch carries, in order.
    pub fields: Fields,
    /// What the image fields become.
    pub transform: Transform,
    pub fetch: FetchConfig,
    /// Per-image pixel limit and the pixels all decode threads hold at once.
    pub decode_limits: DecodeLimits,
    /// What a bad sample does: end the epoch (the default) or get skipped;
    /// see [`bad_samples`] for batch sizes and determinism.
    pub on_error: OnError,
    /// With `on_error = Skip`, the largest fraction of the epoch's samples
    /// that may be skipped before the loader fails (default 0.01).
    pub max_bad_fraction: f64,
    /// A token job's id columns: int64 (the default) or int32.
    pub token_ids: IdType,
    /// Bytes of one batch's image buffer at most (batch size x images x
    /// pixels x channels x element size): a loader holds several such
    /// batches (prefetched, in flight, recycled), so this is a budget that
    /// fits the machine, not a typo check (default
    /// [`DEFAULT_MAX_BATCH_BYTES`]; at most [`limits::MAX_BATCH_BYTES`]).
    pub max_batch_bytes: u64,
}

/// How the bytes of the samples a shuffle buffer holds are bounded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ShuffleBytes {
    /// Beyond this many bytes held, samples are given out early, so a few
    /// huge samples cannot pile up.
    Spill(u64),
    /// Samples are given out by count alone (a rank under a synchronous
    /// coordinator, which recomputes what the buffer emitted from positions
    /// alone: giving out early would make emissions depend on sizes it does
    /// not know); holding more than this many bytes fails the read, naming
    /// the setting to lower, instead of exhausting the machine.
    Refuse(u64),
}

impl ShuffleBytes {
    /// The bytes a synchronous rank's buffer may hold: half the machine's
    /// memory (where it can be read), at least [`DEFAULT_SHUFFLE_BYTES`].
    pub fn for_sync() -> Self {
        let half = tributary_io::machine::physical_memory_bytes().map_or(u64::MAX, |m| m / 2);
        Self::Refuse(half.max(DEFAULT_SHUFFLE_BYTES))
    }
}

/// The default bound of a batch's bytes on this machine:
/// [`DEFAULT_MAX_BATCH_BYTES`] or an eighth of its memory, the smaller (a
/// loader holds a few batches prefetched, a few being decoded and a few
/// recycled).
pub fn machine_batch_bytes() -> u64 {
    let machine = tributary_io::machine::physical_memory_bytes().map_or(u64::MAX, |m| m / 8);
    DEFAULT_MAX_BATCH_BYTES.min(machine).max(1 << 20)
}

/// The default bound of one batch's image buffer: 2 GiB (a batch of 256
/// images of 512 x 512 as `f32` takes 0.8 GB).
pub const DEFAULT_MAX_BATCH_BYTES: u64 = 2 << 30;

/// The largest values [`LoaderConfig::validate`] accepts: beyond them a
/// setting is a typo, and it would size an allocation the machine does not
/// have (the command line and the Python binding check against these too).
pub mod limits {
    /// Ranks in a world.
    pub const MAX_WORLD: usize = 1 << 16;
    /// Samples in a batch.
    pub const MAX_BATCH_SIZE: usize = 1 << 16;
    /// Output side length.
    pub const MAX_IMAGE_SIZE: u32 = 4096;
    /// Bytes of one batch's image buffer (batch x 3 x size^2 x element):
    /// the largest `max_batch_bytes` accepted.
    pub const MAX_BATCH_BYTES: u64 = 16 << 30;
    /// Samples in the shuffle buffer.
    pub const MAX_SHUFFLE_BUFFER: usize = 1 << 24;
    /// Prefetched batches, batches in flight, decode threads, stripes.
    pub const MAX_QUEUE: usize = 1024;
    /// Range requests in flight.
    pub const MAX_REQUESTS: usize = 4096;
    /// Bytes fetched and in flight (1 TiB).
    pub const MAX_BYTES_IN_FLIGHT: u64 = 1 << 40;
    /// Bytes of one range request (4 GiB).
    pub const MAX_READ_BYTES: u64 = 1 << 32;
}

/// Samples each decode thread has in flight at least, where the batch
/// bytes allow ([`DecodeConfig::batches_in_flight`]). With 8 (two batches
/// of 64 over 16 threads, or of 8 over 2) a batch's last, slowest images
/// leave threads idle: on the 2-core box, 2 threads with batches of 8 ran
/// 3-4% under the same threads with 32 or 64 samples each in flight.
pub const SAMPLES_IN_FLIGHT_PER_THREAD: usize = 32;

/// Output bytes of the batches being decoded beyond which no batch is added
/// for the threads' sake: 256 MiB, six 224 x 224 float32 batches of 64.
pub const THREADS_BATCH_BYTES: u64 = 256 << 20;

/// The shuffle buffer's default byte bound: 1 GiB, eight times the
/// default fetch budget ([`FetchConfig::max_bytes_in_flight`]).
pub const DEFAULT_SHUFFLE_BYTES: u64 = 1 << 30;

impl Default for PlanConfig {
    fn default() -> Self {
        Self {
            seed: 0,
            epoch: 0,
            generation: 0,
            rank: 0,
            world: 1,
            batch_size: 64,
            drop_last: false,
            shuffle_buffer: 1024,
            shuffle_bytes: ShuffleBytes::Spill(DEFAULT_SHUFFLE_BYTES),
            shuffle: true,
            tail: Tail::Uneven,
            stripe: Stripe::default(),
        }
    }
}

impl Default for DecodeConfig {
    fn default() -> Self {
        Self {
            prefetch_batches: 4,
            decode_batches_in_flight: 2,
            decode_threads: std::thread::available_parallelism().map_or(1, usize::from),
            fields: Fields::default(),
            transform: Transform::default(),
            fetch: FetchConfig::default(),
            decode_limits: DecodeLimits::default(),
            on_error: OnError::Raise,
            max_bad_fraction: 0.01,
            token_ids: IdType::I64,
            max_batch_bytes: DEFAULT_MAX_BATCH_BYTES,
        }
    }
}

impl DecodeConfig {
    /// The batches decoded at once for batches of `batch_size` samples on
    /// `threads` decode threads: enough for
    /// [`SAMPLES_IN_FLIGHT_PER_THREAD`] samples a thread, as long as their
    /// output fits in [`THREADS_BATCH_BYTES`], and never fewer than
    /// `decode_batches_in_flight`. An output of no fixed size (raw fields)
    /// gets `decode_batches_in_flight`: its bytes are not known here.
    pub fn batches_in_flight(&self, batch_size: usize, threads: usize) -> usize {
        let floor = self.decode_batches_in_flight;
        if !self.transform.fixed_size() {
            return floor;
        }
        let images = batch_size.max(1) as u64 * self.fields.images().max(1) as u64;
        let batch_bytes = self.transform.images_bytes(images);
        let fits = usize::try_from(THREADS_BATCH_BYTES / batch_bytes.max(1)).unwrap_or(usize::MAX);
        let wanted = (SAMPLES_IN_FLIGHT_PER_THREAD * threads).div_ceil(batch_size.max(1));
        wanted.min(fits).max(floor).min(limits::MAX_QUEUE)
    }
}

impl LoaderConfig {
    /// Checks the settings, naming the bad one and its bounds.
    pub fn validate(&self) -> Result<()> {
        use limits::*;
        let (plan, decode) = (&self.plan, &self.decode);
        let bad = |m: String| Err(WorkerError::Config(m));
        let ranged = |name: &str, value: u64, max: u64| {
            if (1..=max).contains(&value) {
                Ok(())
            } else {
                bad(format!("{name} is {value}; it must be between 1 and {max}"))
            }
        };
        ranged("batch_size", plan.batch_size as u64, MAX_BATCH_SIZE as u64)?;
        ranged("world", plan.world as u64, MAX_WORLD as u64)?;
        if plan.rank >= plan.world {
            return bad(format!(
                "rank {} is outside a world of {} ranks",
                plan.rank, plan.world
            ));
        }
        if plan.shuffle_buffer > MAX_SHUFFLE_BUFFER {
            return bad(format!(
                "shuffle_buffer is {}; it must be at most {MAX_SHUFFLE_BUFFER}",
                plan.shuffle_buffer
            ));
        }
        if let ShuffleBytes::Spill(bytes) = plan.shuffle_bytes {
            ranged("shuffle_bytes", bytes, MAX_BYTES_IN_FLIGHT)?;
        }
        for (name, value) in [
            ("prefetch_batches", decode.prefetch_batches),
            ("decode_batches_in_flight", decode.decode_batches_in_flight),
            ("decode_threads", decode.decode_threads),
            ("stripe count", plan.stripe.count),
        ] {
            ranged(name, value as u64, MAX_QUEUE as u64)?;
        }
        if plan.stripe.index >= plan.stripe.count {
            return bad(format!(
                "stripe {} of {} does not exist (stripes are numbered from 0)",
                plan.stripe.index, plan.stripe.count
            ));
        }
        ranged(
            "fetch.max_requests",
            decode.fetch.max_requests as u64,
            MAX_REQUESTS as u64,
        )?;
        ranged(
            "fetch.max_bytes_in_flight",
            decode.fetch.max_bytes_in_flight,
            MAX_BYTES_IN_FLIGHT,
        )?;
        ranged(
            "fetch.max_read_bytes",
            decode.fetch.max_read_bytes,
            MAX_READ_BYTES,
        )?;
        ranged(
            "fetch.first_read_bytes",
            decode.fetch.first_read_bytes,
            MAX_READ_BYTES,
        )?;
        ranged("max_batch_bytes", decode.max_batch_bytes, MAX_BATCH_BYTES)?;
        let size = decode.transform.size;
        ranged(
            "image height",
            u64::from(size.height),
            u64::from(MAX_IMAGE_SIZE),
        )?;
        ranged(
            "image width",
            u64::from(size.width),
            u64::from(MAX_IMAGE_SIZE),
        )?;
        if decode.transform.fixed_size() {
            let images = decode.fields.images() as u64;
            let batch_bytes = decode
                .transform
                .images_bytes(plan.batch_size as u64 * images);
            if batch_bytes > decode.max_batch_bytes {
                return bad(format!(
                    "a batch of {} x {images} images of {size} takes {batch_bytes} bytes, over the budget of {} bytes per batch (max_batch_bytes: --max-batch-mib, max_batch_mib= in Python); lower the batch size (--batch-size) or the image size (--image-size)",
                    plan.batch_size, decode.max_batch_bytes
                ));
            }
        }
        if plan.tail == Tail::Pad && plan.shuffle {
            return bad(
                "tail=\"pad\" is for shuffle=False (evaluation) reading, which splits the dataset without dropping any sample".into(),
            );
        }
        decode
            .decode_limits
            .validate()
            .map_err(WorkerError::Config)?;
        bad_samples::validate_fraction(decode.max_bad_fraction).map_err(WorkerError::Config)?;
        decode.transform.validate().map_err(WorkerError::Config)
    }
}

/// Every `count`-th batch of the epoch, starting at batch `index`.
///
/// The loaders of a rank's `count` DataLoader worker processes each read the
/// rank's whole part but decode only their stripe (the others are dropped
/// before decoding); taking one batch from each stripe in turn gives the
/// unstriped order, which is what PyTorch's DataLoader does with its workers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stripe {
    pub index: usize,
    pub count: usize,
}

impl Default for Stripe {
    /// Every batch.
    fn default() -> Self {
        Self { index: 0, count: 1 }
    }
}

impl Stripe {
    /// Whether batch `batch` of the epoch is in this stripe.
    pub fn keeps(self, batch: u64) -> bool {
        batch % self.count as u64 == self.index as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pipeline::decode::transform::Size;

    fn images(batch_size: usize, side: u32, max_batch_bytes: u64) -> LoaderConfig {
        let mut config = LoaderConfig::default();
        config.plan.batch_size = batch_size;
        config.decode.transform.size = Size::square(side);
        config.decode.max_batch_bytes = max_batch_bytes;
        config
    }

    #[test]
    fn a_batch_over_the_byte_budget_is_refused_naming_the_flags() {
        // 64 x 4096 x 4096 x 3 x f32: 12.9 GB, under the old 16 GiB limit.
        let config = images(64, 4096, DEFAULT_MAX_BATCH_BYTES);
        let Err(WorkerError::Config(message)) = config.validate() else {
            panic!("a 12.9 GB batch passed validation");
        };
        let bytes = 64u64 * 4096 * 4096 * 3 * 4;
        for part in [
            "--batch-size",
            "--image-size",
            &bytes.to_string(),
            "max_batch_bytes",
        ] {
            assert!(message.contains(part), "{message:?} names {part}");
        }
        // Within the budget it passes; a budget over the hard limit does not.
        images(64, 224, DEFAULT_MAX_BATCH_BYTES)
            .validate()
            .expect("38.5 MB");
        images(64, 4096, bytes)
            .validate()
            .expect("a budget that fits it");
        assert!(images(64, 224, limits::MAX_BATCH_BYTES + 1)
            .validate()
            .is_err());
    }

    #[test]
    fn threads_get_enough_batches_in_flight_within_the_byte_bound() {
        let decode = |side: u32| images(64, side, DEFAULT_MAX_BATCH_BYTES).decode;
        // 224 x 224 float32 batches of 64 (38.5 MB): 2 threads keep the
        // floor of 2; 16 want 8 batches, of which 6 fit in 256 MiB.
        let f32_224 = decode(224);
        assert_eq!(f32_224.batches_in_flight(64, 2), 2);
        assert_eq!(f32_224.batches_in_flight(64, 8), 4);
        assert_eq!(f32_224.batches_in_flight(64, 16), 6);
        // Small batches: 32 samples a thread.
        assert_eq!(f32_224.batches_in_flight(8, 2), 8);
        // Large images: the floor, however many threads.
        assert_eq!(decode(1024).batches_in_flight(64, 64), 2);
        // uint8: four times as many batches fit.
        let mut u8_224 = decode(224);
        u8_224.transform.dtype = crate::pipeline::decode::transform::Dtype::U8;
        assert_eq!(u8_224.batches_in_flight(64, 16), 8);
        // A higher floor is kept; the count never passes MAX_QUEUE.
        let mut high = decode(8);
        high.decode_batches_in_flight = 5;
        assert_eq!(high.batches_in_flight(64, 2), 5);
        assert_eq!(high.batches_in_flight(1, 4096), limits::MAX_QUEUE);
        // Raw fields (no fixed size): the floor.
        let mut raw = decode(224);
        raw.transform.preset = crate::pipeline::decode::transform::Preset::None;
        assert_eq!(raw.batches_in_flight(1, 64), 2);
    }
}
