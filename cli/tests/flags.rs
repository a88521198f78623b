//! Every numeric flag of every `tributary` subcommand is ranged: an out of
//! range value (the issue's `--world 2^64-1`, `--batch-size 1e10`,
//! `--max-in-flight-mib 17592186044416`, ...) is a one-line error naming the
//! flag and exit status 2, never a panic, an abort or a silent wrap.

use std::process::Command;

const U64_MAX: &str = "18446744073709551615";

/// `(arguments before the flag, flag, bad values)`.
fn cases() -> Vec<(Vec<&'static str>, &'static str, Vec<&'static str>)> {
    let read = || vec!["read", "memory:///nothing"];
    let bench = || vec!["bench", "memory:///nothing"];
    let mut cases = vec![
        (
            vec!["synth", "/nonexistent/dir"],
            "--images",
            vec!["0", "1000000000", U64_MAX],
        ),
        (
            vec!["synth", "/nonexistent/dir"],
            "--classes",
            vec!["0", "10000000"],
        ),
        (
            vec!["synth", "/nonexistent/dir"],
            "--seed",
            vec!["-1", "18446744073709551616"],
        ),
        (
            vec!["pack", "/nonexistent/src", "/nonexistent/dst"],
            "--max-bytes",
            vec!["0", U64_MAX],
        ),
        (
            vec!["pack", "/nonexistent/src", "/nonexistent/dst"],
            "--max-samples",
            vec!["0", "4294967296"],
        ),
        (vec!["quickstart"], "--images", vec!["0", "1000000000"]),
        (vec!["quickstart"], "--classes", vec!["0", "10000000"]),
        (vec!["quickstart"], "--ranks", vec!["0", "65"]),
        (vec!["quickstart"], "--batch-size", vec!["0", "10000000000"]),
        (vec!["quickstart"], "--image-size", vec!["0", "100000"]),
        (read(), "--world", vec!["0", "4294967296", U64_MAX]),
        (read(), "--rank", vec!["65536", U64_MAX]),
        (read(), "--epoch", vec!["-1"]),
        (bench(), "--samples", vec!["0", "-5"]),
        (bench(), "--rounds", vec!["0", "101"]),
        (vec!["coordinator"], "--leader-ttl-s", vec!["0", U64_MAX]),
        (vec!["coordinator"], "--flush-ms", vec!["1000000000"]),
    ];
    // The loader flags `read` and `bench` share.
    for command in [read(), bench()] {
        for (flag, values) in [
            ("--batch-size", vec!["0", "10000000000"]),
            ("--image-size", vec!["0", "100000"]),
            ("--shuffle-buffer", vec!["10000000000"]),
            ("--threads", vec!["0", "100000"]),
            ("--max-requests", vec!["0", "1000000"]),
            ("--max-read-kib", vec!["0", "17592186044416"]),
            ("--max-in-flight-mib", vec!["0", "17592186044416"]),
            ("--max-image-pixels", vec!["0", "4294967297"]),
            ("--max-decode-pixels", vec!["0", U64_MAX]),
            ("--max-bad-fraction", vec!["1.5", "-0.1", "NaN"]),
            ("--on-error", vec!["ignore"]),
        ] {
            cases.push((command.clone(), flag, values));
        }
    }
    cases
}

#[test]
fn every_numeric_flag_out_of_range_is_a_one_line_error_not_a_panic() {
    let mut checked = 0;
    for (args, flag, values) in cases() {
        for value in values {
            let output = Command::new(env!("CARGO_BIN_EXE_tributary"))
                .args(&args)
                // `--flag=value`, so that `-1` is a value, not a flag.
                .arg(format!("{flag}={value}"))
                .env("RUST_BACKTRACE", "0")
                .output()
                .expect("run tributary");
            let stderr = String::from_utf8_lossy(&output.stderr);
            let what = format!("tributary {} {flag} {value}", args.join(" "));
            assert_eq!(output.status.code(), Some(2), "{what}: {stderr}");
            let lines: Vec<&str> = stderr.lines().filter(|l| !l.trim().is_empty()).collect();
            assert_eq!(lines.len(), 1, "{what}: not one line:\n{stderr}");
            assert!(lines[0].starts_with("error: "), "{what}: {stderr}");
            assert!(
                lines[0].contains(flag),
                "{what}: the flag is not named: {stderr}"
            );
            assert!(!stderr.contains("panicked"), "{what}: {stderr}");
            checked += 1;
        }
    }
    assert!(checked > 60, "{checked} cases");
}

#[test]
fn in_range_flags_still_parse() {
    // `--check` parses every coordinator flag and exits without serving.
    let output = Command::new(env!("CARGO_BIN_EXE_tributary"))
        .args([
            "coordinator",
            "--check",
            "--leader-ttl-s",
            "5",
            "--flush-ms",
            "0",
        ])
        .output()
        .expect("run tributary");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{output:?}");
    assert!(stdout.contains("leader ttl    5 s"), "{stdout}");
}
