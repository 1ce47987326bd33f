//! Fault injection through the file-system trait: a full disk, a failed
//! fsync, a short write, a torn log tail, flipped bytes in the log and in a
//! snapshot. Each gives the documented result and never a silent false
//! negative.

use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use seen_store::fs::{Fs, FsFile, RealFs};
use seen_store::{ErrorKind, FilterSpec, FsyncPolicy, Store, StoreOptions};

use crate::basics::bloom;

/// The real file system, with switches that make operations fail.
#[derive(Default)]
struct Faults {
    enospc_allocate: AtomicBool,
    eio_sync: AtomicBool,
    /// Syncs (of files and directories) that `eio_sync` failed.
    syncs_failed: std::sync::atomic::AtomicU64,
    /// Syncs of files panic (a bug in the store's sync, say).
    panic_sync: AtomicBool,
    short_write: AtomicBool,
    /// Renames of a log lane's spare segment fail (counted).
    fail_spare_rename: AtomicBool,
    spare_renames_failed: std::sync::atomic::AtomicU64,
    /// Spares renamed into segments, and spares synced (each by the path
    /// it was created at).
    spares_renamed: std::sync::Mutex<Vec<PathBuf>>,
    spares_synced: std::sync::Mutex<std::collections::HashSet<PathBuf>>,
    /// Starting a writeback (`write_behind`) fails; the calls made, as
    /// (written_to, upto).
    eio_write_behind: AtomicBool,
    write_behinds: std::sync::Mutex<Vec<(u64, u64)>>,
    /// Removes and directory syncs, in order (`true`: a sync).
    dir_ops: std::sync::Mutex<Vec<(bool, PathBuf)>>,
    /// Syncs of files wait while set (a disk that has stopped
    /// answering); the syncs waiting now.
    hold_syncs: AtomicBool,
    syncs_held: std::sync::atomic::AtomicU64,
    /// Files preallocated by `fallocate`, and by writing zeros.
    allocated: std::sync::atomic::AtomicU64,
    zero_filled: std::sync::atomic::AtomicU64,
    /// Snapshots cannot be opened (EACCES), or are opened and cannot be
    /// read (their directory is opened instead: reads fail with EISDIR).
    snap_open_fails: AtomicBool,
    snap_read_fails: AtomicBool,
    /// Removes of files in the log's directory (segments, spares) fail
    /// (EIO).
    wal_remove_fails: AtomicBool,
    /// Preallocations fail (ENOSPC) but those of spares.
    enospc_allocate_segments: AtomicBool,
}

struct FaultyFs {
    real: RealFs,
    faults: Arc<Faults>,
}

struct FaultyFile {
    inner: Box<dyn FsFile>,
    faults: Arc<Faults>,
    /// The path it was created at, for a spare.
    spare: Option<PathBuf>,
}

impl FaultyFile {
    /// Whether a preallocation fails for want of room.
    fn no_room(&self) -> bool {
        self.faults.enospc_allocate.load(Ordering::SeqCst)
            || (self.spare.is_none() && self.faults.enospc_allocate_segments.load(Ordering::SeqCst))
    }
}

fn is_spare(path: &Path) -> bool {
    path.file_name()
        .and_then(|n| n.to_str())
        .is_some_and(|n| n.starts_with("spare."))
}

fn enospc() -> io::Error {
    io::Error::from_raw_os_error(libc::ENOSPC)
}

impl FsFile for FaultyFile {
    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        if self.faults.short_write.load(Ordering::SeqCst) {
            // Half the bytes reach the file, then the disk is full.
            self.inner.write_all(&buf[..buf.len() / 2])?;
            return Err(enospc());
        }
        self.inner.write_all(buf)
    }
    fn sync_data(&self) -> io::Result<()> {
        if self.faults.panic_sync.load(Ordering::SeqCst) {
            panic!("a sync panics (test)");
        }
        if self.faults.eio_sync.load(Ordering::SeqCst) {
            self.faults.syncs_failed.fetch_add(1, Ordering::SeqCst);
            return Err(io::Error::from_raw_os_error(libc::EIO));
        }
        if self.faults.hold_syncs.load(Ordering::SeqCst) {
            self.faults.syncs_held.fetch_add(1, Ordering::SeqCst);
            while self.faults.hold_syncs.load(Ordering::SeqCst) {
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
            self.faults.syncs_held.fetch_sub(1, Ordering::SeqCst);
        }
        self.inner.sync_data()?;
        if let Some(path) = &self.spare {
            let mut synced = self.faults.spares_synced.lock().unwrap();
            synced.insert(path.clone());
        }
        Ok(())
    }
    fn allocate(&self, len: u64) -> io::Result<()> {
        if self.no_room() {
            return Err(enospc());
        }
        self.faults.allocated.fetch_add(1, Ordering::SeqCst);
        self.inner.allocate(len)
    }
    fn zero_fill(&self, len: u64) -> io::Result<()> {
        if self.no_room() {
            return Err(enospc());
        }
        self.faults.zero_filled.fetch_add(1, Ordering::SeqCst);
        self.inner.zero_fill(len)
    }
    fn std_file(&self) -> &File {
        self.inner.std_file()
    }
    fn try_clone(&self) -> io::Result<Box<dyn FsFile>> {
        Ok(Box::new(FaultyFile {
            inner: self.inner.try_clone()?,
            faults: self.faults.clone(),
            spare: self.spare.clone(),
        }))
    }
    fn write_behind(&self, written_to: u64, upto: u64) -> io::Result<()> {
        if self.faults.eio_write_behind.load(Ordering::SeqCst) {
            return Err(io::Error::from_raw_os_error(libc::EIO));
        }
        self.faults
            .write_behinds
            .lock()
            .unwrap()
            .push((written_to, upto));
        self.inner.write_behind(written_to, upto)
    }
}

impl Fs for FaultyFs {
    fn create(&self, path: &Path) -> io::Result<Box<dyn FsFile>> {
        Ok(Box::new(FaultyFile {
            inner: self.real.create(path)?,
            faults: self.faults.clone(),
            spare: is_spare(path).then(|| path.to_path_buf()),
        }))
    }
    fn open_rw(&self, path: &Path) -> io::Result<Box<dyn FsFile>> {
        Ok(Box::new(FaultyFile {
            inner: self.real.open_rw(path)?,
            faults: self.faults.clone(),
            spare: None,
        }))
    }
    fn open_read(&self, path: &Path) -> io::Result<File> {
        if path.extension().is_some_and(|e| e == "snap") {
            if self.faults.snap_open_fails.load(Ordering::SeqCst) {
                return Err(io::Error::from_raw_os_error(libc::EACCES));
            }
            if self.faults.snap_read_fails.load(Ordering::SeqCst) {
                return File::open(path.parent().expect("a snapshot's directory"));
            }
        }
        self.real.open_read(path)
    }
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        let spare = is_spare(from);
        if spare && self.faults.fail_spare_rename.load(Ordering::SeqCst) {
            self.faults
                .spare_renames_failed
                .fetch_add(1, Ordering::SeqCst);
            return Err(io::Error::from_raw_os_error(libc::EIO));
        }
        self.real.rename(from, to)?;
        if spare {
            let mut renamed = self.faults.spares_renamed.lock().unwrap();
            renamed.push(from.to_path_buf());
        }
        Ok(())
    }
    fn remove(&self, path: &Path) -> io::Result<()> {
        if self.faults.wal_remove_fails.load(Ordering::SeqCst)
            && path.parent().is_some_and(|d| d.ends_with("wal"))
        {
            return Err(io::Error::from_raw_os_error(libc::EIO));
        }
        self.real.remove(path)?;
        let mut ops = self.faults.dir_ops.lock().unwrap();
        ops.push((false, path.to_path_buf()));
        Ok(())
    }
    fn create_dir_all(&self, path: &Path) -> io::Result<()> {
        self.real.create_dir_all(path)
    }
    fn sync_dir(&self, path: &Path) -> io::Result<()> {
        if self.faults.eio_sync.load(Ordering::SeqCst) {
            self.faults.syncs_failed.fetch_add(1, Ordering::SeqCst);
            return Err(io::Error::from_raw_os_error(libc::EIO));
        }
        self.real.sync_dir(path)?;
        let mut ops = self.faults.dir_ops.lock().unwrap();
        ops.push((true, path.to_path_buf()));
        Ok(())
    }
    fn list(&self, path: &Path) -> io::Result<Vec<PathBuf>> {
        self.real.list(path)
    }
}

fn faulty(dir: &Path, fsync: FsyncPolicy) -> (Store, Arc<Faults>) {
    let opts = StoreOptions {
        fsync,
        segment_size: 16 << 10,
        ..Default::default()
    };
    faulty_with(dir, opts)
}

/// A store in `dir` with `opts` on the faulty file system.
fn faulty_with(dir: &Path, opts: StoreOptions) -> (Store, Arc<Faults>) {
    let faults = Arc::new(Faults::default());
    let fs = Arc::new(FaultyFs {
        real: RealFs,
        faults: faults.clone(),
    });
    (Store::open_with_fs(dir, opts, fs).unwrap(), faults)
}

fn reopen(dir: &Path) -> Store {
    Store::open(dir, StoreOptions::default()).unwrap()
}

/// The store in `dir`, opened asking to salvage what can be.
fn open_salvaging(dir: &Path) -> Store {
    let opts = StoreOptions {
        salvage: true,
        ..Default::default()
    };
    Store::open(dir, opts).unwrap()
}

fn item(i: usize) -> Vec<u8> {
    format!("item-{i}").into_bytes()
}

/// Everything in `acked` must be present after reopening.
fn check_acked(dir: &Path, acked: &[usize]) {
    let s = reopen(dir);
    let items: Vec<Vec<u8>> = acked.iter().map(|&i| item(i)).collect();
    let refs: Vec<&[u8]> = items.iter().map(|v| v.as_slice()).collect();
    let present = s.contains(b"f", &refs).unwrap().unwrap();
    let lost = present.iter().filter(|p| !**p).count();
    assert_eq!(lost, 0, "{lost} acknowledged items lost");
}

#[test]
fn full_disk_fails_the_write_keeps_reads_and_recovers() {
    let dir = tempfile::tempdir().unwrap();
    let (s, faults) = faulty(dir.path(), FsyncPolicy::Always);
    s.create(b"f", &bloom()).unwrap();
    let mut acked = Vec::new();
    let mut failures = 0;
    for i in 0..3000 {
        if i == 500 {
            faults.enospc_allocate.store(true, Ordering::SeqCst);
        }
        if i == 2000 {
            faults.enospc_allocate.store(false, Ordering::SeqCst);
        }
        match s.add(b"f", &[&item(i)], None) {
            Ok(_) => {
                acked.push(i);
                assert!(!s.log_failed(), "the log says it failed after add {i}");
            }
            Err(e) => {
                assert!(
                    matches!(e.kind(), ErrorKind::Io { .. })
                        && e.to_string().contains("preallocate"),
                    "{e}"
                );
                assert!((500..2000).contains(&i), "failure at {i}");
                // What `INFO persistence` shows as `aof_last_write_status`.
                assert!(s.log_failed(), "the log says nothing failed at add {i}");
                failures += 1;
                // The store stays readable.
                assert!(s.contains(b"f", &[&item(0)]).unwrap().unwrap()[0]);
            }
        }
    }
    assert!(failures > 100, "the fault was hit ({failures})");
    assert!(acked.iter().any(|&i| i >= 2000), "writes resumed");
    drop(s);
    check_acked(dir.path(), &acked);
}

/// The same under `everysec`, where single-item adds to a fixed-size
/// Bloom filter are staged in the thread's ring and reach the log 256 at
/// a time (docs/FORMAT.md, section 6.5): once a ring cannot be copied
/// into the log, the add that needed the copy fails, and so does every
/// later one (the syncer's copies fail too) while the store stays
/// readable; writes resume when space returns, and nothing acknowledged
/// is lost.
#[test]
fn a_full_disk_under_staging_fails_adds_and_loses_none_acknowledged() {
    let dir = tempfile::tempdir().unwrap();
    let (s, faults) = faulty(dir.path(), FsyncPolicy::EverySec);
    let big = FilterSpec::Bloom {
        capacity: 1_000_000,
        error_rate: 0.001,
        layout: seen_core::Layout::Blocked,
    };
    s.create(b"f", &big).unwrap();
    let mut acked = Vec::new();
    for i in 0..100 {
        s.add(b"f", &[&item(i)], None).unwrap();
        acked.push(i);
    }
    faults.enospc_allocate.store(true, Ordering::SeqCst);
    let mut failed_at = None;
    for i in 100..200_000 {
        match s.add(b"f", &[&item(i)], None) {
            Ok(_) => acked.push(i),
            Err(e) => {
                assert!(e.to_string().contains("preallocate"), "{e}");
                failed_at = Some(i);
                break;
            }
        }
    }
    let failed_at = failed_at.expect("the disk filled and every add succeeded");
    // The syncer's next pass cannot copy the staged adds either; adds keep
    // failing while the disk is full, lookups go on.
    std::thread::sleep(std::time::Duration::from_millis(1500));
    for i in failed_at..failed_at + 300 {
        assert!(s.add(b"f", &[&item(i)], None).is_err(), "add {i}");
    }
    assert!(s.log_failed());
    assert!(s.contains(b"f", &[&item(0)]).unwrap().unwrap()[0]);
    faults.enospc_allocate.store(false, Ordering::SeqCst);
    // Space is back: the next add copies the ring first, and goes on.
    let resumed = failed_at + 1000;
    s.add(b"f", &[&item(resumed)], None).unwrap();
    acked.push(resumed);
    // The next pass that copies every ring (the syncer's, within a
    // second) says the log writes again.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while s.log_failed() {
        assert!(
            std::time::Instant::now() < deadline,
            "the log still says it fails"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let refs: Vec<Vec<u8>> = acked.iter().map(|&i| item(i)).collect();
    let refs: Vec<&[u8]> = refs.iter().map(|v| v.as_slice()).collect();
    assert!(s.contains(b"f", &refs).unwrap().unwrap().iter().all(|&p| p));
    drop(s);
    check_acked(dir.path(), &acked);
}

/// A thread that cannot have a ring (making its file fails) appends its
/// adds to the log's lanes, one record each, and loses none.
#[test]
fn without_a_ring_adds_go_to_the_lanes() {
    let dir = tempfile::tempdir().unwrap();
    let (s, faults) = faulty(dir.path(), FsyncPolicy::EverySec);
    s.create(b"f", &bloom()).unwrap();
    // Making a ring preallocates its file, which fails now; lane 0's
    // segment, made at open, has room for the adds.
    faults.enospc_allocate.store(true, Ordering::SeqCst);
    let acked: Vec<usize> = (0..50).collect();
    for &i in &acked {
        s.add(b"f", &[&item(i)], None).unwrap();
    }
    let rings = std::fs::read_dir(dir.path().join("rings")).unwrap().count();
    assert_eq!(rings, 0, "no ring was made");
    faults.enospc_allocate.store(false, Ordering::SeqCst);
    drop(s);
    let s = reopen(dir.path());
    let r = s.recovery();
    assert_eq!((r.adds, r.staged), (50, 0), "{r:?}");
    drop(s);
    check_acked(dir.path(), &acked);
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
    let segments: Vec<PathBuf> = std::fs::read_dir(s.wal_dir())
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
/// call it), and that checkpoint made everything durable. Before, every
/// lookup failed until the next write (found by review, session 25).
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
            // Under `always` the add fails; under `everysec` it is staged
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
            // fails is not tried again by every lookup (each rewrote
            // snapshots until the first failing sync): not within a second
            // of one that failed.
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

/// A roll whose spare segment cannot be renamed makes its segment the slow
/// way: nothing is lost, and no spare is left behind.
#[test]
fn a_failed_spare_rename_falls_back_to_a_new_segment() {
    let dir = tempfile::tempdir().unwrap();
    let (s, faults) = faulty(dir.path(), FsyncPolicy::EverySec);
    faults.fail_spare_rename.store(true, Ordering::SeqCst);
    s.create(b"f", &bloom()).unwrap();
    let mut acked = Vec::new();
    // 16 KiB segments: hundreds of rolls; the helper makes spares as the
    // segments fill (it runs at least every 100 ms).
    for i in 0..20_000 {
        s.add(b"f", &[&item(i)], None).unwrap();
        acked.push(i);
        if i % 2_000 == 0 {
            std::thread::sleep(std::time::Duration::from_millis(150));
        }
    }
    assert!(faults.spare_renames_failed.load(Ordering::SeqCst) > 0);
    drop(s);
    // The dropped log removes the spares it made (its helper may hold it
    // for a moment more).
    for _ in 0..100 {
        if spares(dir.path()).is_empty() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    assert!(spares(dir.path()).is_empty(), "{:?}", spares(dir.path()));
    check_acked(dir.path(), &acked);
}

#[test]
fn a_renamed_spare_is_synced_before_a_record_in_it_is_acknowledged() {
    // A spare is not synced when made (that waits behind whatever the
    // disk is writing): under `always`, the commit of the first add whose
    // record went into it must sync it, preallocation and all.
    let dir = tempfile::tempdir().unwrap();
    let (s, faults) = faulty(dir.path(), FsyncPolicy::Always);
    s.create(b"f", &bloom()).unwrap();
    let mut checked = 0;
    // 16 KiB segments of 32-byte records: a roll every 512 adds.
    for i in 0..3000 {
        s.add(b"f", &[&item(i)], None).unwrap();
        let renamed = faults.spares_renamed.lock().unwrap().clone();
        let synced = faults.spares_synced.lock().unwrap().clone();
        for spare in &renamed[checked..] {
            assert!(
                synced.contains(spare),
                "add {i} acknowledged in {spare:?}, not synced"
            );
        }
        checked = renamed.len();
    }
    assert!(checked >= 2, "{checked} spares used");
    drop(s);
    check_acked(dir.path(), &(0..3000).collect::<Vec<_>>());
}

/// Under `always` a segment's zeros are written and synced when it is made,
/// so that the syncs its writers wait for write no extent metadata; under
/// `everysec` its blocks are only reserved. Either way nothing is lost,
/// and a full disk during the zero fill is the full-disk test's error.
#[test]
fn segments_are_zero_filled_under_always_and_only_reserved_otherwise() {
    for policy in [FsyncPolicy::Always, FsyncPolicy::EverySec] {
        let dir = tempfile::tempdir().unwrap();
        let (s, faults) = faulty(dir.path(), policy);
        s.create(b"f", &bloom()).unwrap();
        // 16 KiB segments: under `always` a 32-byte record per add, a roll
        // every 512 adds; under `everysec` the adds are staged and logged
        // 256 to a 4 KiB record (16 bytes each), a roll every 1,000 or so.
        let n = if policy == FsyncPolicy::Always {
            3000
        } else {
            8000
        };
        for i in 0..n {
            s.add(b"f", &[&item(i)], None).unwrap();
        }
        let allocated = faults.allocated.load(Ordering::SeqCst);
        let zero_filled = faults.zero_filled.load(Ordering::SeqCst);
        // The first segment, and one for each of at least 5 rolls (made
        // ahead as spares, or by the roll).
        if policy == FsyncPolicy::Always {
            assert!(zero_filled >= 6, "{policy:?}: {zero_filled} zero-filled");
            assert_eq!(allocated, 0, "{policy:?}");
        } else {
            assert!(allocated >= 6, "{policy:?}: {allocated} allocated");
            assert_eq!(zero_filled, 0, "{policy:?}");
        }
        drop(s);
        check_acked(dir.path(), &(0..n).collect::<Vec<_>>());
    }
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
        // The first record of the remove (1 MiB of hashes) fits in a fresh
        // segment, the second does not.
        segment_size: (1 << 20) + (50 << 10),
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
    faults.fail_spare_rename.store(true, Ordering::SeqCst);
    faults.enospc_allocate.store(true, Ordering::SeqCst);
    let e = s.remove(b"f", &refs).unwrap_err();
    assert!(e.to_string().contains("No space"), "{e}");
    faults.enospc_allocate.store(false, Ordering::SeqCst);
    faults.fail_spare_rename.store(false, Ordering::SeqCst);
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

#[test]
fn short_snapshot_write_keeps_the_old_snapshot() {
    // A Bloom filter and a scalable chain are copied with their writers
    // going on; a counting filter in pieces, each under its lock: a failed
    // write must release any of them, mark the filter for the next
    // checkpoint, and leave the old snapshot.
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
        fail_a_checkpoint(dir.path(), s, &spec, &faults.short_write, acked);
    }
}

/// Adds items 100 to 199 to filter "f" of `s` (in `dir`; `acked` holds
/// those added so far), then has a checkpoint fail with `fault` on: the
/// error names a write, the filter is not left locked, no temp file is
/// left, and the old snapshot plus the log hold every item.
fn fail_a_checkpoint(
    dir: &Path,
    s: Store,
    spec: &FilterSpec,
    fault: &AtomicBool,
    mut acked: Vec<usize>,
) {
    for i in 100..200 {
        s.add(b"f", &[&item(i)], None).unwrap();
        acked.push(i);
    }
    fault.store(true, Ordering::SeqCst);
    let e = s.checkpoint().unwrap_err();
    assert!(e.to_string().contains("write"), "{spec:?}: {e}");
    fault.store(false, Ordering::SeqCst);
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

#[test]
fn a_snapshot_is_written_back_as_it_goes_and_a_failure_there_keeps_the_old_one() {
    // Filters of about 24 MiB: their snapshots start the writeback every
    // 8 MiB (so that a checkpoint's dirty pages never pile up), and an
    // error there fails the checkpoint like a failed write.
    let counting = FilterSpec::Counting {
        capacity: 4_000_000,
        error_rate: 0.01,
    };
    let big_bloom = FilterSpec::Bloom {
        capacity: 20_000_000,
        error_rate: 0.01,
        layout: seen_core::Layout::Blocked,
    };
    for spec in [big_bloom, counting] {
        let dir = tempfile::tempdir().unwrap();
        let (s, faults) = faulty(dir.path(), FsyncPolicy::Always);
        s.create(b"f", &spec).unwrap();
        let mut acked = Vec::new();
        for i in 0..100 {
            s.add(b"f", &[&item(i)], None).unwrap();
            acked.push(i);
        }
        s.checkpoint().unwrap();
        let calls = std::mem::take(&mut *faults.write_behinds.lock().unwrap());
        let snapshot = std::fs::read_dir(dir.path().join("snapshots"))
            .unwrap()
            .map(|e| e.unwrap().metadata().unwrap().len())
            .max()
            .unwrap();
        assert!(snapshot > 16 << 20, "{spec:?}: {snapshot} bytes");
        // A call per 8 MiB or so (written a MiB at a time at most), each
        // starting where the one before ended, none past the file's end.
        let n = calls.len() as u64;
        assert!(
            n >= snapshot / (9 << 20) && n <= snapshot / (8 << 20),
            "{spec:?}: {calls:?}"
        );
        let mut at = 0;
        for &(from, to) in &calls {
            assert_eq!(from, at, "{spec:?}: {calls:?}");
            assert!(
                (8 << 20..9 << 20).contains(&(to - from)),
                "{spec:?}: {calls:?}"
            );
            assert!(to <= snapshot, "{spec:?}: {calls:?}");
            at = to;
        }
        fail_a_checkpoint(dir.path(), s, &spec, &faults.eio_write_behind, acked);
    }
}

/// The log's segment files (not a lane's spare, made ahead).
fn segments(dir: &Path) -> impl Iterator<Item = PathBuf> {
    std::fs::read_dir(dir.join("wal"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "log"))
}

/// The log lanes' spare segments (`spare.<lane>.<n>.tmp`).
fn spares(dir: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(dir.join("wal"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.file_name()
                .unwrap()
                .to_str()
                .unwrap()
                .starts_with("spare.")
        })
        .collect()
}

fn newest_segment(dir: &Path) -> PathBuf {
    let mut v: Vec<PathBuf> = segments(dir).collect();
    v.sort();
    v.pop().unwrap()
}

/// The log segment with the most bytes of records.
fn fullest_segment(dir: &Path) -> PathBuf {
    segments(dir)
        .max_by_key(|p| end_of_records(&std::fs::read(p).unwrap()))
        .unwrap()
}

/// The lsns of every record in the log, lowest first.
fn log_lsns(dir: &Path) -> Vec<u64> {
    let mut lsns = Vec::new();
    for path in segments(dir) {
        let data = std::fs::read(path).unwrap();
        let end = end_of_records(&data);
        let mut off = 0;
        while off < end {
            lsns.push(u64::from_le_bytes(
                data[off + 8..off + 16].try_into().unwrap(),
            ));
            off += record_size(&data, off);
        }
    }
    lsns.sort();
    lsns
}

/// Zeroes every log record with an lsn above `lsn`, in every segment, as
/// a power loss that kept the log up to `lsn` would leave it; returns how
/// many it zeroed.
fn cut_log_after(dir: &Path, lsn: u64) -> usize {
    let mut zeroed = 0;
    for path in segments(dir) {
        let mut data = std::fs::read(&path).unwrap();
        let end = end_of_records(&data);
        let mut off = 0;
        let mut here = 0;
        while off < end {
            let used = record_size(&data, off);
            let rec_lsn = u64::from_le_bytes(data[off + 8..off + 16].try_into().unwrap());
            if rec_lsn > lsn {
                data[off..off + used].fill(0);
                here += 1;
            }
            off += used;
        }
        // A segment cut short has lost its end record too.
        if here > 0 && is_segment_end(&data, end) {
            data[end..end + 32].fill(0);
        }
        zeroed += here;
        std::fs::write(&path, &data).unwrap();
    }
    zeroed
}

/// Bytes of the record at `off` of a segment, 0 at the end of its records
/// (docs/FORMAT.md, section 6.1): a short add of one hash is 32 bytes, a
/// long record 8 more than its length, padded to 8.
fn record_size(data: &[u8], off: usize) -> usize {
    let word = u32::from_le_bytes(data[off..off + 4].try_into().unwrap()) as usize;
    match word {
        0 => 0,
        w if w & (1 << 31) != 0 => 32,
        len => (8 + len).next_multiple_of(8),
    }
}

/// Offset just past the last record of a segment (records are 8-aligned
/// and start with a non-zero word), before the segment-end record a roll
/// writes after them, if any.
fn end_of_records(data: &[u8]) -> usize {
    let mut off = 0;
    while off + 8 <= data.len() && !is_segment_end(data, off) {
        match record_size(data, off) {
            0 => break,
            n => off += n,
        }
    }
    off
}

/// Whether the record at `off` is a segment-end record (type 8, 32 bytes
/// with its padding: docs/FORMAT.md, section 6.1).
fn is_segment_end(data: &[u8], off: usize) -> bool {
    data.len() >= off + 32
        && u32::from_le_bytes(data[off..off + 4].try_into().unwrap()) == 17
        && data[off + 16] == 8
}

/// A store in `dir` with filter `f` holding items 0 to 49, added one by
/// one, then closed.
fn add_fifty(dir: &Path, fsync: FsyncPolicy) {
    let s = Store::open(
        dir,
        StoreOptions {
            fsync,
            ..Default::default()
        },
    )
    .unwrap();
    s.create(b"f", &bloom()).unwrap();
    for i in 0..50 {
        s.add(b"f", &[&item(i)], None).unwrap();
    }
}

/// Offset of the last record of a segment (see [`end_of_records`]).
fn last_record(data: &[u8]) -> usize {
    let end = end_of_records(data);
    let mut off = 0;
    while off + record_size(data, off) < end {
        off += record_size(data, off);
    }
    off
}

/// A sync mark says how far the log was written when it was synced: on
/// the boot that wrote it too, no kill can have torn or zeroed anything
/// below it. So after `Store::sync` (which writes a fresh mark, under
/// `always` too) and a drop without a checkpoint, as a kill would leave
/// it, the log's last record zeroed (an end of the log cut off) or
/// damaged is corruption, named by file and offset, not a shorter log or
/// a torn tail. Until session 26 the mark was used only after a reboot,
/// and both opened without an error, the zeroed record's items lost
/// (found by the `store_dir` fuzz target).
#[test]
fn below_a_sync_mark_of_this_boot_the_end_of_the_log_cut_or_torn_is_corruption() {
    for fsync in [FsyncPolicy::Always, FsyncPolicy::EverySec] {
        for zero in [true, false] {
            let dir = tempfile::tempdir().unwrap();
            let opts = StoreOptions {
                fsync,
                ..Default::default()
            };
            {
                let s = Store::open(dir.path(), opts.clone()).unwrap();
                s.create(b"f", &bloom()).unwrap();
                for i in 0..50 {
                    s.add(b"f", &[&item(i)], None).unwrap();
                }
                s.sync().unwrap();
            }
            let seg = fullest_segment(dir.path());
            let mut data = std::fs::read(&seg).unwrap();
            let (last, end) = (last_record(&data), end_of_records(&data));
            assert!(last > 0 && end > last);
            if zero {
                data[last..end].fill(0);
            } else {
                data[last + 20] ^= 1;
            }
            std::fs::write(&seg, &data).unwrap();
            let e = Store::open(dir.path(), opts.clone()).unwrap_err();
            match e.kind() {
                ErrorKind::Corrupt { path, offset, .. } => {
                    assert_eq!((path, *offset), (&seg, last as u64), "{e}")
                }
                _ => panic!("{fsync:?}, zeroed {zero}: not corruption: {e}"),
            }
            // Salvage opens it, with what the damaged record did not hold.
            let s = open_salvaging(dir.path());
            assert!(s.contains(b"f", &[&item(0)]).unwrap().is_some());
        }
    }
}

#[test]
fn torn_tail_is_truncated_and_everything_before_it_kept() {
    // A crash in the middle of writing a record after the last good one:
    // a long record's length and part of its bytes, or the first 20 bytes
    // of a short one (an add of one hash, 32 bytes; here the last record's
    // with the next lsn).
    for short in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        add_fifty(dir.path(), FsyncPolicy::Always);
        let seg = newest_segment(dir.path());
        let mut data = std::fs::read(&seg).unwrap();
        let end = end_of_records(&data);
        assert!(end > 0);
        if short {
            let last = end - 32;
            assert_eq!(record_size(&data, last), 32, "the last record is short");
            let lsn = u64::from_le_bytes(data[last + 8..last + 16].try_into().unwrap());
            data.copy_within(last..last + 8, end);
            data[end + 8..end + 16].copy_from_slice(&(lsn + 1).to_le_bytes());
            data[end + 16..end + 20].copy_from_slice(&[0xab; 4]);
        } else {
            data[end..end + 4].copy_from_slice(&40u32.to_le_bytes());
            data[end + 4..end + 20].copy_from_slice(&[0xab; 16]);
        }
        std::fs::write(&seg, &data).unwrap();
        check_acked(dir.path(), &(0..50).collect::<Vec<_>>());
        let data = std::fs::read(&seg).unwrap();
        assert_eq!(end_of_records(&data), end, "the torn bytes were zeroed");
        assert!(data[end..end + 20].iter().all(|&b| b == 0));
        // And it opens cleanly again after that.
        check_acked(dir.path(), &(0..50).collect::<Vec<_>>());
    }
}

/// A store in `dir` with filter `f` holding items 0 to 799, added 16 at
/// a time under `always` into 4 KiB segments (one lane; each add one
/// record of 288 bytes, 14 to a segment), then closed. Returns the
/// segments in their order and the lsn of each add's record.
fn add_over_segments(dir: &Path) -> (Vec<PathBuf>, Vec<u64>) {
    {
        let s = Store::open(
            dir,
            StoreOptions {
                fsync: FsyncPolicy::Always,
                segment_size: 4 << 10,
                ..Default::default()
            },
        )
        .unwrap();
        s.create(b"f", &bloom()).unwrap();
        for batch in 0..50 {
            let items: Vec<Vec<u8>> = (16 * batch..16 * batch + 16).map(item).collect();
            let refs: Vec<&[u8]> = items.iter().map(|v| v.as_slice()).collect();
            s.add(b"f", &refs, None).unwrap();
        }
    }
    let mut segs: Vec<PathBuf> = segments(dir).collect();
    segs.sort();
    // The create's record, then one per add, in order (one writer).
    let lsns = log_lsns(dir)[1..].to_vec();
    assert_eq!(lsns.len(), 50);
    (segs, lsns)
}

/// The items whose add records have lsns below `lsn`.
fn items_below(lsns: &[u64], lsn: u64) -> Vec<usize> {
    (0..800).filter(|&i| lsns[i / 16] < lsn).collect()
}

/// In the first segment that a segment with records follows, the last
/// record that crosses a 512-byte sector boundary, cut as a power loss
/// during the sync writing it would leave it: its sectors before the last
/// boundary it crosses written, nothing of the segment after. Returns the
/// segment, the record's offset and its lsn.
fn cut_a_record_ending_a_followed_segment(segs: &[PathBuf]) -> (PathBuf, usize, u64) {
    let seg = segs
        .windows(2)
        .find(|w| end_of_records(&std::fs::read(&w[1]).unwrap()) > 0)
        .map(|w| w[0].clone())
        .expect("a segment followed by one with records");
    let mut data = std::fs::read(&seg).unwrap();
    let end = end_of_records(&data);
    let (mut off, mut cut) = (0, None);
    while off < end {
        let size = record_size(&data, off);
        let last_boundary = (off + size - 1) / 512 * 512;
        if last_boundary > off {
            cut = Some((off, last_boundary));
        }
        off += size;
    }
    let (off, boundary) = cut.expect("a record across a sector boundary");
    let lsn = u64::from_le_bytes(data[off + 8..off + 16].try_into().unwrap());
    data[boundary..].fill(0);
    std::fs::write(&seg, &data).unwrap();
    (seg, off, lsn)
}

#[test]
fn torn_end_of_a_segment_that_a_roll_followed_is_a_torn_tail() {
    // Power loss during the sync that wrote a segment's last pages, after a
    // roll had begun the next segment: the sync never finished, so no
    // record from the cut one on was acknowledged (under `always`), and
    // the later segment kept none of its records, only the first bytes of
    // one. The open keeps every record before the cut one, zeroes it and
    // the later segment's bytes, and opens cleanly again after more adds.
    let dir = tempfile::tempdir().unwrap();
    let (segs, lsns) = add_over_segments(dir.path());
    assert!(segs.len() >= 3, "{segs:?}");
    let (seg, off, torn) = cut_a_record_ending_a_followed_segment(&segs);
    assert!(cut_log_after(dir.path(), torn) > 0);
    let next = &segs[segs.iter().position(|p| *p == seg).unwrap() + 1];
    let mut data = std::fs::read(next).unwrap();
    data[..4].copy_from_slice(&300u32.to_le_bytes());
    data[4..100].fill(0xab);
    std::fs::write(next, &data).unwrap();
    let kept = items_below(&lsns, torn);
    assert!(kept.len() >= 100, "{}", kept.len());
    check_acked(dir.path(), &kept);
    let data = std::fs::read(&seg).unwrap();
    assert_eq!(end_of_records(&data), off, "the torn bytes were zeroed");
    let data = std::fs::read(next).unwrap();
    assert!(data.iter().all(|&b| b == 0), "the later segment was zeroed");
    // And it opens cleanly again, with later records in a new segment.
    {
        let s = reopen(dir.path());
        s.add(b"f", &[&item(1000)], None).unwrap();
    }
    let mut kept = kept;
    kept.push(1000);
    check_acked(dir.path(), &kept);
}

#[test]
fn bad_end_of_a_segment_that_no_power_loss_explains_stops_the_open() {
    // The same cut with the later segment's records still there: those
    // were written after it, so it is no tail of a crash but corruption.
    // And a flipped byte in a segment's last record, with nothing after
    // it: a power loss cuts records at sector boundaries, it does not
    // change their bytes, so that is corruption too.
    for flip in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let (segs, _) = add_over_segments(dir.path());
        let (seg, off, lsn) = if flip {
            let seg = segs[segs.len() - 2].clone();
            let mut data = std::fs::read(&seg).unwrap();
            let end = end_of_records(&data);
            let mut off = 0;
            while off + record_size(&data, off) < end {
                off += record_size(&data, off);
            }
            data[off + 40] ^= 0x10;
            std::fs::write(&seg, &data).unwrap();
            let lsn = u64::from_le_bytes(data[off + 8..off + 16].try_into().unwrap());
            (seg, off, lsn)
        } else {
            cut_a_record_ending_a_followed_segment(&segs)
        };
        if flip {
            assert!(cut_log_after(dir.path(), lsn) > 0);
        }
        let e = Store::open(dir.path(), StoreOptions::default()).unwrap_err();
        match e.kind() {
            ErrorKind::Corrupt { path, offset, .. } => {
                assert_eq!(path, &seg);
                assert_eq!(*offset, off as u64);
            }
            other => panic!("flip {flip}: expected corruption, got {other}"),
        }
        // Salvage skips the damaged record and keeps the rest of the log.
        let s = open_salvaging(dir.path());
        assert!(s.contains(b"f", &[&item(0)]).unwrap().unwrap()[0]);
    }
}

/// The snapshots of `dir`, in order.
fn snap_files(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir.join("snapshots"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "snap"))
        .collect();
    v.sort();
    v
}

/// What a power loss that keeps a later filter (its create, or its
/// snapshot) but not the delete of an earlier one of the same name leaves:
/// here filter "f" holding item 1, deleted, and a second "f" holding item
/// 2, then the first one's snapshot put back. Returns its path.
fn two_filters_of_one_name(dir: &Path) -> PathBuf {
    let older = {
        let s = reopen(dir);
        s.create(b"f", &bloom()).unwrap();
        s.add(b"f", &[&item(1)], None).unwrap();
        s.checkpoint().unwrap();
        let older = snap_files(dir);
        assert_eq!(older.len(), 1);
        let kept = (older[0].clone(), std::fs::read(&older[0]).unwrap());
        assert!(s.delete(b"f").unwrap());
        s.create(b"f", &bloom()).unwrap();
        s.add(b"f", &[&item(2)], None).unwrap();
        s.close().unwrap();
        kept
    };
    assert!(!older.0.exists(), "the checkpoint removed the deleted one");
    std::fs::write(&older.0, &older.1).unwrap();
    older.0
}

#[test]
fn two_filters_of_one_name_keep_the_later_for_good() {
    // Every open must take the later, and the next checkpoint must remove
    // the older, or a later open could bring it back over what the later
    // one holds.
    let dir = tempfile::tempdir().unwrap();
    let older = two_filters_of_one_name(dir.path());
    for _ in 0..3 {
        let s = reopen(dir.path());
        assert_eq!(
            s.contains(b"f", &[&item(1), &item(2)]).unwrap().unwrap(),
            vec![false, true]
        );
    }
    {
        let s = reopen(dir.path());
        s.add(b"f", &[&item(3)], None).unwrap();
        s.checkpoint().unwrap();
    }
    assert!(!older.exists(), "the next checkpoint removed the older one");
    assert_eq!(snap_files(dir.path()).len(), 1);
    let s = reopen(dir.path());
    assert_eq!(
        s.contains(b"f", &[&item(1), &item(2), &item(3)])
            .unwrap()
            .unwrap(),
        vec![false, true, true]
    );
}

/// The later of two filters of one name deleted (or expired) in its turn,
/// and the process killed before a checkpoint: the earlier one stays
/// deleted (it came back, holding item 1, when the open that chose the
/// later one did not log the earlier one's delete again; found by review,
/// session 25).
#[test]
fn the_later_of_two_filters_of_one_name_deleted_does_not_bring_the_earlier_back() {
    for expire in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        two_filters_of_one_name(dir.path());
        {
            let s = reopen(dir.path());
            if expire {
                let past = std::time::SystemTime::now() - std::time::Duration::from_secs(1);
                assert!(s.expire_at(b"f", Some(past)).unwrap());
            } else {
                assert!(s.delete(b"f").unwrap());
            }
            assert_eq!(s.contains(b"f", &[&item(1)]).unwrap(), None);
            s.sync().unwrap();
            // Dropped without a checkpoint, as by a kill.
        }
        let s = reopen(dir.path());
        assert_eq!(
            s.contains(b"f", &[&item(1), &item(2)]).unwrap(),
            None,
            "expire {expire}: the earlier filter came back"
        );
    }
}

#[test]
fn flipped_byte_in_the_middle_of_the_log_stops_the_open() {
    let dir = tempfile::tempdir().unwrap();
    // Under `always`: a record per add (no add is staged).
    add_fifty(dir.path(), FsyncPolicy::Always);
    // The segment holding most of the records (a writer may move to
    // another lane for an add or two), damaged in the middle: records
    // follow the damage, so it is no torn tail.
    let seg = fullest_segment(dir.path());
    let mut data = std::fs::read(&seg).unwrap();
    let end = end_of_records(&data);
    assert!(end >= 10 * 32, "{end}");
    data[end / 2] ^= 0x10;
    std::fs::write(&seg, &data).unwrap();
    let e = Store::open(dir.path(), StoreOptions::default()).unwrap_err();
    match e.kind() {
        ErrorKind::Corrupt { path, offset, .. } => {
            assert_eq!(path, &seg);
            assert!(*offset <= (end / 2) as u64, "{offset}");
        }
        other => panic!("expected corruption, got {other}"),
    }
    assert!(e.to_string().contains(seg.to_str().unwrap()), "{e}");
    // Asked to salvage, it opens with what precedes the damage.
    let s = open_salvaging(dir.path());
    assert!(s.contains(b"f", &[&item(0)]).unwrap().unwrap()[0]);
}

#[test]
fn flipped_byte_in_a_snapshot_stops_the_open() {
    let dir = tempfile::tempdir().unwrap();
    {
        let s = Store::open(dir.path(), StoreOptions::default()).unwrap();
        s.create(b"f", &bloom()).unwrap();
        s.add(b"f", &[&item(1)], None).unwrap();
        s.close().unwrap();
    }
    let snap = std::fs::read_dir(dir.path().join("snapshots"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let mut data = std::fs::read(&snap).unwrap();
    let mid = data.len() / 2;
    data[mid] ^= 1;
    std::fs::write(&snap, &data).unwrap();
    let e = Store::open(dir.path(), StoreOptions::default()).unwrap_err();
    assert!(matches!(e.kind(), ErrorKind::Corrupt { .. }), "{e}");
    assert!(e.to_string().contains(snap.to_str().unwrap()), "{e}");
    assert!(e.to_string().contains("checksum"), "{e}");
}

#[test]
fn a_log_cut_before_a_copys_count_point_keeps_later_counts() {
    // A snapshot copied while adds went on says "count 150 once replay has
    // passed lsn C"; power loss then cuts the log before C. Adds after the
    // reopen must not get lsns up to C (a later replay would set the count
    // of 150 over theirs): the reopen hands out lsns above C.
    let dir = tempfile::tempdir().unwrap();
    // Under `always`: a record per add (no add is staged).
    let opts = StoreOptions {
        fsync: FsyncPolicy::Always,
        segment_size: 1 << 20,
        ..Default::default()
    };
    let count = |s: &Store| {
        s.with_filter(b"f", |f| match f {
            seen_core::AnyFilter::Bloom(b) => b.len(),
            _ => unreachable!(),
        })
        .unwrap()
        .unwrap()
    };
    {
        let s = Store::open(dir.path(), opts.clone()).unwrap();
        s.create(b"f", &bloom()).unwrap();
        for i in 0..100 {
            s.add(b"f", &[&item(i)], None).unwrap();
        }
        s.checkpoint().unwrap();
        for i in 100..150 {
            s.add(b"f", &[&item(i)], None).unwrap();
        }
    }
    // As if the 50 later adds had run during the copy: count lsn at the
    // last of them, count 150.
    let snap = std::fs::read_dir(dir.path().join("snapshots"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|e| e == "snap"))
        .unwrap();
    let mut bytes = std::fs::read(&snap).unwrap();
    let lsn = u64::from_le_bytes(bytes[24..32].try_into().unwrap());
    // The 50 later records' lsns (lanes take lsns in blocks, and a writer
    // may move to another lane: they need not follow each other).
    let later: Vec<u64> = log_lsns(dir.path())
        .into_iter()
        .filter(|&l| l > lsn)
        .collect();
    assert_eq!(later.len(), 50);
    // The trailer (docs/FORMAT.md, section 6.2): count lsn, count, no
    // pieces, CRC.
    let n = bytes.len();
    let mut trailer = Vec::new();
    trailer.extend_from_slice(&later[49].to_le_bytes());
    trailer.extend_from_slice(&150u64.to_le_bytes());
    trailer.extend_from_slice(&[0; 16]);
    let crc = crc32fast::hash(&trailer);
    trailer.extend_from_slice(&crc.to_le_bytes());
    bytes[n - 36..].copy_from_slice(&trailer);
    std::fs::write(&snap, &bytes).unwrap();
    // Power loss keeps only the first 20 of the 50 records (in whichever
    // lanes they went to).
    assert_eq!(cut_log_after(dir.path(), later[19]), 30);
    {
        let s = Store::open(dir.path(), opts.clone()).unwrap();
        assert_eq!(count(&s), 150);
        for i in 0..100 {
            assert_eq!(s.contains(b"f", &[&item(i)]).unwrap(), Some(vec![true]));
        }
        // The 20 records kept hold 20 of the later items (which ones
        // depends on the lanes their adds went to); the 30 cut are gone,
        // but for a false positive or two.
        let kept = (100..150)
            .filter(|&i| s.contains(b"f", &[&item(i)]).unwrap() == Some(vec![true]))
            .count();
        assert!((20..=25).contains(&kept), "{kept}");
        for i in 1000..1010 {
            assert!(s.add(b"f", &[&item(i)], None).unwrap().new[0]);
        }
        assert_eq!(count(&s), 160);
        // Dropped without a checkpoint: the ten adds are only in the log.
    }
    let s = Store::open(dir.path(), opts).unwrap();
    assert_eq!(count(&s), 160);
    for i in 1000..1010 {
        assert_eq!(s.contains(b"f", &[&item(i)]).unwrap(), Some(vec![true]));
    }
}

/// `close` on one clone of a store used to stop the log's syncer and page
/// helper for all of them, and the other clones went on acknowledging adds
/// under `everysec` that no sync would ever cover. Now the threads run
/// until the last clone is dropped.
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
/// acknowledged, and once the disk answers again the adds go on. Before
/// the bound (2026-11-27) adds went on throughout, and with 50 writers
/// keeping both cores of the project's VM busy, records waited up to 3.5 s
/// for a sync.
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
/// power loss: one whose sync had failed (retired by the checkpoint that
/// follows the poisoning) would come back damaged, below the sync mark
/// that later syncs write, and stop the open.
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
        let wal = s.wal_dir().to_path_buf();
        let last_removed = ops
            .iter()
            .rposition(|(sync, p)| !sync && p.extension().is_some_and(|e| e == "log"))
            .unwrap_or_else(|| panic!("{fsync:?}: no segment retired: {ops:?}"));
        assert!(
            ops[last_removed..]
                .iter()
                .any(|(sync, p)| *sync && *p == wal),
            "{fsync:?}: no sync of {} after the last removal: {ops:?}",
            wal.display()
        );
    }
}

/// A salvaging open leaves a directory that opens without salvage, with
/// what the salvage kept: it ends with a checkpoint, which retires the
/// damaged log, and it puts a damaged snapshot aside
/// (`<id>.snap.damaged`, kept for a look). Until 2026-11-28 the damage
/// stayed in place until a checkpoint, and every open before one needed
/// salvage again.
#[test]
fn after_a_salvaging_open_the_directory_opens_without_salvage() {
    let items: Vec<Vec<u8>> = (0..50).map(item).collect();
    let refs: Vec<&[u8]> = items.iter().map(|v| v.as_slice()).collect();
    // A flipped byte in the log's last record, below the sync mark (under
    // `always`: a record for each add).
    let dir = tempfile::tempdir().unwrap();
    {
        let always = StoreOptions {
            fsync: FsyncPolicy::Always,
            ..Default::default()
        };
        let s = Store::open(dir.path(), always).unwrap();
        s.create(b"f", &bloom()).unwrap();
        for it in &refs {
            s.add(b"f", &[it], None).unwrap();
        }
        s.sync().unwrap();
    }
    let seg = fullest_segment(dir.path());
    let mut data = std::fs::read(&seg).unwrap();
    let last = last_record(&data);
    data[last + 20] ^= 1;
    std::fs::write(&seg, &data).unwrap();
    assert!(Store::open(dir.path(), StoreOptions::default()).is_err());
    let salvaged = open_salvaging(dir.path());
    assert_eq!(salvaged.recovery().salvaged, 1);
    let kept = salvaged.contains(b"f", &refs).unwrap().unwrap();
    drop(salvaged);
    assert_eq!(kept.iter().filter(|&&k| k).count(), 49, "{kept:?}");
    let s = Store::open(dir.path(), StoreOptions::default()).unwrap();
    assert_eq!(s.contains(b"f", &refs).unwrap().unwrap(), kept);
    drop(s);

    // A flipped byte in the middle of the first of several segments:
    // salvage skips the rest of that lane, segments and all.
    let dir = tempfile::tempdir().unwrap();
    let many: Vec<Vec<u8>> = (0..5000).map(item).collect();
    {
        let always = StoreOptions {
            fsync: FsyncPolicy::Always,
            segment_size: 64 << 10,
            ..Default::default()
        };
        let s = Store::open(dir.path(), always).unwrap();
        s.create(b"f", &bloom()).unwrap();
        for it in &many {
            s.add(b"f", &[it], None).unwrap();
        }
        s.sync().unwrap();
    }
    let mut segs: Vec<PathBuf> = std::fs::read_dir(dir.path().join("wal"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "log"))
        .collect();
    segs.sort();
    assert!(segs.len() >= 3, "{segs:?}");
    let mut data = std::fs::read(&segs[0]).unwrap();
    let mid = end_of_records(&data) / 2;
    data[mid + 20] ^= 0x10;
    std::fs::write(&segs[0], &data).unwrap();
    assert!(Store::open(dir.path(), StoreOptions::default()).is_err());
    let refs_many: Vec<&[u8]> = many.iter().map(|v| v.as_slice()).collect();
    let salvaged = open_salvaging(dir.path());
    assert!(salvaged.recovery().salvaged >= 1);
    let kept = salvaged.contains(b"f", &refs_many).unwrap().unwrap();
    drop(salvaged);
    let n = kept.iter().filter(|&&k| k).count();
    assert!(n > 0 && n < 4000, "salvage kept {n}");
    let s = Store::open(dir.path(), StoreOptions::default()).unwrap();
    assert_eq!(s.contains(b"f", &refs_many).unwrap().unwrap(), kept);
    drop(s);

    // A flipped byte in a snapshot: its filter is lost, the other kept.
    let dir = tempfile::tempdir().unwrap();
    let (snaps, data) = two_snapshots_second_damaged(dir.path(), &refs);
    assert!(Store::open(dir.path(), StoreOptions::default()).is_err());
    assert_eq!(open_salvaging(dir.path()).recovery().salvaged, 1);
    let s = Store::open(dir.path(), StoreOptions::default()).unwrap();
    assert_eq!(s.names(), [b"f".to_vec()]);
    assert!(s.contains(b"f", &refs).unwrap().unwrap().iter().all(|&k| k));
    let mut aside = snaps[1].clone().into_os_string();
    aside.push(".damaged");
    assert_eq!(
        std::fs::read(&aside).unwrap(),
        data,
        "the damaged snapshot is kept aside"
    );
}

/// Filters `f` and `g` holding `refs`, checkpointed, then a byte in the
/// middle of `g`'s snapshot (the second: `g` has the higher id) flipped.
/// Returns both snapshots' paths and `g`'s damaged bytes.
fn two_snapshots_second_damaged(dir: &Path, refs: &[&[u8]]) -> (Vec<PathBuf>, Vec<u8>) {
    {
        let s = Store::open(dir, StoreOptions::default()).unwrap();
        for name in [b"f", b"g"] {
            s.create(name, &bloom()).unwrap();
            s.add(name, refs, None).unwrap();
        }
        s.checkpoint().unwrap();
    }
    let snaps = snap_files(dir);
    assert_eq!(snaps.len(), 2);
    let damaged = flip_middle(&snaps[1]);
    (snaps, damaged)
}

/// Flips a bit of the byte in the middle of file `path`: its new bytes.
fn flip_middle(path: &Path) -> Vec<u8> {
    let mut data = std::fs::read(path).unwrap();
    let mid = data.len() / 2;
    data[mid] ^= 1;
    std::fs::write(path, &data).unwrap();
    data
}

/// A salvaging open that finds nothing damaged changes nothing: no
/// checkpoint (a server may be started with salvage every time; until
/// 2026-11-29 each such start wrote every filter), nothing skipped.
#[test]
fn a_salvaging_open_that_finds_no_damage_writes_no_checkpoint() {
    let dir = tempfile::tempdir().unwrap();
    let items: Vec<Vec<u8>> = (0..100).map(item).collect();
    let refs: Vec<&[u8]> = items.iter().map(|v| v.as_slice()).collect();
    {
        let s = Store::open(dir.path(), StoreOptions::default()).unwrap();
        s.create(b"f", &bloom()).unwrap();
        s.add(b"f", &refs, None).unwrap();
    }
    let logged: Vec<PathBuf> = segments(dir.path()).collect();
    let s = open_salvaging(dir.path());
    assert_eq!(s.recovery().salvaged, 0);
    assert!(s.contains(b"f", &refs).unwrap().unwrap().iter().all(|&k| k));
    assert!(
        snap_files(dir.path()).is_empty(),
        "a checkpoint was written"
    );
    let now: Vec<PathBuf> = segments(dir.path()).collect();
    assert!(
        logged.iter().all(|f| now.contains(f)),
        "the log was retired: {logged:?}, now {now:?}"
    );
    drop(s);
    let s = reopen(dir.path());
    assert!(s.contains(b"f", &refs).unwrap().unwrap().iter().all(|&k| k));
}

/// A snapshot put aside keeps its id from new filters, and one of the same
/// id put aside later does not overwrite it.
#[test]
fn a_snapshot_put_aside_keeps_its_id_and_is_not_overwritten() {
    let dir = tempfile::tempdir().unwrap();
    let items: Vec<Vec<u8>> = (0..50).map(item).collect();
    let refs: Vec<&[u8]> = items.iter().map(|v| v.as_slice()).collect();
    // `g`, the newest filter, damaged: its id is the highest.
    let (snaps, damaged) = two_snapshots_second_damaged(dir.path(), &refs);
    let mut aside = snaps[1].clone().into_os_string();
    aside.push(".damaged");
    let aside = PathBuf::from(aside);
    // A filter made later takes a new id, not the one put aside: in the
    // salvaging open that put it aside, and after a later open (which
    // reads it from the name).
    for (name, salvaging) in [(b"h", true), (b"i", false)] {
        let s = if salvaging {
            open_salvaging(dir.path())
        } else {
            reopen(dir.path())
        };
        assert_eq!(s.recovery().salvaged, u64::from(salvaging));
        s.create(name, &bloom()).unwrap();
        s.add(name, &refs, None).unwrap();
        s.checkpoint().unwrap();
        drop(s);
        assert!(std::fs::read(&aside).unwrap() == damaged, "not put aside");
        let now = snap_files(dir.path());
        assert_eq!(now[0], snaps[0]);
        assert!(
            now[1..].iter().all(|p| *p > snaps[1]),
            "a new filter took the id put aside: {now:?}"
        );
    }
    // The same id damaged again (here: `f`'s, with a file of its id put
    // aside by hand): the second goes beside the first.
    let mut first = snaps[0].clone().into_os_string();
    first.push(".damaged");
    std::fs::write(&first, b"put aside before").unwrap();
    let again = flip_middle(&snaps[0]);
    let s = open_salvaging(dir.path());
    assert_eq!(s.recovery().salvaged, 1);
    let mut names = s.names();
    names.sort();
    assert_eq!(names, [b"h".to_vec(), b"i".to_vec()]);
    drop(s);
    assert_eq!(
        std::fs::read(&first).unwrap(),
        b"put aside before",
        "overwritten"
    );
    first.push(".1");
    assert!(std::fs::read(&first).unwrap() == again, "not put aside");
    assert!(std::fs::read(&aside).unwrap() == damaged, "changed");
}

/// The ids in snapshot file names are not checked as records are: a junk
/// name at the top of the range, put aside or found damaged, reserves
/// nothing, and the next filter still gets a valid id (one of
/// `ffffffffffffffff` wrapped the next id round to 0, onto a live
/// filter's, in a review of the first version).
#[test]
fn junk_ids_in_snapshot_names_leave_the_next_id_in_range() {
    let dir = tempfile::tempdir().unwrap();
    let items: Vec<Vec<u8>> = (0..50).map(item).collect();
    let refs: Vec<&[u8]> = items.iter().map(|v| v.as_slice()).collect();
    {
        let s = reopen(dir.path());
        s.create(b"f", &bloom()).unwrap();
        s.add(b"f", &refs[..25], None).unwrap();
        s.checkpoint().unwrap();
    }
    let snaps = dir.path().join("snapshots");
    for junk in [
        "3fffffffffffffff.snap.damaged",
        "4000000000000000.snap",
        "ffffffffffffffff.snap",
    ] {
        std::fs::write(snaps.join(junk), b"not a snapshot").unwrap();
    }
    let s = open_salvaging(dir.path());
    assert_eq!(s.recovery().salvaged, 2);
    s.create(b"g", &bloom()).unwrap();
    s.add(b"g", &refs, None).unwrap();
    s.add(b"f", &refs[25..], None).unwrap();
    drop(s);
    // Replayed from the log, then from a snapshot.
    for _ in 0..2 {
        let s = reopen(dir.path());
        for name in [b"f", b"g"] {
            let found = s.contains(name, &refs).unwrap().unwrap();
            assert!(found.iter().all(|&k| k), "items of {name:?} lost");
        }
        s.checkpoint().unwrap();
    }
}

/// A directory whose one filter, `f`, has `items()`'s first 50 in a
/// snapshot and the other 50 in the log only: the snapshot's path and
/// bytes.
fn snapshot_and_logged_adds(dir: &Path) -> (PathBuf, Vec<u8>) {
    let items: Vec<Vec<u8>> = (0..100).map(item).collect();
    let refs: Vec<&[u8]> = items.iter().map(|v| v.as_slice()).collect();
    let s = Store::open(dir, StoreOptions::default()).unwrap();
    s.create(b"f", &bloom()).unwrap();
    s.add(b"f", &refs[..50], None).unwrap();
    s.checkpoint().unwrap();
    s.add(b"f", &refs[50..], None).unwrap();
    drop(s);
    let snaps = snap_files(dir);
    assert_eq!(snaps.len(), 1);
    let bytes = std::fs::read(&snaps[0]).unwrap();
    (snaps[0].clone(), bytes)
}

/// `snap` holds `bytes` still, nothing was moved aside, and an open
/// without salvage finds all 100 items of `f`, logged ones too.
fn assert_kept_whole(dir: &Path, snap: &Path, bytes: &[u8], why: &str) {
    assert_eq!(
        std::fs::read(snap).unwrap(),
        bytes,
        "{why}: snapshot changed"
    );
    let files: Vec<PathBuf> = std::fs::read_dir(dir.join("snapshots"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(files, [snap], "{why}: something was moved aside");
    let items: Vec<Vec<u8>> = (0..100).map(item).collect();
    let refs: Vec<&[u8]> = items.iter().map(|v| v.as_slice()).collect();
    let s = Store::open(dir, StoreOptions::default()).unwrap();
    let found = s.contains(b"f", &refs).unwrap().unwrap();
    assert!(found.iter().all(|&k| k), "{why}: items lost");
}

#[test]
fn a_salvaging_open_stops_on_a_snapshot_too_large_for_its_limit_and_keeps_it() {
    // A sound snapshot whose filter is larger than `max_filter_bytes` is
    // not damage: salvage moved it aside until 2026-11-29, and its
    // closing checkpoint then retired the adds logged after it.
    let dir = tempfile::tempdir().unwrap();
    let (snap, before) = snapshot_and_logged_adds(dir.path());
    let small = StoreOptions {
        salvage: true,
        max_filter_bytes: 1000,
        ..Default::default()
    };
    let Err(e) = Store::open(dir.path(), small) else {
        panic!("the open succeeded");
    };
    match e.kind() {
        ErrorKind::CannotLoad { path, source } => {
            assert_eq!(path, &snap);
            assert!(
                matches!(
                    source.kind(),
                    seen_core::ErrorKind::TooLarge { limit: 1000, .. }
                ),
                "{source}"
            );
        }
        other => panic!("not CannotLoad: {other}"),
    }
    assert!(
        e.to_string().contains("more than the limit of 1000 bytes"),
        "{e}"
    );
    assert_kept_whole(dir.path(), &snap, &before, "too large");
}

#[test]
fn a_salvaging_open_stops_on_a_snapshot_it_cannot_open_or_read_and_keeps_it() {
    // An I/O error says nothing of the file's bytes: moved aside, a
    // sound snapshot would be lost with the adds logged after it.
    let dir = tempfile::tempdir().unwrap();
    let (snap, before) = snapshot_and_logged_adds(dir.path());
    for (open_fails, op, errno) in [(true, "open", libc::EACCES), (false, "read", libc::EISDIR)] {
        let faults = Arc::new(Faults::default());
        faults.snap_open_fails.store(open_fails, Ordering::SeqCst);
        faults.snap_read_fails.store(!open_fails, Ordering::SeqCst);
        let fs = Arc::new(FaultyFs {
            real: RealFs,
            faults,
        });
        let salvaging = StoreOptions {
            salvage: true,
            ..Default::default()
        };
        let Err(e) = Store::open_with_fs(dir.path(), salvaging, fs) else {
            panic!("the open succeeded ({op} failing)");
        };
        match e.kind() {
            ErrorKind::Io {
                op: failed,
                path,
                source,
            } => {
                assert_eq!((*failed, path), (op, &snap), "{e}");
                assert_eq!(source.raw_os_error(), Some(errno), "{e}");
            }
            other => panic!("not Io ({op} failing): {other}"),
        }
        assert_kept_whole(dir.path(), &snap, &before, op);
    }
}

/// A roll that fails and cannot remove the file it began. With no room
/// for a new segment, the file is a spare's (made as a spare is, then
/// renamed): nothing is left under a segment's name, and the next open
/// removes the spare. Where spares cannot be renamed, the roll makes its
/// segment under its own name, and one it cannot remove keeps its number
/// and is retired in its turn. Until 2026-11-29 the roll made its file
/// under the segment's name and left it out of the lane's list:
/// checkpoints retired the segments after it and not it, and the next
/// open failed on the gap in the lane's numbers (and, a review found,
/// after a power loss the reader took it for a segment that lost its end,
/// and dropped the records after it). Later rolls, checkpoints and opens
/// go on with every acknowledged add.
#[test]
fn a_failed_roll_that_cannot_remove_its_file_does_not_fail_later_opens() {
    for spares_made in [false, true] {
        failed_roll_that_cannot_remove_its_file(spares_made);
    }
}

/// With `spares_made` false there is no room for any file; with it true,
/// spares are made but cannot be renamed, and there is no room for a file
/// made under a segment's name. Removes in the log's directory fail.
fn failed_roll_that_cannot_remove_its_file(spares_made: bool) {
    let dir = tempfile::tempdir().unwrap();
    let opts = StoreOptions {
        fsync: FsyncPolicy::Always,
        segment_size: 16 << 10,
        ..Default::default()
    };
    let (s, faults) = faulty_with(dir.path(), opts);
    s.create(b"f", &bloom()).unwrap();
    let faulted = [
        &faults.wal_remove_fails,
        &faults.fail_spare_rename,
        if spares_made {
            &faults.enospc_allocate_segments
        } else {
            &faults.enospc_allocate
        },
    ];
    for f in faulted {
        f.store(true, Ordering::SeqCst);
    }
    let before: Vec<PathBuf> = segments(dir.path()).collect();
    let mut acked = Vec::new();
    let mut i = 0;
    let failed = loop {
        match s.add(b"f", &[&item(i)], None) {
            Ok(_) => acked.push(i),
            Err(e) => break e,
        }
        i += 1;
        assert!(i < 100_000, "no roll failed");
    };
    assert!(failed.to_string().contains("No space"), "{failed}");
    let left: Vec<PathBuf> = segments(dir.path())
        .filter(|p| !before.contains(p))
        .collect();
    if !spares_made {
        assert!(left.is_empty(), "left under a segment's name: {left:?}");
        assert!(
            !spares(dir.path()).is_empty(),
            "no spare left: the test's faults did not hold"
        );
    } else {
        assert_eq!(left.len(), 1, "the test's faults did not hold");
    }
    for f in faulted {
        f.store(false, Ordering::SeqCst);
    }
    // Rolls past it, and checkpoints that retire the segments around it.
    for _ in 0..3 {
        for _ in 0..1500 {
            i += 1;
            s.add(b"f", &[&item(i)], None).unwrap();
            acked.push(i);
        }
        s.checkpoint().unwrap();
    }
    // Retired in its turn, with the segments before it.
    assert!(left.iter().all(|p| !p.exists()), "{left:?} still there");
    for _ in 0..1500 {
        i += 1;
        s.add(b"f", &[&item(i)], None).unwrap();
        acked.push(i);
    }
    drop(s);
    check_acked(dir.path(), &acked);
    let stray = spares(dir.path());
    assert!(stray.is_empty(), "the open removes what is left: {stray:?}");
    // And the open left nothing that stops the next.
    check_acked(dir.path(), &acked);
}
