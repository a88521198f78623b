//! A rank that reads without a coordinator: the unshuffled (evaluation)
//! split of the whole dataset, the same part on every pass.

use std::sync::Arc;

use rayon::ThreadPool;

use crate::pipeline::decode_pool;
use crate::pipeline::metrics::Metrics;
use crate::{Batch, Datasets, Loader, LoaderConfig, Result};

/// Rank `config.plan.rank` of `config.plan.world` reading its contiguous part of the
/// dataset in manifest order (see [`tributary_common::plan::assign::ordered_assignment`]),
/// pass after pass. It keeps no progress to checkpoint: a pass is read
/// whole or read again.
#[derive(Debug)]
pub struct OrderedReader {
    dataset: Datasets,
    config: LoaderConfig,
    pool: Arc<ThreadPool>,
    /// Counted into by every pass's loader.
    metrics: Arc<Metrics>,
    loader: Loader,
}

impl OrderedReader {
    /// Starts pass `config.plan.epoch`.
    pub async fn start(dataset: impl Into<Datasets>, config: LoaderConfig) -> Result<Self> {
        config.validate()?;
        let dataset = dataset.into();
        let pool = decode_pool(config.decode.decode_threads)?;
        let metrics = Arc::default();
        let loader = Self::loader(&dataset, &config, &pool, &metrics).await?;
        Ok(Self {
            dataset,
            config,
            pool,
            metrics,
            loader,
        })
    }

    async fn loader(
        dataset: &Datasets,
        config: &LoaderConfig,
        pool: &Arc<ThreadPool>,
        metrics: &Arc<Metrics>,
    ) -> Result<Loader> {
        Loader::builder(dataset.clone())
            .config(config.clone())
            .decode_pool(Arc::clone(pool))
            .metrics(Arc::clone(metrics))
            .build()
            .await
    }

    pub async fn next(&mut self) -> Option<Result<Batch>> {
        self.loader.next().await
    }

    /// Starts pass `epoch` from its first batch.
    pub async fn set_epoch(&mut self, epoch: u64) -> Result<()> {
        let mut config = self.config.clone();
        config.plan.epoch = epoch;
        self.loader = Self::loader(&self.dataset, &config, &self.pool, &self.metrics).await?;
        self.config = config;
        Ok(())
    }

    /// Starts the next pass; there is always one.
    pub async fn next_epoch(&mut self) -> Result<bool> {
        self.set_epoch(self.config.plan.epoch + 1).await?;
        Ok(true)
    }

    pub fn epoch(&self) -> u64 {
        self.config.plan.epoch
    }

    /// Samples of this rank's part (with `tail = pad`, padding included).
    pub fn samples(&self) -> u64 {
        self.loader.samples()
    }

    /// What every pass's loader counted.
    pub fn metrics(&self) -> &Arc<Metrics> {
        &self.metrics
    }

    pub fn rank(&self) -> u32 {
        self.config.plan.rank as u32
    }

    pub fn world(&self) -> u32 {
        self.config.plan.world as u32
    }
}
