//! A small fuzzing harness on proptest (cargo-fuzz needs a nightly
//! toolchain): each target runs generated and mutated inputs for a time
//! budget, under an allocator that refuses any single allocation over a cap,
//! and reports the cases it ran.
//!
//! - `TRIBUTARY_FUZZ_SECS`: seconds per target (default 2).
//! - `TRIBUTARY_FUZZ_CASES`: stop after this many cases (default: no limit).
//! - `TRIBUTARY_FUZZ_SEED`: the seed (default: random, printed). A failure
//!   prints the seed and the case number; `TRIBUTARY_FUZZ_SEED=S
//!   TRIBUTARY_FUZZ_CASE=N` replays just that case.
//!
//! Shared by the fuzz tests of `tributary-common` and `tributary-worker`
//! (included with `#[path]`).

#![allow(dead_code)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::fmt::Debug;
use std::io::Write;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use proptest::strategy::{Strategy, ValueTree};
use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};

/// The largest single allocation a target may make; the test binary sets it.
pub static ALLOCATION_CAP: AtomicUsize = AtomicUsize::new(usize::MAX);
static SEED: AtomicU64 = AtomicU64::new(0);
static CASE: AtomicU64 = AtomicU64::new(u64::MAX);

/// The system allocator, refusing (and reporting) any single allocation
/// over [`ALLOCATION_CAP`]: the process then aborts with the seed and case
/// on stderr, which is how an unbounded allocation shows up.
#[derive(Debug)]
pub struct CappedAlloc;

fn write_number(out: &mut [u8; 20], mut n: u64) -> &[u8] {
    let mut at = out.len();
    loop {
        at -= 1;
        out[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            return &out[at..];
        }
    }
}

fn over_cap(size: usize) -> bool {
    if size <= ALLOCATION_CAP.load(Ordering::Relaxed) {
        return false;
    }
    // No allocation here: numbers are formatted on the stack and written
    // straight to stderr, past the test harness's capture.
    let mut stderr = std::io::stderr();
    let mut buf = [0u8; 20];
    let _ = stderr.write_all(b"\nfuzz: an allocation of ");
    let _ = stderr.write_all(write_number(&mut buf, size as u64));
    let _ = stderr.write_all(b" bytes is over the cap; replay with TRIBUTARY_FUZZ_SEED=");
    let _ = stderr.write_all(write_number(&mut buf, SEED.load(Ordering::Relaxed)));
    let _ = stderr.write_all(b" TRIBUTARY_FUZZ_CASE=");
    let _ = stderr.write_all(write_number(&mut buf, CASE.load(Ordering::Relaxed)));
    let _ = stderr.write_all(b"\n");
    true
}

// SAFETY: every call is forwarded to `System` unchanged, or refused with a
// null pointer, which `GlobalAlloc` allows.
unsafe impl GlobalAlloc for CappedAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if over_cap(layout.size()) {
            return std::ptr::null_mut();
        }
        // SAFETY: forwarded with the caller's layout.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if over_cap(layout.size()) {
            return std::ptr::null_mut();
        }
        // SAFETY: forwarded with the caller's layout.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from `System` with this layout.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if over_cap(new_size) {
            return std::ptr::null_mut();
        }
        // SAFETY: forwarded unchanged.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

fn env_number(name: &str) -> Option<u64> {
    let value = std::env::var(name).ok()?;
    Some(
        value
            .parse()
            .unwrap_or_else(|_| panic!("{name}={value:?} is not a whole number")),
    )
}

/// Runs `target` on values of `strategy` until the time or case budget is
/// spent. A panic fails the test with the seed, the case number and the
/// input.
pub fn fuzz<T: Debug>(name: &str, strategy: impl Strategy<Value = T>, target: impl Fn(&T)) {
    let budget =
        Duration::from_secs_f64(std::env::var("TRIBUTARY_FUZZ_SECS").ok().map_or(2.0, |s| {
            s.parse()
                .expect("TRIBUTARY_FUZZ_SECS is a number of seconds")
        }));
    let max_cases = env_number("TRIBUTARY_FUZZ_CASES").unwrap_or(u64::MAX);
    let only = env_number("TRIBUTARY_FUZZ_CASE");
    let seed = env_number("TRIBUTARY_FUZZ_SEED").unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |d| d.as_nanos() as u64)
    });
    SEED.store(seed, Ordering::Relaxed);
    let mut seed_bytes = [0u8; 32];
    seed_bytes[..8].copy_from_slice(&seed.to_le_bytes());
    let mut runner = TestRunner::new_with_rng(
        Config::default(),
        TestRng::from_seed(RngAlgorithm::ChaCha, &seed_bytes),
    );
    let started = Instant::now();
    let mut cases = 0u64;
    while cases < max_cases && (only.is_some() || started.elapsed() < budget) {
        let value = strategy
            .new_tree(&mut runner)
            .expect("the strategies here never reject")
            .current();
        if only.is_none_or(|n| n == cases) {
            CASE.store(cases, Ordering::Relaxed);
            if let Err(panic) = catch_unwind(AssertUnwindSafe(|| target(&value))) {
                let message = panic
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| panic.downcast_ref::<&str>().map(|s| (*s).to_owned()))
                    .unwrap_or_default();
                let input = format!("{value:?}");
                panic!(
                    "fuzz {name}: case {cases} panicked: {message}\n\
                     replay: TRIBUTARY_FUZZ_SEED={seed} TRIBUTARY_FUZZ_CASE={cases}\n\
                     input: {}",
                    &input[..input.len().min(4000)]
                );
            }
        }
        cases += 1;
        if only.is_some_and(|n| cases > n) {
            break;
        }
    }
    CASE.store(u64::MAX, Ordering::Relaxed);
    let _ = writeln!(
        std::io::stderr(),
        "fuzz {name}: {cases} cases in {:.1} s (seed {seed})",
        started.elapsed().as_secs_f64()
    );
}

/// One change to a valid input.
#[derive(Debug, Clone)]
pub enum Mutation {
    /// Flip bit `1 << bit` of the byte at (a fraction of the length) `at`.
    Flip { at: f64, bit: u8 },
    /// Set a byte to an interesting value.
    Set { at: f64, value: u8 },
    /// Cut the input there.
    Truncate { at: f64 },
    /// Copy `len` bytes from one place over another.
    Splice { from: f64, to: f64, len: usize },
    /// Insert bytes.
    Insert { at: f64, bytes: Vec<u8> },
    /// Write a huge or edge-case number in one of tar's or JSON's spellings.
    Number { at: f64, text: &'static [u8] },
    /// Repeat the 512-byte block at `at`.
    DuplicateBlock { at: f64 },
}

/// Numbers that break parsers: octal and base-256 tar sizes, u32/u64 edges.
pub const HUGE_NUMBERS: &[&[u8]] = &[
    b"77777777777\0",
    b"\x80\x00\x00\x00\xff\xff\xff\xff\xff\xff\xff\xff",
    b"\x80\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff",
    b"\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff",
    b"4294967295",
    b"4294967296",
    b"18446744073709551615",
    b"18446744073709551616",
    b"9007199254740993",
    b"-1",
    b"0",
    b"1e308",
];

pub fn mutation() -> impl Strategy<Value = Mutation> {
    use proptest::prelude::*;
    let at = 0.0..1.0f64;
    prop_oneof![
        (at.clone(), 0u8..8).prop_map(|(at, bit)| Mutation::Flip { at, bit }),
        (
            at.clone(),
            prop::sample::select(vec![
                0u8, 0xff, 0x80, 0x7f, b'0', b'7', b' ', b'x', b'L', b'g'
            ])
        )
            .prop_map(|(at, value)| Mutation::Set { at, value }),
        at.clone().prop_map(|at| Mutation::Truncate { at }),
        (at.clone(), at.clone(), 1usize..2048).prop_map(|(from, to, len)| Mutation::Splice {
            from,
            to,
            len
        }),
        (at.clone(), prop::collection::vec(any::<u8>(), 1..64))
            .prop_map(|(at, bytes)| Mutation::Insert { at, bytes }),
        (at.clone(), prop::sample::select(HUGE_NUMBERS.to_vec()))
            .prop_map(|(at, text)| Mutation::Number { at, text }),
        at.prop_map(|at| Mutation::DuplicateBlock { at }),
    ]
}

fn index(at: f64, len: usize) -> usize {
    ((at * len as f64) as usize).min(len.saturating_sub(1))
}

/// Applies `mutations` to a copy of `input`.
pub fn mutate(input: &[u8], mutations: &[Mutation]) -> Vec<u8> {
    let mut out = input.to_vec();
    for m in mutations {
        if out.is_empty() {
            break;
        }
        let len = out.len();
        match m {
            Mutation::Flip { at, bit } => out[index(*at, len)] ^= 1 << bit,
            Mutation::Set { at, value } => out[index(*at, len)] = *value,
            Mutation::Truncate { at } => out.truncate(index(*at, len)),
            Mutation::Splice { from, to, len: n } => {
                let from = index(*from, len);
                let to = index(*to, len);
                let n = (*n).min(len - from).min(len - to);
                let piece = out[from..from + n].to_vec();
                out[to..to + n].copy_from_slice(&piece);
            }
            Mutation::Insert { at, bytes } => {
                let at = index(*at, len);
                out.splice(at..at, bytes.iter().copied());
            }
            Mutation::Number { at, text } => {
                let at = index(*at, len);
                let n = text.len().min(len - at);
                out[at..at + n].copy_from_slice(&text[..n]);
            }
            Mutation::DuplicateBlock { at } => {
                let at = index(*at, len) / 512 * 512;
                let end = (at + 512).min(len);
                let block = out[at..end].to_vec();
                out.splice(at..at, block);
            }
        }
    }
    out
}

/// Inputs for a target: one of `seeds` changed by a few mutations, or (one
/// case in eight) random bytes.
pub fn inputs(seeds: Vec<Vec<u8>>, max_random: usize) -> impl Strategy<Value = Vec<u8>> {
    use proptest::prelude::*;
    let count = seeds.len();
    let mutated = (0..count, prop::collection::vec(mutation(), 1..8))
        .prop_map(move |(i, mutations)| mutate(&seeds[i], &mutations));
    prop_oneof![
        7 => mutated,
        1 => prop::collection::vec(any::<u8>(), 0..max_random),
    ]
}
