//! Faults through the faulty file system: a full disk, a failed or
//! panicking or stalled sync, a failed checkpoint, every fault point in
//! turn, a data directory removed under the store. Each gives the
//! documented result and never a lost acknowledged add.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use seen_store::{ErrorKind, FilterSpec, FsyncPolicy, Store, StoreOptions};

use crate::basics::bloom;
use crate::faulty::{Faults, FaultyFs};

pub fn faulty(dir: &Path, fsync: FsyncPolicy) -> (Store, Arc<Faults>) {
    let opts = StoreOptions {
        fsync,
        segment_size: 16 << 10,
        ..Default::default()
    };
    faulty_with(dir, opts)
}

/// A store in `dir` with `opts` on the faulty file system.
pub fn faulty_with(dir: &Path, opts: StoreOptions) -> (Store, Arc<Faults>) {
    let (fs, faults) = FaultyFs::new();
    (Store::open_with_fs(dir, opts, fs).unwrap(), faults)
}

pub fn reopen(dir: &Path) -> Store {
    Store::open(dir, StoreOptions::default()).unwrap()
}

pub fn item(i: usize) -> Vec<u8> {
    format!("item-{i}").into_bytes()
}

/// Everything in `acked` must be present after reopening.
pub fn check_acked(dir: &Path, acked: &[usize]) {
    let s = reopen(dir);
    let items: Vec<Vec<u8>> = acked.iter().map(|&i| item(i)).collect();
    let refs: Vec<&[u8]> = items.iter().map(|v| v.as_slice()).collect();
    let present = s.contains(b"f", &refs).unwrap().unwrap();
    let lost = present.iter().filter(|p| !**p).count();
    assert_eq!(lost, 0, "{lost} acknowledged items lost");
}

/// A write refused for want of space.
fn no_space(e: &seen_store::Error) -> bool {
    matches!(e.kind(), ErrorKind::Io { source, .. } if source.raw_os_error() == Some(libc::ENOSPC))
}

#[test]
fn full_disk_fails_the_write_keeps_reads_and_recovers() {
    for policy in [FsyncPolicy::Always, FsyncPolicy::EverySec, FsyncPolicy::No] {
        let dir = tempfile::tempdir().unwrap();
        let (s, faults) = faulty(dir.path(), policy);
        s.create(b"f", &bloom()).unwrap();
        let mut acked = Vec::new();
        let mut failures = 0;
        for i in 0..3000 {
            if i == 500 {
                faults.set_room(0);
            }
            if i == 2000 {
                faults.set_room(u64::MAX);
            }
            match s.add(b"f", &[&item(i)], None) {
                Ok(_) => {
                    acked.push(i);
                    assert!(!s.log_failed(), "the log says it failed after add {i}");
                }
                Err(e) => {
                    assert!(no_space(&e), "{policy:?}: {e}");
                    assert!((500..2000).contains(&i), "failure at {i}");
                    // What `INFO persistence` shows as `aof_last_write_status`.
                    assert!(s.log_failed(), "the log says nothing failed at add {i}");
                    failures += 1;
                    // The store stays readable.
                    assert!(s.contains(b"f", &[&item(0)]).unwrap().unwrap()[0]);
                    assert!(!s.contains(b"f", &[&item(i)]).unwrap().unwrap()[0]);
                }
            }
        }
        assert_eq!(failures, 1500, "{policy:?}");
        assert!(acked.iter().any(|&i| i >= 2000), "writes resumed");
        drop(s);
        check_acked(dir.path(), &acked);
    }
}

/// A full disk refuses writes only until some space is free: no segment's
/// worth has to be, only the record's.
#[test]
fn writes_resume_as_soon_as_any_space_is_free() {
    let dir = tempfile::tempdir().unwrap();
    let (s, faults) = faulty(dir.path(), FsyncPolicy::EverySec);
    s.create(b"f", &bloom()).unwrap();
    faults.set_room(0);
    assert!(no_space(&s.add(b"f", &[&item(0)], None).unwrap_err()));
    // Room for one record of one hash (48 bytes): one add, then none.
    faults.set_room(48);
    s.add(b"f", &[&item(1)], None).unwrap();
    assert!(no_space(&s.add(b"f", &[&item(2)], None).unwrap_err()));
    // Room for 30 bytes: the record is cut back, nothing is left of it.
    faults.set_room(30);
    assert!(no_space(&s.add(b"f", &[&item(3)], None).unwrap_err()));
    faults.set_room(u64::MAX);
    s.add(b"f", &[&item(4)], None).unwrap();
    drop(s);
    let s = reopen(dir.path());
    let found = s
        .contains(b"f", &[&item(0), &item(1), &item(2), &item(3), &item(4)])
        .unwrap()
        .unwrap();
    assert_eq!(found, [false, true, false, false, true]);
}

#[test]
fn failed_fsync_is_an_error_then_writes_resume_after_a_checkpoint() {
    let dir = tempfile::tempdir().unwrap();
    let (s, faults) = faulty(dir.path(), FsyncPolicy::Always);
    s.create(b"f", &bloom()).unwrap();
    // An expired filter, which a checkpoint deletes (with a log record):
    // the checkpoint that clears the poisoned log must get by without.
    s.create(b"expired", &bloom()).unwrap();
    // Its snapshot from before the expiry: a reopen must not bring it back.
    s.checkpoint().unwrap();
    let soon = std::time::SystemTime::now() + std::time::Duration::from_millis(100);
    s.expire_at(b"expired", Some(soon)).unwrap();
    let mut acked = Vec::new();
    for i in 0..100 {
        s.add(b"f", &[&item(i)], None).unwrap();
        acked.push(i);
    }
    std::thread::sleep(std::time::Duration::from_millis(150));
    faults.eio_sync.store(true, Ordering::SeqCst);
    let e = s.add(b"f", &[&item(100)], None).unwrap_err();
    assert!(e.to_string().contains("sync"), "{e}");
    // The log's segments now, the one whose sync failed among them.
    let segments: Vec<PathBuf> = std::fs::read_dir(s.log_dir())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "log"))
        .collect();
    assert!(!segments.is_empty());
    // Still failing: the log is poisoned and the checkpoint cannot sync.
    assert!(s.add(b"f", &[&item(101)], None).is_err());
    faults.eio_sync.store(false, Ordering::SeqCst);
    for i in 102..200 {
        s.add(b"f", &[&item(i)], None).unwrap();
        acked.push(i);
    }
    // The checkpoint that made the log usable again retired them all
    // (the expired filter kept them, and the failed one was never synced
    // again).
    let kept: Vec<_> = segments.iter().filter(|p| p.exists()).collect();
    assert!(kept.is_empty(), "{kept:?}");
    // (Not looked up before the reopen: a lookup deletes it, with a log
    // record.)
    drop(s);
    check_acked(dir.path(), &acked);
    let s = Store::open(dir.path(), StoreOptions::default()).unwrap();
    assert_eq!(s.contains(b"expired", &[&item(0)]).unwrap(), None);
}

/// After a failed sync, with no write to come: lookups are answered (an
/// expired filter as absent, an absent item at once), a "present" only
/// once the checkpoint that makes the log usable again has run (it runs
/// for the lookup, or for `checkpoint`, as the server's timer and SAVE
/// call it), and that checkpoint made everything durable.
#[test]
fn lookups_are_answered_after_a_failed_sync_and_recover_the_log() {
    for policy in [FsyncPolicy::Always, FsyncPolicy::EverySec] {
        for by_checkpoint in [false, true] {
            let dir = tempfile::tempdir().unwrap();
            let (s, faults) = faulty(dir.path(), policy);
            s.create(b"f", &bloom()).unwrap();
            s.create(b"e", &bloom()).unwrap();
            s.add(b"f", &[&item(0)], None).unwrap();
            s.sync().unwrap();
            let soon = std::time::SystemTime::now() + std::time::Duration::from_millis(100);
            s.expire_at(b"e", Some(soon)).unwrap();
            std::thread::sleep(std::time::Duration::from_millis(150));
            faults.eio_sync.store(true, Ordering::SeqCst);
            // Under `always` the add fails; under `everysec` it is written
            // and acknowledged (unless the syncer's own sync met the
            // failure first, and refused it), and the sync fails.
            let added = s.add(b"f", &[&item(1)], None);
            if policy == FsyncPolicy::Always {
                assert!(added.is_err());
            }
            assert!(s.sync().is_err(), "{policy:?}");
            assert!(s.log_failed());
            // While syncs still fail: what needs no durable add is answered.
            assert_eq!(s.contains(b"e", &[&item(0)]).unwrap(), None, "{policy:?}");
            assert_eq!(
                s.contains(b"f", &[&item(999)]).unwrap(),
                Some(vec![false]),
                "{policy:?}"
            );
            // A "present" cannot be made durable yet. The recovery that
            // fails is not tried again by every lookup: not within a
            // second of one that failed.
            let e = s.contains(b"f", &[&item(0)]).unwrap_err();
            assert!(e.to_string().contains("sync"), "{policy:?}: {e}");
            let failed = faults.syncs_failed.load(Ordering::SeqCst);
            for _ in 0..20 {
                assert!(s.contains(b"f", &[&item(0)]).is_err());
            }
            let tried = faults.syncs_failed.load(Ordering::SeqCst) - failed;
            assert!(tried <= 2, "{policy:?}: {tried} more syncs failed");
            faults.eio_sync.store(false, Ordering::SeqCst);
            if by_checkpoint {
                s.checkpoint().unwrap();
                assert!(!s.log_failed(), "{policy:?}: the checkpoint left it failed");
            }
            // A lookup recovers the log once a second has passed since the
            // recovery that failed (at once after the checkpoint).
            let began = std::time::Instant::now();
            let found = loop {
                match s.contains(b"f", &[&item(0), &item(1), &item(999)]) {
                    Ok(found) => break found.unwrap(),
                    Err(e) => {
                        assert!(!by_checkpoint, "{policy:?}: {e}");
                        assert!(began.elapsed() < std::time::Duration::from_secs(30), "{e}");
                        std::thread::sleep(std::time::Duration::from_millis(50));
                    }
                }
            };
            assert!(found[0] && !found[2], "{policy:?}: {found:?}");
            // Item 1 was added in memory, under `always` not acknowledged.
            if added.is_ok() || policy == FsyncPolicy::Always {
                assert!(found[1], "{policy:?}");
            }
            assert!(!s.log_failed(), "{policy:?}");
            // Dropped with no write since (as by a kill): what was answered
            // comes back, item 1 present.
            drop(s);
            let s = reopen(dir.path());
            assert_eq!(
                s.contains(b"f", &[&item(0), &item(1)]).unwrap(),
                Some(vec![true, found[1]]),
                "{policy:?}, by checkpoint {by_checkpoint}"
            );
            assert_eq!(s.contains(b"e", &[&item(0)]).unwrap(), None);
        }
    }
}

#[test]
fn a_sync_that_panics_holds_up_no_later_write_and_loses_nothing() {
    // A panic inside a sync (a bug) left the log's "sync in progress" flag
    // set, and every later add under `always` waited for that sync for
    // ever.
    let dir = tempfile::tempdir().unwrap();
    let (s, faults) = faulty(dir.path(), FsyncPolicy::Always);
    s.create(b"f", &bloom()).unwrap();
    let mut acked = Vec::new();
    for i in 0..100 {
        s.add(b"f", &[&item(i)], None).unwrap();
        acked.push(i);
    }
    faults.panic_sync.store(true, Ordering::SeqCst);
    let add = std::panic::AssertUnwindSafe(|| s.add(b"f", &[&item(100)], None));
    assert!(
        std::panic::catch_unwind(add).is_err(),
        "the sync did not panic"
    );
    faults.panic_sync.store(false, Ordering::SeqCst);
    // The next add recovers the log (a checkpoint, as after a failed
    // sync) and is acknowledged; on a thread of its own, so that a wait
    // for ever fails the test instead of hanging it.
    let (tx, rx) = std::sync::mpsc::channel();
    let writer = s.clone();
    std::thread::spawn(move || {
        let added: Vec<_> = (101..200)
            .map(|i| writer.add(b"f", &[&item(i)], None).map(|_| i))
            .collect();
        let _ = tx.send(added);
    });
    let added = rx
        .recv_timeout(std::time::Duration::from_secs(30))
        .expect("adds after a sync that panicked still waiting after 30 s");
    for a in added {
        acked.push(a.unwrap());
    }
    drop(s);
    check_acked(dir.path(), &acked);
}

#[test]
fn a_remove_that_fails_part_way_leaves_the_filter_as_its_log() {
    // A remove of more items than one record holds (65,536) logs several
    // records; when the disk fills before the last, the call fails, and
    // the filter must hold the removes logged so far and no others: what
    // a reopen replays. (Applied only at the end, the live filter had none
    // of them and the reopened one all the logged ones.)
    let dir = tempfile::tempdir().unwrap();
    let opts = StoreOptions {
        fsync: FsyncPolicy::Always,
        ..Default::default()
    };
    let (s, faults) = faulty_with(dir.path(), opts);
    let spec = FilterSpec::Counting {
        capacity: 100_000,
        error_rate: 0.01,
    };
    s.create(b"f", &spec).unwrap();
    let items: Vec<Vec<u8>> = (0..70_000).map(item).collect();
    let refs: Vec<&[u8]> = items.iter().map(|v| v.as_slice()).collect();
    for part in refs.chunks(1000) {
        s.add(b"f", part, None).unwrap();
    }
    s.checkpoint().unwrap();
    // Room for the first record of the remove (1 MiB of hashes), not the
    // second.
    faults.set_room((1 << 20) + 1024);
    let e = s.remove(b"f", &refs).unwrap_err();
    assert!(e.to_string().contains("No space"), "{e}");
    faults.set_room(u64::MAX);
    let live = s.contains(b"f", &refs).unwrap().unwrap();
    let removed = live.iter().filter(|p| !**p).count();
    assert!(
        (65_536..66_000).contains(&removed),
        "{removed} removed (false positives keep a few)"
    );
    drop(s);
    let s = reopen(dir.path());
    assert_eq!(s.contains(b"f", &refs).unwrap().unwrap(), live);
}

/// A checkpoint whose snapshot write fails for want of space: the old
/// snapshot stays, no temp file is left, the filter is not left locked.
#[test]
fn short_snapshot_write_keeps_the_old_snapshot() {
    let chain = FilterSpec::Scalable {
        capacity: 1000,
        error_rate: 0.01,
        layout: seen_core::Layout::Blocked,
        expansion: 2,
        nonscaling: false,
    };
    let counting = FilterSpec::Counting {
        capacity: 1000,
        error_rate: 0.01,
    };
    for spec in [bloom(), chain, counting] {
        let dir = tempfile::tempdir().unwrap();
        let (s, faults) = faulty(dir.path(), FsyncPolicy::Always);
        s.create(b"f", &spec).unwrap();
        let mut acked = Vec::new();
        for i in 0..100 {
            s.add(b"f", &[&item(i)], None).unwrap();
            acked.push(i);
        }
        s.checkpoint().unwrap();
        fail_a_checkpoint(dir.path(), s, &spec, &faults, acked);
    }
}

/// Adds items 100 to 199 to filter "f" of `s` (in `dir`; `acked` holds
/// those added so far), then has a checkpoint fail on a full disk: the
/// error names a write, the filter is not left locked, no temp file is
/// left, and the old snapshot plus the log hold every item.
fn fail_a_checkpoint(
    dir: &Path,
    s: Store,
    spec: &FilterSpec,
    faults: &Faults,
    mut acked: Vec<usize>,
) {
    for i in 100..200 {
        s.add(b"f", &[&item(i)], None).unwrap();
        acked.push(i);
    }
    faults.set_room(0);
    let e = s.checkpoint().unwrap_err();
    assert!(e.to_string().contains("write"), "{spec:?}: {e}");
    faults.set_room(u64::MAX);
    // The filter is not left locked: adds and a lookup go on.
    s.add(b"f", &[&item(200)], None).unwrap();
    acked.push(200);
    assert_eq!(s.contains(b"f", &[&item(7)]).unwrap(), Some(vec![true]));
    drop(s);
    let leftovers = std::fs::read_dir(dir.join("snapshots"))
        .unwrap()
        .filter(|e| e.as_ref().unwrap().path().extension().unwrap() == "tmp")
        .count();
    assert_eq!(leftovers, 0, "{spec:?}");
    check_acked(dir, &acked);
}

/// `close` on one clone of a store leaves the log's syncer running for the
/// others, until the last clone is dropped.
#[test]
fn closing_one_clone_leaves_the_others_their_syncer() {
    let dir = tempfile::tempdir().unwrap();
    let opts = StoreOptions {
        fsync: FsyncPolicy::EverySec,
        ..Default::default()
    };
    let s = Store::open(dir.path(), opts).unwrap();
    s.create(b"f", &bloom()).unwrap();
    s.clone().close().unwrap();
    for i in 0..100 {
        s.add(b"f", &[&item(i)], None).unwrap();
    }
    // Syncs begin a second apart: with none since the close, the figure
    // would be at least 6 s; with them, about a second plus a sync's
    // length (more on a busy machine: up to 4 s is allowed for that).
    std::thread::sleep(std::time::Duration::from_secs(6));
    let unsynced = s.unsynced_for().unwrap();
    assert!(
        unsynced < std::time::Duration::from_secs(5),
        "no sync for {unsynced:?} after a clone was closed"
    );
}

/// Under `everysec` a power loss must take no more than about the last
/// second and a half of acknowledged adds, however late the syncs run:
/// while the last sync that succeeded began more than that ago, adds wait
/// for one. Here the disk stops answering syncs for 3 seconds while two
/// writers add: from 2 seconds into the stall (the last sync that
/// succeeded then began at least that long ago) no add may be
/// acknowledged, and once the disk answers again the adds go on.
#[test]
fn adds_wait_for_a_sync_that_is_overdue_under_everysec() {
    use std::time::{Duration, Instant};
    let dir = tempfile::tempdir().unwrap();
    let (s, faults) = faulty(dir.path(), FsyncPolicy::EverySec);
    s.create(b"f", &bloom()).unwrap();
    let stop = AtomicBool::new(false);
    let acks = std::sync::Mutex::new(Vec::<(Instant, usize)>::new());
    let (held_at, released_at) = std::thread::scope(|scope| {
        for t in 0..2 {
            let (s, stop, acks) = (&s, &stop, &acks);
            scope.spawn(move || {
                let mut i = t;
                while !stop.load(Ordering::Relaxed) {
                    s.add(b"f", &[&item(i)], None).unwrap();
                    acks.lock().unwrap().push((Instant::now(), i));
                    i += 2;
                    std::thread::sleep(Duration::from_micros(200));
                }
            });
        }
        std::thread::sleep(Duration::from_millis(500));
        faults.hold_syncs.store(true, Ordering::SeqCst);
        let start = Instant::now();
        while faults.syncs_held.load(Ordering::SeqCst) == 0 {
            assert!(start.elapsed() < Duration::from_secs(10), "no sync came");
            std::thread::sleep(Duration::from_millis(1));
        }
        let held_at = Instant::now();
        std::thread::sleep(Duration::from_secs(3));
        let released_at = Instant::now();
        faults.hold_syncs.store(false, Ordering::SeqCst);
        std::thread::sleep(Duration::from_millis(1500));
        stop.store(true, Ordering::Relaxed);
        (held_at, released_at)
    });
    let acks = acks.into_inner().unwrap();
    let during: Vec<_> = acks
        .iter()
        .filter(|(at, _)| *at > held_at + Duration::from_secs(2) && *at < released_at)
        .collect();
    assert!(
        during.is_empty(),
        "{} adds acknowledged 2-3 s into a stalled sync, the first {:?} after the stall began",
        during.len(),
        during[0].0 - held_at
    );
    let before = acks.iter().filter(|(at, _)| *at < held_at).count();
    let after = acks.iter().filter(|(at, _)| *at > released_at).count();
    assert!(before > 100, "only {before} adds before the stall");
    assert!(
        after > 100,
        "only {after} adds after the disk answered again"
    );
    // Nothing acknowledged is missing, after the stall or a reopen.
    let items: Vec<Vec<u8>> = acks.iter().map(|(_, i)| item(*i)).collect();
    let refs: Vec<&[u8]> = items.iter().map(|i| i.as_slice()).collect();
    assert!(s.contains(b"f", &refs).unwrap().unwrap().iter().all(|p| *p));
    drop(s);
    let s = reopen(dir.path());
    assert!(s.contains(b"f", &refs).unwrap().unwrap().iter().all(|p| *p));
}

/// A checkpoint syncs the log's directory after it removes the segments
/// its snapshots cover, so that no removed segment comes back after a
/// power loss.
#[test]
fn a_checkpoint_makes_the_removal_of_retired_segments_durable() {
    let dir = tempfile::tempdir().unwrap();
    for fsync in [FsyncPolicy::Always, FsyncPolicy::EverySec, FsyncPolicy::No] {
        let sub = dir.path().join(format!("{fsync:?}"));
        let (s, faults) = faulty(&sub, fsync);
        s.create(b"f", &bloom()).unwrap();
        for i in 0..3000 {
            s.add(b"f", &[&item(i)], None).unwrap();
        }
        faults.dir_ops.lock().unwrap().clear();
        s.checkpoint().unwrap();
        let ops = faults.dir_ops.lock().unwrap().clone();
        let log = s.log_dir().to_path_buf();
        let last_removed = ops
            .iter()
            .rposition(|(sync, p)| !sync && p.extension().is_some_and(|e| e == "log"))
            .unwrap_or_else(|| panic!("{fsync:?}: no segment retired: {ops:?}"));
        assert!(
            ops[last_removed..]
                .iter()
                .any(|(sync, p)| *sync && *p == log),
            "{fsync:?}: no sync of {} after the last removal: {ops:?}",
            log.display()
        );
    }
}

/// What [`a_run`] did: the items whose adds were acknowledged, by filter.
#[derive(Default)]
struct Acked {
    bloom: Vec<usize>,
    chain: Vec<usize>,
}

/// Creates, adds (single items and batches), removes, checkpoints, adds
/// again: every kind of record and every step of a checkpoint, carrying on
/// past errors. Returns what was acknowledged.
fn a_run(s: &Store) -> Acked {
    let mut acked = Acked::default();
    let chain = FilterSpec::Scalable {
        capacity: 40,
        error_rate: 0.01,
        layout: seen_core::Layout::Classic,
        expansion: 2,
        nonscaling: false,
    };
    let counting = FilterSpec::Counting {
        capacity: 1000,
        error_rate: 0.01,
    };
    let _ = s.create(b"f", &bloom());
    let _ = s.create(b"c", &counting);
    let mut next = 0;
    for round in 0..3 {
        for batch in [1, 7, 1, 20] {
            let items: Vec<Vec<u8>> = (next..next + batch).map(item).collect();
            let refs: Vec<&[u8]> = items.iter().map(|v| v.as_slice()).collect();
            if s.add(b"f", &refs, None).is_ok() {
                acked.bloom.extend(next..next + batch);
            }
            if s.add(b"chain", &refs, Some(&chain)).is_ok() {
                acked.chain.extend(next..next + batch);
            }
            let _ = s.add(b"c", &refs, None);
            let _ = s.remove(b"c", &refs[..1]);
            next += batch;
        }
        if round < 2 {
            let _ = s.checkpoint();
        }
    }
    let _ = s.sync();
    acked
}

/// Every acknowledged add of `acked` is in the store in `dir`, opened
/// without salvage.
fn holds(dir: &Path, acked: &Acked, what: &str) {
    let s = Store::open(dir, StoreOptions::default())
        .unwrap_or_else(|e| panic!("{what}: the directory does not open: {e}"));
    for (name, list) in [(&b"f"[..], &acked.bloom), (b"chain", &acked.chain)] {
        let items: Vec<Vec<u8>> = list.iter().map(|&i| item(i)).collect();
        let refs: Vec<&[u8]> = items.iter().map(|v| v.as_slice()).collect();
        let found = s.contains(name, &refs).unwrap().unwrap_or_default();
        let lost = found.iter().filter(|p| !**p).count() + refs.len() - found.len();
        assert_eq!(lost, 0, "{what}: {lost} acknowledged adds to {name:?} lost");
    }
}

/// Each operation that touches the disk on the paths of adds, removes,
/// checkpoints and opens (creates, opens, reads, writes, syncs, cuts,
/// renames, removes, directory syncs) fails in turn, one per run: the
/// directory then opens without salvage, holding every add acknowledged.
#[test]
fn every_fault_point_in_turn_loses_nothing_acknowledged() {
    for policy in [FsyncPolicy::Always, FsyncPolicy::EverySec] {
        let opts = StoreOptions {
            fsync: policy,
            segment_size: 1024,
            ..Default::default()
        };
        // Faults in the run.
        let mut point = 0;
        loop {
            let dir = tempfile::tempdir().unwrap();
            let (fs, faults) = FaultyFs::new();
            faults.fail_point.store(point, Ordering::SeqCst);
            let acked = match Store::open_with_fs(dir.path(), opts.clone(), fs) {
                Ok(s) => a_run(&s),
                Err(_) => Acked::default(),
            };
            let Some(failed) = faults.failed.lock().unwrap().clone() else {
                break;
            };
            holds(
                dir.path(),
                &acked,
                &format!("{policy:?}, a failed {failed}"),
            );
            point += 1;
        }
        assert!(
            point > 100,
            "{policy:?}: only {point} fault points in a run"
        );
        // Faults in the open of a directory the run left.
        let dir = tempfile::tempdir().unwrap();
        let acked = a_run(&Store::open(dir.path(), opts.clone()).unwrap());
        let mut point = 0;
        loop {
            let (fs, faults) = FaultyFs::new();
            faults.fail_point.store(point, Ordering::SeqCst);
            drop(Store::open_with_fs(dir.path(), opts.clone(), fs));
            let Some(failed) = faults.failed.lock().unwrap().clone() else {
                break;
            };
            holds(
                dir.path(),
                &acked,
                &format!("{policy:?}, a failed {failed} in an open"),
            );
            point += 1;
        }
        assert!(
            point > 10,
            "{policy:?}: only {point} fault points in an open"
        );
    }
}

/// A data directory removed under a running store: writes become errors
/// (as `INFO persistence` shows), not acknowledgements, within about a
/// second (the syncer looks once a second under every policy).
#[test]
fn a_vanished_data_directory_turns_writes_into_errors() {
    for policy in [FsyncPolicy::Always, FsyncPolicy::EverySec, FsyncPolicy::No] {
        let dir = tempfile::tempdir().unwrap();
        let opts = StoreOptions {
            fsync: policy,
            ..Default::default()
        };
        let s = Store::open(dir.path(), opts).unwrap();
        s.create(b"f", &bloom()).unwrap();
        s.add(b"f", &[&item(0)], None).unwrap();
        std::fs::remove_dir_all(dir.path()).unwrap();
        let began = std::time::Instant::now();
        let mut i = 1;
        while s.add(b"f", &[&item(i)], None).is_ok() {
            assert!(
                began.elapsed() < std::time::Duration::from_secs(3),
                "{policy:?}: adds still acknowledged 3 s after the directory went"
            );
            std::thread::sleep(std::time::Duration::from_millis(20));
            i += 1;
        }
        assert!(s.log_failed(), "{policy:?}");
        // The next add tries the checkpoint that would make the log usable
        // again, which cannot make its files either.
        let e = s.add(b"f", &[&item(i)], None).unwrap_err();
        assert!(
            matches!(e.kind(), ErrorKind::Io { .. } | ErrorKind::Poisoned(_)),
            "{policy:?}: {e}"
        );
        // Lookups of what it holds go on.
        assert_eq!(s.contains(b"f", &[&item(999)]).unwrap(), Some(vec![false]));
    }
}
