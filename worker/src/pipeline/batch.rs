//! Batches: the type the trainer gets (one contiguous image buffer plus
//! labels, keys and sample ids), and the stage that shuffles parsed samples
//! and cuts them into the sample batches the decode stage turns into it.

use std::pin::pin;
use std::sync::Arc;

use futures::stream::{BoxStream, StreamExt};
use tokio::sync::mpsc;
use tributary_common::sample::Sample;
use tributary_io::Dataset;

use super::buffers::Buffer;
use super::config::{LoaderConfig, Stripe};
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
    pub images: Images,
    /// `[N, 3, S, S]` for `F32`, `[N, S, S, 3]` for `U8`.
    pub shape: [usize; 4],
    /// Class index from the `cls` field, or -1 where a sample has none.
    pub labels: Vec<i64>,
    pub keys: Vec<String>,
    /// Dataset-wide sample ids.
    pub ids: Vec<u64>,
    /// Ids of the samples of this batch that were bad and skipped
    /// (`on_error = skip`): read, so counted as done by progress tracking
    /// (commits, acks), but not in the batch.
    pub skipped_ids: Vec<u64>,
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
}

/// Fetch, parse and shuffle, sending batches of samples downstream.
pub(super) async fn assemble(
    dataset: Dataset,
    input: BoxStream<'static, Input>,
    config: LoaderConfig,
    metrics: Arc<Metrics>,
    tx: mpsc::Sender<Result<(u64, Vec<Sample>)>>,
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
    if !config.drop_last {
        batcher.flush().await;
    }
}

struct Batcher<'a> {
    pending: Vec<Sample>,
    size: usize,
    index: u64,
    stripe: Stripe,
    tx: &'a mpsc::Sender<Result<(u64, Vec<Sample>)>>,
}

impl Batcher<'_> {
    /// Sends the partial batch, if any; false once the consumer is gone.
    async fn flush(&mut self) -> bool {
        if self.pending.is_empty() {
            return true;
        }
        let part = std::mem::replace(&mut self.pending, Vec::with_capacity(self.size));
        let index = self.index;
        self.index += 1;
        // Batches of other stripes are dropped here, before decoding.
        !self.stripe.keeps(index) || self.tx.send(Ok((index, part))).await.is_ok()
    }

    /// Adds a sample, sending a full batch; false once the consumer is gone.
    async fn push(&mut self, sample: Sample) -> bool {
        self.pending.push(sample);
        self.pending.len() < self.size || self.flush().await
    }
}
