//! What a loader reads: one dataset, or several mixed into one epoch.
//!
//! Spans name *virtual* shards (see [`tributary_common::plan::mix`]): for one
//! dataset they are its shards; for a mix, the datasets' shards
//! concatenated and repeated as often as an epoch takes a dataset more than
//! once. [`Datasets::shard`] resolves one to its dataset and shard, and a
//! sample's id is its position in that space, so ids stay unique within an
//! epoch and a repeated sample gets its own augmentations.

use std::sync::Arc;

use tributary_common::manifest::{ColumnKind, Manifest, ShardEntry, ShardMeta};
use tributary_common::plan::mix::{Layout, SourceShape, Take};
use tributary_common::plan::span::Span;
use tributary_common::tokens::SequenceSpec;
use tributary_io::{AnyDataset, Dataset, ShardCache, TokenDataset};

use super::decode::fields::Fields;
use super::table::{column_reads, plan_rows, RowsRead};
use super::table_fields::resolve_fields;
use crate::error::{Result, WorkerError};

/// One dataset, or several mixed by a [`Layout`]: of samples, or of
/// tokens (then the layout counts rows, see [`tributary_common::tokens`]).
#[derive(Debug, Clone)]
pub struct Datasets {
    datasets: Arc<[Dataset]>,
    tokens: Option<Arc<TokenSources>>,
    layout: Arc<Layout>,
    /// The columns read from each Parquet dataset (none from tar shards):
    /// those the fields name ([`Datasets::with_fields`]).
    projections: Arc<[Projection]>,
}

/// The columns read from a Parquet dataset: names and kinds, as its
/// manifest lists them.
pub type Projection = Arc<[(String, ColumnKind)]>;

/// How a span is read: from a tar shard's chunks, or as reads of a
/// Parquet file's row groups.
#[derive(Debug)]
pub enum Planned {
    Chunks(Arc<ShardMeta>),
    /// Each read's rows of the file, and what it fetches.
    Rows(Vec<(std::ops::Range<u32>, RowsRead)>),
}

/// A token job's datasets, in mix order, and the rows they are cut into.
#[derive(Debug)]
pub struct TokenSources {
    pub datasets: Vec<TokenDataset>,
    pub sequence: SequenceSpec,
}

/// A virtual shard resolved: its dataset, and its shard there.
#[derive(Debug, Clone, Copy)]
pub struct ShardRef<'a> {
    pub dataset: &'a Dataset,
    /// The dataset's position in the mix (0 for one dataset).
    pub source: usize,
    /// The shard's index in its dataset's manifest.
    pub index: usize,
    /// Its manifest entry (name, samples, size; the chunk columns through
    /// [`ShardRef::meta`]).
    pub entry: &'a ShardEntry,
    /// The id of the shard's first sample (in the virtual space).
    pub first_id: u64,
}

impl ShardRef<'_> {
    pub fn manifest(&self) -> &Manifest {
        &self.dataset.manifest
    }

    /// The shard's chunk columns, its index loaded the first time
    /// ([`Dataset::shard_meta`]).
    pub async fn meta(&self) -> tributary_io::Result<Arc<ShardMeta>> {
        self.dataset.shard_meta(self.index).await
    }

    /// The shard's chunk columns if they are at hand without a read.
    pub fn loaded_meta(&self) -> Option<Arc<ShardMeta>> {
        self.dataset.loaded_shard_meta(self.index)
    }

    /// The shard's name for messages: its object name, or in a mix (whose
    /// datasets may name shards alike) its URL.
    pub fn display_name(&self, mixed: bool) -> String {
        if mixed {
            self.dataset.location.url_of(&self.entry.name)
        } else {
            self.entry.name.clone()
        }
    }
}

impl From<Dataset> for Datasets {
    fn from(dataset: Dataset) -> Self {
        let counts = dataset.manifest.shards.iter().map(|s| s.samples).collect();
        Self {
            datasets: Arc::from([dataset]),
            tokens: None,
            layout: Arc::new(Layout::single(counts)),
            projections: Arc::from([Projection::from([])]),
        }
    }
}

impl Datasets {
    /// `datasets` mixed as `takes` says (one [`Take`] each; `epoch_samples`
    /// for weighted ones, 0: all their samples): the same layout the
    /// coordinator plans with. Errors name the field (`sources[i]`).
    pub fn mixed(datasets: Vec<Dataset>, takes: &[Take], epoch_samples: u64) -> Result<Self> {
        let counts = datasets
            .iter()
            .map(|d| d.manifest.shards.iter().map(|s| s.samples).collect())
            .collect();
        let layout = mixed_layout(counts, takes, epoch_samples)?;
        let projections = datasets.iter().map(|_| Projection::from([])).collect();
        Ok(Self {
            datasets: datasets.into(),
            tokens: None,
            layout: Arc::new(layout),
            projections,
        })
    }

    /// Token datasets cut into rows of `sequence` and mixed as `takes`
    /// says (as [`Datasets::mixed`]; one dataset with one default take is
    /// unmixed): the layout the coordinator plans a token job with.
    pub async fn tokens(
        datasets: Vec<TokenDataset>,
        takes: &[Take],
        epoch_samples: u64,
        sequence: SequenceSpec,
    ) -> Result<Self> {
        let rows =
            futures::future::try_join_all(datasets.iter().map(|d| d.shard_rows(sequence))).await?;
        let layout = if takes.is_empty() {
            let [rows] = <[Vec<u32>; 1]>::try_from(rows).map_err(|rows| {
                WorkerError::Config(format!("{} token datasets and no mix", rows.len()))
            })?;
            Layout::single(rows)
        } else {
            mixed_layout(rows, takes, epoch_samples)?
        };
        Ok(Self {
            datasets: Arc::from([]),
            tokens: Some(Arc::new(TokenSources { datasets, sequence })),
            layout: Arc::new(layout),
            projections: Arc::from([]),
        })
    }

    /// Opened datasets as a job reads them: one (no `takes`) or a mix,
    /// of samples (through `cache`) or, with a `sequence`, of tokens cut
    /// into its rows. A dataset of the other kind is an error that says
    /// what to pass.
    pub async fn open(
        opened: Vec<AnyDataset>,
        takes: &[Take],
        epoch_samples: u64,
        sequence: Option<SequenceSpec>,
        cache: Option<Arc<ShardCache>>,
    ) -> Result<Self> {
        match sequence {
            Some(sequence) => {
                let tokens = opened
                    .into_iter()
                    .map(|d| match d {
                        AnyDataset::Tokens(d) => Ok(d),
                        AnyDataset::Samples(d) => Err(WorkerError::Config(format!(
                            "{}: is a sample dataset; sequence_length is for token datasets \
                             (pack text with `tributary pack CORPUS OUT --tokenizer T`)",
                            d.location.url_of("")
                        ))),
                    })
                    .collect::<Result<Vec<_>>>()?;
                Self::tokens(tokens, takes, epoch_samples, sequence).await
            }
            None => {
                let mut samples = opened
                    .into_iter()
                    .map(|d| match d {
                        AnyDataset::Samples(d) => Ok(d.with_cache(cache.clone())),
                        AnyDataset::Tokens(d) => Err(WorkerError::Config(format!(
                            "{}: is a token dataset: give sequence_length (and packing) to \
                             read it as fixed-length sequences",
                            d.location.url_of("")
                        ))),
                    })
                    .collect::<Result<Vec<_>>>()?;
                if takes.is_empty() && samples.len() == 1 {
                    return Ok(samples.remove(0).into());
                }
                Self::mixed(samples, takes, epoch_samples)
            }
        }
    }

    /// A token job's datasets; `None` for samples.
    pub fn token_sources(&self) -> Option<&Arc<TokenSources>> {
        self.tokens.as_ref()
    }

    /// The plan's view of the data.
    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    /// The datasets, in mix order.
    pub fn datasets(&self) -> &[Dataset] {
        &self.datasets
    }

    /// The first dataset: the one dataset of an unmixed loader.
    pub fn first(&self) -> &Dataset {
        &self.datasets[0]
    }

    /// Virtual shard `shard` resolved; `None` outside the layout.
    pub fn shard(&self, shard: u32) -> Option<ShardRef<'_>> {
        self.layout.shard_samples(shard)?;
        let (source, index) = self.layout.resolve(shard);
        let dataset = &self.datasets[source];
        Some(ShardRef {
            dataset,
            source,
            index: index as usize,
            entry: &dataset.manifest.shards[index as usize],
            first_id: self.layout.shard_start(shard),
        })
    }

    /// How `span` is read: its tar shard's chunk columns (the index loaded
    /// the first time), or the reads of its Parquet file's row groups (the
    /// footer loaded the first time), of the columns the fields name, each
    /// of about `max_read_bytes` where the file has an offset index.
    pub async fn plan(&self, span: &Span, max_read_bytes: u64) -> Result<Planned> {
        let shard = self.shard(span.shard).ok_or_else(|| {
            WorkerError::Config(format!(
                "shard {} is outside the dataset ({} shards)",
                span.shard,
                self.layout.shards()
            ))
        })?;
        let Some(groups) = shard.entry.row_groups() else {
            return Ok(Planned::Chunks(shard.meta().await?));
        };
        let footer = shard.dataset.footer(shard.index).await?;
        let projection = &self.projections[shard.source];
        let columns =
            column_reads(&footer, projection).map_err(|reason| tributary_io::IoError::Parquet {
                url: shard.dataset.location.url_of(&shard.entry.name),
                reason,
            })?;
        let reads = plan_rows(&footer, &groups.starts(), &columns, span, max_read_bytes);
        Ok(Planned::Rows(reads))
    }

    /// The same datasets reading, from each Parquet dataset, the columns
    /// `fields` name; and the fields, each with the decoder its columns
    /// take (see [`super::table_fields`]).
    pub fn with_fields(self, fields: &Fields) -> Result<(Self, Fields)> {
        let (fields, projections) = resolve_fields(&self.datasets, fields)?;
        Ok((
            Self {
                projections: projections.into(),
                ..self
            },
            fields,
        ))
    }

    /// Virtual shard `shard`'s chunk columns, its dataset's index of it
    /// loaded the first time ([`Dataset::shard_meta`]).
    pub async fn shard_meta(&self, shard: u32) -> Result<Arc<ShardMeta>> {
        let resolved = self.shard(shard).ok_or_else(|| {
            WorkerError::Config(format!(
                "shard {shard} is outside the dataset ({} shards)",
                self.layout.shards()
            ))
        })?;
        Ok(resolved.meta().await?)
    }

    /// Sample `id`'s shard, resolved, and its index there.
    pub fn locate(&self, id: u64) -> Option<(ShardRef<'_>, u32)> {
        let (shard, index) = self.layout.locate(id)?;
        Some((self.shard(shard)?, index))
    }

    /// The dataset (its position in the mix) sample `id` comes from.
    pub fn source_of(&self, id: u64) -> u32 {
        self.layout
            .locate(id)
            .map_or(0, |(shard, _)| self.layout.resolve(shard).0 as u32)
    }

    /// An error unless `span` lies inside the layout.
    pub fn check_span(&self, span: &Span) -> Result<()> {
        match self.layout.shard_samples(span.shard) {
            Some(samples) if span.start <= span.end && span.end <= samples => Ok(()),
            _ => Err(WorkerError::Config(format!(
                "span {}:{}..{} is outside the dataset ({} shards)",
                span.shard,
                span.start,
                span.end,
                self.layout.shards()
            ))),
        }
    }
}

/// The layout of datasets of `counts` (samples or rows per shard, each)
/// mixed as `takes` says: one take per dataset.
fn mixed_layout(counts: Vec<Vec<u32>>, takes: &[Take], epoch_samples: u64) -> Result<Layout> {
    if counts.len() != takes.len() {
        return Err(WorkerError::Config(format!(
            "{} datasets but {} ways to take from them",
            counts.len(),
            takes.len()
        )));
    }
    let shapes: Vec<SourceShape> = counts
        .into_iter()
        .zip(takes)
        .map(|(shard_samples, &take)| SourceShape {
            shard_samples,
            take,
        })
        .collect();
    Layout::mixed(&shapes, epoch_samples).map_err(|e| WorkerError::Config(e.to_string()))
}
