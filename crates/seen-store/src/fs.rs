//! The small file-system interface storage code is written against.
//!
//! [`RealFs`] is the operating system. Tests wrap it (see
//! `FaultyFs` in the tests) to inject short writes, failed syncs and
//! `ENOSPC` exactly where they want them.

use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};

/// An open file, as storage code uses one.
pub trait FsFile: Send + Sync {
    /// Writes all of `buf` at the current position.
    fn write_all(&mut self, buf: &[u8]) -> io::Result<()>;
    /// `fdatasync`: the file's data (and size) are durable once this returns.
    fn sync_data(&self) -> io::Result<()>;
    /// Reserves `len` bytes of disk for the file (no sparse holes), so that
    /// writing into a memory map of it can never hit a full disk.
    fn allocate(&self, len: u64) -> io::Result<()>;
    /// Writes zeros over the first `len` bytes, so that every block of
    /// them is allocated and written. Unlike [`allocate`](Self::allocate),
    /// which leaves the blocks marked unwritten on ext4 and XFS, a later
    /// `fdatasync` of data written there has no extent to convert, no
    /// metadata to write. The zeros go in 4 KiB writes: larger ones leave
    /// large folios in the page cache, and a record written into one
    /// through a memory map dirties, and has the next sync write, the
    /// whole folio (BENCHMARKS.md, session 12).
    fn zero_fill(&self, len: u64) -> io::Result<()> {
        use std::os::unix::fs::FileExt;
        static ZEROS: [u8; 4096] = [0; 4096];
        let file = self.std_file();
        let mut at = 0;
        while at < len {
            let n = (len - at).min(ZEROS.len() as u64) as usize;
            file.write_all_at(&ZEROS[..n], at)?;
            at += n as u64;
        }
        Ok(())
    }
    /// Drops the cached pages of bytes `from..to` (`to` = `u64::MAX`: to
    /// the end) that are written to disk and not mapped (Linux
    /// `posix_fadvise(POSIX_FADV_DONTNEED)`), so that the memory goes back
    /// to the page allocator while it is still warm; a later read reads
    /// the disk. Loses nothing: dirty and mapped pages stay. A hint, so
    /// errors are ignored; elsewhere it does nothing.
    fn drop_cached(&self, from: u64, to: u64) {
        let _ = (from, to);
    }
    /// The underlying file, to memory-map it or read it.
    fn std_file(&self) -> &File;
    /// An independent handle to the same open file (for syncing from
    /// another thread).
    fn try_clone(&self) -> io::Result<Box<dyn FsFile>>;
    /// Starts writing the bytes `written_to..upto` back to disk, and waits
    /// until those below `written_to` are (Linux: `sync_file_range`; not
    /// durable: no metadata, no cache flush). A writer of a large file
    /// calls it as it goes, so that the file's dirty pages never pile up
    /// (see `snapshot::WRITE_BEHIND`). Elsewhere it does nothing.
    fn write_behind(&self, written_to: u64, upto: u64) -> io::Result<()> {
        let _ = (written_to, upto);
        Ok(())
    }
}

/// File-system operations.
pub trait Fs: Send + Sync + 'static {
    /// Creates (truncating) a file for writing and reading.
    fn create(&self, path: &Path) -> io::Result<Box<dyn FsFile>>;
    /// Opens an existing file for reading and writing.
    fn open_rw(&self, path: &Path) -> io::Result<Box<dyn FsFile>>;
    /// Opens an existing file for reading.
    fn open_read(&self, path: &Path) -> io::Result<File>;
    /// Renames atomically.
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()>;
    /// Removes a file.
    fn remove(&self, path: &Path) -> io::Result<()>;
    /// Creates a directory and its parents.
    fn create_dir_all(&self, path: &Path) -> io::Result<()>;
    /// Fsyncs a directory, making creates, renames and removes in it durable.
    fn sync_dir(&self, path: &Path) -> io::Result<()>;
    /// Lists a directory's file names.
    fn list(&self, path: &Path) -> io::Result<Vec<PathBuf>>;
    /// The machine's boot id (Linux: `/proc/sys/kernel/random/boot_id`),
    /// which changes at every boot; zeros where there is none. The log's
    /// sync mark keeps it, to tell a power loss from a process kill
    /// (tests that model a power loss give another).
    fn boot_id(&self) -> [u8; 16] {
        let mut id = [0u8; 16];
        if let Ok(text) = std::fs::read_to_string("/proc/sys/kernel/random/boot_id") {
            let hex: Vec<u8> = text.bytes().filter(u8::is_ascii_hexdigit).collect();
            for (i, pair) in hex.chunks(2).take(16).enumerate() {
                let digits = std::str::from_utf8(pair).unwrap_or("0");
                id[i] = u8::from_str_radix(digits, 16).unwrap_or(0);
            }
        }
        id
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

pub(crate) struct RealFile(pub(crate) File);

impl FsFile for RealFile {
    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        io::Write::write_all(&mut self.0, buf)
    }
    fn sync_data(&self) -> io::Result<()> {
        self.0.sync_data()
    }
    fn allocate(&self, len: u64) -> io::Result<()> {
        rustix::fs::fallocate(&self.0, rustix::fs::FallocateFlags::empty(), 0, len)
            .map_err(io::Error::from)
    }
    fn std_file(&self) -> &File {
        &self.0
    }
    fn try_clone(&self) -> io::Result<Box<dyn FsFile>> {
        Ok(Box::new(RealFile(self.0.try_clone()?)))
    }
    #[cfg(target_os = "linux")]
    fn drop_cached(&self, from: u64, to: u64) {
        if to > from {
            let len = std::num::NonZeroU64::new(to - from).filter(|_| to != u64::MAX);
            let _ = rustix::fs::fadvise(&self.0, from, len, rustix::fs::Advice::DontNeed);
        }
    }
    #[cfg(target_os = "linux")]
    fn write_behind(&self, written_to: u64, upto: u64) -> io::Result<()> {
        use std::os::fd::AsRawFd;
        let range = |from: u64, to: u64, flags: libc::c_uint| {
            let (from, len) = (from as libc::off64_t, (to - from) as libc::off64_t);
            // SAFETY: a plain system call on a file descriptor we own.
            match unsafe { libc::sync_file_range(self.0.as_raw_fd(), from, len, flags) } {
                0 => Ok(()),
                _ => {
                    let e = io::Error::last_os_error();
                    // A pacing aid only: where there is none (a sandbox, a
                    // file system without it), the fsync does it all.
                    match e.raw_os_error() {
                        Some(libc::ENOSYS | libc::EOPNOTSUPP) => Ok(()),
                        _ => Err(e),
                    }
                }
            }
        };
        if upto > written_to {
            range(written_to, upto, libc::SYNC_FILE_RANGE_WRITE)?;
        }
        if written_to > 0 {
            range(
                0,
                written_to,
                libc::SYNC_FILE_RANGE_WAIT_BEFORE
                    | libc::SYNC_FILE_RANGE_WRITE
                    | libc::SYNC_FILE_RANGE_WAIT_AFTER,
            )?;
        }
        Ok(())
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
    fn open_read(&self, path: &Path) -> io::Result<File> {
        File::open(path)
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
}
