//! The file-system interface every byte of the store goes through.
//!
//! [`RealFs`] is the operating system. Tests put a file system of their own
//! behind these traits (one that fails a chosen write, sync or read, or that
//! keeps what a power loss would leave) and so reach every I/O path of the
//! store: nothing is read or written past them.

use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};

use crate::error::{io_err, Result};

/// An open file. Every method takes `&self`: the log's writer and its
/// syncer use one file from two threads.
pub trait FsFile: Send + Sync {
    /// Reads up to `buf.len()` bytes at `offset`; 0 at the end.
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize>;
    /// Writes all of `buf` at `offset`. On an error some of it may have
    /// been written.
    fn write_all_at(&self, buf: &[u8], offset: u64) -> io::Result<()>;
    /// `fdatasync`: the data and size are durable once this returns.
    fn sync_data(&self) -> io::Result<()>;
    /// Cuts or extends the file to `len` bytes.
    fn set_len(&self, len: u64) -> io::Result<()>;
    /// The file's size in bytes.
    fn size(&self) -> io::Result<u64>;
    /// Whether the file has been removed from its directory while open (it
    /// has no name left: its directory was deleted, say).
    fn is_removed(&self) -> io::Result<bool>;
}

/// File-system operations.
pub trait Fs: Send + Sync + 'static {
    /// Creates (truncating) a file for reading and writing.
    fn create(&self, path: &Path) -> io::Result<Box<dyn FsFile>>;
    /// Opens an existing file for reading and writing.
    fn open_rw(&self, path: &Path) -> io::Result<Box<dyn FsFile>>;
    /// Opens an existing file for reading.
    fn open_read(&self, path: &Path) -> io::Result<Box<dyn FsFile>>;
    /// Renames atomically.
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()>;
    /// Removes a file.
    fn remove(&self, path: &Path) -> io::Result<()>;
    /// Creates a directory and its parents.
    fn create_dir_all(&self, path: &Path) -> io::Result<()>;
    /// Fsyncs a directory, making creates, renames and removes in it durable.
    fn sync_dir(&self, path: &Path) -> io::Result<()>;
    /// Lists a directory's entries, sorted.
    fn list(&self, path: &Path) -> io::Result<Vec<PathBuf>>;
    /// Takes an exclusive advisory lock on `path` (created if missing),
    /// held until the returned value is dropped; `WouldBlock` if another
    /// process holds it.
    fn try_lock(&self, path: &Path) -> io::Result<Box<dyn Send + Sync>>;
}

/// Opens `path` for reading and writing, creating it if it is not there.
pub(crate) fn open_or_create(fs: &dyn Fs, path: &Path) -> Result<Box<dyn FsFile>> {
    match fs.open_rw(path) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => fs.create(path),
        r => r,
    }
    .map_err(|e| io_err("open", path, e))
}

/// Reads a whole file.
pub(crate) fn read_all(file: &dyn FsFile) -> io::Result<Vec<u8>> {
    let len = file.size()?;
    let mut buf = vec![0u8; usize::try_from(len).map_err(io::Error::other)?];
    let mut at = 0;
    while at < buf.len() {
        match file.read_at(&mut buf[at..], at as u64)? {
            0 => {
                buf.truncate(at);
                break;
            }
            n => at += n,
        }
    }
    Ok(buf)
}

/// `io::Read` over an [`FsFile`], from offset 0.
pub(crate) struct FsReader<'a> {
    pub(crate) file: &'a dyn FsFile,
    pub(crate) pos: u64,
}

impl io::Read for FsReader<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.file.read_at(buf, self.pos)?;
        self.pos += n as u64;
        Ok(n)
    }
}

/// `io::Write` over an [`FsFile`], appending from offset 0, and syncing
/// every [`FsWriter::SYNC_EVERY`] bytes: a large file (the snapshot of a
/// 1 GiB filter) then never has much in the page cache waiting to be
/// written, whose flush would hold up the log's syncs queued behind it.
pub(crate) struct FsWriter<'a> {
    pub(crate) file: &'a dyn FsFile,
    pub(crate) pos: u64,
}

impl FsWriter<'_> {
    const SYNC_EVERY: u64 = 64 << 20;
}

impl io::Write for FsWriter<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.file.write_all_at(buf, self.pos)?;
        let before = self.pos;
        self.pos += buf.len() as u64;
        if before / Self::SYNC_EVERY != self.pos / Self::SYNC_EVERY {
            self.file.sync_data()?;
        }
        Ok(buf.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// Makes `file`, written as `tmp` in directory `dir`, durable as `path`:
/// syncs it, renames it over `path`, syncs the directory. A crash leaves
/// either the old `path` or the new one; on failure `tmp` is removed.
pub(crate) fn install(
    fs: &dyn Fs,
    dir: &Path,
    file: Box<dyn FsFile>,
    tmp: &Path,
    path: &Path,
) -> crate::Result<()> {
    use crate::error::io_err;
    let result = (|| {
        file.sync_data().map_err(|e| io_err("sync", tmp, e))?;
        drop(file);
        fs.rename(tmp, path).map_err(|e| io_err("rename", tmp, e))?;
        fs.sync_dir(dir)
            .map_err(|e| io_err("sync directory", dir, e))
    })();
    if result.is_err() {
        let _ = fs.remove(tmp);
    }
    result
}

/// The real file system.
#[derive(Clone, Copy, Debug, Default)]
pub struct RealFs;

struct RealFile(File);

impl FsFile for RealFile {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        std::os::unix::fs::FileExt::read_at(&self.0, buf, offset)
    }
    fn write_all_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        std::os::unix::fs::FileExt::write_all_at(&self.0, buf, offset)
    }
    fn sync_data(&self) -> io::Result<()> {
        self.0.sync_data()
    }
    fn set_len(&self, len: u64) -> io::Result<()> {
        self.0.set_len(len)
    }
    fn size(&self) -> io::Result<u64> {
        Ok(self.0.metadata()?.len())
    }
    fn is_removed(&self) -> io::Result<bool> {
        Ok(std::os::unix::fs::MetadataExt::nlink(&self.0.metadata()?) == 0)
    }
}

impl Fs for RealFs {
    fn create(&self, path: &Path) -> io::Result<Box<dyn FsFile>> {
        let f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(path)?;
        Ok(Box::new(RealFile(f)))
    }
    fn open_rw(&self, path: &Path) -> io::Result<Box<dyn FsFile>> {
        let f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(path)?;
        Ok(Box::new(RealFile(f)))
    }
    fn open_read(&self, path: &Path) -> io::Result<Box<dyn FsFile>> {
        Ok(Box::new(RealFile(File::open(path)?)))
    }
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        std::fs::rename(from, to)
    }
    fn remove(&self, path: &Path) -> io::Result<()> {
        std::fs::remove_file(path)
    }
    fn create_dir_all(&self, path: &Path) -> io::Result<()> {
        std::fs::create_dir_all(path)
    }
    fn sync_dir(&self, path: &Path) -> io::Result<()> {
        File::open(path)?.sync_all()
    }
    fn list(&self, path: &Path) -> io::Result<Vec<PathBuf>> {
        let mut out = Vec::new();
        for entry in std::fs::read_dir(path)? {
            out.push(entry?.path());
        }
        out.sort();
        Ok(out)
    }
    fn try_lock(&self, path: &Path) -> io::Result<Box<dyn Send + Sync>> {
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)?;
        match file.try_lock() {
            Ok(()) => Ok(Box::new(file)),
            Err(std::fs::TryLockError::WouldBlock) => Err(io::ErrorKind::WouldBlock.into()),
            Err(std::fs::TryLockError::Error(e)) => Err(e),
        }
    }
}
