//! A reader's memory is bounded by what decompresses, not by what is
//! fetched: a zstd dataset of 1 GiB of samples that is about 100 KB on disk
//! (each chunk honestly records its 32 MiB) is read by `tributary read`
//! with a peak RSS under half the 1 GiB it would take to hold it all.

#![allow(clippy::print_stdout, reason = "the test prints what it measures")]

use std::process::Command;
use std::time::{Duration, Instant};

use tributary_tests::cli::{tributary_bin, tributary_ok, Scratch};
use tributary_tests::process::Proc;

const SAMPLES: usize = 32;
const SAMPLE_BYTES: u64 = 32 << 20;
/// The bound: the whole dataset decompressed is 1 GiB; reads charged their
/// fetched bytes (one 40 KB read of every chunk) peaked at 833 MiB, reads
/// charged their decompressed bytes at 213 MiB.
const PEAK_BOUND: u64 = 512 << 20;

#[test]
fn reading_a_zstd_dataset_of_huge_chunks_stays_within_its_decompressed_budget() {
    let scratch = Scratch::new();
    let src = scratch.path("src");
    let class = std::path::Path::new(&src).join("c0");
    std::fs::create_dir_all(&class).expect("mkdir");
    for i in 0..SAMPLES {
        // Sparse: 32 MiB of zeros that take no disk.
        let file = std::fs::File::create(class.join(format!("{i:04}.bin"))).expect("create");
        file.set_len(SAMPLE_BYTES).expect("set_len");
    }
    let url = scratch.path("ds");
    tributary_ok(
        &[
            "pack",
            &src,
            &url,
            "--compression",
            "zstd",
            "--max-samples",
            "64",
        ],
        &[],
    );
    let on_disk: u64 = std::fs::read_dir(&url)
        .expect("dataset")
        .map(|e| e.expect("entry").metadata().expect("metadata").len())
        .sum();
    assert!(on_disk < 8 << 20, "the dataset is small on disk: {on_disk}");

    let mut command = Command::new(tributary_bin());
    command.args([
        "read",
        &url,
        "--fields",
        "bin",
        "--batch-size",
        "1",
        "--shuffle-buffer",
        "4",
        "--max-in-flight-mib",
        "64",
    ]);
    let mut read = Proc::spawn("tributary read", command);
    // VmHWM is the high-water mark: sampled until the process exits, the
    // last sample holds the peak of all but its final moments.
    let started = Instant::now();
    let mut peak = 0;
    let status = loop {
        if let Some(hwm) = read.peak_rss() {
            peak = peak.max(hwm);
        }
        if let Some(status) = read.try_exit() {
            break status;
        }
        assert!(
            started.elapsed() < Duration::from_secs(300),
            "read ran 300 s"
        );
        std::thread::sleep(Duration::from_millis(5));
    };
    assert!(status.success(), "read failed: {status}");
    assert_eq!(read.lines().len(), SAMPLES, "every sample read");
    println!(
        "read {on_disk} bytes on disk, {} MiB decompressed: peak RSS {} MiB",
        (SAMPLES as u64 * SAMPLE_BYTES) >> 20,
        peak >> 20
    );
    assert!(
        peak < PEAK_BOUND,
        "peak RSS {} MiB, over {} MiB",
        peak >> 20,
        PEAK_BOUND >> 20
    );
}
