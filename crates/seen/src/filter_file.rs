//! Filter files the command line reads and writes: seen's byte format
//! (`docs/FORMAT.md`) and Guava's `BloomFilter.writeTo` format, told apart
//! by their first bytes, and written atomically.

use std::fs::{self, File};
use std::io::{self, BufReader, BufWriter, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use anyhow::{anyhow, bail, Result};
use clap::ValueEnum;
use seen_core::{guava, AnyFilter, BloomFilter, DecodeOptions};

/// The format of a filter file.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub(crate) enum FileFormat {
    /// seen's own byte format (`seen dedup --state`, any filter kind).
    Seen,
    /// Guava's `BloomFilter.writeTo` format (Java's
    /// `BloomFilter.readFrom` reads it).
    Guava,
}

/// What a file holds, by its first bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Content {
    /// A filter in seen's byte format.
    SeenFilter,
    /// A snapshot of a `seen serve` data directory.
    SeenSnapshot,
    /// A Guava `writeTo` file.
    Guava,
    /// None of those: the first bytes, for the error message.
    Unknown([u8; 8], usize),
}

/// Opens `path` for reading with a clear error; `None` if it does not
/// exist.
fn open(path: &Path, what: &str) -> Result<Option<File>> {
    let f = match File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => bail!("cannot open {what} '{}': {e}", path.display()),
    };
    if f.metadata().map(|m| m.is_dir()).unwrap_or(false) {
        bail!(
            "{what} '{}' is a directory; give a file path such as '{}/urls.seen'",
            path.display(),
            path.display()
        );
    }
    Ok(Some(f))
}

/// Opens `path` as [`open`] does and tells what it holds, by its first
/// bytes (and, for Guava, its length), the file then read from its start
/// again; `None` if it does not exist.
pub(crate) fn open_sniffed(path: &Path, what: &str) -> Result<Option<(File, Content)>> {
    let Some(mut f) = open(path, what)? else {
        return Ok(None);
    };
    let content = sniff(&mut f, path)?;
    f.seek(SeekFrom::Start(0))
        .map_err(|e| anyhow!("cannot read {what} '{}': {e}", path.display()))?;
    Ok(Some((f, content)))
}

/// What the file `f` holds, by its first bytes (and, for Guava, its length).
fn sniff(f: &mut File, path: &Path) -> Result<Content> {
    let len = f
        .metadata()
        .map_err(|e| anyhow!("cannot read '{}': {e}", path.display()))?
        .len();
    let mut head = [0u8; 8];
    let mut got = 0;
    while got < head.len() {
        match f.read(&mut head[got..]) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => bail!("cannot read '{}': {e}", path.display()),
        }
    }
    Ok(match &head[..got] {
        b"SEENFLTR" => Content::SeenFilter,
        b"SEENSNAP" => Content::SeenSnapshot,
        h if guava::looks_like_guava(h, len) => Content::Guava,
        _ => Content::Unknown(head, got),
    })
}

/// The filter in a Guava file.
pub(crate) fn read_guava(path: &Path, f: File) -> Result<BloomFilter> {
    guava::read_file(
        BufReader::with_capacity(1 << 20, f),
        guava::DEFAULT_MAX_BYTES,
    )
    .map_err(|e| anyhow!("'{}' is not a readable Guava filter: {e}", path.display()))
}

/// The filter in a seen filter file.
pub(crate) fn read_seen(path: &Path, f: File) -> Result<AnyFilter> {
    let opts = DecodeOptions {
        max_bytes: u64::MAX,
    };
    seen_core::decode(BufReader::with_capacity(1 << 20, f), &opts)
        .map_err(|e| anyhow!("'{}' is damaged or not a filter: {e}", path.display()))
}

/// The snapshot of a `seen serve` data directory at `path`: its filter,
/// name, lsn and expiry.
pub(crate) fn read_snapshot(path: &Path) -> Result<seen_store::SnapshotFile> {
    let opts = DecodeOptions {
        max_bytes: u64::MAX,
    };
    seen_store::read_snapshot(path, &opts)
        .map_err(|e| anyhow!("'{}' is a damaged snapshot: {e}", path.display()))
}

/// The temporary file a file is written as before it is renamed over
/// `path`, in the same directory (so the rename is atomic), and that
/// directory.
fn temporary(path: &Path) -> Result<(PathBuf, PathBuf)> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let file_name = path
        .file_name()
        .ok_or_else(|| anyhow!("'{}' is not a file path", path.display()))?;
    let tmp = dir.join(format!(
        ".{}.tmp-{}",
        file_name.to_string_lossy(),
        std::process::id()
    ));
    Ok((tmp, dir))
}

/// Makes and removes the temporary file of `path`, so that a file that
/// could not be written (no such directory, no permission, a read-only
/// disk) is reported before any work is done.
pub(crate) fn check_writable(path: &Path) -> Result<()> {
    let (tmp, _) = temporary(path)?;
    File::create(&tmp)
        .and_then(|_| fs::remove_file(&tmp))
        .map_err(|e| anyhow!("cannot write '{}': {e}", path.display()))
}

/// Writes `path` atomically with `write`: a temporary file in the same
/// directory, fsync, rename over the old file, fsync the directory. On
/// error the old file (if any) is unchanged and the temporary file gone.
pub(crate) fn write_atomically(
    path: &Path,
    write: impl FnOnce(&mut BufWriter<File>) -> seen_core::Result<()>,
) -> Result<()> {
    let (tmp, dir) = temporary(path)?;
    let result = (|| -> io::Result<()> {
        let mut w = BufWriter::with_capacity(1 << 20, File::create(&tmp)?);
        write(&mut w).map_err(io::Error::other)?;
        let f = w.into_inner().map_err(|e| e.into_error())?;
        f.sync_all()?;
        drop(f);
        fs::rename(&tmp, path)?;
        File::open(&dir)?.sync_all()
    })();
    if let Err(e) = result {
        let _ = fs::remove_file(&tmp);
        bail!("cannot write '{}': {e}", path.display());
    }
    Ok(())
}

/// Writes a Bloom filter to `path` in `format`, atomically.
pub(crate) fn save_bloom(filter: &BloomFilter, path: &Path, format: FileFormat) -> Result<()> {
    write_atomically(path, |w| match format {
        FileFormat::Seen => filter.encode(w),
        FileFormat::Guava => guava::write(filter, w),
    })
}
