//! The one fault-injecting file system of the store's tests: the real
//! file system behind [`Fs`], with switches that fail chosen operations,
//! hooks on creates and removes, and a numbered fault point for every
//! operation that touches the disk, so that a test can fail each in turn.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use seen_store::fs::{Fs, FsFile, RealFs};

pub type CreateHook = Box<dyn FnMut(&Path) -> bool + Send>;
pub type RemoveHook = Box<dyn FnMut(&Path) -> Option<io::Result<()>> + Send>;
/// Called before a rename with its target; `true` when done (dropped then).
pub type RenameHook = Box<dyn FnMut(&Path) -> bool + Send>;

/// What to fail, and what happened.
#[derive(Default)]
pub struct Faults {
    /// Bytes the disk can still take (`u64::MAX`: no limit): a write past
    /// them puts what fits in the file, then fails with ENOSPC.
    pub room: AtomicU64,
    /// Syncs of files and directories fail with EIO (counted).
    pub eio_sync: AtomicBool,
    pub syncs_failed: AtomicU64,
    /// Syncs of files panic (a bug in a sync, say).
    pub panic_sync: AtomicBool,
    /// Syncs of files wait while set (a disk that has stopped answering);
    /// the syncs waiting now.
    pub hold_syncs: AtomicBool,
    pub syncs_held: AtomicU64,
    /// Removes of files in the log's directory fail with EIO.
    pub log_remove_fails: AtomicBool,
    /// Snapshots cannot be opened (EACCES), or are opened and cannot be
    /// read (EIO).
    pub snap_open_fails: AtomicBool,
    pub snap_read_fails: AtomicBool,
    /// Each write into a snapshot's temp file first sleeps this long (ms).
    pub slow_snap_ms: AtomicU64,
    /// Removes and directory syncs, in order (`true`: a sync).
    pub dir_ops: Mutex<Vec<(bool, PathBuf)>>,
    /// Fault points met so far: every create, open, read, write, sync,
    /// cut, rename, remove and directory sync.
    pub points: AtomicU64,
    /// The fault point to fail (`u64::MAX`: none), and the operation it
    /// was, once met.
    pub fail_point: AtomicU64,
    pub failed: Mutex<Option<String>>,
    pub on_create: Mutex<Option<CreateHook>>,
    pub on_remove: Mutex<Option<RemoveHook>>,
    pub on_rename: Mutex<Option<RenameHook>>,
}

impl Faults {
    pub fn new() -> Arc<Faults> {
        Arc::new(Faults {
            fail_point: AtomicU64::new(u64::MAX),
            room: AtomicU64::new(u64::MAX),
            ..Default::default()
        })
    }

    /// Leaves the disk `bytes` of room (`u64::MAX`: no limit).
    pub fn set_room(&self, bytes: u64) {
        self.room.store(bytes, Ordering::SeqCst);
    }

    /// Takes `n` bytes of room: how many fit.
    fn take_room(&self, n: u64) -> u64 {
        let mut fit = n;
        let _ = self
            .room
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |room| {
                fit = n.min(room);
                Some(if room == u64::MAX { room } else { room - fit })
            });
        fit
    }

    /// Counts a fault point: whether it is the one to fail.
    fn point(&self, what: &str, path: &Path) -> io::Result<()> {
        let n = self.points.fetch_add(1, Ordering::SeqCst);
        if n != self.fail_point.load(Ordering::SeqCst) {
            return Ok(());
        }
        *self.failed.lock().unwrap() = Some(format!("{what} {}", path.display()));
        let code = if what == "write" {
            libc::ENOSPC
        } else {
            libc::EIO
        };
        Err(io::Error::from_raw_os_error(code))
    }
}

pub struct FaultyFs {
    pub faults: Arc<Faults>,
}

struct FaultyFile {
    inner: Box<dyn FsFile>,
    faults: Arc<Faults>,
    path: PathBuf,
}

fn is_snapshot(path: &Path) -> bool {
    path.to_str().is_some_and(|p| p.ends_with(".snap"))
}

fn in_log(path: &Path) -> bool {
    path.parent().is_some_and(|d| d.ends_with("log"))
}

impl FsFile for FaultyFile {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        if is_snapshot(&self.path) && self.faults.snap_read_fails.load(Ordering::SeqCst) {
            return Err(io::Error::from_raw_os_error(libc::EIO));
        }
        if offset == 0 {
            self.faults.point("read", &self.path)?;
        }
        self.inner.read_at(buf, offset)
    }
    fn write_all_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        let ms = self.faults.slow_snap_ms.load(Ordering::SeqCst);
        if ms > 0 && self.path.to_str().is_some_and(|p| p.ends_with(".snap.tmp")) {
            std::thread::sleep(Duration::from_millis(ms));
        }
        if let Err(e) = self.faults.point("write", &self.path) {
            // Part of it is written, as a full disk can leave.
            self.inner.write_all_at(&buf[..buf.len() / 2], offset)?;
            return Err(e);
        }
        let fit = self.faults.take_room(buf.len() as u64) as usize;
        self.inner.write_all_at(&buf[..fit], offset)?;
        if fit < buf.len() {
            return Err(io::Error::from_raw_os_error(libc::ENOSPC));
        }
        Ok(())
    }
    fn sync_data(&self) -> io::Result<()> {
        let f = &self.faults;
        if f.panic_sync.load(Ordering::SeqCst) {
            panic!("a sync panics (test)");
        }
        if f.eio_sync.load(Ordering::SeqCst) {
            f.syncs_failed.fetch_add(1, Ordering::SeqCst);
            return Err(io::Error::from_raw_os_error(libc::EIO));
        }
        if f.hold_syncs.load(Ordering::SeqCst) {
            f.syncs_held.fetch_add(1, Ordering::SeqCst);
            while f.hold_syncs.load(Ordering::SeqCst) {
                std::thread::sleep(Duration::from_millis(5));
            }
            f.syncs_held.fetch_sub(1, Ordering::SeqCst);
        }
        f.point("sync", &self.path)?;
        self.inner.sync_data()
    }
    fn set_len(&self, len: u64) -> io::Result<()> {
        self.faults.point("cut", &self.path)?;
        self.inner.set_len(len)
    }
    fn size(&self) -> io::Result<u64> {
        self.inner.size()
    }
    fn is_removed(&self) -> io::Result<bool> {
        self.inner.is_removed()
    }
}

impl FaultyFs {
    pub fn new() -> (Arc<FaultyFs>, Arc<Faults>) {
        let faults = Faults::new();
        (
            Arc::new(FaultyFs {
                faults: faults.clone(),
            }),
            faults,
        )
    }

    fn wrap(&self, path: &Path, inner: Box<dyn FsFile>) -> Box<dyn FsFile> {
        Box::new(FaultyFile {
            inner,
            faults: self.faults.clone(),
            path: path.to_path_buf(),
        })
    }
}

impl Fs for FaultyFs {
    fn create(&self, path: &Path) -> io::Result<Box<dyn FsFile>> {
        // Taken out while it runs, so that it may call into the store.
        let hook = self.faults.on_create.lock().unwrap().take();
        if let Some(mut h) = hook {
            if !h(path) {
                *self.faults.on_create.lock().unwrap() = Some(h);
            }
        }
        self.faults.point("create", path)?;
        Ok(self.wrap(path, RealFs.create(path)?))
    }
    fn open_rw(&self, path: &Path) -> io::Result<Box<dyn FsFile>> {
        self.faults.point("open", path)?;
        Ok(self.wrap(path, RealFs.open_rw(path)?))
    }
    fn open_read(&self, path: &Path) -> io::Result<Box<dyn FsFile>> {
        if is_snapshot(path) && self.faults.snap_open_fails.load(Ordering::SeqCst) {
            return Err(io::Error::from_raw_os_error(libc::EACCES));
        }
        self.faults.point("open", path)?;
        Ok(self.wrap(path, RealFs.open_read(path)?))
    }
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        let hook = self.faults.on_rename.lock().unwrap().take();
        if let Some(mut h) = hook {
            if !h(to) {
                *self.faults.on_rename.lock().unwrap() = Some(h);
            }
        }
        self.faults.point("rename", from)?;
        RealFs.rename(from, to)
    }
    fn remove(&self, path: &Path) -> io::Result<()> {
        let hook = self.faults.on_remove.lock().unwrap().take();
        if let Some(mut h) = hook {
            match h(path) {
                Some(r) => return r,
                None => *self.faults.on_remove.lock().unwrap() = Some(h),
            }
        }
        if in_log(path) && self.faults.log_remove_fails.load(Ordering::SeqCst) {
            return Err(io::Error::from_raw_os_error(libc::EIO));
        }
        self.faults.point("remove", path)?;
        RealFs.remove(path)?;
        self.faults
            .dir_ops
            .lock()
            .unwrap()
            .push((false, path.to_path_buf()));
        Ok(())
    }
    fn create_dir_all(&self, path: &Path) -> io::Result<()> {
        RealFs.create_dir_all(path)
    }
    fn sync_dir(&self, path: &Path) -> io::Result<()> {
        if self.faults.eio_sync.load(Ordering::SeqCst) {
            self.faults.syncs_failed.fetch_add(1, Ordering::SeqCst);
            return Err(io::Error::from_raw_os_error(libc::EIO));
        }
        self.faults.point("sync directory", path)?;
        RealFs.sync_dir(path)?;
        self.faults
            .dir_ops
            .lock()
            .unwrap()
            .push((true, path.to_path_buf()));
        Ok(())
    }
    fn list(&self, path: &Path) -> io::Result<Vec<PathBuf>> {
        RealFs.list(path)
    }
    fn try_lock(&self, path: &Path) -> io::Result<Box<dyn Send + Sync>> {
        RealFs.try_lock(path)
    }
}
