//! Snapshot files: one filter, its name, expiry and the lsn it covers.
//!
//! ```text
//! magic "SEENSNAP", u16 version (2), u16 reserved, u32 name length,
//! u64 filter id, u64 lsn, i64 expiry (unix ms, 0 = none), name bytes,
//! u32 CRC-32 of all the above, then the filter in the seen byte format,
//! then (version 2) u64 count lsn, u64 count, u32 CRC-32 of those 16 bytes
//! ```
//!
//! A count lsn of 0 says the bits are the filter at `lsn`. Otherwise the
//! bits were copied while adds went on: they hold every add up to `lsn`
//! and some after it, and the filter's count is `count` once every record
//! up to the count lsn has been replayed over them. For a chain, the adds
//! made during the copy all went into its newest sub-filter, and replay
//! puts them there (adds between `lsn` and the copy, which may have grown
//! the chain, are in the copy already: replaying them changes nothing);
//! the older sub-filters keep the counts the copy has, and the newest gets
//! the rest of `count`. Version 1 files (no trailer) are still read.
//!
//! Written to `<id>.snap.tmp`, synced, renamed over `<id>.snap`, and the
//! directory synced: a crash leaves either the old snapshot or the new one.

use std::path::{Path, PathBuf};

use seen_core::{AnyFilter, DecodeOptions};

use crate::error::{io_err, ErrorKind, Result};
use crate::fs::{Fs, FsFile};

const MAGIC: [u8; 8] = *b"SEENSNAP";
const VERSION: u16 = 2;
const TRAILER: usize = 20;
const FIXED: usize = 40;

/// A filter as loaded from its snapshot.
pub(crate) struct Loaded {
    pub(crate) id: u64,
    pub(crate) lsn: u64,
    pub(crate) expire_at_ms: i64,
    pub(crate) name: Vec<u8>,
    pub(crate) filter: AnyFilter,
    /// `(count lsn, count)` of a snapshot copied while adds went on.
    pub(crate) count_fix: Option<(u64, u64)>,
}

/// The trailer: the count lsn (0 for a snapshot taken with writers held
/// off) and the count that holds once the log is replayed up to it.
pub(crate) fn trailer(count_lsn: u64, count: u64) -> Vec<u8> {
    let mut b = Vec::with_capacity(TRAILER);
    b.extend_from_slice(&count_lsn.to_le_bytes());
    b.extend_from_slice(&count.to_le_bytes());
    let crc = crc32fast::hash(&b);
    b.extend_from_slice(&crc.to_le_bytes());
    b
}

pub(crate) fn file_name(id: u64) -> String {
    format!("{id:016x}.snap")
}

pub(crate) fn parse_file_name(path: &Path) -> Option<u64> {
    let name = path.file_name()?.to_str()?;
    let hex = name.strip_suffix(".snap")?;
    (hex.len() == 16).then(|| u64::from_str_radix(hex, 16).ok())?
}

/// The snapshot header for a filter.
pub(crate) fn header(id: u64, lsn: u64, expire_at_ms: i64, name: &[u8]) -> Vec<u8> {
    let mut b = Vec::with_capacity(FIXED + name.len() + 4);
    b.extend_from_slice(&MAGIC);
    b.extend_from_slice(&VERSION.to_le_bytes());
    b.extend_from_slice(&0u16.to_le_bytes());
    b.extend_from_slice(&(name.len() as u32).to_le_bytes());
    b.extend_from_slice(&id.to_le_bytes());
    b.extend_from_slice(&lsn.to_le_bytes());
    b.extend_from_slice(&expire_at_ms.to_le_bytes());
    b.extend_from_slice(name);
    let crc = crc32fast::hash(&b);
    b.extend_from_slice(&crc.to_le_bytes());
    b
}

/// A snapshot being written: filled while the filter is locked, made
/// durable (sync, rename, directory sync) after the lock is released.
pub(crate) struct Pending {
    tmp: PathBuf,
    path: PathBuf,
    file: Box<dyn FsFile>,
}

/// `io::Write` over an [`FsFile`], so the filter encoder can stream into it.
struct FsWrite<'a>(&'a mut dyn FsFile);

impl std::io::Write for FsWrite<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.write_all(buf)?;
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Starts the snapshot of filter `id`: writes `header`, then lets `body`
/// stream the filter into the temp file (through a 1 MiB buffer), then
/// writes the [`trailer`] `body` returns.
pub(crate) fn begin(
    fs: &dyn Fs,
    dir: &Path,
    id: u64,
    header: &[u8],
    body: impl FnOnce(&mut dyn std::io::Write) -> Result<Vec<u8>>,
) -> Result<Pending> {
    let path = dir.join(file_name(id));
    let tmp = dir.join(format!("{}.tmp", file_name(id)));
    let mut file = fs.create(&tmp).map_err(|e| io_err("create", &tmp, e))?;
    let result = (|| -> Result<()> {
        file.write_all(header)
            .map_err(|e| io_err("write", &tmp, e))?;
        let mut w = std::io::BufWriter::with_capacity(1 << 20, FsWrite(&mut *file));
        let trailer = body(&mut w)?;
        std::io::Write::write_all(&mut w, &trailer)
            .and_then(|()| std::io::Write::flush(&mut w))
            .map_err(|e| io_err("write", &tmp, e))?;
        Ok(())
    })();
    match result {
        Ok(()) => Ok(Pending { tmp, path, file }),
        Err(e) => {
            let _ = fs.remove(&tmp);
            // The encoder reports I/O failures as filter errors; say which
            // file they were about.
            Err(match e.kind() {
                ErrorKind::Filter(inner) => {
                    io_err("write", &tmp, std::io::Error::other(inner.to_string()))
                }
                _ => e,
            })
        }
    }
}

/// Drops a snapshot begun and not wanted after all (its temp file).
pub(crate) fn abandon(fs: &dyn Fs, p: Pending) {
    drop(p.file);
    let _ = fs.remove(&p.tmp);
}

/// Makes a snapshot durable: sync, rename over the old one, sync the
/// directory. A crash leaves either the old snapshot or the new one.
pub(crate) fn finish(fs: &dyn Fs, dir: &Path, p: Pending) -> Result<PathBuf> {
    crate::fs::install(fs, dir, p.file, &p.tmp, &p.path).map(|()| p.path)
}

/// Reads a snapshot file.
pub(crate) fn read(fs: &dyn Fs, path: &Path, opts: &DecodeOptions) -> Result<Loaded> {
    let file = fs.open_read(path).map_err(|e| io_err("open", path, e))?;
    let mut r = std::io::BufReader::with_capacity(1 << 16, file);
    let corrupt = |offset: u64, what: String| -> crate::Error {
        ErrorKind::Corrupt {
            path: path.to_path_buf(),
            offset,
            what,
        }
        .into()
    };
    let mut fixed = [0u8; FIXED];
    std::io::Read::read_exact(&mut r, &mut fixed)
        .map_err(|e| corrupt(0, format!("snapshot header: {e}")))?;
    if fixed[..8] != MAGIC {
        return Err(corrupt(0, "not a seen snapshot (bad magic)".into()));
    }
    let version = u16::from_le_bytes([fixed[8], fixed[9]]);
    if version != 1 && version != VERSION {
        return Err(corrupt(
            8,
            format!("snapshot version {version}, this build reads {VERSION}"),
        ));
    }
    let u64_at = |o: usize| u64::from_le_bytes(fixed[o..o + 8].try_into().expect("8"));
    let name_len = u32::from_le_bytes(fixed[12..16].try_into().expect("4")) as usize;
    if name_len > 1 << 30 {
        return Err(corrupt(12, format!("name length {name_len}")));
    }
    let id = u64_at(16);
    let lsn = u64_at(24);
    let expire_at_ms = u64_at(32) as i64;
    let mut rest = vec![0u8; name_len + 4];
    std::io::Read::read_exact(&mut r, &mut rest)
        .map_err(|e| corrupt(FIXED as u64, format!("snapshot header: {e}")))?;
    let mut h = crc32fast::Hasher::new();
    h.update(&fixed);
    h.update(&rest[..name_len]);
    let stored = u32::from_le_bytes(rest[name_len..].try_into().expect("4"));
    if h.finalize() != stored {
        return Err(corrupt(0, "snapshot header checksum mismatch".into()));
    }
    let body_at = (FIXED + name_len + 4) as u64;
    let filter = seen_core::decode(&mut r, opts)
        .map_err(|e| corrupt(body_at, format!("filter data: {e}")))?;
    let mut count_fix = None;
    if version >= 2 {
        let mut t = [0u8; TRAILER];
        std::io::Read::read_exact(&mut r, &mut t)
            .map_err(|e| corrupt(body_at, format!("snapshot trailer after the filter: {e}")))?;
        let stored = u32::from_le_bytes(t[16..20].try_into().expect("4"));
        if crc32fast::hash(&t[..16]) != stored {
            return Err(corrupt(
                body_at,
                "snapshot trailer checksum mismatch".into(),
            ));
        }
        let count_lsn = u64::from_le_bytes(t[..8].try_into().expect("8"));
        let count = u64::from_le_bytes(t[8..16].try_into().expect("8"));
        if count_lsn != 0 {
            if count_lsn < lsn || !matches!(filter, AnyFilter::Bloom(_) | AnyFilter::Scalable(_)) {
                return Err(corrupt(
                    body_at,
                    format!("snapshot trailer: count lsn {count_lsn} with lsn {lsn}"),
                ));
            }
            count_fix = Some((count_lsn, count));
        }
    }
    rest.truncate(name_len);
    Ok(Loaded {
        id,
        lsn,
        expire_at_ms,
        name: rest,
        filter,
        count_fix,
    })
}
