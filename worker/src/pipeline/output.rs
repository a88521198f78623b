//! What the pipeline hands the trainer: a [`Batch`], a [`Column`] per
//! field, and the image buffers ([`Images`]) and arrays ([`Arrays`]) the
//! columns hold. A leaf: the decoder that makes them and the field
//! decoders import it; it names no stage, only the buffers it holds and
//! the dtype of an array.

use bytes::Bytes;

use super::buffers::Buffer;
use super::decode::npy::DType;

/// A batch's image buffer; it goes back to its loader's pool when dropped.
#[derive(Debug, Clone, PartialEq)]
pub enum Images {
    /// `N x 3 x S x S`, normalised.
    F32(Buffer<f32>),
    /// `N x S x S x 3`.
    U8(Buffer<u8>),
}

/// A batch ready for the trainer.
#[derive(Debug, Clone, PartialEq)]
pub struct Batch {
    /// Position of the batch in this rank's epoch, from 0.
    pub index: u64,
    /// One column per field of the loader's
    /// [`Fields`](super::decode::fields::Fields), in their order.
    pub columns: Vec<Column>,
    pub keys: Vec<String>,
    /// Sample ids: a dataset's ids; in a mix, positions in the mix's
    /// virtual sample space (unique within an epoch, see
    /// [`Datasets`](super::datasets::Datasets)).
    pub ids: Vec<u64>,
    /// The dataset each sample comes from: its position in the mix (all 0
    /// for one dataset).
    pub sources: Vec<u32>,
    /// Ids of the samples of this batch that were bad and skipped
    /// (`on_error = skip`): read, so counted as done by progress tracking
    /// (commits, acks), but not in the batch.
    pub skipped_ids: Vec<u64>,
    /// The last `padded` samples repeat a sample to even out the ranks'
    /// batch counts (`tail = pad`); they are not part of the epoch.
    pub padded: usize,
}

impl Batch {
    /// Number of samples.
    pub fn len(&self) -> usize {
        self.ids.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }

    /// Samples this batch consumed from the epoch: those in it plus those
    /// skipped.
    pub fn consumed(&self) -> usize {
        self.ids.len() + self.skipped_ids.len()
    }

    /// The first dense image column and its shape (`[N, 3, H, W]` or
    /// `[N, H, W, 3]`).
    pub fn images(&self) -> Option<(&Images, [usize; 4])> {
        self.columns.iter().find_map(|c| match c {
            Column::Images(images, shape) => Some((images, *shape)),
            _ => None,
        })
    }

    /// The first label column.
    pub fn labels(&self) -> Option<&[i64]> {
        self.columns.iter().find_map(|c| match c {
            Column::Labels(labels) => Some(labels.as_slice()),
            _ => None,
        })
    }

    /// Whether each sample belongs to the epoch (false for padding).
    pub fn valid(&self) -> Vec<bool> {
        let real = self.len() - self.padded.min(self.len());
        (0..self.len()).map(|i| i < real).collect()
    }
}

/// One array of an `npy` field.
#[derive(Debug, Clone, PartialEq)]
pub struct Array {
    pub dtype: DType,
    pub shape: Vec<usize>,
    /// Little-endian, C order; shares the buffer the sample was read in.
    pub data: Bytes,
}

/// An `npy` column.
#[derive(Debug, Clone, PartialEq)]
pub enum Arrays {
    /// Every sample's array had this dtype and shape: one `N x shape`
    /// array.
    Stacked {
        dtype: DType,
        /// Of one array; the stack is `[count, shape...]`.
        shape: Vec<usize>,
        count: usize,
        data: Vec<u8>,
    },
    /// Dtypes or shapes differ, or a sample lacks the field.
    List(Vec<Option<Array>>),
}

/// One field of a batch, a value per sample.
#[derive(Debug, Clone, PartialEq)]
pub enum Column {
    /// Every image transformed to one size: `[N, 3, H, W]` (NCHW) or
    /// `[N, H, W, 3]` (NHWC).
    Images(Images, [usize; 4]),
    /// Preset `none`: each image as decoded, `[3, H, W]` or `[H, W, 3]`.
    ImageList(Vec<(Images, [usize; 3])>),
    /// `cls`: -1 where an optional label is missing.
    Labels(Vec<i64>),
    Text(Vec<Option<String>>),
    Json(Vec<Option<serde_json::Value>>),
    Arrays(Arrays),
    Bytes(Vec<Option<Bytes>>),
}
