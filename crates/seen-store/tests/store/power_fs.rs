//! A file system that keeps what a power loss would leave: the real one
//! underneath, with each file's durable bytes (what its syncs covered) and
//! each directory's durable entries (what its syncs covered) kept aside,
//! so that [`PowerFs::cut`] can make the disk a power cut at any moment
//! leaves, sector by sector. The power-loss tests (`power.rs`) run the
//! store on it.

use std::collections::HashMap;
use std::ffi::OsString;
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use rand::rngs::StdRng;
use rand::Rng;
use seen_store::fs::{Fs, FsFile, RealFs};

/// The unit a disk writes whole or not at all.
const SECTOR: usize = 512;

/// A change to a directory not yet made durable by a sync of it (files by
/// id, see [`Disk::ids`]).
#[derive(Clone, Debug)]
enum Op {
    Create(OsString, u64),
    Rename(OsString, OsString),
    Remove(OsString),
}

fn apply(entries: &mut HashMap<OsString, u64>, op: &Op) {
    match op {
        Op::Create(name, id) => {
            entries.insert(name.clone(), *id);
        }
        Op::Rename(from, to) => {
            if let Some(id) = entries.remove(from) {
                entries.insert(to.clone(), id);
            }
        }
        Op::Remove(name) => {
            entries.remove(name);
        }
    }
}

#[derive(Default)]
pub struct Disk {
    /// The power is off: every sync fails, and nothing more becomes
    /// durable.
    dead: bool,
    /// Each directory's durable entries (name to file id).
    dirs: HashMap<PathBuf, HashMap<OsString, u64>>,
    /// Changes made since each directory's last sync, in order.
    pending: HashMap<PathBuf, Vec<Op>>,
    /// Each file's durable bytes (by file id), as its last sync left them.
    durable: HashMap<u64, Vec<u8>>,
    /// The id of the file each inode now is: ids are never reused, inodes
    /// are (a removed segment's by a new snapshot, say), and the disk
    /// keeps a removed file's bytes until the removal is durable.
    ids: HashMap<u64, u64>,
    next_id: u64,
    /// For each completed sync of the log's sync mark, how many items had
    /// been acknowledged by then.
    pub marks: Vec<usize>,
    /// What the store did to the disk, in order, each with how many items
    /// had been acknowledged: kept with the disk of a round that fails.
    pub events: Vec<String>,
}

impl Disk {
    pub fn event(&mut self, acked: usize, what: String) {
        if !self.dead {
            self.events.push(format!("{acked} {what}"));
        }
    }
}

/// Which unsynced sectors a power loss keeps.
#[derive(Clone, Copy, Debug)]
pub enum Keep {
    /// Each with this probability, in any order.
    Each(f64),
    /// A random prefix of each file's: its writeback ran in the order of
    /// its offsets, each file's apart from the others'. (A segment can
    /// then lose its last records while the lane's next one keeps its
    /// first.)
    Prefix,
}

/// The real file system, keeping what a power loss would leave.
#[derive(Clone, Default)]
pub struct PowerFs {
    pub disk: Arc<Mutex<Disk>>,
    /// Items acknowledged so far (the writers keep it).
    pub acked: Arc<AtomicUsize>,
}

struct PowerFile {
    inner: Box<dyn FsFile>,
    disk: Arc<Mutex<Disk>>,
    id: u64,
    /// The log's sync mark (`wal/SYNCED`): each of its syncs ends a log
    /// sync, and is counted in `Disk::marks`.
    mark: bool,
    acked: Arc<AtomicUsize>,
}

fn dead() -> io::Error {
    io::Error::from_raw_os_error(libc::EIO)
}

fn split(path: &Path) -> (PathBuf, OsString) {
    (
        path.parent().expect("a file in a directory").to_path_buf(),
        path.file_name().expect("a file name").to_os_string(),
    )
}

fn read_whole(f: &dyn FsFile) -> io::Result<Vec<u8>> {
    let mut bytes = vec![0; f.size()? as usize];
    let mut at = 0;
    while at < bytes.len() {
        match f.read_at(&mut bytes[at..], at as u64)? {
            0 => break,
            n => at += n,
        }
    }
    bytes.truncate(at);
    Ok(bytes)
}

impl FsFile for PowerFile {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        self.inner.read_at(buf, offset)
    }
    fn write_all_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        self.inner.write_all_at(buf, offset)
    }
    fn sync_data(&self) -> io::Result<()> {
        if self.disk.lock().unwrap().dead {
            return Err(dead());
        }
        self.inner.sync_data()?;
        let mut disk = self.disk.lock().unwrap();
        // A sync the cut overtook is not known to have finished.
        if disk.dead {
            return Err(dead());
        }
        // Read after the sync: it holds at least what the sync made
        // durable (later writes may be on the disk too, as they may be).
        let bytes = read_whole(&*self.inner)?;
        let acked = self.acked.load(Ordering::SeqCst);
        let len = bytes.len();
        disk.durable.insert(self.id, bytes);
        let id = self.id;
        disk.event(acked, format!("sync file {id} ({len} bytes)"));
        if self.mark {
            disk.marks.push(acked);
        }
        Ok(())
    }
    fn set_len(&self, len: u64) -> io::Result<()> {
        self.inner.set_len(len)
    }
    fn size(&self) -> io::Result<u64> {
        self.inner.size()
    }
    fn is_removed(&self) -> io::Result<bool> {
        self.inner.is_removed()
    }
}

fn inode(path: &Path) -> io::Result<u64> {
    Ok(std::fs::metadata(path)?.ino())
}

impl PowerFs {
    fn record(&self, dir: PathBuf, op: Op) {
        let mut disk = self.disk.lock().unwrap();
        let acked = self.acked.load(Ordering::SeqCst);
        disk.event(acked, format!("{} {op:?}", dir.display()));
        if !disk.dead {
            disk.pending.entry(dir).or_default().push(op);
        }
    }

    /// Cuts the power: from now on every sync fails. Returns the files the
    /// disk holds (path and bytes), with the unsynced sectors `keep` says,
    /// and any prefix of each directory's unsynced changes.
    pub fn cut(&self, rng: &mut StdRng, keep: Keep) -> DiskImage {
        let mut disk = self.disk.lock().unwrap();
        disk.dead = true;
        let mut dirs: Vec<PathBuf> = disk.dirs.keys().cloned().collect();
        dirs.extend(disk.pending.keys().cloned());
        dirs.sort();
        dirs.dedup();
        // What each file holds now (by id), written or not.
        let mut now: HashMap<u64, Vec<u8>> = HashMap::new();
        for dir in &dirs {
            for entry in std::fs::read_dir(dir).unwrap() {
                let entry = entry.unwrap();
                // A file the store removes meanwhile is read as it was
                // when last synced.
                let Ok(f) = RealFs.open_read(&entry.path()) else {
                    continue;
                };
                if let (Ok(meta), Ok(bytes)) = (entry.metadata(), read_whole(&*f)) {
                    if let Some(id) = disk.ids.get(&meta.ino()).filter(|_| meta.is_file()) {
                        now.insert(*id, bytes);
                    }
                }
            }
        }
        let mut files = Vec::new();
        for dir in &dirs {
            let mut entries = disk.dirs.get(dir).cloned().unwrap_or_default();
            let pending = disk.pending.get(dir).cloned().unwrap_or_default();
            let done = rng.gen_range(0..=pending.len());
            for op in &pending[..done] {
                apply(&mut entries, op);
            }
            for (name, id) in entries {
                let old = disk.durable.get(&id).cloned().unwrap_or_default();
                let new = now.get(&id).unwrap_or(&old);
                let mut bytes = old.clone();
                let changed: Vec<usize> = (0..new.len())
                    .step_by(SECTOR)
                    .filter(|&start| {
                        let end = (start + SECTOR).min(new.len());
                        old.get(start..end) != Some(&new[start..end])
                    })
                    .collect();
                let prefix = match keep {
                    Keep::Prefix => rng.gen_range(0..=changed.len()),
                    Keep::Each(_) => 0,
                };
                for (n, &start) in changed.iter().enumerate() {
                    let end = (start + SECTOR).min(new.len());
                    let kept = match keep {
                        Keep::Each(p) => rng.gen_bool(p),
                        Keep::Prefix => n < prefix,
                    };
                    if kept {
                        if bytes.len() < end {
                            bytes.resize(end, 0);
                        }
                        bytes[start..end].copy_from_slice(&new[start..end]);
                    }
                }
                files.push((dir.join(name), bytes));
            }
        }
        files
    }
}

impl Fs for PowerFs {
    fn create(&self, path: &Path) -> io::Result<Box<dyn FsFile>> {
        let inner = RealFs.create(path)?;
        let ino = inode(path)?;
        let (dir, name) = split(path);
        let id = {
            let mut disk = self.disk.lock().unwrap();
            let id = disk.next_id;
            disk.next_id += 1;
            disk.ids.insert(ino, id);
            id
        };
        let mark = name == "SYNCED";
        self.record(dir, Op::Create(name, id));
        Ok(Box::new(PowerFile {
            inner,
            disk: self.disk.clone(),
            id,
            mark,
            acked: self.acked.clone(),
        }))
    }
    fn open_rw(&self, path: &Path) -> io::Result<Box<dyn FsFile>> {
        let inner = RealFs.open_rw(path)?;
        let ino = inode(path)?;
        let id = *self
            .disk
            .lock()
            .unwrap()
            .ids
            .get(&ino)
            .expect("the store opens only files it made");
        Ok(Box::new(PowerFile {
            inner,
            disk: self.disk.clone(),
            id,
            mark: path.file_name().is_some_and(|n| n == "SYNCED"),
            acked: self.acked.clone(),
        }))
    }
    fn open_read(&self, path: &Path) -> io::Result<Box<dyn FsFile>> {
        // Opens under the store's own writes are of its logs' files, and
        // syncs through them count as syncs of those files.
        let ino = inode(path)?;
        let id = self.disk.lock().unwrap().ids.get(&ino).copied();
        let inner = RealFs.open_read(path)?;
        match id {
            Some(id) => Ok(Box::new(PowerFile {
                inner,
                disk: self.disk.clone(),
                id,
                mark: path.file_name().is_some_and(|n| n == "SYNCED"),
                acked: self.acked.clone(),
            })),
            None => Ok(inner),
        }
    }
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        RealFs.rename(from, to)?;
        let (dir, from) = split(from);
        let (to_dir, to) = split(to);
        assert_eq!(dir, to_dir, "the store renames within a directory");
        self.record(dir, Op::Rename(from, to));
        Ok(())
    }
    fn remove(&self, path: &Path) -> io::Result<()> {
        RealFs.remove(path)?;
        let (dir, name) = split(path);
        self.record(dir, Op::Remove(name));
        Ok(())
    }
    fn create_dir_all(&self, path: &Path) -> io::Result<()> {
        // Directories themselves are taken as durable once made.
        RealFs.create_dir_all(path)?;
        self.disk
            .lock()
            .unwrap()
            .dirs
            .entry(path.to_path_buf())
            .or_default();
        Ok(())
    }
    fn sync_dir(&self, path: &Path) -> io::Result<()> {
        if self.disk.lock().unwrap().dead {
            return Err(dead());
        }
        RealFs.sync_dir(path)?;
        let mut disk = self.disk.lock().unwrap();
        if disk.dead {
            return Err(dead());
        }
        let acked = self.acked.load(Ordering::SeqCst);
        disk.event(acked, format!("sync dir {}", path.display()));
        let ops = disk.pending.remove(path).unwrap_or_default();
        let entries = disk.dirs.entry(path.to_path_buf()).or_default();
        for op in &ops {
            apply(entries, op);
        }
        Ok(())
    }
    fn list(&self, path: &Path) -> io::Result<Vec<PathBuf>> {
        RealFs.list(path)
    }
    fn try_lock(&self, path: &Path) -> io::Result<Box<dyn Send + Sync>> {
        RealFs.try_lock(path)
    }
}

/// Files left on the disk: path and bytes.
pub type DiskImage = Vec<(PathBuf, Vec<u8>)>;
