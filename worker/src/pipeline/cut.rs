//! The cut stage: the shuffled sample stream of a rank cut into the
//! batches the decode stage turns into [`Batch`](super::output::Batch)es.
//! Where one batch ends and the next begins is a [`Cut`] strategy's
//! choice; today's is [`WholeSamples`]: `batch_size` whole samples.

use std::collections::VecDeque;

use futures::stream::{self, Stream, StreamExt};
use tributary_common::plan::assign::Padding;
use tributary_common::sample::Sample;

use super::config::Stripe;
use super::parse::Output;
use crate::error::Result;

/// Samples on their way to the decode stage as batch `index`; the last
/// `padded` of them are padding (`tail = pad`).
#[derive(Debug)]
pub struct SampleBatch {
    pub index: u64,
    pub samples: Vec<Sample>,
    pub padded: usize,
}

/// How a rank's stream of samples becomes its batches: the seam between
/// what a rank reads and what its trainer steps on.
///
/// Two counts meet here, and a strategy must keep both:
///
/// - **Progress counts whole samples.** What a rank has consumed is the
///   samples of the batches it handed on: each batch's `ids` plus its
///   `skipped_ids` ([`Batch::consumed`](super::output::Batch::consumed)).
///   Commits, acks and the coordinator's recomputation of a rank's shuffle
///   buffer all speak in sample ids, so every sample pushed must come out in
///   exactly one batch (or be dropped with the epoch's short last batch,
///   `drop_last`), in push order.
/// - **DDP lockstep counts batches.** Data-parallel ranks run one collective
///   per step, so every rank must yield the same number of batches, each of
///   the same number of rows. [`WholeSamples`] gets this from equal sample
///   counts per rank (the equal split of an epoch, or `tail = pad`): with
///   `batch_size` samples per batch, equal samples make equal batches.
///
/// Token jobs need no other strategy: their rows of `L` tokens (documents
/// cut across boundaries or packed, [`tributary_common::tokens`]) are the
/// plan's samples, so `batch_size` whole rows a batch keeps both counts,
/// and a restart resumes at a row, every token of which is known from the
/// plan alone.
///
/// The stage ([`cut`]) numbers the batches a strategy forms and keeps only
/// its loader's [`Stripe`] of them; a strategy only says where batches end.
pub trait Cut: Send + 'static {
    /// Takes the rank's next sample, forming the batches it completes.
    fn push(&mut self, sample: Sample, out: &mut Batches);

    /// No more samples for now (a dynamic loader's `Input::Flush`): the
    /// partial batch goes out, so that every sample read so far reaches
    /// the consumer.
    fn flush(&mut self, out: &mut Batches);

    /// The end of the epoch's input: the last batches (padding, and the
    /// partial batch unless the strategy drops it).
    fn finish(&mut self, out: &mut Batches);
}

/// The batches a [`Cut`] forms, numbered here in order from 0; those of
/// other stripes are dropped here, before decoding.
#[derive(Debug)]
pub struct Batches {
    index: u64,
    stripe: Stripe,
    ready: VecDeque<SampleBatch>,
}

impl Batches {
    fn new(stripe: Stripe) -> Self {
        Self {
            index: 0,
            stripe,
            ready: VecDeque::new(),
        }
    }

    /// Forms the next batch: `samples`, the last `padded` of them padding.
    pub fn form(&mut self, samples: Vec<Sample>, padded: usize) {
        let index = self.index;
        self.index += 1;
        if self.stripe.keeps(index) {
            self.ready.push_back(SampleBatch {
                index,
                samples,
                padded,
            });
        }
    }
}

/// `batch_size` whole samples a batch, in stream order: the last batch
/// of the epoch short (or dropped with `drop_last`), a flush's partial
/// batch short; with [`Padding`], the stream is evened out to
/// `padding.total` samples by repeating its last sample.
#[derive(Debug)]
pub struct WholeSamples {
    size: usize,
    drop_last: bool,
    padding: Option<Padding>,
    pending: Vec<Sample>,
    /// Samples pushed so far in the epoch.
    position: u64,
    /// Padding samples among `pending`.
    padded: usize,
    /// The last sample pushed, which padding repeats.
    last: Option<Sample>,
}

impl WholeSamples {
    pub fn new(batch_size: usize, drop_last: bool, padding: Option<Padding>) -> Self {
        Self {
            size: batch_size,
            drop_last,
            padding,
            pending: Vec::with_capacity(batch_size),
            position: 0,
            padded: 0,
            last: None,
        }
    }

    /// Forms the partial batch, if any.
    fn form(&mut self, out: &mut Batches) {
        if self.pending.is_empty() {
            return;
        }
        let samples = std::mem::replace(&mut self.pending, Vec::with_capacity(self.size));
        out.form(samples, std::mem::take(&mut self.padded));
    }

    /// Repeats the last sample up to the padded total (`tail = pad`).
    fn pad(&mut self, out: &mut Batches) {
        let (Some(padding), Some(last)) = (self.padding, self.last.take()) else {
            return;
        };
        while self.position < padding.total {
            self.padded += 1;
            self.position += 1;
            self.pending.push(last.clone());
            if self.pending.len() >= self.size {
                self.form(out);
            }
        }
    }
}

impl Cut for WholeSamples {
    fn push(&mut self, sample: Sample, out: &mut Batches) {
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
        if self.pending.len() >= self.size {
            self.form(out);
        }
    }

    fn flush(&mut self, out: &mut Batches) {
        self.form(out);
    }

    fn finish(&mut self, out: &mut Batches) {
        self.pad(out);
        if !self.drop_last {
            self.form(out);
        }
    }
}

/// The cut stage: the samples of `samples`, in order, cut into batches by
/// `strategy`, those of `stripe` kept. A read's byte budget is held until
/// the batches its samples completed are handed on. An error passes on and
/// ends the stream.
pub fn cut(
    samples: impl Stream<Item = Result<Output>> + Send + 'static,
    strategy: impl Cut,
    stripe: Stripe,
) -> impl Stream<Item = Result<SampleBatch>> + Send + 'static {
    let state = State {
        samples: Box::pin(samples),
        strategy,
        batches: Batches::new(stripe),
        budget: None,
        ended: false,
    };
    stream::unfold(state, |mut state| async move {
        loop {
            if let Some(batch) = state.batches.ready.pop_front() {
                return Some((Ok(batch), state));
            }
            // Every batch of the last read is handed on: its budget goes
            // back.
            state.budget = None;
            if state.ended {
                return None;
            }
            match state.samples.next().await {
                Some(Ok(Output::Samples(read))) => {
                    for sample in read.samples {
                        state.strategy.push(sample, &mut state.batches);
                    }
                    state.budget = read.budget;
                }
                Some(Ok(Output::Flush)) => state.strategy.flush(&mut state.batches),
                Some(Err(error)) => {
                    state.ended = true;
                    return Some((Err(error), state));
                }
                None => {
                    state.ended = true;
                    state.strategy.finish(&mut state.batches);
                }
            }
        }
    })
}

/// The cut stage between two items.
struct State<S, C> {
    samples: std::pin::Pin<Box<S>>,
    strategy: C,
    batches: Batches,
    /// The byte budget of the read whose batches are being handed on.
    budget: Option<tokio::sync::OwnedSemaphorePermit>,
    ended: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(id: u64) -> Sample {
        Sample {
            id,
            key: format!("s{id}"),
            fields: Vec::new(),
        }
    }

    /// Runs `items` (`Some(n)`: a read of the next `n` samples; `None`: a
    /// flush) through the cut stage: (index, ids, padded) per batch.
    fn run(
        items: &[Option<u64>],
        strategy: WholeSamples,
        stripe: Stripe,
    ) -> Vec<(u64, Vec<u64>, usize)> {
        let mut next = 0;
        let input: Vec<Result<Output>> = items
            .iter()
            .map(|item| {
                Ok(match item {
                    Some(n) => {
                        let samples = (next..next + n).map(sample).collect();
                        next += n;
                        Output::Samples(crate::pipeline::parse::Fetched {
                            samples,
                            budget: None,
                        })
                    }
                    None => Output::Flush,
                })
            })
            .collect();
        let batches = cut(stream::iter(input), strategy, stripe);
        futures::executor::block_on(batches.collect::<Vec<_>>())
            .into_iter()
            .map(|batch| {
                let batch = batch.expect("the cut of in-memory samples fails nothing");
                let ids = batch.samples.iter().map(|s| s.id).collect();
                (batch.index, ids, batch.padded)
            })
            .collect()
    }

    #[test]
    fn whole_samples_across_reads_short_last() {
        let batches = run(
            &[Some(3), Some(4)],
            WholeSamples::new(3, false, None),
            Stripe::default(),
        );
        assert_eq!(
            batches,
            vec![
                (0, vec![0, 1, 2], 0),
                (1, vec![3, 4, 5], 0),
                (2, vec![6], 0)
            ]
        );
        let dropped = run(
            &[Some(7)],
            WholeSamples::new(3, true, None),
            Stripe::default(),
        );
        assert_eq!(dropped.len(), 2);
    }

    #[test]
    fn flush_sends_the_partial_batch_and_stripes_drop_others() {
        let stripe = Stripe { index: 1, count: 2 };
        let batches = run(
            &[Some(2), None, Some(4)],
            WholeSamples::new(3, true, None),
            stripe,
        );
        // Batch 0 ([0, 1], flushed) is the other stripe's; [5] is the short
        // last batch, dropped.
        assert_eq!(batches, vec![(1, vec![2, 3, 4], 0)]);
    }

    #[test]
    fn padding_repeats_the_last_sample() {
        let padding = Padding { real: 2, total: 5 };
        let batches = run(
            &[Some(3)],
            WholeSamples::new(2, false, Some(padding)),
            Stripe::default(),
        );
        assert_eq!(
            batches,
            vec![(0, vec![0, 1], 0), (1, vec![2, 2], 2), (2, vec![2], 1)]
        );
    }
}
