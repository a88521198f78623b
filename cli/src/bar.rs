//! A progress bar that shows samples/s and MB/s, drawn on stderr when it is a
//! terminal and silent otherwise (each command prints a summary line).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use indicatif::{ProgressBar, ProgressStyle};
use tributary_worker::tools::progress::Progress;

#[derive(Debug, Clone)]
pub struct Bar {
    bar: ProgressBar,
    bytes: Arc<AtomicU64>,
    started: Instant,
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
            bytes: Arc::default(),
            started: Instant::now(),
        }
    }

    pub fn finish(&self) {
        self.bar.finish_and_clear();
    }
}

impl Progress for Bar {
    fn total(&self, samples: u64, _bytes: u64) {
        if samples > 0 {
            self.bar.set_length(samples);
        }
    }

    fn advance(&self, samples: u64, bytes: u64) {
        let total = self.bytes.fetch_add(bytes, Ordering::Relaxed) + bytes;
        let rate = total as f64 / self.started.elapsed().as_secs_f64().max(1e-3) / 1e6;
        self.bar.set_message(format!("{rate:.1} MB/s"));
        self.bar.inc(samples);
    }
}
