//! The cache against an in-memory store and a real directory: two
//! `ShardCache`s on one directory stand for two processes (flock locks
//! belong to open files, so they exclude each other as processes do).

use std::os::unix::fs::FileExt;
use std::sync::atomic::{AtomicBool, Ordering};

use object_store::memory::InMemory;
use tributary_common::manifest::ShardMeta;

use super::*;

mod attacks;

fn shard_bytes(seed: u8, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect()
}

/// A store holding `sizes.len()` shards, and their manifest entries.
async fn dataset(sizes: &[usize]) -> (Location, Vec<ShardMeta>) {
    let location = Location::from_store(Arc::new(InMemory::new()), "ds", "memory:///ds");
    let mut metas = Vec::new();
    for (i, &len) in sizes.iter().enumerate() {
        let data = shard_bytes(i as u8, len);
        let name = format!("shard-{i}.tar");
        location
            .put(&name, Bytes::from(data.clone()))
            .await
            .expect("put");
        metas.push(ShardMeta {
            name,
            samples: 1,
            bytes: len as u64,
            crc32c: crc32c::crc32c(&data),
            chunk_offsets: vec![0, len as u64],
            chunk_samples: Vec::new(),
            chunk_crc32c: vec![crc32c::crc32c(&data)],
            chunk_uncompressed_bytes: Vec::new(),
        });
    }
    (location, metas)
}

fn cache(dir: &Path, limit: u64) -> Arc<ShardCache> {
    Arc::new(ShardCache::open(dir, limit).expect("open cache"))
}

/// Reads a range through the cache and checks its bytes.
async fn read(cache: &Arc<ShardCache>, location: &Location, meta: &ShardMeta, range: Range<u64>) {
    let got = cache
        .read_range(location, meta, range.clone())
        .await
        .expect("read");
    let seed = meta
        .name
        .trim_start_matches("shard-")
        .trim_end_matches(".tar");
    let all = shard_bytes(seed.parse().expect("seed"), meta.bytes as usize);
    assert_eq!(
        &got[..],
        &all[range.start as usize..range.end as usize],
        "{}",
        meta.name
    );
}

/// Reads shard `meta` once and waits for its fill.
async fn fill(cache: &Arc<ShardCache>, location: &Location, meta: &ShardMeta) {
    read(cache, location, meta, 0..10).await;
    cache.idle().await;
}

fn entry_path(cache: &ShardCache, location: &Location, meta: &ShardMeta) -> PathBuf {
    cache.entries.join(entry_name(
        &location.url_of(&meta.name),
        meta.bytes,
        meta.crc32c,
    ))
}

fn set_age(path: &Path, seconds: u64) {
    let file = File::options().write(true).open(path).expect("open entry");
    file.set_modified(SystemTime::now() - Duration::from_secs(seconds))
        .expect("set mtime");
}

#[tokio::test]
async fn a_miss_fills_the_shard_and_reads_wait_for_the_fill_then_hit_the_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (location, metas) = dataset(&[5000]).await;
    let cache = cache(dir.path(), 1 << 20);
    // The first read starts the fill and reads its range from the file the
    // fill writes, once the bytes are there.
    read(&cache, &location, &metas[0], 100..900).await;
    cache.idle().await;
    let stats = cache.stats();
    assert_eq!((stats.misses, stats.hits, stats.fills), (0, 1, 1));
    assert_eq!(stats.fill_bytes, 5000);
    // The object and its tag.
    assert_eq!(cache.used_bytes().expect("used"), 5000 + ENTRY_OVERHEAD);
    read(&cache, &location, &metas[0], 0..5000).await;
    read(&cache, &location, &metas[0], 4000..4001).await;
    let stats = cache.stats();
    assert_eq!((stats.misses, stats.hits, stats.fills), (0, 3, 1));
    assert_eq!(stats.hit_bytes, 800 + 5001);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shard_read_whole_on_a_miss_comes_from_the_store_once() {
    // Shards of 2 MiB read in 64 KiB ranges, all at once: every range
    // waits for the one fill of its shard, no range GET of its own.
    let inner = Location::from_store(Arc::new(InMemory::new()), "ds", "memory:///ds");
    let sizes = [2 << 20, (2 << 20) + 12_345];
    let mut metas = Vec::new();
    for (i, &len) in sizes.iter().enumerate() {
        let data = shard_bytes(i as u8, len);
        let name = format!("shard-{i}.tar");
        inner
            .put(&name, Bytes::from(data.clone()))
            .await
            .expect("put");
        metas.push((name, len as u64, crc32c::crc32c(&data)));
    }
    let counting = Arc::new(crate::testing::CountingStore::counting(Arc::clone(
        &inner.store,
    )));
    let location = Location::from_store(counting.clone(), "ds", "memory:///ds");
    let dir = tempfile::tempdir().expect("tempdir");
    let cache = cache(dir.path(), 1 << 30);
    let mut reads = Vec::new();
    for (i, (name, bytes, crc32c)) in metas.iter().enumerate() {
        for start in (0..*bytes).step_by(64 << 10) {
            let range = start..(start + (64 << 10)).min(*bytes);
            let (cache, location) = (Arc::clone(&cache), location.clone());
            let object = ShardObject {
                name,
                bytes: *bytes,
                crc32c: *crc32c,
                checked_from: 0,
            };
            let want = shard_bytes(i as u8, *bytes as usize)
                [range.start as usize..range.end as usize]
                .to_vec();
            reads.push(async move {
                let got = cache
                    .read_range(&location, object, range)
                    .await
                    .expect("read");
                assert_eq!(&got[..], &want[..]);
            });
        }
    }
    futures::future::join_all(reads).await;
    cache.idle().await;
    let stats = cache.stats();
    assert_eq!(
        (stats.fills, stats.misses, stats.errors),
        (2, 0, 0),
        "{stats:?}"
    );
    let (gets, bytes) = counting.hooks.reads();
    assert_eq!((gets, bytes), (2, sizes.iter().sum::<usize>() as u64));
}

#[tokio::test]
async fn the_least_recently_used_entry_is_evicted_and_use_survives_a_restart() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (location, metas) = dataset(&[1000, 1000, 1000]).await;
    let first = cache(dir.path(), 2500);
    fill(&first, &location, &metas[0]).await;
    fill(&first, &location, &metas[1]).await;
    let (a, b, c) = (
        entry_path(&first, &location, &metas[0]),
        entry_path(&first, &location, &metas[1]),
        entry_path(&first, &location, &metas[2]),
    );
    // Shard 0 was used long ago, shard 1 less long ago.
    set_age(&a, 100);
    set_age(&b, 50);
    drop(first);

    // A restarted process uses shard 0: it becomes the most recent.
    let second = cache(dir.path(), 2500);
    read(&second, &location, &metas[0], 0..1000).await;
    assert_eq!(second.stats().hits, 1);
    fill(&second, &location, &metas[2]).await;
    assert!(a.exists() && !b.exists() && c.exists());
    let stats = second.stats();
    assert_eq!(
        (stats.evictions, stats.evicted_bytes),
        (1, 1000 + ENTRY_OVERHEAD)
    );
    assert_eq!(
        second.used_bytes().expect("used"),
        2000 + 2 * ENTRY_OVERHEAD
    );

    // The evicted shard comes back from the store, evicting the oldest.
    set_age(&c, 10);
    fill(&second, &location, &metas[1]).await;
    assert!(a.exists() && b.exists() && !c.exists());
}

#[tokio::test]
async fn a_restarted_process_checks_and_reuses_what_another_wrote() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (location, metas) = dataset(&[3000, 4000]).await;
    let first = cache(dir.path(), 1 << 20);
    fill(&first, &location, &metas[0]).await;
    fill(&first, &location, &metas[1]).await;
    drop(first);
    let second = cache(dir.path(), 1 << 20);
    read(&second, &location, &metas[0], 0..3000).await;
    read(&second, &location, &metas[1], 10..20).await;
    second.idle().await;
    let stats = second.stats();
    assert_eq!((stats.hits, stats.misses, stats.fills), (2, 0, 0));
}

#[tokio::test]
async fn a_corrupt_entry_is_deleted_read_from_the_store_and_cached_again() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (location, metas) = dataset(&[3000, 3000]).await;
    let first = cache(dir.path(), 1 << 20);
    fill(&first, &location, &metas[0]).await;
    fill(&first, &location, &metas[1]).await;
    drop(first);
    // One flipped byte; one file cut short.
    let path = entry_path(&cache(dir.path(), 1), &location, &metas[0]);
    let file = File::options().write(true).open(&path).expect("open");
    file.write_all_at(&[0xff ^ shard_bytes(0, 3000)[1234]], 1234)
        .expect("corrupt");
    let cut = entry_path(&cache(dir.path(), 1), &location, &metas[1]);
    File::options()
        .write(true)
        .open(&cut)
        .expect("open")
        .set_len(100)
        .expect("cut");

    let second = cache(dir.path(), 1 << 20);
    read(&second, &location, &metas[0], 1000..2000).await;
    read(&second, &location, &metas[1], 0..50).await;
    second.idle().await;
    let stats = second.stats();
    // Both fetched again (the reads waited for the new fills).
    assert_eq!((stats.corrupt, stats.hits, stats.misses), (2, 2, 0));
    assert_eq!(stats.fills, 2, "both cached again");
    read(&second, &location, &metas[0], 0..3000).await;
    read(&second, &location, &metas[1], 0..3000).await;
    assert_eq!(second.stats().hits, 4);
}

#[tokio::test]
async fn a_shard_larger_than_the_limit_is_read_straight_through() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (location, metas) = dataset(&[5000]).await;
    let cache = cache(dir.path(), 4999);
    read(&cache, &location, &metas[0], 0..5000).await;
    cache.idle().await;
    read(&cache, &location, &metas[0], 0..5000).await;
    let stats = cache.stats();
    assert_eq!((stats.misses, stats.hits, stats.fills), (2, 0, 0));
    assert_eq!(cache.used_bytes().expect("used"), 0);
}

#[tokio::test]
async fn an_object_that_differs_from_its_manifest_is_not_cached() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (location, mut metas) = dataset(&[2000]).await;
    metas[0].crc32c ^= 1;
    let cache = cache(dir.path(), 1 << 20);
    cache
        .read_range(&location, &metas[0], 0..10)
        .await
        .expect("read");
    cache.idle().await;
    let stats = cache.stats();
    assert_eq!((stats.fills, stats.errors), (0, 1));
    assert_eq!(
        cache.used_bytes().expect("used"),
        0,
        "the download is deleted"
    );
}

#[tokio::test]
async fn a_file_left_by_a_dead_writer_is_reclaimed_and_a_live_one_is_not_touched() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (location, metas) = dataset(&[1000, 1000]).await;
    let cache = cache(dir.path(), 2000 + ENTRY_OVERHEAD);
    let dead = cache.tmp.join("dead");
    File::create(&dead)
        .expect("create")
        .set_len(1500)
        .expect("len");
    // A writer in another process holds its file's lock.
    let live_path = cache.tmp.join(entry_name(
        &location.url_of(&metas[1].name),
        metas[1].bytes,
        metas[1].crc32c,
    ));
    let live = File::create(&live_path).expect("create");
    live.lock().expect("lock");
    live.set_len(1000).expect("len");

    fill(&cache, &location, &metas[0]).await;
    assert!(!dead.exists(), "reclaimed");
    assert!(entry_path(&cache, &location, &metas[0]).exists());
    fill(&cache, &location, &metas[1]).await;
    assert!(live_path.exists(), "being written elsewhere: left alone");
    assert_eq!(cache.stats().fills, 1);
    assert_eq!(cache.used_bytes().expect("used"), 2000 + ENTRY_OVERHEAD);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_processes_filling_at_once_never_exceed_the_limit() {
    let dir = tempfile::tempdir().expect("tempdir");
    let sizes: Vec<usize> = (0..24).map(|i| 2000 + 500 * (i % 5)).collect();
    let (location, metas) = dataset(&sizes).await;
    let limit = 9000;
    let caches = [cache(dir.path(), limit), cache(dir.path(), limit)];
    let done = Arc::new(AtomicBool::new(false));
    let sampler = {
        let (cache, done) = (Arc::clone(&caches[0]), Arc::clone(&done));
        std::thread::spawn(move || {
            let (mut max, mut samples) = (0, 0u64);
            while !done.load(Ordering::Relaxed) || samples == 0 {
                // A file may vanish between listing and stat: skip that sample.
                if let Ok(used) = cache.used_bytes() {
                    max = max.max(used);
                    samples += 1;
                }
            }
            (max, samples)
        })
    };
    for round in 0..3 {
        let mut tasks = Vec::new();
        for (i, cache) in caches.iter().enumerate() {
            let (cache, location, metas) = (Arc::clone(cache), location.clone(), metas.clone());
            tasks.push(tokio::spawn(async move {
                // Each process reads every shard, in its own order.
                for k in 0..metas.len() {
                    let shard = if i == 0 { k } else { metas.len() - 1 - k };
                    let meta = &metas[(shard + round) % metas.len()];
                    read(&cache, &location, meta, 0..meta.bytes).await;
                }
                cache.idle().await;
            }));
        }
        for task in tasks {
            task.await.expect("task");
        }
    }
    done.store(true, Ordering::Relaxed);
    let (max, samples) = sampler.join().expect("sampler");
    assert!(max <= limit, "{max} bytes in the directory, over {limit}");
    assert!(samples > 0);
    let stats: Vec<CacheStats> = caches.iter().map(|c| c.stats()).collect();
    assert!(
        stats.iter().all(|s| s.errors == 0 && s.corrupt == 0),
        "{stats:?}"
    );
    assert!(stats.iter().map(|s| s.hits).sum::<u64>() > 0, "{stats:?}");
    assert!(
        stats.iter().map(|s| s.evictions).sum::<u64>() > 0,
        "{stats:?}"
    );
    // Every entry left is whole and correct.
    for meta in &metas {
        let path = entry_path(&caches[0], &location, meta);
        if let Ok(file) = File::open(&path) {
            let shard = Shard {
                name: meta.name.clone(),
                bytes: meta.bytes,
                crc32c: meta.crc32c,
                checked_from: 0,
                entry: entry_name(&location.url_of(&meta.name), meta.bytes, meta.crc32c),
            };
            assert_eq!(
                check(&file, &shard, &caches[0].seal).expect("check"),
                None,
                "{path:?}"
            );
        }
    }
    assert!(fs::read_dir(&caches[0].tmp).expect("tmp").next().is_none());
}

#[test]
fn a_zero_limit_or_an_unusable_directory_is_refused_by_name() {
    let dir = tempfile::tempdir().expect("tempdir");
    let error = ShardCache::open(dir.path(), 0)
        .expect_err("zero")
        .to_string();
    assert!(
        error.contains("the cache limit must be at least 1 byte"),
        "{error}"
    );
    let file = dir.path().join("a-file");
    File::create(&file).expect("create");
    let error = ShardCache::open(file.join("cache"), 10)
        .expect_err("under a file")
        .to_string();
    assert!(error.contains("a-file/cache"), "{error}");
}

#[test]
fn entry_names_differ_by_url_size_and_crc_and_are_plain_file_names() {
    let a = entry_name("s3://b/ds/shard-0.tar", 10, 1);
    assert_ne!(a, entry_name("s3://b/other/shard-0.tar", 10, 1));
    assert_ne!(a, entry_name("s3://b/ds/shard-0.tar", 11, 1));
    assert_ne!(a, entry_name("s3://b/ds/shard-0.tar", 10, 2));
    assert!(a.ends_with("-10-00000001-shard-0.tar"), "{a}");
    let odd = entry_name("s3://b/ds/a b?..", 1, 1);
    assert!(!odd.contains(['/', ' ', '?']), "{odd}");
}

#[test]
fn byte_counts_take_binary_units_and_refuse_anything_else() {
    assert_eq!(parse_bytes("1000"), Ok(1000));
    assert_eq!(parse_bytes("64MiB"), Ok(64 << 20));
    assert_eq!(parse_bytes("10G"), Ok(10 << 30));
    assert_eq!(parse_bytes("2 TB"), Ok(2 << 40));
    for bad in ["", "x", "-1", "1.5G", "10PB", "99999999999999999999"] {
        assert!(parse_bytes(bad).is_err(), "{bad}");
    }
    assert!(parse_bytes("20000000T")
        .expect_err("overflow")
        .contains("2^64"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn misses_while_every_fill_slot_is_busy_are_queued_not_dropped() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (location, metas) = dataset(&[3000; 8]).await;
    let cache = Arc::new(
        ShardCache::open(dir.path(), 1 << 20)
            .expect("open")
            .with_fills(1),
    );
    let reads = metas
        .iter()
        .map(|meta| read(&cache, &location, meta, 0..100));
    futures::future::join_all(reads).await;
    cache.idle().await;
    let stats = cache.stats();
    assert_eq!((stats.fills, stats.errors), (8, 0), "{stats:?}");
    // Each read was served: from a fill it waited for (at least the first
    // one's), or, its shard's fill still queued behind the one slot, from
    // the store. How many fills finished before their reads came depends
    // on the scheduler, not on the cache.
    assert_eq!(stats.hits + stats.misses, 8, "{stats:?}");
    assert!(stats.hits >= 1, "{stats:?}");
    // None of the queued fills was dropped: every shard is cached now.
    for meta in &metas {
        read(&cache, &location, meta, 0..3000).await;
    }
    assert_eq!(cache.stats().hits, stats.hits + 8);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fill_that_ends_before_its_reader_waits_on_it_still_serves_the_read() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (location, metas) = dataset(&[3000]).await;
    let cache = Arc::new(ShardCache::open(dir.path(), 1 << 20).expect("open"));
    let shard = Shard::of(&location, &(&metas[0]).into());
    let progress = cache
        .spawn_fill(&location, shard.clone())
        .expect("a free slot: the fill starts");
    // The fill ends, and leaves the running fills, before the read waits
    // on it (a busy machine can run a small shard's fill that fast): the
    // read still takes the bytes it cached, not the store's.
    cache.idle().await;
    let got = cache
        .from_fill(&shard, 0..100, progress)
        .await
        .expect("the fill's bytes");
    assert_eq!(&got[..], &shard_bytes(0, 3000)[..100]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_loader_sizes_the_fill_slots_to_its_reads_in_flight_so_none_bypass_the_cache() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (location, metas) = dataset(&[3000; 8]).await;
    let cache = Arc::new(
        ShardCache::open(dir.path(), 1 << 20)
            .expect("open")
            .with_fills(1),
    );
    cache.fill_at_least(8);
    cache.fill_at_least(2);
    assert_eq!(cache.fill_slots(), 8, "the slots only grow");
    let reads = metas
        .iter()
        .map(|meta| read(&cache, &location, meta, 0..100));
    futures::future::join_all(reads).await;
    cache.idle().await;
    // Eight shards read at once, eight fills: each read waited for its own
    // shard's fill, none went to the store beside it.
    let stats = cache.stats();
    assert_eq!(
        (stats.fills, stats.hits, stats.misses, stats.errors),
        (8, 8, 0, 0),
        "{stats:?}"
    );
    cache.fill_at_least(usize::MAX);
    assert_eq!(cache.fill_slots(), MAX_FILLS);
}
