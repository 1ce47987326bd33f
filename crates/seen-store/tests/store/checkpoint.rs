//! A checkpoint cut short or failing part-way: a kill after a delete made
//! during it, a retired segment that cannot be removed. Through the faulty
//! file system's hooks on creates and removes.

use std::io;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use seen_core::Layout;
use seen_store::{FilterSpec, FsyncPolicy, Store, StoreOptions};

use crate::faulty::{Faults, FaultyFs};

fn bloom(capacity: u64) -> FilterSpec {
    FilterSpec::Bloom {
        capacity,
        error_rate: 0.01,
        layout: Layout::Blocked,
    }
}

fn always() -> StoreOptions {
    StoreOptions {
        fsync: FsyncPolicy::Always,
        segment_size: 64 << 10,
        ..Default::default()
    }
}

fn file_name_str(p: &Path) -> String {
    p.file_name().unwrap().to_str().unwrap().to_string()
}

/// A filter deleted (acknowledged, fsync=always) while a checkpoint writes
/// its snapshots: the checkpoint still writes the deleted filter's
/// snapshot (as of the log before its delete), and a kill before a later
/// checkpoint removes it must not bring the filter back: replay applies
/// every delete, whatever its lsn.
#[test]
fn a_delete_during_a_checkpoint_stays_deleted_after_a_kill_before_it_ends() {
    let dir = tempfile::tempdir().unwrap();
    let crash = tempfile::tempdir().unwrap();
    let crash_path = crash.path().join("copy");
    let (fs, faults) = FaultyFs::new();
    let store = Store::open_with_fs(dir.path(), always(), fs).unwrap();
    store.create(b"a", &bloom(1000)).unwrap();
    store.create(b"b", &bloom(1000)).unwrap();
    store.add(b"a", &[b"x"], None).unwrap();
    store.add(b"b", &[b"y"], None).unwrap();

    let deleted: Arc<Mutex<Option<Vec<u8>>>> = Arc::default();
    {
        let s2 = store.clone();
        let deleted = deleted.clone();
        *faults.on_create.lock().unwrap() = Some(Box::new(move |path| {
            let name = file_name_str(path);
            if !name.ends_with(".snap.tmp") {
                return false;
            }
            // The checkpoint is writing its first snapshot (filter 1 = "a"
            // or 2 = "b"): delete the one it has not reached yet.
            let other: &[u8] = if name.starts_with("0000000000000001") {
                b"b"
            } else {
                b"a"
            };
            assert!(s2.delete(other).unwrap());
            *deleted.lock().unwrap() = Some(other.to_vec());
            true
        }));
    }
    {
        let dir = dir.path().to_path_buf();
        let crash_path = crash_path.clone();
        *faults.on_remove.lock().unwrap() = Some(Box::new(move |path| {
            // The removal of a segment the snapshots cover: a kill here.
            if path.parent().is_some_and(|p| p.ends_with("log")) {
                crate::crash::copy_dir(&dir, &crash_path, &["", "snapshots", "log"]);
                return Some(std::fs::remove_file(path));
            }
            None
        }));
    }
    store.checkpoint().unwrap();
    let deleted = deleted.lock().unwrap().clone().expect("a delete ran");
    assert!(crash_path.exists(), "the kill point was reached");
    drop(store);

    let reopened = Store::open(&crash_path, always()).unwrap();
    let mut names = reopened.names();
    names.sort();
    println!(
        "deleted {:?} (acknowledged); names after kill+reopen: {:?}",
        String::from_utf8_lossy(&deleted),
        names
            .iter()
            .map(|n| String::from_utf8_lossy(n).to_string())
            .collect::<Vec<_>>()
    );
    assert!(
        !names.contains(&deleted),
        "an acknowledged delete was undone by a kill mid-checkpoint"
    );
}

/// A store of 4 KiB segments under `always`, holding filter "f".
fn store_of_small_segments(dir: &Path) -> (Store, StoreOptions, Arc<Faults>) {
    let opts = StoreOptions {
        segment_size: 4096,
        ..always()
    };
    let (fs, faults) = FaultyFs::new();
    let store = Store::open_with_fs(dir, opts.clone(), fs).unwrap();
    store.create(b"f", &bloom(100_000)).unwrap();
    (store, opts, faults)
}

/// Adds `<tag>-0` to `<tag>-399` to "f": 400 records, about four segments.
fn add_400(store: &Store, tag: &str) {
    for i in 0..400 {
        let item = format!("{tag}-{i}");
        store.add(b"f", &[item.as_bytes()], None).unwrap();
    }
}

/// The log segments in data directory `dir`.
fn segment_count(dir: &Path) -> usize {
    std::fs::read_dir(dir.join("log"))
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .file_name()
                .to_str()
                .unwrap()
                .ends_with(".log")
        })
        .count()
}

/// Makes the next removal of a log segment return `fail`'s answer for its
/// path, and sets `hooked`.
fn hook_next_segment_removal(
    faults: &Faults,
    hooked: &Arc<AtomicBool>,
    fail: fn(&Path) -> io::Result<()>,
) {
    let hooked = hooked.clone();
    *faults.on_remove.lock().unwrap() = Some(Box::new(move |path| {
        if path.parent().is_some_and(|p| p.ends_with("log"))
            && file_name_str(path).ends_with(".log")
        {
            hooked.store(true, Ordering::SeqCst);
            return Some(fail(path));
        }
        None
    }));
}

/// A retired segment that cannot be removed stays, with the segments after
/// it, for the next checkpoint: the log keeps no gap, and every add is
/// there after a reopen.
#[test]
fn a_retired_segment_that_could_not_be_removed_leaves_no_gap_after_the_next_checkpoint() {
    let dir = tempfile::tempdir().unwrap();
    let (store, opts, faults) = store_of_small_segments(dir.path());
    add_400(&store, "one");
    let failed = Arc::new(AtomicBool::new(false));
    hook_next_segment_removal(&faults, &failed, |_| {
        Err(io::Error::from_raw_os_error(libc::EIO))
    });
    store.checkpoint().unwrap();
    assert!(failed.load(Ordering::SeqCst), "no removal failed");
    let kept = segment_count(dir.path());
    add_400(&store, "two");
    store.checkpoint().unwrap();
    // The kept ones went with the next checkpoint's.
    assert!(
        segment_count(dir.path()) < kept,
        "{} segments after the second checkpoint, {kept} after the first",
        segment_count(dir.path())
    );
    drop(store);
    let s = Store::open(dir.path(), opts).unwrap();
    for tag in ["one", "two"] {
        for i in 0..400 {
            let item = format!("{tag}-{i}");
            assert_eq!(
                s.contains(b"f", &[item.as_bytes()]).unwrap(),
                Some(vec![true]),
                "{item}"
            );
        }
    }
}

/// A retired segment that is already gone when the checkpoint removes it
/// (NotFound) counts as removed: the later retired segments go too.
#[test]
fn a_retired_segment_already_gone_counts_as_removed() {
    let dir = tempfile::tempdir().unwrap();
    let (store, opts, faults) = store_of_small_segments(dir.path());
    add_400(&store, "one");
    let before = segment_count(dir.path());
    let gone = Arc::new(AtomicBool::new(false));
    hook_next_segment_removal(&faults, &gone, |path| {
        std::fs::remove_file(path).unwrap();
        Err(io::Error::from(io::ErrorKind::NotFound))
    });
    store.checkpoint().unwrap();
    assert!(gone.load(Ordering::SeqCst), "no removal was hooked");
    let after = segment_count(dir.path());
    assert!(after < before / 2, "{after} segments left of {before}");
    drop(store);
    let s = Store::open(dir.path(), opts).unwrap();
    assert_eq!(s.contains(b"f", &[b"one-399"]).unwrap(), Some(vec![true]));
}
