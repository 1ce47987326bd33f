//! Snapshot files: one filter, its name and expiry, exactly as it was once
//! every log record up to the snapshot's lsn was applied (docs/FORMAT.md,
//! section 6.2).
//!
//! ```text
//! magic "SEENSNAP", u16 version (4), u16 reserved, u32 name length,
//! u64 filter id, u64 lsn, i64 expiry (unix ms, 0 = none), name bytes,
//! u32 CRC-32 of all the above, then the filter in the seen byte format
//! ```
//!
//! Versions 1 to 3 (data directories of format 6 and earlier) are read too:
//! version 2 and 3 files end with a trailer describing a copy taken while
//! adds went on, which only the upgrade of such a directory uses
//! ([`CopiedWhileAdding`]).
//!
//! Written to `<id>.snap.tmp`, synced, renamed over `<id>.snap`, and the
//! directory synced: a crash leaves either the old snapshot or the new one.

use std::io::Read;
use std::path::{Path, PathBuf};

use seen_core::{AnyFilter, DecodeOptions};

use crate::error::{io_err, Error, ErrorKind, Result};
use crate::fs::{Fs, FsReader, FsWriter};

const MAGIC: [u8; 8] = *b"SEENSNAP";
const VERSION: u16 = 4;
/// Bytes of the header before the name.
const FIXED: usize = 40;

/// Lsns from here up are damage wherever they are read (a record, a
/// snapshot), so that the next lsn an open computes (one past the
/// highest) cannot overflow.
pub(crate) const MAX_LSN: u64 = 1 << 62;
/// Filter ids from here up are damage wherever they are read, for the same
/// reason.
pub(crate) const MAX_ID: u64 = 1 << 62;

/// A filter as loaded from its snapshot.
pub(crate) struct Loaded {
    pub(crate) id: u64,
    pub(crate) lsn: u64,
    pub(crate) expire_at_ms: i64,
    pub(crate) name: Vec<u8>,
    pub(crate) filter: AnyFilter,
    /// Set in a version 2 or 3 file copied while adds went on.
    pub(crate) copied_while_adding: Option<CopiedWhileAdding>,
}

/// How a data directory of format 6 or earlier copied a filter while its
/// writers went on: its bits hold every record up to the snapshot's lsn and
/// some after; its count is `count` once the log is replayed up to
/// `count_lsn`. A counting filter was copied in pieces of `per_piece`
/// blocks, piece `i` holding every record up to `piece_lsns[i]` and none
/// after.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct CopiedWhileAdding {
    pub(crate) count_lsn: u64,
    pub(crate) count: u64,
    pub(crate) per_piece: u64,
    pub(crate) piece_lsns: Vec<u64>,
}

impl CopiedWhileAdding {
    /// Does the copy hold the change a record at `lsn` made to `block`?
    pub(crate) fn holds(&self, block: u64, lsn: u64) -> bool {
        self.piece_lsns
            .get((block / self.per_piece.max(1)) as usize)
            .is_some_and(|&piece| lsn <= piece)
    }
}

pub(crate) fn file_name(id: u64) -> String {
    format!("{id:016x}.snap")
}

/// The id in a snapshot's file name: 16 hex digits, then `.snap`.
pub(crate) fn parse_file_name(path: &Path) -> Option<u64> {
    parse_id(path.file_name()?.to_str()?.strip_suffix(".snap")?)
}

fn parse_id(hex: &str) -> Option<u64> {
    (hex.len() == 16 && hex.bytes().all(|b| b.is_ascii_hexdigit()))
        .then(|| u64::from_str_radix(hex, 16).ok())?
}

/// The suffix a salvaging open adds to a damaged snapshot's name.
const DAMAGED: &str = ".damaged";

/// The id of a snapshot a salvaging open put aside: `<id>.snap.damaged`,
/// or `<id>.snap.damaged.<n>`.
pub(crate) fn parse_damaged_name(path: &Path) -> Option<u64> {
    let name = path.file_name()?.to_str()?;
    let (hex, rest) = name.split_once(".snap")?;
    let n = rest.strip_prefix(DAMAGED)?;
    let numbered = n
        .strip_prefix('.')
        .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()));
    if !n.is_empty() && !numbered {
        return None;
    }
    parse_id(hex)
}

/// Where a salvaging open puts the damaged snapshot `path` aside:
/// `<id>.snap.damaged`, or the lowest `<id>.snap.damaged.<n>` that none of
/// `listed` (the directory's files) has, so that no damaged file is
/// overwritten.
pub(crate) fn damaged_name(path: &Path, listed: &[PathBuf]) -> PathBuf {
    let with = |suffix: String| {
        let mut p = path.as_os_str().to_owned();
        p.push(suffix);
        PathBuf::from(p)
    };
    std::iter::once(with(DAMAGED.to_string()))
        .chain((1u64..).map(|n| with(format!("{DAMAGED}.{n}"))))
        .find(|p| !listed.contains(p))
        .expect("fewer files than numbers")
}

/// What a snapshot file holds besides the filter.
pub(crate) struct Header<'a> {
    pub(crate) id: u64,
    pub(crate) lsn: u64,
    pub(crate) expire_at_ms: i64,
    pub(crate) name: &'a [u8],
}

fn encode_header(h: &Header<'_>) -> Vec<u8> {
    let mut b = Vec::with_capacity(FIXED + h.name.len() + 4);
    b.extend_from_slice(&MAGIC);
    b.extend_from_slice(&VERSION.to_le_bytes());
    b.extend_from_slice(&0u16.to_le_bytes());
    b.extend_from_slice(&(h.name.len() as u32).to_le_bytes());
    b.extend_from_slice(&h.id.to_le_bytes());
    b.extend_from_slice(&h.lsn.to_le_bytes());
    b.extend_from_slice(&h.expire_at_ms.to_le_bytes());
    b.extend_from_slice(h.name);
    let crc = crc32fast::hash(&b);
    b.extend_from_slice(&crc.to_le_bytes());
    b
}

/// Writes the snapshot of `filter` into `dir` and makes it durable (temp
/// file, sync, rename, directory sync). On failure the temp file is gone
/// and the old snapshot, if any, is untouched.
pub(crate) fn write(fs: &dyn Fs, dir: &Path, h: &Header<'_>, filter: &AnyFilter) -> Result<()> {
    let path = dir.join(file_name(h.id));
    let tmp = dir.join(format!("{}.tmp", file_name(h.id)));
    let file = fs.create(&tmp).map_err(|e| io_err("create", &tmp, e))?;
    let written = (|| {
        let mut w = std::io::BufWriter::with_capacity(
            1 << 20,
            FsWriter {
                file: &*file,
                pos: 0,
            },
        );
        std::io::Write::write_all(&mut w, &encode_header(h))?;
        filter.encode(&mut w).map_err(|e| match e.into_kind() {
            seen_core::ErrorKind::Io(e) => e,
            k => std::io::Error::other(k.to_string()),
        })?;
        std::io::Write::flush(&mut w)
    })();
    if let Err(e) = written {
        drop(file);
        let _ = fs.remove(&tmp);
        return Err(io_err("write", &tmp, e));
    }
    crate::fs::install(fs, dir, file, &tmp, &path)
}

/// Reads a snapshot file, checking its checksums.
pub(crate) fn read(fs: &dyn Fs, path: &Path, opts: &DecodeOptions) -> Result<Loaded> {
    let file = fs.open_read(path).map_err(|e| io_err("open", path, e))?;
    let mut r = std::io::BufReader::with_capacity(
        1 << 16,
        FsReader {
            file: &*file,
            pos: 0,
        },
    );
    let corrupt = |offset: u64, what: String| -> Error {
        ErrorKind::Corrupt {
            path: path.to_path_buf(),
            offset,
            what,
        }
        .into()
    };
    // A file that ends early is damaged; any other failure to read it is
    // the disk's or the system's, an I/O error, which a salvaging open
    // does not skip either.
    let read_failed = |offset: u64, what: &str, e: std::io::Error| -> Error {
        if e.kind() == std::io::ErrorKind::UnexpectedEof {
            corrupt(offset, format!("{what}: {e}"))
        } else {
            io_err("read", path, e)
        }
    };
    let mut fixed = [0u8; FIXED];
    r.read_exact(&mut fixed)
        .map_err(|e| read_failed(0, "snapshot header", e))?;
    if fixed[..8] != MAGIC {
        return Err(corrupt(0, "not a seen snapshot (bad magic)".into()));
    }
    let version = u16::from_le_bytes([fixed[8], fixed[9]]);
    if !(1..=VERSION).contains(&version) {
        return Err(corrupt(
            8,
            format!("snapshot version {version}, this build reads up to {VERSION}"),
        ));
    }
    let u64_at = |o: usize| u64::from_le_bytes(fixed[o..o + 8].try_into().expect("8"));
    let name_len = u32::from_le_bytes(fixed[12..16].try_into().expect("4")) as usize;
    if name_len > 1 << 30 {
        return Err(corrupt(12, format!("name length {name_len}")));
    }
    let (id, lsn, expire_at_ms) = (u64_at(16), u64_at(24), u64_at(32) as i64);
    let mut rest = vec![0u8; name_len + 4];
    r.read_exact(&mut rest)
        .map_err(|e| read_failed(FIXED as u64, "snapshot header", e))?;
    let mut h = crc32fast::Hasher::new();
    h.update(&fixed);
    h.update(&rest[..name_len]);
    if h.finalize() != u32::from_le_bytes(rest[name_len..].try_into().expect("4")) {
        return Err(corrupt(0, "snapshot header checksum mismatch".into()));
    }
    if lsn >= MAX_LSN {
        return Err(corrupt(24, format!("snapshot lsn {lsn} out of range")));
    }
    if id >= MAX_ID {
        return Err(corrupt(16, format!("snapshot filter id {id} out of range")));
    }
    let body_at = (FIXED + name_len + 4) as u64;
    // The filter's header is checked (its CRC) before its size is held
    // against the limit or allocated: a filter too large for either is
    // sound, not damaged.
    let filter = seen_core::decode(&mut r, opts).map_err(|e| match e.into_kind() {
        k @ (seen_core::ErrorKind::TooLarge { .. } | seen_core::ErrorKind::OutOfMemory(_)) => {
            ErrorKind::CannotLoad {
                path: path.to_path_buf(),
                source: k.into(),
            }
            .into()
        }
        seen_core::ErrorKind::Io(source) => io_err("read", path, source),
        k => corrupt(body_at, format!("filter data: {k}")),
    })?;
    let copied_while_adding = match version {
        2 | 3 => read_trailer(&mut r, version, &filter, lsn).map_err(|e| match e {
            Trailer::Read(e) => read_failed(body_at, "snapshot trailer after the filter", e),
            Trailer::Bad(what) => corrupt(body_at, format!("snapshot trailer: {what}")),
        })?,
        _ => None,
    };
    rest.truncate(name_len);
    Ok(Loaded {
        id,
        lsn,
        expire_at_ms,
        name: rest,
        filter,
        copied_while_adding,
    })
}

enum Trailer {
    Read(std::io::Error),
    Bad(String),
}

/// The trailer of a version 2 file (count lsn, count, CRC) or a version 3
/// one (count lsn, count, blocks per piece, pieces `n`, `n` piece lsns,
/// CRC), checked against the filter and the snapshot's lsn.
fn read_trailer(
    r: &mut impl Read,
    version: u16,
    filter: &AnyFilter,
    lsn: u64,
) -> std::result::Result<Option<CopiedWhileAdding>, Trailer> {
    let mut t = vec![0u8; if version == 2 { 16 } else { 32 }];
    r.read_exact(&mut t).map_err(Trailer::Read)?;
    let u64_of = |t: &[u8], o: usize| u64::from_le_bytes(t[o..o + 8].try_into().expect("8"));
    let (count_lsn, count) = (u64_of(&t, 0), u64_of(&t, 8));
    let (mut per_piece, mut pieces) = (0, 0);
    if version == 3 {
        (per_piece, pieces) = (u64_of(&t, 16), u64_of(&t, 24));
        // Bounded by the filter before anything is allocated for it.
        let expected = match filter {
            AnyFilter::Counting(c) if per_piece > 0 => c.blocks().div_ceil(per_piece),
            _ => 0,
        };
        if pieces != expected {
            return Err(Trailer::Bad(format!(
                "{pieces} pieces of {per_piece} blocks for this filter"
            )));
        }
        t.resize(32 + 8 * pieces as usize, 0);
        r.read_exact(&mut t[32..]).map_err(Trailer::Read)?;
    }
    let mut crc = [0u8; 4];
    r.read_exact(&mut crc).map_err(Trailer::Read)?;
    if crc32fast::hash(&t) != u32::from_le_bytes(crc) {
        return Err(Trailer::Bad("checksum mismatch".into()));
    }
    if count_lsn == 0 {
        return Ok(None);
    }
    let piece_lsns: Vec<u64> = (0..pieces as usize)
        .map(|i| u64_of(&t, 32 + 8 * i))
        .collect();
    let copied = match filter {
        AnyFilter::Counting(_) => !piece_lsns.is_empty(),
        _ => piece_lsns.is_empty(),
    };
    let ordered = piece_lsns.windows(2).all(|w| w[0] <= w[1])
        && piece_lsns.first().is_none_or(|&l| l >= lsn)
        && piece_lsns.last().is_none_or(|&l| l <= count_lsn);
    if count_lsn < lsn || count_lsn >= MAX_LSN || !copied || !ordered {
        return Err(Trailer::Bad(format!(
            "count lsn {count_lsn} and piece lsns {piece_lsns:?} with lsn {lsn}"
        )));
    }
    Ok(Some(CopiedWhileAdding {
        count_lsn,
        count,
        per_piece,
        piece_lsns,
    }))
}
