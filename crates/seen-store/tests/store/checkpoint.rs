//! A checkpoint cut short or failing part-way: a kill between a deleted
//! filter's stale snapshot and its removal, a retired segment that cannot
//! be removed. Through a file system whose creates and removes can be
//! hooked.

use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use seen_core::Layout;
use seen_store::fs::{Fs, FsFile, RealFs};
use seen_store::{FilterSpec, FsyncPolicy, Store, StoreOptions};

type CreateHook = Box<dyn FnMut(&Path) -> bool + Send>;
type RemoveHook = Box<dyn FnMut(&Path) -> Option<io::Result<()>> + Send>;

#[derive(Default)]
struct HookFs {
    real: RealFs,
    on_create: Mutex<Option<CreateHook>>,
    on_remove: Mutex<Option<RemoveHook>>,
    /// Sleep per write into a snapshot temp file (ms).
    slow_snap_ms: AtomicU64,
}

struct SlowFile {
    inner: Box<dyn FsFile>,
    ms: u64,
}

impl FsFile for SlowFile {
    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        std::thread::sleep(Duration::from_millis(self.ms));
        self.inner.write_all(buf)
    }
    fn sync_data(&self) -> io::Result<()> {
        self.inner.sync_data()
    }
    fn allocate(&self, len: u64) -> io::Result<()> {
        self.inner.allocate(len)
    }
    fn std_file(&self) -> &File {
        self.inner.std_file()
    }
    fn try_clone(&self) -> io::Result<Box<dyn FsFile>> {
        self.inner.try_clone()
    }
}

impl Fs for HookFs {
    fn create(&self, path: &Path) -> io::Result<Box<dyn FsFile>> {
        // Take the hook out so that it may call into the store.
        let hook = self.on_create.lock().unwrap().take();
        if let Some(mut h) = hook {
            if !h(path) {
                *self.on_create.lock().unwrap() = Some(h);
            }
        }
        let f = self.real.create(path)?;
        let ms = self.slow_snap_ms.load(Ordering::SeqCst);
        let is_snap_tmp = path.to_str().is_some_and(|p| p.ends_with(".snap.tmp"));
        if ms > 0 && is_snap_tmp {
            return Ok(Box::new(SlowFile { inner: f, ms }));
        }
        Ok(f)
    }
    fn open_rw(&self, path: &Path) -> io::Result<Box<dyn FsFile>> {
        self.real.open_rw(path)
    }
    fn open_read(&self, path: &Path) -> io::Result<File> {
        self.real.open_read(path)
    }
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        self.real.rename(from, to)
    }
    fn remove(&self, path: &Path) -> io::Result<()> {
        let hook = self.on_remove.lock().unwrap().take();
        if let Some(mut h) = hook {
            match h(path) {
                Some(r) => return r,
                None => *self.on_remove.lock().unwrap() = Some(h),
            }
        }
        self.real.remove(path)
    }
    fn create_dir_all(&self, path: &Path) -> io::Result<()> {
        self.real.create_dir_all(path)
    }
    fn sync_dir(&self, path: &Path) -> io::Result<()> {
        self.real.sync_dir(path)
    }
    fn list(&self, path: &Path) -> io::Result<Vec<PathBuf>> {
        self.real.list(path)
    }
}

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

/// A filter deleted (acknowledged, fsync=always) while a checkpoint is in
/// its loop, before the checkpoint reached it: its snapshot gets an lsn
/// above the delete record, and a kill before the same checkpoint removes
/// that snapshot brought the filter back (replay skipped the delete as
/// "already in the snapshot"). Replay now applies every delete.
#[test]
fn a_delete_during_a_checkpoint_stays_deleted_after_a_kill_before_it_ends() {
    let dir = tempfile::tempdir().unwrap();
    let crash = tempfile::tempdir().unwrap();
    let crash_path = crash.path().join("copy");
    let fs = Arc::new(HookFs::default());
    let store = Store::open_with_fs(dir.path(), always(), fs.clone()).unwrap();
    store.create(b"a", &bloom(1000)).unwrap();
    store.create(b"b", &bloom(1000)).unwrap();
    store.add(b"a", &[b"x"], None).unwrap();
    store.add(b"b", &[b"y"], None).unwrap();

    let deleted: Arc<Mutex<Option<Vec<u8>>>> = Arc::default();
    {
        let s2 = store.clone();
        let deleted = deleted.clone();
        *fs.on_create.lock().unwrap() = Some(Box::new(move |path| {
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
        *fs.on_remove.lock().unwrap() = Some(Box::new(move |path| {
            // The removal of a deleted filter's snapshot: a kill here.
            let in_snaps = path.parent().is_some_and(|p| p.ends_with("snapshots"));
            if in_snaps && file_name_str(path).ends_with(".snap") {
                crate::crash::copy_dir(&dir, &crash_path, &["", "rings", "snapshots", "wal"]);
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
fn store_of_small_segments(dir: &Path, fs: &Arc<HookFs>) -> (Store, StoreOptions) {
    let opts = StoreOptions {
        segment_size: 4096,
        ..always()
    };
    let store = Store::open_with_fs(dir, opts.clone(), fs.clone()).unwrap();
    store.create(b"f", &bloom(100_000)).unwrap();
    (store, opts)
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
    std::fs::read_dir(dir.join("wal"))
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

/// Makes the next removal of a log segment (not a spare) return `fail`'s
/// answer for its path, and sets `hooked`.
fn hook_next_segment_removal(
    fs: &HookFs,
    hooked: &Arc<AtomicBool>,
    fail: fn(&Path) -> io::Result<()>,
) {
    let hooked = hooked.clone();
    *fs.on_remove.lock().unwrap() = Some(Box::new(move |path| {
        if path.parent().is_some_and(|p| p.ends_with("wal"))
            && !file_name_str(path).starts_with("spare")
        {
            hooked.store(true, Ordering::SeqCst);
            return Some(fail(path));
        }
        None
    }));
}

/// One failed removal of a retired segment kept the lane's later retired
/// segments on disk but dropped them all from the log's list; the next
/// checkpoint then removed newer segments, leaving a gap in the lane's
/// numbers, and the open failed: "lane 0 segment 8 follows segment 3: the
/// segments between are missing". They now go back into the list.
#[test]
fn a_retired_segment_that_could_not_be_removed_leaves_no_gap_after_the_next_checkpoint() {
    let dir = tempfile::tempdir().unwrap();
    let fs = Arc::new(HookFs::default());
    let (store, opts) = store_of_small_segments(dir.path(), &fs);
    add_400(&store, "one");
    let failed = Arc::new(AtomicBool::new(false));
    hook_next_segment_removal(&fs, &failed, |_| {
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
/// (NotFound) counts as removed: the lane's later retired segments go too,
/// and nothing is put back into the log's list (kept there, it and they
/// came back at every checkpoint, and the log grew for good).
#[test]
fn a_retired_segment_already_gone_counts_as_removed() {
    let dir = tempfile::tempdir().unwrap();
    let fs = Arc::new(HookFs::default());
    let (store, opts) = store_of_small_segments(dir.path(), &fs);
    add_400(&store, "one");
    let before = segment_count(dir.path());
    let gone = Arc::new(AtomicBool::new(false));
    hook_next_segment_removal(&fs, &gone, |path| {
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
