//! The shuffle stage: parsed samples through the seeded, bounded shuffle
//! buffer. The buffer lives in `tributary-common` because the coordinator
//! recomputes what a rank's buffer emitted
//! (`tributary_common::plan::generation::emitted`) and the two must never drift
//! apart; this module re-exports it for the pipeline.

use futures::future;
use futures::stream::{self, Stream, StreamExt};
pub use tributary_common::plan::shuffle::*;
use tributary_common::sample::Sample;

use super::config::ShuffleBytes;
use super::parse::{Fetched, Output};
use crate::error::{Result, WorkerError};

/// The shuffle stage: each read's samples pushed through `buffer`, in
/// order, coming out as what the buffer gives out for them (which holds the
/// read's byte budget in their place). Samples are pushed with their
/// payload sizes and held within `bytes`: given out early beyond a
/// [`ShuffleBytes::Spill`] bound ([`ShuffleBuffer::max_bytes`]), an error
/// past a [`ShuffleBytes::Refuse`] one. A flush marker empties the buffer
/// before it passes on; so does the end of the input. Errors pass through
/// in their place.
pub fn shuffle(
    samples: impl Stream<Item = Result<Output>> + Send + 'static,
    buffer: ShuffleBuffer<Sample>,
    bytes: ShuffleBytes,
) -> impl Stream<Item = Result<Output>> + Send + 'static {
    let (mut buffer, refuse) = match bytes {
        ShuffleBytes::Spill(max) => (buffer.max_bytes(max), u64::MAX),
        ShuffleBytes::Refuse(max) => (buffer, max),
    };
    // `None`: the input has ended.
    let end = stream::once(future::ready(None));
    samples.map(Some).chain(end).flat_map(move |item| {
        let mut drained = || {
            Ok(Output::Samples(Fetched {
                samples: buffer.drain().collect(),
                budget: None,
            }))
        };
        let out = match item {
            Some(Ok(Output::Samples(read))) => {
                let mut out = Vec::with_capacity(read.samples.len());
                for sample in read.samples {
                    let bytes = sample.payload_bytes() as u64;
                    buffer.push_sized(sample, bytes, &mut out);
                    if buffer.held_bytes() > refuse {
                        return stream::iter(vec![Err(over(&buffer, refuse))]);
                    }
                }
                vec![Ok(Output::Samples(Fetched {
                    samples: out,
                    budget: read.budget,
                }))]
            }
            Some(Ok(Output::Flush)) => vec![drained(), Ok(Output::Flush)],
            Some(Err(error)) => vec![Err(error)],
            None => vec![drained()],
        };
        stream::iter(out)
    })
}

/// Why a buffer that gives out by count alone cannot go on holding more.
fn over(buffer: &ShuffleBuffer<Sample>, max: u64) -> WorkerError {
    WorkerError::Config(format!(
        "the shuffle buffer holds {} samples of {} bytes, over the {max} bytes a synchronous \
         rank's buffer may hold (half this machine's memory): it gives samples out by count \
         alone, as the coordinator recomputes them, so it cannot give out early. Lower the \
         job's shuffle_buffer (the samples are large)",
        buffer.len(),
        buffer.held_bytes()
    ))
}
