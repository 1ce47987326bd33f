//! Snapshot files: one filter, its name, expiry and the lsn it covers.
//!
//! ```text
//! magic "SEENSNAP", u16 version (3), u16 reserved, u32 name length,
//! u64 filter id, u64 lsn, i64 expiry (unix ms, 0 = none), name bytes,
//! u32 CRC-32 of all the above, then the filter in the seen byte format,
//! then a trailer: u64 count lsn, u64 count, (version 3) u64 blocks per
//! piece, u64 pieces n, n x u64 piece lsn, then u32 CRC-32 of the trailer
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
//! the rest of `count`.
//!
//! A counting filter is copied in pieces of blocks, each under the
//! filter's lock (its adds and removes change counters both ways, so a
//! record replayed over a copy that already has it would count twice):
//! piece `i` holds every record of the filter up to its piece lsn and none
//! after, so replay applies to each block only the records above its
//! piece's lsn (an item's counters are all in one block). Version 1 files
//! (no trailer) and version 2 files (no pieces) are still read.
//!
//! Written to `<id>.snap.tmp`, synced, renamed over `<id>.snap`, and the
//! directory synced: a crash leaves either the old snapshot or the new one.

use std::path::{Path, PathBuf};

use seen_core::{AnyFilter, DecodeOptions};

use crate::error::{io_err, ErrorKind, Result};
use crate::fs::{Fs, FsFile};

const MAGIC: [u8; 8] = *b"SEENSNAP";
const VERSION: u16 = 3;
/// The version 2 trailer, and the fixed part of the version 3 one
/// (without the piece lsns and the CRC).
const TRAILER_V2: usize = 20;
const TRAILER_FIXED: usize = 32;
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
    /// How a counting filter was copied in pieces, if it was.
    pub(crate) pieces: Option<Pieces>,
}

/// The pieces a counting filter was copied in: `per` blocks each (the
/// last may have fewer), piece `i` holding every record of the filter up
/// to `lsns[i]` and none after.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Pieces {
    pub(crate) per: u64,
    pub(crate) lsns: Vec<u64>,
}

impl Pieces {
    /// Does the copy hold the change a record at `lsn` made to `block`?
    pub(crate) fn holds(&self, block: u64, lsn: u64) -> bool {
        self.lsns
            .get((block / self.per) as usize)
            .is_some_and(|&piece| lsn <= piece)
    }
}

/// The trailer: the count lsn (0 for a snapshot taken with writers held
/// off) and the count that holds once the log is replayed up to it, and
/// the pieces of a counting filter copied in pieces.
pub(crate) fn trailer(count_lsn: u64, count: u64, pieces: Option<&Pieces>) -> Vec<u8> {
    let (per, lsns) = pieces.map_or((0, &[][..]), |p| (p.per, &p.lsns[..]));
    let mut b = Vec::with_capacity(TRAILER_FIXED + 8 * lsns.len() + 4);
    b.extend_from_slice(&count_lsn.to_le_bytes());
    b.extend_from_slice(&count.to_le_bytes());
    b.extend_from_slice(&per.to_le_bytes());
    b.extend_from_slice(&(lsns.len() as u64).to_le_bytes());
    for lsn in lsns {
        b.extend_from_slice(&lsn.to_le_bytes());
    }
    let crc = crc32fast::hash(&b);
    b.extend_from_slice(&crc.to_le_bytes());
    b
}

pub(crate) fn file_name(id: u64) -> String {
    format!("{id:016x}.snap")
}

pub(crate) fn parse_file_name(path: &Path) -> Option<u64> {
    let name = path.file_name()?.to_str()?;
    parse_id(name.strip_suffix(".snap")?)
}

/// The id in a snapshot's file name: 16 hex digits.
fn parse_id(hex: &str) -> Option<u64> {
    (hex.len() == 16 && hex.bytes().all(|b| b.is_ascii_hexdigit()))
        .then(|| u64::from_str_radix(hex, 16).ok())?
}

/// The suffix a salvaging open adds to a damaged snapshot's name when it
/// puts the file aside.
const DAMAGED: &str = ".damaged";

/// The id of a snapshot a salvaging open put aside: `<id>.snap.damaged`,
/// or `<id>.snap.damaged.<n>` (see [`damaged_name`]).
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
/// `<id>.snap.damaged`, or, if `listed` (the snapshot directory's files)
/// holds one of that name already (the same id's snapshot damaged on an
/// earlier open), `<id>.snap.damaged.<n>` with the lowest `n` from 1 that
/// none has. So no damaged file is overwritten.
pub(crate) fn damaged_name(path: &Path, listed: &[PathBuf]) -> PathBuf {
    let with = |suffix: String| {
        let mut p = path.as_os_str().to_owned();
        p.push(suffix);
        PathBuf::from(p)
    };
    let first = with(DAMAGED.to_string());
    if !listed.contains(&first) {
        return first;
    }
    (1u64..)
        .map(|n| with(format!("{DAMAGED}.{n}")))
        .find(|p| !listed.contains(p))
        .expect("fewer files than numbers")
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

/// How much of a snapshot is written before its writeback is started
/// (and the previous part's waited for; see [`FsFile::write_behind`]).
/// Left to the kernel, a 1 GiB snapshot's dirty pages were written back
/// in bulk during its fsync, and changes to the log's files meanwhile
/// (making a segment or a spare, renaming one) took 0.2-2.2 s, a writer
/// waiting on some of them; with it, writers' pauses during a 1 GiB
/// checkpoint went from 124-1,456 ms in 5 of 24 measurements to one of
/// 482 ms (BENCHMARKS.md, session 11).
const WRITE_BEHIND: u64 = 8 << 20;

/// `io::Write` over an [`FsFile`], so the filter encoder can stream into
/// it; it starts the writeback every [`WRITE_BEHIND`] bytes.
struct FsWrite<'a> {
    file: &'a mut dyn FsFile,
    /// Bytes written, and where the writeback last started.
    written: u64,
    started: u64,
    /// Whether to start the writeback as it goes.
    pace: bool,
}

impl std::io::Write for FsWrite<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        // A MiB at a time at most, so that the writeback starts every
        // WRITE_BEHIND bytes whatever slices the encoder hands over.
        let buf = &buf[..buf.len().min(1 << 20)];
        self.file.write_all(buf)?;
        self.written += buf.len() as u64;
        if self.pace && self.written - self.started >= WRITE_BEHIND {
            self.file.write_behind(self.started, self.written)?;
            self.started = self.written;
        }
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Starts the snapshot of filter `id`: writes `header`, then lets `body`
/// stream the filter into the temp file (through a 1 MiB buffer), then
/// writes the [`trailer`] `body` returns. With `pace`, the file's
/// writeback starts every [`WRITE_BEHIND`] bytes, and the part before
/// waits for it: at the disk's speed, so not for a body that holds a
/// filter's writers off.
pub(crate) fn begin(
    fs: &dyn Fs,
    dir: &Path,
    id: u64,
    header: &[u8],
    pace: bool,
    body: impl FnOnce(&mut dyn std::io::Write) -> Result<Vec<u8>>,
) -> Result<Pending> {
    let path = dir.join(file_name(id));
    let tmp = dir.join(format!("{}.tmp", file_name(id)));
    let mut file = fs.create(&tmp).map_err(|e| io_err("create", &tmp, e))?;
    let result = (|| -> Result<()> {
        file.write_all(header)
            .map_err(|e| io_err("write", &tmp, e))?;
        let mut w = std::io::BufWriter::with_capacity(
            1 << 20,
            FsWrite {
                file: &mut *file,
                written: header.len() as u64,
                started: 0,
                pace,
            },
        );
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
    // A file that ends early is damaged; any other failure to read it is
    // the disk's or the system's (EIO, ESTALE...), and says nothing of its
    // bytes: an I/O error, which a salvaging open does not skip either.
    let read_failed = |offset: u64, what: &str, e: std::io::Error| -> crate::Error {
        if e.kind() == std::io::ErrorKind::UnexpectedEof {
            corrupt(offset, format!("{what}: {e}"))
        } else {
            io_err("read", path, e)
        }
    };
    let mut fixed = [0u8; FIXED];
    std::io::Read::read_exact(&mut r, &mut fixed)
        .map_err(|e| read_failed(0, "snapshot header", e))?;
    if fixed[..8] != MAGIC {
        return Err(corrupt(0, "not a seen snapshot (bad magic)".into()));
    }
    let version = u16::from_le_bytes([fixed[8], fixed[9]]);
    if !(1..=VERSION).contains(&version) {
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
        .map_err(|e| read_failed(FIXED as u64, "snapshot header", e))?;
    let mut h = crc32fast::Hasher::new();
    h.update(&fixed);
    h.update(&rest[..name_len]);
    let stored = u32::from_le_bytes(rest[name_len..].try_into().expect("4"));
    if h.finalize() != stored {
        return Err(corrupt(0, "snapshot header checksum mismatch".into()));
    }
    if lsn >= crate::wal::MAX_LSN {
        return Err(corrupt(24, format!("snapshot lsn {lsn} out of range")));
    }
    if id >= crate::wal::MAX_ID {
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
    let mut count_fix = None;
    let mut pieces = None;
    if version >= 2 {
        let trailer_err =
            |e: std::io::Error| read_failed(body_at, "snapshot trailer after the filter", e);
        let mut t = vec![
            0u8;
            if version == 2 {
                TRAILER_V2
            } else {
                TRAILER_FIXED
            }
        ];
        std::io::Read::read_exact(&mut r, &mut t).map_err(trailer_err)?;
        let u64_of = |t: &[u8], o: usize| u64::from_le_bytes(t[o..o + 8].try_into().expect("8"));
        let count_lsn = u64_of(&t, 0);
        let count = u64_of(&t, 8);
        if version >= 3 {
            let per = u64_of(&t, 16);
            let n = u64_of(&t, 24);
            // Bounded by the filter before anything is allocated for it.
            let expected = match &filter {
                AnyFilter::Counting(c) if per > 0 => c.blocks().div_ceil(per),
                _ => 0,
            };
            if n != expected {
                return Err(corrupt(
                    body_at,
                    format!("snapshot trailer: {n} pieces of {per} blocks for this filter"),
                ));
            }
            let mut rest = vec![0u8; 8 * n as usize + 4];
            std::io::Read::read_exact(&mut r, &mut rest).map_err(trailer_err)?;
            t.extend_from_slice(&rest);
            if n > 0 {
                let lsns: Vec<u64> = (0..n as usize).map(|i| u64_of(&t, 32 + 8 * i)).collect();
                pieces = Some(Pieces { per, lsns });
            }
        }
        let crc_at = t.len() - 4;
        let stored = u32::from_le_bytes(t[crc_at..].try_into().expect("4"));
        if crc32fast::hash(&t[..crc_at]) != stored {
            return Err(corrupt(
                body_at,
                "snapshot trailer checksum mismatch".into(),
            ));
        }
        if count_lsn != 0 {
            let copied = match &filter {
                AnyFilter::Bloom(_) | AnyFilter::Scalable(_) => true,
                AnyFilter::Counting(_) => pieces.is_some(),
                _ => false,
            };
            if count_lsn < lsn || count_lsn >= crate::wal::MAX_LSN || !copied {
                return Err(corrupt(
                    body_at,
                    format!("snapshot trailer: count lsn {count_lsn} with lsn {lsn}"),
                ));
            }
            count_fix = Some((count_lsn, count));
        }
        if let Some(p) = &pieces {
            let ordered = p.lsns.windows(2).all(|w| w[0] <= w[1])
                && p.lsns.last().is_some_and(|&l| l < crate::wal::MAX_LSN);
            if count_lsn == 0 || !ordered || p.lsns[0] < lsn || p.lsns[p.lsns.len() - 1] > count_lsn
            {
                return Err(corrupt(
                    body_at,
                    format!("snapshot trailer: piece lsns out of order for lsn {lsn} and count lsn {count_lsn}"),
                ));
            }
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
        pieces,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use seen_core::{BloomFilter, CountingBloomFilter};

    #[test]
    fn names_of_snapshots_put_aside() {
        let id = |name: &str| parse_damaged_name(Path::new(name));
        assert_eq!(id("00000000000000a2.snap.damaged"), Some(0xa2));
        assert_eq!(
            id("/d/snapshots/00000000000000a2.snap.damaged.12"),
            Some(0xa2)
        );
        for not in [
            "00000000000000a2.snap",
            "00000000000000a2.snap.damaged.",
            "00000000000000a2.snap.damaged.x",
            "00000000000000a2.snap.damagedx",
            "00000000000000a2.snap.tmp",
            "+0000000000000a2.snap.damaged",
            "a2.snap.damaged",
        ] {
            assert_eq!(id(not), None, "{not}");
        }
        let snap = Path::new("/d/00000000000000a2.snap");
        let aside = |listed: &[&str]| {
            let listed: Vec<PathBuf> = listed.iter().map(PathBuf::from).collect();
            damaged_name(snap, &listed)
        };
        assert_eq!(aside(&[]), Path::new("/d/00000000000000a2.snap.damaged"));
        assert_eq!(
            aside(&[
                "/d/00000000000000a2.snap.damaged",
                "/d/00000000000000a2.snap.damaged.2",
            ]),
            Path::new("/d/00000000000000a2.snap.damaged.1")
        );
        assert_eq!(
            aside(&[
                "/d/00000000000000a2.snap.damaged.1",
                "/d/00000000000000a2.snap.damaged",
                "/d/00000000000000a3.snap.damaged.2",
            ]),
            Path::new("/d/00000000000000a2.snap.damaged.2")
        );
    }

    /// A snapshot file of `version` holding `filter` and `trailer`.
    fn write(dir: &Path, version: u16, filter: &AnyFilter, trailer: &[u8]) -> PathBuf {
        write_with(dir, 7, 42, version, filter, trailer)
    }

    /// [`write`], for filter `id` at `lsn`.
    fn write_with(
        dir: &Path,
        id: u64,
        lsn: u64,
        version: u16,
        filter: &AnyFilter,
        trailer: &[u8],
    ) -> PathBuf {
        let mut bytes = header(id, lsn, 0, b"n");
        bytes[8..10].copy_from_slice(&version.to_le_bytes());
        let n = bytes.len();
        let crc = crc32fast::hash(&bytes[..n - 4]);
        bytes[n - 4..].copy_from_slice(&crc.to_le_bytes());
        filter.encode(&mut bytes).unwrap();
        bytes.extend_from_slice(trailer);
        let path = dir.join(file_name(7));
        std::fs::write(&path, bytes).unwrap();
        path
    }

    /// An lsn or a filter id of `u64::MAX` in a snapshot whose checksums
    /// hold (written by something else, or by hand) used to reach the
    /// open's next lsn or id, one past the highest: an overflow (a panic
    /// with overflow checks; without, lsn 0, or new filters' ids from 0,
    /// which existing snapshots' names and ids can hold). From `MAX_LSN`
    /// and `MAX_ID` up they are corruption.
    #[test]
    fn a_snapshot_lsn_or_id_out_of_range_is_corruption() {
        let dir = tempfile::tempdir().unwrap();
        let bloom = AnyFilter::Bloom(BloomFilter::new(100, 0.01).unwrap());
        // The lsn (at 24), then the filter id (at 16), out of range.
        for (id, lsn, at) in [(7, u64::MAX, 24), (u64::MAX, 42, 16)] {
            let path = write_with(dir.path(), id, lsn, VERSION, &bloom, &trailer(0, 0, None));
            let e = read_back(&path).err().expect("read");
            assert!(
                matches!(e.kind(), ErrorKind::Corrupt { offset, .. } if *offset == at),
                "{e}"
            );
            assert!(e.to_string().contains("out of range"), "{e}");
        }
    }

    fn read_back(path: &Path) -> Result<Loaded> {
        read(&crate::fs::RealFs, path, &DecodeOptions::default())
    }

    #[test]
    fn every_version_reads_and_bad_pieces_are_corruption() {
        let dir = tempfile::tempdir().unwrap();
        let bloom = AnyFilter::Bloom(BloomFilter::new(100, 0.01).unwrap());
        let counting = AnyFilter::Counting(CountingBloomFilter::new(100, 0.01).unwrap());
        let blocks = match &counting {
            AnyFilter::Counting(c) => c.blocks(),
            _ => unreachable!(),
        };
        // Version 1: no trailer.
        let l = read_back(&write(dir.path(), 1, &bloom, &[])).unwrap();
        assert_eq!((l.id, l.lsn, &l.name[..]), (7, 42, &b"n"[..]));
        assert_eq!((l.count_fix, l.pieces), (None, None));
        // Version 2: count lsn and count, 20 bytes.
        let mut v2 = Vec::new();
        v2.extend_from_slice(&50u64.to_le_bytes());
        v2.extend_from_slice(&9u64.to_le_bytes());
        let crc = crc32fast::hash(&v2);
        v2.extend_from_slice(&crc.to_le_bytes());
        let l = read_back(&write(dir.path(), 2, &bloom, &v2)).unwrap();
        assert_eq!((l.count_fix, l.pieces), (Some((50, 9)), None));
        // Version 3, as written now: a counting filter in pieces.
        let pieces = Pieces {
            per: 2,
            lsns: (0..blocks.div_ceil(2)).map(|i| 42 + i).collect(),
        };
        let last = *pieces.lsns.last().unwrap();
        let t = trailer(last + 1, 5, Some(&pieces));
        let l = read_back(&write(dir.path(), 3, &counting, &t)).unwrap();
        assert_eq!(l.count_fix, Some((last + 1, 5)));
        assert_eq!(l.pieces.as_ref(), Some(&pieces));
        assert!(pieces.holds(0, 42) && !pieces.holds(0, 43) && pieces.holds(3, 43));
        // Damaged or impossible trailers are corruption, naming the file.
        let corrupt = |version: u16, filter: &AnyFilter, t: &[u8], what: &str| {
            let path = write(dir.path(), version, filter, t);
            let e = read_back(&path).err().expect("an error");
            assert!(matches!(e.kind(), ErrorKind::Corrupt { .. }), "{e}");
            assert!(e.to_string().contains(what), "{e}");
        };
        let fewer = Pieces {
            per: 2,
            lsns: pieces.lsns[1..].to_vec(),
        };
        corrupt(3, &counting, &trailer(last + 1, 5, Some(&fewer)), "pieces");
        corrupt(3, &bloom, &trailer(last + 1, 5, Some(&pieces)), "pieces");
        corrupt(3, &counting, &trailer(last + 1, 5, None), "count lsn");
        corrupt(
            3,
            &counting,
            &trailer(last - 1, 5, Some(&pieces)),
            "piece lsns",
        );
        let mut flipped = t.clone();
        flipped[40] ^= 1;
        corrupt(3, &counting, &flipped, "checksum");
        corrupt(3, &counting, &t[..t.len() - 1], "trailer");
        corrupt(4, &bloom, &t, "version 4");
    }
}
