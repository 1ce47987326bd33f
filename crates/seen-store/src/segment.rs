//! Log segments and the sync mark (docs/FORMAT.md, section 6.1).
//!
//! The log is a sequence of segment files, `log/<first lsn>.log` (20
//! decimal digits: every record in the file has that lsn or a higher one),
//! each holding records back to back from offset 0, written with ordinary
//! appends. A roll (when the segment passes its size, and at each
//! checkpoint) syncs the segment it leaves before the next one takes a
//! record, under `always` and `everysec`: so only the newest segment can
//! end in a torn record.
//!
//! `log/SYNCED`, the sync mark, says how much of the newest segment a sync
//! made durable: damage past it is what a power loss or a kill can leave
//! (a torn tail), damage before it is corruption.

use std::path::{Path, PathBuf};

use crate::error::{io_err, Result};
use crate::fs::Fs;
use crate::record::{parse, Parsed, Record};

/// A segment file: its first lsn and its path.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct SegmentFile {
    pub(crate) first_lsn: u64,
    pub(crate) path: PathBuf,
}

pub(crate) fn path(dir: &Path, first_lsn: u64) -> PathBuf {
    dir.join(format!("{first_lsn:020}.log"))
}

/// The segments of the log in `dir`, oldest first.
pub(crate) fn list(fs: &dyn Fs, dir: &Path) -> Result<Vec<SegmentFile>> {
    let listed = fs.list(dir).map_err(|e| io_err("list", dir, e))?;
    let mut segments: Vec<SegmentFile> = listed
        .into_iter()
        .filter_map(|path| {
            let name = path.file_name()?.to_str()?;
            let digits = name.strip_suffix(".log")?;
            let ok = digits.len() == 20 && digits.bytes().all(|b| b.is_ascii_digit());
            let first_lsn = digits.parse().ok().filter(|_| ok)?;
            Some(SegmentFile { first_lsn, path })
        })
        .collect();
    segments.sort_by_key(|s| s.first_lsn);
    Ok(segments)
}

/// A record that does not parse, where a segment's records stop.
#[derive(Debug)]
pub(crate) struct Damage {
    pub(crate) offset: u64,
    pub(crate) what: String,
    /// Whether a valid record starts somewhere after it (at a multiple of
    /// 8 bytes), as it does past damage in the middle of a log and never
    /// past the torn end of one.
    pub(crate) valid_after: bool,
    /// Whether the damaged bytes (up to the next valid record) hold a
    /// whole 512-byte sector of zeros, or zeros from the damage to the end
    /// of its sector (a sector whose first part an earlier sync made
    /// durable, the rest lost), or run to the end of the file: what losing
    /// sectors to a power loss leaves, where a flipped bit does not.
    pub(crate) lost_sectors: bool,
}

/// Calls `each` with the offset, lsn and record of every record of
/// `bytes` (a segment's contents) in order; returns where they stop short
/// of the end, if they do.
pub(crate) fn read_records<'a>(
    bytes: &'a [u8],
    mut each: impl FnMut(u64, u64, Record<'a>) -> Result<()>,
) -> Result<Option<Damage>> {
    let mut at = 0;
    while at < bytes.len() {
        match parse(&bytes[at..]) {
            Parsed::Record(record, lsn, used) => {
                each(at as u64, lsn, record)?;
                at += used;
            }
            Parsed::Bad(what) => {
                let next = (at + 8..bytes.len())
                    .step_by(8)
                    .find(|&o| matches!(parse(&bytes[o..]), Parsed::Record(..)));
                let end = next.unwrap_or(bytes.len());
                let zero_sector = (at.next_multiple_of(SECTOR)..end.saturating_sub(SECTOR - 1))
                    .step_by(SECTOR)
                    .any(|o| bytes[o..o + SECTOR].iter().all(|&b| b == 0));
                // A sector whose start a sync had made durable and whose
                // later bytes were lost: zeros from the damage to its end.
                let sector_end = at.next_multiple_of(SECTOR);
                let lost_tail = sector_end <= end && bytes[at..sector_end].iter().all(|&b| b == 0);
                return Ok(Some(Damage {
                    offset: at as u64,
                    what,
                    valid_after: next.is_some(),
                    lost_sectors: next.is_none() || zero_sector || (at < sector_end && lost_tail),
                }));
            }
        }
    }
    Ok(None)
}

/// The unit a disk writes whole or not at all.
const SECTOR: usize = 512;

/// The sync mark's file in the log's directory.
pub(crate) const MARK: &str = "SYNCED";
const MARK_MAGIC: [u8; 8] = *b"SEENMARK";
/// One sector: a disk writes it whole or not at all.
pub(crate) const MARK_BYTES: usize = 512;

/// Where the sync mark says the log was durable when it was written:
/// segment `first_lsn` below `offset`, and every segment before it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Mark {
    pub(crate) first_lsn: u64,
    pub(crate) offset: u64,
}

impl Mark {
    pub(crate) fn encode(&self) -> [u8; MARK_BYTES] {
        let mut b = [0u8; MARK_BYTES];
        b[0..8].copy_from_slice(&MARK_MAGIC);
        b[8..16].copy_from_slice(&self.first_lsn.to_le_bytes());
        b[16..24].copy_from_slice(&self.offset.to_le_bytes());
        let crc = crc32fast::hash(&b[..24]);
        b[24..28].copy_from_slice(&crc.to_le_bytes());
        b
    }

    /// The mark in `dir`, if there is a whole one.
    pub(crate) fn read(fs: &dyn Fs, dir: &Path) -> Option<Mark> {
        let file = fs.open_read(&dir.join(MARK)).ok()?;
        let b = crate::fs::read_all(&*file).ok()?;
        let b = b.get(..28)?;
        let crc = u32::from_le_bytes(b[24..28].try_into().ok()?);
        (b[..8] == MARK_MAGIC && crc32fast::hash(&b[..24]) == crc).then(|| Mark {
            first_lsn: u64::from_le_bytes(b[8..16].try_into().expect("8")),
            offset: u64::from_le_bytes(b[16..24].try_into().expect("8")),
        })
    }
}
