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
use seen_store::{ErrorKind, FsyncPolicy, Store, StoreOptions};

use crate::basics::bloom;

/// The real file system, with switches that make operations fail.
#[derive(Default)]
struct Faults {
    enospc_allocate: AtomicBool,
    eio_sync: AtomicBool,
    short_write: AtomicBool,
}

struct FaultyFs {
    real: RealFs,
    faults: Arc<Faults>,
}

struct FaultyFile {
    inner: Box<dyn FsFile>,
    faults: Arc<Faults>,
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
        if self.faults.eio_sync.load(Ordering::SeqCst) {
            return Err(io::Error::from_raw_os_error(libc::EIO));
        }
        self.inner.sync_data()
    }
    fn allocate(&self, len: u64) -> io::Result<()> {
        if self.faults.enospc_allocate.load(Ordering::SeqCst) {
            return Err(enospc());
        }
        self.inner.allocate(len)
    }
    fn std_file(&self) -> &File {
        self.inner.std_file()
    }
    fn try_clone(&self) -> io::Result<Box<dyn FsFile>> {
        Ok(Box::new(FaultyFile {
            inner: self.inner.try_clone()?,
            faults: self.faults.clone(),
        }))
    }
}

impl Fs for FaultyFs {
    fn create(&self, path: &Path) -> io::Result<Box<dyn FsFile>> {
        Ok(Box::new(FaultyFile {
            inner: self.real.create(path)?,
            faults: self.faults.clone(),
        }))
    }
    fn open_rw(&self, path: &Path) -> io::Result<Box<dyn FsFile>> {
        Ok(Box::new(FaultyFile {
            inner: self.real.open_rw(path)?,
            faults: self.faults.clone(),
        }))
    }
    fn open_read(&self, path: &Path) -> io::Result<File> {
        self.real.open_read(path)
    }
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        self.real.rename(from, to)
    }
    fn remove(&self, path: &Path) -> io::Result<()> {
        self.real.remove(path)
    }
    fn create_dir_all(&self, path: &Path) -> io::Result<()> {
        self.real.create_dir_all(path)
    }
    fn sync_dir(&self, path: &Path) -> io::Result<()> {
        if self.faults.eio_sync.load(Ordering::SeqCst) {
            return Err(io::Error::from_raw_os_error(libc::EIO));
        }
        self.real.sync_dir(path)
    }
    fn list(&self, path: &Path) -> io::Result<Vec<PathBuf>> {
        self.real.list(path)
    }
}

fn faulty(dir: &Path, fsync: FsyncPolicy) -> (Store, Arc<Faults>) {
    let faults = Arc::new(Faults::default());
    let fs = Arc::new(FaultyFs {
        real: RealFs,
        faults: faults.clone(),
    });
    let opts = StoreOptions {
        fsync,
        segment_size: 16 << 10,
        ..Default::default()
    };
    (Store::open_with_fs(dir, opts, fs).unwrap(), faults)
}

fn reopen(dir: &Path) -> Store {
    Store::open(dir, StoreOptions::default()).unwrap()
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
            Ok(_) => acked.push(i),
            Err(e) => {
                assert!(
                    matches!(e.kind(), ErrorKind::Io { .. })
                        && e.to_string().contains("preallocate"),
                    "{e}"
                );
                assert!((500..2000).contains(&i), "failure at {i}");
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

#[test]
fn failed_fsync_is_an_error_then_writes_resume_after_a_checkpoint() {
    let dir = tempfile::tempdir().unwrap();
    let (s, faults) = faulty(dir.path(), FsyncPolicy::Always);
    s.create(b"f", &bloom()).unwrap();
    let mut acked = Vec::new();
    for i in 0..100 {
        s.add(b"f", &[&item(i)], None).unwrap();
        acked.push(i);
    }
    faults.eio_sync.store(true, Ordering::SeqCst);
    let e = s.add(b"f", &[&item(100)], None).unwrap_err();
    assert!(e.to_string().contains("sync"), "{e}");
    // Still failing: the log is poisoned and the checkpoint cannot sync.
    assert!(s.add(b"f", &[&item(101)], None).is_err());
    faults.eio_sync.store(false, Ordering::SeqCst);
    for i in 102..200 {
        s.add(b"f", &[&item(i)], None).unwrap();
        acked.push(i);
    }
    drop(s);
    check_acked(dir.path(), &acked);
}

#[test]
fn short_snapshot_write_keeps_the_old_snapshot() {
    let dir = tempfile::tempdir().unwrap();
    let (s, faults) = faulty(dir.path(), FsyncPolicy::Always);
    s.create(b"f", &bloom()).unwrap();
    let mut acked = Vec::new();
    for i in 0..100 {
        s.add(b"f", &[&item(i)], None).unwrap();
        acked.push(i);
    }
    s.checkpoint().unwrap();
    for i in 100..200 {
        s.add(b"f", &[&item(i)], None).unwrap();
        acked.push(i);
    }
    faults.short_write.store(true, Ordering::SeqCst);
    let e = s.checkpoint().unwrap_err();
    assert!(e.to_string().contains("write"), "{e}");
    faults.short_write.store(false, Ordering::SeqCst);
    drop(s);
    // No temp file is left, and the old snapshot plus the log have it all.
    let leftovers = std::fs::read_dir(dir.path().join("snapshots"))
        .unwrap()
        .filter(|e| e.as_ref().unwrap().path().extension().unwrap() == "tmp")
        .count();
    assert_eq!(leftovers, 0);
    check_acked(dir.path(), &acked);
}

fn newest_segment(dir: &Path) -> PathBuf {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir.join("wal"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    v.sort();
    v.pop().unwrap()
}

/// Offset just past the last record of a segment (records are 8-aligned
/// and start with a non-zero length).
fn end_of_records(data: &[u8]) -> usize {
    let mut off = 0;
    while off + 8 <= data.len() {
        let len = u32::from_le_bytes(data[off..off + 4].try_into().unwrap()) as usize;
        if len == 0 {
            break;
        }
        off += (8 + len).next_multiple_of(8);
    }
    off
}

#[test]
fn torn_tail_is_truncated_and_everything_before_it_kept() {
    let dir = tempfile::tempdir().unwrap();
    {
        let s = Store::open(
            dir.path(),
            StoreOptions {
                fsync: FsyncPolicy::Always,
                ..Default::default()
            },
        )
        .unwrap();
        s.create(b"f", &bloom()).unwrap();
        for i in 0..50 {
            s.add(b"f", &[&item(i)], None).unwrap();
        }
    }
    // Simulate a crash in the middle of writing a record: a length and part
    // of a record after the last good one.
    let seg = newest_segment(dir.path());
    let mut data = std::fs::read(&seg).unwrap();
    let end = end_of_records(&data);
    assert!(end > 0);
    data[end..end + 4].copy_from_slice(&40u32.to_le_bytes());
    data[end + 4..end + 20].copy_from_slice(&[0xab; 16]);
    std::fs::write(&seg, &data).unwrap();
    check_acked(dir.path(), &(0..50).collect::<Vec<_>>());
    // And it opens cleanly again after that (the torn bytes were zeroed).
    check_acked(dir.path(), &(0..50).collect::<Vec<_>>());
}

#[test]
fn flipped_byte_in_the_middle_of_the_log_stops_the_open() {
    let dir = tempfile::tempdir().unwrap();
    {
        let s = Store::open(dir.path(), StoreOptions::default()).unwrap();
        s.create(b"f", &bloom()).unwrap();
        for i in 0..50 {
            s.add(b"f", &[&item(i)], None).unwrap();
        }
    }
    let seg = newest_segment(dir.path());
    let mut data = std::fs::read(&seg).unwrap();
    let end = end_of_records(&data);
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
    let s = Store::open(
        dir.path(),
        StoreOptions {
            salvage: true,
            ..Default::default()
        },
    )
    .unwrap();
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
