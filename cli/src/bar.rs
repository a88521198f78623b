//! A progress bar that shows samples/s and MB/s (tokens/s for token
//! datasets; and, packing, the bytes and shards uploaded), drawn on stderr when it is a terminal and silent
//! otherwise (each command prints a summary line).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use indicatif::{ProgressBar, ProgressStyle};
use tributary_tools::progress::Progress;

#[derive(Debug, Clone)]
pub struct Bar {
    bar: ProgressBar,
    counts: Arc<Counts>,
    started: Instant,
}

/// What the message line shows: bytes read, bytes and objects uploaded.
#[derive(Debug, Default)]
struct Counts {
    bytes: AtomicU64,
    tokens: AtomicU64,
    uploaded: AtomicU64,
    shards: AtomicU64,
    total_shards: AtomicU64,
}

impl Bar {
    pub fn new(label: &'static str, total: u64) -> Self {
        let bar = ProgressBar::new(total);
        bar.set_style(
            ProgressStyle::with_template(&format!(
                "{label:>7} [{{bar:30}}] {{pos}}/{{len}} samples  {{per_sec}}  {{msg}}  eta {{eta}}"
            ))
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> "),
        );
        Self {
            bar,
            counts: Arc::default(),
            started: Instant::now(),
        }
    }

    /// A bar counting documents, whose message shows tokens/s (token
    /// packs and indexes).
    pub fn documents(label: &'static str) -> Self {
        let bar = Self::new(label, 0);
        bar.bar.set_style(
            ProgressStyle::with_template(&format!(
                "{label:>7} {{spinner}} {{pos}} documents  {{per_sec}}  {{msg}}  {{elapsed}}"
            ))
            .unwrap_or_else(|_| ProgressStyle::default_spinner()),
        );
        bar
    }

    pub fn finish(&self) {
        self.bar.finish_and_clear();
    }

    /// `12.3 MB/s`, and for jobs that upload (`pack`) `, 80.0 MB up, 2/5 shards`.
    fn message(&self) -> String {
        let c = &self.counts;
        let bytes = c.bytes.load(Ordering::Relaxed);
        let seconds = self.started.elapsed().as_secs_f64().max(1e-3);
        let rate = bytes as f64 / seconds / 1e6;
        let tokens = c.tokens.load(Ordering::Relaxed);
        let tokens = if tokens == 0 {
            String::new()
        } else {
            format!("{:.2} M tokens/s, ", tokens as f64 / seconds / 1e6)
        };
        let total_shards = c.total_shards.load(Ordering::Relaxed);
        if total_shards == 0 {
            return format!("{tokens}{rate:.1} MB/s");
        }
        format!(
            "{tokens}{rate:.1} MB/s, {:.1} MB up, {}/{total_shards} shards",
            c.uploaded.load(Ordering::Relaxed) as f64 / 1e6,
            c.shards.load(Ordering::Relaxed),
        )
    }
}

impl Progress for Bar {
    fn total(&self, samples: u64, _bytes: u64) {
        if samples > 0 {
            self.bar.set_length(samples);
        }
    }

    fn advance(&self, samples: u64, bytes: u64) {
        self.counts.bytes.fetch_add(bytes, Ordering::Relaxed);
        self.bar.set_message(self.message());
        self.bar.inc(samples);
    }

    fn total_shards(&self, shards: u64) {
        self.counts.total_shards.store(shards, Ordering::Relaxed);
    }

    fn tokens(&self, tokens: u64) {
        self.counts.tokens.fetch_add(tokens, Ordering::Relaxed);
        self.bar.set_message(self.message());
    }

    fn uploaded(&self, bytes: u64, shards: u64) {
        self.counts.uploaded.fetch_add(bytes, Ordering::Relaxed);
        self.counts.shards.fetch_add(shards, Ordering::Relaxed);
        self.bar.set_message(self.message());
    }
}
