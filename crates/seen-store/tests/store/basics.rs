//! Everyday behaviour: create, add, look up, delete, expire, reopen, lock.

use std::time::{Duration, SystemTime};

use seen_core::{Layout, Removal};
use seen_store::{ErrorKind, FilterSpec, FsyncPolicy, Store, StoreOptions};

pub fn bloom() -> FilterSpec {
    FilterSpec::Bloom {
        capacity: 10_000,
        error_rate: 0.001,
        layout: Layout::Blocked,
    }
}

fn opts(fsync: FsyncPolicy) -> StoreOptions {
    StoreOptions {
        fsync,
        segment_size: 64 << 10,
        ..Default::default()
    }
}

fn items(prefix: &str, n: usize) -> Vec<String> {
    (0..n).map(|i| format!("{prefix}{i}")).collect()
}

/// A filter of the store in seen's byte format (bits and count).
pub fn encoded(s: &Store, name: &[u8]) -> Vec<u8> {
    s.with_filter(name, |f| {
        let mut out = Vec::new();
        f.encode(&mut out).unwrap();
        out
    })
    .unwrap()
    .unwrap()
}

fn refs(v: &[String]) -> Vec<&[u8]> {
    v.iter().map(|s| s.as_bytes()).collect()
}

#[test]
fn survives_reopen_with_and_without_checkpoint() {
    for policy in [FsyncPolicy::Always, FsyncPolicy::EverySec, FsyncPolicy::No] {
        let dir = tempfile::tempdir().unwrap();
        let a = items("a", 3000);
        let b = items("b", 3000);
        {
            let s = Store::open(dir.path(), opts(policy)).unwrap();
            s.create(b"f", &bloom()).unwrap();
            let out = s.add(b"f", &refs(&a), None).unwrap();
            assert!(out.new.iter().filter(|&&n| n).count() > 2990);
            s.checkpoint().unwrap();
            s.add(b"f", &refs(&b), None).unwrap();
            // Dropped without close: b is only in the log.
        }
        let s = Store::open(dir.path(), opts(policy)).unwrap();
        let all: Vec<String> = a.iter().chain(&b).cloned().collect();
        let present = s.contains(b"f", &refs(&all)).unwrap().unwrap();
        assert!(present.iter().all(|&p| p), "{policy:?}");
        let count = s
            .with_filter(b"f", |f| match f {
                seen_core::AnyFilter::Bloom(f) => f.len(),
                _ => unreachable!(),
            })
            .unwrap()
            .unwrap();
        assert!(count > 5980 && count <= 6000, "{count}");
        s.close().unwrap();
    }
}

#[test]
fn the_directory_names_its_format_and_a_later_one_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let format = dir.path().join("FORMAT");
    {
        let s = Store::open(dir.path(), opts(FsyncPolicy::No)).unwrap();
        s.create(b"f", &bloom()).unwrap();
        s.add(b"f", &[b"kept".as_slice()], None).unwrap();
    }
    assert_eq!(
        std::fs::read_to_string(&format).unwrap(),
        "seen-store data directory, format 8\n"
    );
    // A directory of format 7 (no import records, no Guava layouts) opens
    // as it is and is marked as of format 8.
    std::fs::write(&format, "seen-store data directory, format 7\n").unwrap();
    let s = Store::open(dir.path(), opts(FsyncPolicy::No)).unwrap();
    assert_eq!(s.recovery().staged, 0);
    assert_eq!(
        s.contains(b"f", &[b"kept".as_slice()]).unwrap(),
        Some(vec![true])
    );
    drop(s);
    assert_eq!(
        std::fs::read_to_string(&format).unwrap(),
        "seen-store data directory, format 8\n"
    );
    // A directory from before the file (format 1) is marked as of this
    // format, and opens as before.
    std::fs::remove_file(&format).unwrap();
    let s = Store::open(dir.path(), opts(FsyncPolicy::No)).unwrap();
    assert_eq!(
        s.contains(b"f", &[b"kept".as_slice()]).unwrap(),
        Some(vec![true])
    );
    drop(s);
    assert!(std::fs::read_to_string(&format)
        .unwrap()
        .ends_with("format 8\n"));
    for (text, want) in [
        (
            "seen-store data directory, format 9\n",
            "format 9, written by a later seen",
        ),
        ("something else\n", "not a format line"),
    ] {
        std::fs::write(&format, text).unwrap();
        let e = Store::open(dir.path(), opts(FsyncPolicy::No)).unwrap_err();
        match e.kind() {
            ErrorKind::Format { path, what } => {
                assert_eq!(path, &format);
                assert!(what.contains(want), "{what}");
            }
            _ => panic!("{e}"),
        }
        // Refused before anything was touched.
        assert_eq!(std::fs::read_to_string(&format).unwrap(), text);
    }
}

#[test]
fn names_errors_delete_and_recreate() {
    let dir = tempfile::tempdir().unwrap();
    let s = Store::open(dir.path(), opts(FsyncPolicy::Always)).unwrap();
    assert!(matches!(
        s.add(b"missing", &[b"x"], None).unwrap_err().kind(),
        ErrorKind::NotFound
    ));
    assert_eq!(s.contains(b"missing", &[b"x"]).unwrap(), None);
    s.create(b"k\0\r\n", &bloom()).unwrap();
    assert!(matches!(
        s.create(b"k\0\r\n", &bloom()).unwrap_err().kind(),
        ErrorKind::Exists
    ));
    s.add(b"k\0\r\n", &[b"x"], None).unwrap();
    assert!(s.delete(b"k\0\r\n").unwrap());
    assert!(!s.delete(b"k\0\r\n").unwrap());
    s.create(b"k\0\r\n", &bloom()).unwrap();
    assert_eq!(s.contains(b"k\0\r\n", &[b"x"]).unwrap(), Some(vec![false]));
    s.checkpoint().unwrap();
    drop(s);
    let s = Store::open(dir.path(), opts(FsyncPolicy::Always)).unwrap();
    assert_eq!(s.names(), vec![b"k\0\r\n".to_vec()]);
    assert_eq!(s.contains(b"k\0\r\n", &[b"x"]).unwrap(), Some(vec![false]));
    // A huge filter is refused, not allocated.
    let huge = FilterSpec::Bloom {
        capacity: u64::MAX / 4,
        error_rate: 0.01,
        layout: Layout::Blocked,
    };
    let e = s.create(b"huge", &huge).unwrap_err();
    assert!(matches!(e.kind(), ErrorKind::Filter(_)), "{e}");
}

/// A thread remembers the filter it used last (to skip the lookup): two
/// stores with the same filter name, used in turns from one thread, keep
/// their own filters, and a store reopened in the same thread sees the
/// reopened filter.
#[test]
fn one_thread_using_two_stores_keeps_their_filters_apart() {
    let (d1, d2) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let a = Store::open(d1.path(), opts(FsyncPolicy::No)).unwrap();
    let b = Store::open(d2.path(), opts(FsyncPolicy::No)).unwrap();
    a.create(b"f", &bloom()).unwrap();
    b.create(b"f", &bloom()).unwrap();
    for i in 0..50 {
        let (x, y) = (format!("a{i}"), format!("b{i}"));
        assert_eq!(a.add(b"f", &[x.as_bytes()], None).unwrap().new, vec![true]);
        assert_eq!(b.add(b"f", &[y.as_bytes()], None).unwrap().new, vec![true]);
        assert_eq!(
            b.contains(b"f", &[x.as_bytes()]).unwrap(),
            Some(vec![false])
        );
        assert_eq!(
            a.contains(b"f", &[y.as_bytes()]).unwrap(),
            Some(vec![false])
        );
    }
    drop(a);
    let a = Store::open(d1.path(), opts(FsyncPolicy::No)).unwrap();
    assert_eq!(a.contains(b"f", &[b"a7"]).unwrap(), Some(vec![true]));
    assert_eq!(a.add(b"f", &[b"a50"], None).unwrap().new, vec![true]);
    assert_eq!(b.contains(b"f", &[b"a50"]).unwrap(), Some(vec![false]));
}

/// A thread's add finds the filter it used last expired: the add, given a
/// spec, deletes it and creates and fills a new one (a call nested inside
/// the one that holds the thread's cached entry), and later calls use the
/// new filter, before and after a reopen.
#[test]
fn an_add_to_the_cached_filter_after_it_expired_makes_a_new_one() {
    let dir = tempfile::tempdir().unwrap();
    {
        let s = Store::open(dir.path(), opts(FsyncPolicy::No)).unwrap();
        s.create(b"f", &bloom()).unwrap();
        for i in 0..3 {
            let item = format!("old{i}");
            assert_eq!(
                s.add(b"f", &[item.as_bytes()], None).unwrap().new,
                vec![true]
            );
        }
        let soon = std::time::SystemTime::now() + std::time::Duration::from_millis(300);
        assert!(s.expire_at(b"f", Some(soon)).unwrap());
        std::thread::sleep(std::time::Duration::from_millis(400));
        // Without a spec: the filter is gone.
        let e = s.add(b"f", &[b"new"], None).unwrap_err();
        assert!(matches!(e.kind(), ErrorKind::NotFound), "{e}");
        s.create(b"f", &bloom()).unwrap();
        s.add(b"f", &[b"new0"], None).unwrap();
        let soon = std::time::SystemTime::now() + std::time::Duration::from_millis(300);
        assert!(s.expire_at(b"f", Some(soon)).unwrap());
        std::thread::sleep(std::time::Duration::from_millis(400));
        // With one: a new filter, holding only what is added from now on.
        assert_eq!(
            s.add(b"f", &[b"new1"], Some(&bloom())).unwrap().new,
            vec![true]
        );
        assert_eq!(s.add(b"f", &[b"new1"], None).unwrap().new, vec![false]);
        assert_eq!(s.add(b"f", &[b"new2"], None).unwrap().new, vec![true]);
        assert_eq!(
            s.contains(b"f", &[b"old0", b"new0", b"new1", b"new2"])
                .unwrap(),
            Some(vec![false, false, true, true])
        );
        assert_eq!(s.len(), 1);
    }
    let s = Store::open(dir.path(), opts(FsyncPolicy::No)).unwrap();
    assert_eq!(
        s.contains(b"f", &[b"old0", b"new0", b"new1", b"new2"])
            .unwrap(),
        Some(vec![false, false, true, true])
    );
}

#[test]
fn deleted_filters_stay_deleted_after_checkpoint_and_reopen() {
    let dir = tempfile::tempdir().unwrap();
    {
        let s = Store::open(dir.path(), opts(FsyncPolicy::Always)).unwrap();
        s.create(b"gone", &bloom()).unwrap();
        s.add(b"gone", &[b"x"], None).unwrap();
        s.checkpoint().unwrap();
        s.delete(b"gone").unwrap();
        s.checkpoint().unwrap();
    }
    let s = Store::open(dir.path(), opts(FsyncPolicy::Always)).unwrap();
    assert!(s.names().is_empty());
}

#[test]
fn expiry_applies_to_the_whole_filter_and_persists() {
    let dir = tempfile::tempdir().unwrap();
    {
        let s = Store::open(dir.path(), opts(FsyncPolicy::Always)).unwrap();
        s.create(b"short", &bloom()).unwrap();
        s.create(b"long", &bloom()).unwrap();
        s.add(b"short", &[b"x"], None).unwrap();
        s.add(b"long", &[b"x"], None).unwrap();
        let soon = SystemTime::now() + Duration::from_millis(300);
        assert!(s.expire_at(b"short", Some(soon)).unwrap());
        let later = SystemTime::now() + Duration::from_secs(3600);
        assert!(s.expire_at(b"long", Some(later)).unwrap());
        assert!(s.expires_at(b"long").unwrap().unwrap().is_some());
    }
    std::thread::sleep(Duration::from_millis(400));
    let s = Store::open(dir.path(), opts(FsyncPolicy::Always)).unwrap();
    assert_eq!(s.contains(b"short", &[b"x"]).unwrap(), None, "expired");
    assert_eq!(s.contains(b"long", &[b"x"]).unwrap(), Some(vec![true]));
    assert!(s.expire_at(b"long", None).unwrap());
    assert_eq!(s.expires_at(b"long").unwrap(), Some(None));
}

#[test]
fn counting_remove_is_logged() {
    let dir = tempfile::tempdir().unwrap();
    let spec = FilterSpec::Counting {
        capacity: 1000,
        error_rate: 0.01,
    };
    {
        let s = Store::open(dir.path(), opts(FsyncPolicy::Always)).unwrap();
        s.create(b"c", &spec).unwrap();
        s.add(b"c", &[b"a", b"b"], None).unwrap();
        assert_eq!(s.remove(b"c", &[b"a"]).unwrap(), vec![Removal::Removed]);
        assert!(matches!(
            s.remove(b"missing", &[b"a"]).unwrap_err().kind(),
            ErrorKind::NotFound
        ));
    }
    let s = Store::open(dir.path(), opts(FsyncPolicy::Always)).unwrap();
    assert_eq!(
        s.contains(b"c", &[b"a", b"b"]).unwrap(),
        Some(vec![false, true])
    );
    s.create(b"plain", &bloom()).unwrap();
    assert!(matches!(
        s.remove(b"plain", &[b"a"]).unwrap_err().kind(),
        ErrorKind::WrongKind(_)
    ));
}

#[test]
fn counting_repeated_adds_survive_one_remove_after_reopen() {
    // An item added twice and removed once is still there, also when the
    // adds are only in the log (every counting add is logged, not only the
    // first).
    let dir = tempfile::tempdir().unwrap();
    let spec = FilterSpec::Counting {
        capacity: 1000,
        error_rate: 0.01,
    };
    {
        let s = Store::open(dir.path(), opts(FsyncPolicy::Always)).unwrap();
        s.create(b"c", &spec).unwrap();
        assert_eq!(s.add(b"c", &[b"x"], None).unwrap().new, vec![true]);
        assert_eq!(s.add(b"c", &[b"x"], None).unwrap().new, vec![false]);
    }
    let s = Store::open(dir.path(), opts(FsyncPolicy::Always)).unwrap();
    assert_eq!(s.remove(b"c", &[b"x"]).unwrap(), vec![Removal::Removed]);
    assert_eq!(s.contains(b"c", &[b"x"]).unwrap(), Some(vec![true]));
    assert_eq!(s.remove(b"c", &[b"x"]).unwrap(), vec![Removal::Removed]);
    assert_eq!(s.contains(b"c", &[b"x"]).unwrap(), Some(vec![false]));
}

#[test]
fn a_directory_is_opened_by_one_store_at_a_time() {
    let dir = tempfile::tempdir().unwrap();
    let _s = Store::open(dir.path(), opts(FsyncPolicy::No)).unwrap();
    let e = Store::open(dir.path(), opts(FsyncPolicy::No)).unwrap_err();
    assert!(matches!(e.kind(), ErrorKind::Locked(_)), "{e}");
}

#[test]
fn checkpoints_drop_covered_log_segments() {
    let dir = tempfile::tempdir().unwrap();
    let s = Store::open(dir.path(), opts(FsyncPolicy::No)).unwrap();
    s.create(b"f", &bloom()).unwrap();
    for round in 0..60 {
        let v = items(&format!("{round}-"), 500);
        s.add(b"f", &refs(&v), None).unwrap();
    }
    let names = || -> Vec<String> {
        std::fs::read_dir(s.log_dir())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .filter(|n| n.ends_with(".log"))
            .collect()
    };
    assert!(names().len() > 3, "{:?}", names());
    s.checkpoint().unwrap();
    // What is left is the segment the checkpoint began.
    assert_eq!(names().len(), 1, "{:?}", names());
}

/// A RedisBloom dump loaded chunk by chunk (`BF.LOADCHUNK`) is logged, so
/// it survives a reopen without a checkpoint; a chunk larger than one log
/// record is logged in pieces; a bad chunk changes nothing.
#[test]
fn redis_dump_load_is_durable() {
    use seen_core::ScalableBloomFilter;
    let dir = tempfile::tempdir().unwrap();
    // About 6 MiB of bits: its one chunk spans two log records.
    let src = ScalableBloomFilter::builder(5_000_000, 0.01)
        .layout(Layout::Classic)
        .nonscaling(true)
        .build()
        .unwrap();
    let present = items("dump", 20_000);
    for i in &present {
        src.add(i).unwrap();
    }
    let header = src.redis_dump_header().unwrap();
    let mut chunks = Vec::new();
    let (mut iter, _) = src.redis_scandump(0).unwrap();
    loop {
        let (next, data) = src.redis_scandump(iter).unwrap();
        if next == 0 {
            break;
        }
        chunks.push((next, data));
        iter = next;
    }
    assert!(chunks.iter().any(|(_, d)| d.len() > 4 << 20));
    {
        let s = Store::open(dir.path(), opts(FsyncPolicy::Always)).unwrap();
        s.load_redis_header(b"d", &header, u64::MAX).unwrap();
        assert_eq!(
            s.load_redis_header(b"d", &header, u64::MAX)
                .unwrap_err()
                .kind()
                .to_string(),
            ErrorKind::Exists.to_string()
        );
        // A chunk past the end is refused and logs nothing.
        assert!(s.load_redis_chunk(b"d", u64::MAX - 1, b"xyz").is_err());
        assert!(s.load_redis_chunk(b"none", 10, b"xyz").is_err());
        for (next, data) in &chunks {
            s.load_redis_chunk(b"d", *next, data).unwrap();
        }
        // Dropped without a checkpoint: only the log has it.
    }
    let s = Store::open(dir.path(), opts(FsyncPolicy::Always)).unwrap();
    let found = s.contains(b"d", &refs(&present)).unwrap().unwrap();
    assert!(found.iter().all(|&p| p), "an item of the dump went missing");
    s.with_filter(b"d", |f| match f {
        seen_core::AnyFilter::Scalable(f) => {
            assert_eq!(f.len(), src.len());
            assert_eq!(f.redis_dump_header().unwrap(), header);
        }
        _ => panic!("not a chain"),
    })
    .unwrap()
    .unwrap();
}

/// A header asking for more than the limit is refused before allocating.
#[test]
fn redis_header_over_the_limit_is_refused() {
    use seen_core::ScalableBloomFilter;
    let dir = tempfile::tempdir().unwrap();
    let src = ScalableBloomFilter::builder(1_000_000, 0.01)
        .layout(Layout::Classic)
        .build()
        .unwrap();
    let header = src.redis_dump_header().unwrap();
    let s = Store::open(dir.path(), opts(FsyncPolicy::No)).unwrap();
    let err = s.load_redis_header(b"d", &header, 1 << 20).unwrap_err();
    assert!(err.to_string().contains("1048576"), "{err}");
    assert!(s.is_empty());
}

#[test]
fn replay_of_interleaved_filters_and_recovery_figures() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b, c) = (items("a", 500), items("b", 500), items("c", 300));
    // One record per add that finds its item absent.
    {
        let s = Store::open(dir.path(), opts(FsyncPolicy::Always)).unwrap();
        let r = s.recovery();
        assert_eq!((r.snapshots, r.records, r.log_bytes), (0, 0, 0));
        s.create(b"x", &bloom()).unwrap();
        s.create(b"y", &bloom()).unwrap();
        s.checkpoint().unwrap();
        // One record per add, alternating between the filters; then "y" is
        // deleted and created again (a new id) and filled with other items.
        for (i, j) in a.iter().zip(&b) {
            s.add(b"x", &[i.as_bytes()], None).unwrap();
            s.add(b"y", &[j.as_bytes()], None).unwrap();
        }
        assert!(s.delete(b"y").unwrap());
        s.create(b"y", &bloom()).unwrap();
        for (i, k) in a.iter().zip(&c) {
            s.add(b"y", &[k.as_bytes()], None).unwrap();
            s.add(b"x", &[i.as_bytes()], None).unwrap(); // present: not logged
        }
    }
    let s = Store::open(dir.path(), opts(FsyncPolicy::Always)).unwrap();
    let r = s.recovery().clone();
    assert_eq!(r.snapshots, 2, "{r:?}");
    // 1,000 adds, a delete, a create, 300 adds; each add record of one
    // hash is 48 bytes (8 + 9 + id, count, hash: 45, padded), the delete
    // 32 (8 + 9 + an 8-byte id, padded), the create 56 (8 + 9 + id, spec,
    // name length, name).
    assert_eq!(r.records, 1302, "{r:?}");
    assert_eq!(r.log_bytes, 1300 * 48 + 32 + 56, "{r:?}");
    assert!(r.replay_rate() > 0.0);
    let all = |name: &[u8], v: &[String]| {
        s.contains(name, &refs(v))
            .unwrap()
            .unwrap()
            .iter()
            .all(|&p| p)
    };
    assert!(all(b"x", &a));
    assert!(all(b"y", &c));
    // The first "y" is gone with its items (allowing false positives).
    let old = s.contains(b"y", &refs(&b)).unwrap().unwrap();
    assert!(old.iter().filter(|&&p| p).count() < 10);
}

#[test]
fn replay_of_many_adds_gives_the_same_filter() {
    // Enough records that replay applies them in large batches on several
    // threads; the reopened filter must be the one the adds made, bit for
    // bit and count for count.
    let dir = tempfile::tempdir().unwrap();
    let spec = FilterSpec::Bloom {
        capacity: 200_000,
        error_rate: 0.01,
        layout: Layout::Blocked,
    };
    let all = items("many", 150_000);
    let encode = |s: &Store| encoded(s, b"f");
    let before = {
        let s = Store::open(dir.path(), opts(FsyncPolicy::No)).unwrap();
        s.create(b"f", &spec).unwrap();
        s.checkpoint().unwrap();
        // Calls of 1 to 7 items, every tenth item a repeat of an earlier one.
        let mut i = 0;
        while i < all.len() {
            let n = 1 + i % 7;
            let mut call: Vec<&[u8]> = all[i..(i + n).min(all.len())]
                .iter()
                .map(|x| x.as_bytes())
                .collect();
            if i % 10 == 0 {
                call.push(all[i / 2].as_bytes());
            }
            s.add(b"f", &call, None).unwrap();
            i += n;
        }
        encode(&s)
    };
    let s = Store::open(dir.path(), opts(FsyncPolicy::No)).unwrap();
    // About 150,000 hashes (16 bytes each), a record per call.
    let r = s.recovery();
    assert!(r.log_bytes > 150_000 * 16 && r.records > 500, "{r:?}");
    assert_eq!(encode(&s), before);
    assert!(s
        .contains(b"f", &refs(&all))
        .unwrap()
        .unwrap()
        .iter()
        .all(|&p| p));
}

/// `log_bytes` grows with each add, drops when a checkpoint starts, and
/// after a reopen counts the log the open read until the next checkpoint.
#[test]
fn log_bytes_counts_what_a_reopen_would_replay() {
    let dir = tempfile::tempdir().unwrap();
    let s = Store::open(dir.path(), opts(FsyncPolicy::EverySec)).unwrap();
    s.create(b"f", &bloom()).unwrap();
    let start = s.log_bytes();
    let v = items("a", 5_000);
    for chunk in v.chunks(7) {
        s.add(b"f", &refs(chunk), None).unwrap();
    }
    let grown = s.log_bytes();
    // Each item's 16-byte hash at least; the 64 KiB segments rolled many
    // times on the way.
    assert!(grown >= start + 5_000 * 16, "{start} -> {grown}");
    s.checkpoint().unwrap();
    assert!(
        s.log_bytes() < 1024,
        "after a checkpoint: {}",
        s.log_bytes()
    );
    let w = items("b", 3_000);
    for chunk in w.chunks(7) {
        s.add(b"f", &refs(chunk), None).unwrap();
    }
    let since = s.log_bytes();
    assert!(since >= 3_000 * 16, "{since}");
    // Dropped without `close`, which would checkpoint: the reopen reads
    // the log written since the checkpoint.
    drop(s);
    let s = Store::open(dir.path(), opts(FsyncPolicy::EverySec)).unwrap();
    let reopened = s.log_bytes();
    assert!(reopened >= 3_000 * 16, "{reopened}");
    assert!(s
        .contains(b"f", &refs(&w))
        .unwrap()
        .unwrap()
        .iter()
        .all(|p| *p));
    s.checkpoint().unwrap();
    assert!(s.log_bytes() < 1024, "{}", s.log_bytes());
}

/// A filter unchanged since its snapshot holds no log back: with one idle
/// filter beside a busy one, each checkpoint still retires the segments
/// before it.
#[test]
fn an_idle_filter_keeps_no_log_segment() {
    let dir = tempfile::tempdir().unwrap();
    let s = Store::open(dir.path(), opts(FsyncPolicy::EverySec)).unwrap();
    s.create(b"idle", &bloom()).unwrap();
    s.create(b"busy", &bloom()).unwrap();
    s.add(b"idle", &[b"x"], None).unwrap();
    s.checkpoint().unwrap();
    let segments = || {
        std::fs::read_dir(s.log_dir())
            .unwrap()
            .filter(|e| {
                e.as_ref()
                    .unwrap()
                    .path()
                    .extension()
                    .is_some_and(|x| x == "log")
            })
            .count()
    };
    let mut counts = Vec::new();
    for round in 0..5 {
        let v = items(&format!("r{round}-"), 3_000);
        for chunk in v.chunks(7) {
            s.add(b"busy", &refs(chunk), None).unwrap();
        }
        s.checkpoint().unwrap();
        counts.push(segments());
    }
    // The segment each checkpoint began: nothing accumulates.
    assert!(counts.iter().all(|&c| c == 1), "{counts:?}");
    drop(s);
    let s = Store::open(dir.path(), opts(FsyncPolicy::EverySec)).unwrap();
    assert!(s.contains(b"idle", &[b"x"]).unwrap().unwrap()[0]);
    let last = items("r4-", 3_000);
    assert!(s
        .contains(b"busy", &refs(&last))
        .unwrap()
        .unwrap()
        .iter()
        .all(|p| *p));
}

/// A store with 4 KiB segments rolls every 85 single-item adds, and
/// reopens with them all.
#[test]
fn adds_over_many_small_segments() {
    let dir = tempfile::tempdir().unwrap();
    let small = StoreOptions {
        fsync: FsyncPolicy::EverySec,
        segment_size: 4096,
        ..Default::default()
    };
    let v = items("small", 3000);
    {
        let s = Store::open(dir.path(), small.clone()).unwrap();
        s.create(b"f", &bloom()).unwrap();
        for it in &v {
            s.add(b"f", &[it.as_bytes()], None).unwrap();
        }
        s.checkpoint().unwrap();
        for it in items("more", 1000) {
            s.add(b"f", &[it.as_bytes()], None).unwrap();
        }
    }
    let s = Store::open(dir.path(), small).unwrap();
    let all: Vec<String> = v.into_iter().chain(items("more", 1000)).collect();
    let present = s.contains(b"f", &refs(&all)).unwrap().unwrap();
    assert!(present.iter().all(|&p| p));
}

/// Deleting a filter that has expired answers `false`, as Redis's `DEL`
/// does not count an expired key (it answered `true`), and the filter goes
/// all the same, for good.
#[test]
fn deleting_an_expired_filter_answers_false_and_removes_it() {
    let dir = tempfile::tempdir().unwrap();
    {
        let s = Store::open(dir.path(), opts(FsyncPolicy::Always)).unwrap();
        s.create(b"f", &bloom()).unwrap();
        s.create(b"g", &bloom()).unwrap();
        let soon = std::time::SystemTime::now() + std::time::Duration::from_millis(100);
        assert!(s.expire_at(b"f", Some(soon)).unwrap());
        std::thread::sleep(std::time::Duration::from_millis(200));
        assert!(!s.delete(b"f").unwrap(), "an expired filter counted");
        assert!(s.delete(b"g").unwrap());
        assert!(!s.delete(b"g").unwrap());
        assert!(s.names().is_empty());
    }
    let s = Store::open(dir.path(), opts(FsyncPolicy::Always)).unwrap();
    assert!(s.names().is_empty(), "{:?}", s.names());
}

/// A blocked Bloom filter at 1% of about `bytes` bytes (within a block).
fn bloom_of_bytes(bytes: u64) -> FilterSpec {
    let size = |capacity| {
        let (blocks, _) = seen_core::BloomFilter::builder(capacity, 0.01)
            .layout(Layout::Blocked)
            .size()
            .unwrap();
        blocks * 64
    };
    let (mut lo, mut hi) = (1u64, 1 << 40);
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if size(mid) < bytes {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    assert!(size(lo).abs_diff(bytes) <= 64, "{} for {bytes}", size(lo));
    FilterSpec::Bloom {
        capacity: lo,
        error_rate: 0.01,
        layout: Layout::Blocked,
    }
}

/// A refusal for memory.
fn too_large(e: &seen_store::Error) -> bool {
    matches!(e.kind(), ErrorKind::Filter(f) if matches!(f.kind(), seen_core::ErrorKind::TooLarge { .. }))
}

/// Bytes of a filter's bits (or counters).
fn filter_bytes(f: &seen_core::AnyFilter) -> u64 {
    match f {
        seen_core::AnyFilter::Bloom(b) => b.memory_bytes(),
        seen_core::AnyFilter::Scalable(s) => s.memory_bytes(),
        seen_core::AnyFilter::Counting(c) => c.memory_bytes(),
        _ => unreachable!("no other kinds"),
    }
}

/// `max_memory` bounds all filters together: creations, and chains'
/// growth, are refused past it (each chain keeping every item it took);
/// a delete gives room back; the log replays a chain's growth whatever the
/// limit, and a reopen under a lower limit keeps every filter, refusing
/// only new memory.
#[test]
fn max_memory_bounds_creation_and_growth_of_all_filters() {
    let dir = tempfile::tempdir().unwrap();
    let limit = 1 << 20;
    let with_limit = |max_memory| StoreOptions {
        max_memory,
        ..opts(FsyncPolicy::No)
    };
    let chain = FilterSpec::Scalable {
        capacity: 1000,
        error_rate: 0.01,
        layout: Layout::Blocked,
        expansion: 2,
        nonscaling: false,
    };
    let s = Store::open(dir.path(), with_limit(limit)).unwrap();
    let names = [&b"a"[..], b"b", b"c"];
    for n in names {
        s.create(n, &chain).unwrap();
    }
    // Round robin, 500 items a call, until every chain is refused.
    let mut taken: [Vec<String>; 3] = Default::default();
    let mut refused = [false; 3];
    let mut round = 0;
    while refused.contains(&false) {
        for (c, n) in names.iter().enumerate() {
            if refused[c] {
                continue;
            }
            let batch = items(&format!("{c}-{round}-"), 500);
            match s.add(n, &refs(&batch), None) {
                Ok(out) => {
                    taken[c].extend_from_slice(&batch[..out.new.len()]);
                    if let Some(e) = out.stopped {
                        assert!(
                            matches!(e.kind(), seen_core::ErrorKind::TooLarge { .. }),
                            "{e}"
                        );
                        refused[c] = true;
                    }
                }
                Err(e) => panic!("{e}"),
            }
        }
        round += 1;
        assert!(round < 10_000, "the chains never reached max_memory");
    }
    let used = s.memory_bytes();
    assert!(used <= limit && used > limit / 2, "{used}");
    assert_eq!(s.memory_available(), limit - used);
    let held: u64 = names
        .iter()
        .map(|n| s.with_filter(n, filter_bytes).unwrap().unwrap())
        .sum();
    assert_eq!(held, used);
    // A filter larger than what is left, by half of what chain `a` holds,
    // is refused (nothing logged); once `a` is deleted, it is made.
    let a_bytes = s.with_filter(b"a", filter_bytes).unwrap().unwrap();
    let big = bloom_of_bytes(limit - used + a_bytes / 2);
    let e = s.create(b"big", &big).unwrap_err();
    assert!(too_large(&e), "{e}");
    assert!(s.with_filter(b"big", |_| ()).unwrap().is_none());
    assert!(s.delete(b"a").unwrap());
    assert_eq!(s.memory_bytes(), used - a_bytes);
    s.create(b"big", &big).unwrap();
    assert!(s.memory_bytes() <= limit);
    drop(s);

    // Reopened under a quarter of the limit: everything is kept (the
    // chains replayed with all their growth), nothing new fits.
    let s = Store::open(dir.path(), with_limit(limit / 4)).unwrap();
    assert!(s.memory_bytes() > limit / 4);
    assert_eq!(s.memory_available(), 0);
    for (c, n) in names.iter().enumerate().skip(1) {
        let present = s.contains(n, &refs(&taken[c])).unwrap().unwrap();
        assert!(present.iter().all(|&p| p), "chain {c} lost items");
        assert!(s.with_filter(n, filter_bytes).unwrap().unwrap() > 10_000);
    }
    let e = s.create(b"one-more", &bloom()).unwrap_err();
    assert!(too_large(&e), "{e}");
}
