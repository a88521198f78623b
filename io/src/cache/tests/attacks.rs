//! Another local user against the cache: each test is one attack that
//! worked before the directory was checked, files were opened without
//! following links or blocking, and entries were tagged. Ownership by
//! another user cannot be arranged on one uid: those tests open the cache
//! as if it ran for another user.

use std::os::unix::fs::{symlink, FileTypeExt, PermissionsExt};
use std::process::Command;

use super::*;

/// Longer than any of these reads takes; reaching it means a hang.
const HANG: Duration = Duration::from_secs(20);

fn mode(path: &Path) -> u32 {
    fs::symlink_metadata(path)
        .expect("stat")
        .permissions()
        .mode()
        & 0o7777
}

fn chmod(path: &Path, mode: u32) {
    fs::set_permissions(path, fs::Permissions::from_mode(mode)).expect("chmod");
}

fn mkfifo(path: &Path) {
    let status = Command::new("mkfifo").arg(path).status().expect("mkfifo");
    assert!(status.success(), "mkfifo {path:?}");
    assert!(fs::symlink_metadata(path)
        .expect("stat")
        .file_type()
        .is_fifo());
}

/// A directory holding one file, `precious`, that the cache must not touch.
fn victim(root: &Path) -> PathBuf {
    let victim = root.join("victim");
    fs::create_dir(&victim).expect("victim");
    fs::write(victim.join("precious"), b"do not delete").expect("write");
    victim
}

fn refusal(dir: &Path) -> String {
    ShardCache::open(dir, 1 << 20)
        .expect_err("an untrustworthy cache directory is refused")
        .to_string()
}

/// Reads shard `meta` whole through the cache, failing if it hangs.
async fn read_or_hang(cache: &Arc<ShardCache>, location: &Location, meta: &ShardMeta) {
    tokio::time::timeout(HANG, async {
        read(cache, location, meta, 0..meta.bytes).await;
        cache.idle().await;
    })
    .await
    .expect("the read hung");
}

#[test]
fn new_cache_directories_and_files_are_private() {
    let root = tempfile::tempdir().expect("tempdir");
    let dir = root.path().join("a/cache");
    let cache = cache(&dir, 1 << 20);
    for part in [&dir, &cache.tmp, &cache.entries] {
        assert_eq!(mode(part), 0o700, "{part:?}");
    }
    assert_eq!(mode(&dir.join("key")), 0o600);
    assert_eq!(mode(&dir.join("lock")) & 0o077, 0);
    assert_eq!(fs::read(dir.join("key")).expect("key").len(), 32);
}

#[test]
fn a_cache_dir_that_is_a_symlink_is_refused() {
    let root = tempfile::tempdir().expect("tempdir");
    let victim = victim(root.path());
    let dir = root.path().join("cache");
    symlink(&victim, &dir).expect("symlink");
    let error = refusal(&dir);
    assert!(
        error.contains(&format!("{}: it is a symbolic link", dir.display())),
        "{error}"
    );
    assert!(error.contains("remove it or choose another"), "{error}");
    let left: Vec<_> = fs::read_dir(&victim).expect("ls").collect();
    assert_eq!(left.len(), 1, "nothing created in the victim: {left:?}");
}

#[test]
fn a_tmp_dir_that_is_a_symlink_is_refused() {
    let root = tempfile::tempdir().expect("tempdir");
    let victim = victim(root.path());
    let dir = root.path().join("cache");
    fs::create_dir(&dir).expect("mkdir");
    symlink(&victim, dir.join("tmp")).expect("symlink");
    let error = refusal(&dir);
    assert!(
        error.contains("cache/tmp: it is a symbolic link"),
        "{error}"
    );
    assert!(victim.join("precious").exists());
}

#[test]
fn an_entries_dir_that_is_a_symlink_is_refused() {
    let root = tempfile::tempdir().expect("tempdir");
    let victim = victim(root.path());
    let dir = root.path().join("cache");
    fs::create_dir(&dir).expect("mkdir");
    symlink(&victim, dir.join("entries")).expect("symlink");
    let error = refusal(&dir);
    assert!(
        error.contains("cache/entries: it is a symbolic link"),
        "{error}"
    );
    assert!(victim.join("precious").exists());
}

#[test]
fn a_lock_or_key_that_is_a_symlink_is_refused() {
    for part in ["lock", "key"] {
        let root = tempfile::tempdir().expect("tempdir");
        let victim = victim(root.path());
        let dir = root.path().join("cache");
        fs::create_dir(&dir).expect("mkdir");
        symlink(victim.join("precious"), dir.join(part)).expect("symlink");
        let error = refusal(&dir);
        assert!(error.contains(&format!("cache/{part}: ")), "{error}");
        assert!(error.contains("symbolic link"), "{error}");
        assert_eq!(
            fs::read(victim.join("precious")).expect("read"),
            b"do not delete"
        );
    }
}

#[test]
fn a_cache_dir_writable_by_others_is_refused() {
    for (part, bad) in [
        ("", 0o777),
        ("", 0o770),
        ("", 0o1777),
        ("tmp", 0o777),
        ("entries", 0o722),
    ] {
        let root = tempfile::tempdir().expect("tempdir");
        let dir = root.path().join("cache");
        drop(cache(&dir, 1 << 20));
        let path = if part.is_empty() {
            dir.clone()
        } else {
            dir.join(part)
        };
        chmod(&path, bad);
        let error = refusal(&dir);
        assert!(
            error.contains(&format!(
                "{}: its mode {bad:o} lets other users write to it",
                path.display()
            )),
            "{error}"
        );
        // Readable by others is fine for a directory: a cache made by an
        // earlier version (mode 0755) opens.
        chmod(&path, 0o755);
        ShardCache::open(&dir, 1 << 20).expect("a 0755 directory is accepted");
    }
}

#[test]
fn a_key_others_can_read_or_write_is_refused() {
    for bad in [0o644, 0o620] {
        let root = tempfile::tempdir().expect("tempdir");
        let dir = root.path().join("cache");
        drop(cache(&dir, 1 << 20));
        chmod(&dir.join("key"), bad);
        let error = refusal(&dir);
        assert!(error.contains("cache/key: its mode"), "{error}");
    }
}

#[test]
fn a_cache_dir_owned_by_another_user_is_refused() {
    let root = tempfile::tempdir().expect("tempdir");
    let dir = root.path().join("cache");
    drop(cache(&dir, 1 << 20));
    let me = guard::current_user();
    let error = ShardCache::open_as(dir.clone(), 1 << 20, me.wrapping_add(1))
        .expect_err("another user's directory")
        .to_string();
    assert!(
        error.contains(&format!(
            "{}: it is owned by user {me}, not by user {}",
            dir.display(),
            me.wrapping_add(1)
        )),
        "{error}"
    );
    ShardCache::open_as(dir, 1 << 20, me).expect("its owner's directory");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fifo_entry_is_not_read_and_does_not_hang() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (location, metas) = dataset(&[3000]).await;
    let cache = cache(dir.path(), 1 << 20);
    let entry = entry_path(&cache, &location, &metas[0]);
    mkfifo(&entry);
    read_or_hang(&cache, &location, &metas[0]).await;
    let stats = cache.stats();
    assert_eq!(
        (stats.corrupt, stats.fills, stats.errors),
        (1, 1, 0),
        "{stats:?}"
    );
    assert!(
        fs::symlink_metadata(&entry).expect("stat").is_file(),
        "replaced by a good entry"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_symlink_entry_is_not_followed_and_its_target_is_kept() {
    let root = tempfile::tempdir().expect("tempdir");
    let (location, metas) = dataset(&[3000]).await;
    let cache = cache(&root.path().join("cache"), 1 << 20);
    // What the link points to has the right bytes: still not used.
    let target = root.path().join("elsewhere");
    fs::write(&target, shard_bytes(0, 3000)).expect("write");
    let entry = entry_path(&cache, &location, &metas[0]);
    symlink(&target, &entry).expect("symlink");
    read_or_hang(&cache, &location, &metas[0]).await;
    let stats = cache.stats();
    assert_eq!((stats.corrupt, stats.fills), (1, 1), "{stats:?}");
    assert!(fs::symlink_metadata(&entry).expect("stat").is_file());
    assert_eq!(fs::read(&target).expect("target"), shard_bytes(0, 3000));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fifo_in_tmp_does_not_hang() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (location, metas) = dataset(&[3000]).await;
    let cache = cache(dir.path(), 1 << 20);
    let fifo = cache.tmp.join("planted");
    mkfifo(&fifo);
    // Admission scans tmp/ for files whose writer died.
    read_or_hang(&cache, &location, &metas[0]).await;
    assert_eq!(cache.stats().fills, 1);
    assert!(
        fs::symlink_metadata(&fifo)
            .expect("stat")
            .file_type()
            .is_fifo(),
        "not a regular file: left alone"
    );
}

/// XORed into a message at any byte offset, these bytes leave its crc32c
/// unchanged: they are the crc32c polynomial (x^32 + 0x1EDC6F41), in the
/// bit order crc32c reads bytes, so the difference divides by it.
const CRC_NEUTRAL: [u8; 5] = [0xf1, 0x76, 0xec, 0x05, 0x01];

#[tokio::test]
async fn a_forged_entry_with_a_matching_crc_is_refused_and_refetched() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (location, metas) = dataset(&[3000]).await;
    let first = cache(dir.path(), 1 << 20);
    fill(&first, &location, &metas[0]).await;
    let entry = entry_path(&first, &location, &metas[0]);
    drop(first);
    // The attacker changes bytes of the object, keeping its length, its
    // crc32c and the tag that was there (no key, no new tag).
    let real = fs::read(&entry).expect("entry");
    let mut forged = real.clone();
    for (i, b) in CRC_NEUTRAL.iter().enumerate() {
        forged[1000 + i] ^= b;
    }
    assert_ne!(forged, real);
    assert_eq!(
        crc32c::crc32c(&forged[..3000]),
        metas[0].crc32c,
        "a real forgery"
    );
    fs::write(&entry, &forged).expect("forge");

    let second = cache(dir.path(), 1 << 20);
    read(&second, &location, &metas[0], 0..3000).await;
    second.idle().await;
    let stats = second.stats();
    assert_eq!((stats.corrupt, stats.fills), (1, 1), "{stats:?}");
    assert_eq!(fs::read(&entry).expect("entry"), real, "fetched again");
}

#[tokio::test]
async fn an_entry_tagged_under_another_key_is_refused() {
    // Another user's cache (its own key) wrote a good-looking entry; it is
    // copied into ours with its tag.
    let (mine, theirs) = (
        tempfile::tempdir().expect("a"),
        tempfile::tempdir().expect("b"),
    );
    let (location, metas) = dataset(&[2000]).await;
    let other = cache(theirs.path(), 1 << 20);
    fill(&other, &location, &metas[0]).await;
    let ours = cache(mine.path(), 1 << 20);
    fs::copy(
        entry_path(&other, &location, &metas[0]),
        entry_path(&ours, &location, &metas[0]),
    )
    .expect("copy");
    read(&ours, &location, &metas[0], 0..2000).await;
    ours.idle().await;
    assert_eq!(ours.stats().corrupt, 1);
}

#[tokio::test]
async fn eviction_never_deletes_outside_the_cache() {
    let root = tempfile::tempdir().expect("tempdir");
    let (location, metas) = dataset(&[1000, 1000, 1000]).await;
    let dir = root.path().join("cache");
    let cache = cache(&dir, 2 * (1000 + ENTRY_OVERHEAD));
    fill(&cache, &location, &metas[0]).await;
    // Links to files outside, in the cache's own directories: never
    // evicted or cleaned up through (nor are the links counted as files).
    let victim = victim(root.path());
    symlink(victim.join("precious"), cache.entries.join("a-link")).expect("symlink");
    symlink(victim.join("precious"), cache.tmp.join("a-link")).expect("symlink");
    fill(&cache, &location, &metas[1]).await;
    fill(&cache, &location, &metas[2]).await;
    assert_eq!(cache.stats().evictions, 1);
    assert!(victim.join("precious").exists());

    // `entries/` swapped for a link to a directory of files after the
    // cache was opened: evicting would delete them. Nothing is done there.
    let entries_was = root.path().join("entries-was");
    fs::rename(&cache.entries, &entries_was).expect("move");
    for i in 0..3 {
        fs::write(victim.join(format!("old-{i}")), [0; 1000]).expect("write");
    }
    symlink(&victim, &cache.entries).expect("symlink");
    read(&cache, &location, &metas[0], 0..1000).await;
    cache.idle().await;
    let error = cache.used_bytes().expect_err("refused").to_string();
    assert!(
        error.contains("cache/entries: it is a symbolic link"),
        "{error}"
    );
    assert_eq!(
        fs::read_dir(&victim).expect("ls").count(),
        4,
        "nothing evicted"
    );

    // The same for `tmp/` (its unlocked files look left by dead writers).
    fs::remove_file(&cache.entries).expect("unlink");
    fs::rename(&entries_was, &cache.entries).expect("move back");
    fs::remove_dir_all(&cache.tmp).expect("rm tmp");
    symlink(&victim, &cache.tmp).expect("symlink");
    read(&cache, &location, &metas[0], 0..1000).await;
    cache.idle().await;
    assert_eq!(
        fs::read_dir(&victim).expect("ls").count(),
        4,
        "nothing cleaned up"
    );
    assert_eq!(cache.stats().evictions, 1);
}

#[tokio::test]
async fn a_held_lock_times_out_naming_the_lock() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (location, metas) = dataset(&[1000]).await;
    let mut cache = ShardCache::open(dir.path(), 1 << 20).expect("open");
    cache.lock_timeout = Duration::from_millis(20);
    let cache = Arc::new(cache);
    // Another process holds the directory lock and never lets go.
    let lock = dir.path().join("lock");
    let holder = File::open(&lock).expect("open lock");
    holder.lock().expect("lock");
    let error = cache.used_bytes().expect_err("timed out").to_string();
    assert!(
        error.contains(&format!("for the cache lock {}", lock.display())),
        "{error}"
    );
    // A read is served by the store; its fill gave up.
    read(&cache, &location, &metas[0], 0..1000).await;
    cache.idle().await;
    let stats = cache.stats();
    assert_eq!(
        (stats.misses, stats.fills, stats.errors),
        (1, 0, 1),
        "{stats:?}"
    );
    drop(holder);
    assert_eq!(cache.used_bytes().expect("free again"), 0);
}
