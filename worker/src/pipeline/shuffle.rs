//! The shuffle stage: parsed samples through the seeded, bounded shuffle
//! buffer. The buffer lives in `tributary-common` because the coordinator
//! recomputes what a rank's buffer emitted
//! (`tributary_common::plan::generation::emitted`) and the two must never drift
//! apart; this module re-exports it for the pipeline.

use futures::future;
use futures::stream::{self, Stream, StreamExt};
pub use tributary_common::plan::shuffle::*;
use tributary_common::sample::Sample;

use super::parse::{Fetched, Output};
use crate::error::Result;

/// The shuffle stage: each read's samples pushed through `buffer`, in
/// order, coming out as what the buffer gives out for them (which holds the
/// read's byte budget in their place). Samples are pushed with their
/// payload sizes, so a buffer bounded by bytes
/// ([`ShuffleBuffer::max_bytes`]) holds at most that many. A flush marker empties the buffer
/// before it passes on; so does the end of the input. Errors pass through
/// in their place.
pub fn shuffle(
    samples: impl Stream<Item = Result<Output>> + Send + 'static,
    mut buffer: ShuffleBuffer<Sample>,
) -> impl Stream<Item = Result<Output>> + Send + 'static {
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
