//! Batches: the type the trainer gets (a column per field, keys and sample
//! ids), and the stage that shuffles parsed samples and cuts them into the
//! sample batches the decode stage turns into it.

use std::pin::pin;
use std::sync::Arc;

use futures::stream::{BoxStream, StreamExt};
use tokio::sync::mpsc;
use tributary_common::plan::assign::Padding;
use tributary_common::sample::Sample;

use super::buffers::Buffer;
use super::config::{LoaderConfig, Stripe};
use super::datasets::Datasets;
use super::decode::fields::Column;
use super::fetch::Input;
use super::metrics::Metrics;
use super::parse::{read_samples, Output};
use super::shuffle::ShuffleBuffer;
use crate::error::Result;

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
    /// [`Datasets`]).
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

/// Samples on their way to the decode stage as batch `index`; the last
/// `padded` of them are padding (`tail = pad`).
#[derive(Debug)]
pub struct SampleBatch {
    pub index: u64,
    pub samples: Vec<Sample>,
    pub padded: usize,
}

/// Fetch, parse and shuffle, sending batches of samples downstream.
pub(super) async fn assemble(
    dataset: Datasets,
    input: BoxStream<'static, Input>,
    config: LoaderConfig,
    metrics: Arc<Metrics>,
    padding: Option<Padding>,
    tx: mpsc::Sender<Result<SampleBatch>>,
) {
    let mut shuffle = ShuffleBuffer::new(
        config.shuffle_buffer,
        config.seed,
        config.epoch,
        config.generation,
        config.rank as u64,
    );
    let mut batcher = Batcher {
        pending: Vec::with_capacity(config.batch_size),
        size: config.batch_size,
        index: 0,
        stripe: config.stripe,
        padding,
        position: 0,
        padded: 0,
        last: None,
        tx: &tx,
    };
    let mut fetched = pin!(read_samples(dataset, input, &config.fetch, metrics));
    while let Some(item) = fetched.next().await {
        let read = match item {
            Ok(Output::Samples(read)) => read,
            Ok(Output::Flush) => {
                for sample in shuffle.drain().collect::<Vec<_>>() {
                    if !batcher.push(sample).await {
                        return;
                    }
                }
                if !batcher.flush().await {
                    return;
                }
                continue;
            }
            Err(error) => {
                let _ = tx.send(Err(error)).await;
                return;
            }
        };
        for sample in read.samples {
            if let Some(out) = shuffle.push(sample) {
                if !batcher.push(out).await {
                    return;
                }
            }
        }
    }
    for sample in shuffle.drain().collect::<Vec<_>>() {
        if !batcher.push(sample).await {
            return;
        }
    }
    if !batcher.pad().await {
        return;
    }
    if !config.drop_last {
        batcher.flush().await;
    }
}

struct Batcher<'a> {
    pending: Vec<Sample>,
    size: usize,
    index: u64,
    stripe: Stripe,
    padding: Option<Padding>,
    /// Samples pushed so far in the epoch.
    position: u64,
    /// Padding samples among `pending`.
    padded: usize,
    /// The last sample pushed, which padding repeats.
    last: Option<Sample>,
    tx: &'a mpsc::Sender<Result<SampleBatch>>,
}

impl Batcher<'_> {
    /// Sends the partial batch, if any; false once the consumer is gone.
    async fn flush(&mut self) -> bool {
        if self.pending.is_empty() {
            return true;
        }
        let samples = std::mem::replace(&mut self.pending, Vec::with_capacity(self.size));
        let batch = SampleBatch {
            index: self.index,
            samples,
            padded: std::mem::take(&mut self.padded),
        };
        self.index += 1;
        // Batches of other stripes are dropped here, before decoding.
        !self.stripe.keeps(batch.index) || self.tx.send(Ok(batch)).await.is_ok()
    }

    /// Adds a sample, sending a full batch; false once the consumer is gone.
    async fn push(&mut self, sample: Sample) -> bool {
        if let Some(padding) = self.padding {
            // Samples past `real` were read only to pad with (a rank with
            // no part of its own reads one).
            if self.position >= padding.real {
                self.padded += 1;
            }
            self.last = Some(sample.clone());
        }
        self.position += 1;
        self.pending.push(sample);
        self.pending.len() < self.size || self.flush().await
    }

    /// Repeats the last sample up to the padded total (`tail = pad`).
    async fn pad(&mut self) -> bool {
        let (Some(padding), Some(last)) = (self.padding, self.last.take()) else {
            return true;
        };
        while self.position < padding.total {
            self.padded += 1;
            self.position += 1;
            self.pending.push(last.clone());
            if self.pending.len() >= self.size && !self.flush().await {
                return false;
            }
        }
        true
    }
}
