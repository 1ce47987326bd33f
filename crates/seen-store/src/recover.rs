//! What an open does: load every snapshot, replay the log after them, and
//! tell a torn tail (what a kill or a power loss leaves: cut off, with a
//! warning) from corruption (the open stops, naming the file and offset,
//! unless it salvages).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use seen_core::DecodeOptions;

use crate::error::{io_err, ErrorKind, Result, Salvage};
use crate::fs::{read_all, Fs};
use crate::log::Tail;
use crate::replay::{Rebuilt, Replay};
use crate::segment::{self, Damage, Mark, SegmentFile};
use crate::snapshot::{self, MAX_LSN};

/// What [`Store::open`](crate::Store::open) found and how long recovery
/// took. (Non-exhaustive: later versions may report more.)
#[derive(Clone, Debug, Default, PartialEq)]
#[non_exhaustive]
pub struct Recovery {
    /// Snapshots loaded.
    pub snapshots: usize,
    /// Time spent reading and decoding them.
    pub snapshot_time: Duration,
    /// Log records read (every valid record, including those a snapshot
    /// already covers).
    pub records: u64,
    /// Bytes of log those records occupy.
    pub log_bytes: u64,
    /// Item hashes in the add records read.
    pub adds: u64,
    /// Time spent reading the log and applying its records.
    pub replay_time: Duration,
    /// Adds recovered from the staging rings of a data directory of format
    /// 6 or earlier, replayed after its log.
    pub staged: u64,
    /// Damaged parts a salvaging open skipped, each with a warning: the
    /// snapshots it put aside and the log segments whose rest it skipped.
    /// The open ended with a checkpoint if there were any.
    pub salvaged: u64,
}

impl Recovery {
    /// Log records replayed per second (0 without records).
    pub fn replay_rate(&self) -> f64 {
        self.records as f64 / self.replay_time.as_secs_f64().max(1e-9)
    }
}

/// A data directory's state, loaded.
pub(crate) struct Recovered {
    pub(crate) filters: Vec<Rebuilt>,
    pub(crate) tail: Tail,
    /// Where the newest segment's good records end (a torn tail, or damage
    /// a salvaging open skipped, or a last record without all of its
    /// padding), to set its length to: the log goes on from there.
    pub(crate) torn_at: Option<u64>,
    pub(crate) next_id: u64,
    /// Filters whose delete the log holds: their snapshots, if any, go at
    /// the next checkpoint.
    pub(crate) deleted: Vec<u64>,
    pub(crate) recovery: Recovery,
}

/// Loads every snapshot of `snap_dir` into a replay, putting damaged ones
/// aside when salvaging; returns the ids of those put aside before too.
pub(crate) fn load_snapshots(
    fs: &dyn Fs,
    snap_dir: &Path,
    opts: &DecodeOptions,
    salvage: &Salvage,
    replay: &mut Replay,
) -> Result<u64> {
    let listed = fs.list(snap_dir).map_err(|e| io_err("list", snap_dir, e))?;
    let mut max_id = 0;
    for path in &listed {
        // An id in a file name reserves ids below it only if a record
        // could hold it: a junk name at the top of the range reserves none.
        let reserve = |max_id: &mut u64, id: u64| {
            if id < snapshot::MAX_ID - 1 {
                *max_id = (*max_id).max(id);
            }
        };
        if let Some(id) = snapshot::parse_damaged_name(path) {
            replay.ignored.insert(id);
            reserve(&mut max_id, id);
            continue;
        }
        let Some(id) = snapshot::parse_file_name(path) else {
            if path.to_string_lossy().ends_with(".snap.tmp") {
                let _ = fs.remove(path);
            }
            continue;
        };
        reserve(&mut max_id, id);
        let loaded = match snapshot::read(fs, path, opts) {
            Ok(l) if l.id == id => l,
            Ok(l) => {
                let what = format!("the file of filter {id} holds filter {}", l.id);
                salvage.damaged(path, 16, what, "the snapshot")?;
                put_aside(fs, snap_dir, path, &listed, replay, id);
                continue;
            }
            Err(e) => match e.kind() {
                ErrorKind::Corrupt { offset, what, .. } if salvage.on => {
                    salvage.damaged(path, *offset, what.clone(), "the snapshot")?;
                    put_aside(fs, snap_dir, path, &listed, replay, id);
                    continue;
                }
                _ => return Err(e),
            },
        };
        if loaded.copied_while_adding.is_some() {
            let what = "a snapshot copied while adds went on, which only an upgrade reads".into();
            salvage.damaged(path, 0, what, "the snapshot")?;
            put_aside(fs, snap_dir, path, &listed, replay, id);
            continue;
        }
        replay.filters.insert(id, loaded.into());
    }
    Ok(max_id)
}

/// Moves a damaged snapshot aside (`<id>.snap.damaged`), its id kept from
/// new filters and its records passed by.
pub(crate) fn put_aside(
    fs: &dyn Fs,
    dir: &Path,
    path: &Path,
    listed: &[PathBuf],
    replay: &mut Replay,
    id: u64,
) {
    replay.ignored.insert(id);
    let to = snapshot::damaged_name(path, listed);
    match fs.rename(path, &to).and_then(|()| fs.sync_dir(dir)) {
        Ok(()) => tracing::warn!("{}: put aside as {}", path.display(), to.display()),
        Err(e) => tracing::warn!("{}: could not be put aside: {e}", path.display()),
    }
}

/// Opens a data directory's state: snapshots, then the log replayed over
/// them.
pub(crate) fn recover(
    fs: &dyn Fs,
    snap_dir: &Path,
    log_dir: &Path,
    opts: &DecodeOptions,
    salvage: &Salvage,
) -> Result<Recovered> {
    let mut replay = Replay::default();
    let began = Instant::now();
    let max_snap_id = load_snapshots(fs, snap_dir, opts, salvage, &mut replay)?;
    let mut recovery = Recovery {
        snapshots: replay.filters.len(),
        snapshot_time: began.elapsed(),
        ..Default::default()
    };
    let began = Instant::now();
    let segments = segment::list(fs, log_dir)?;
    let mark = Mark::read(fs, log_dir);
    let mut last_lsn = replay.max_snap_lsn();
    let mut torn_at = None;
    for (i, seg) in segments.iter().enumerate() {
        let file = fs
            .open_read(&seg.path)
            .map_err(|e| io_err("open", &seg.path, e))?;
        let bytes = read_all(&*file).map_err(|e| io_err("read", &seg.path, e))?;
        let mut prev = 0u64;
        let damage = segment::read_records(&bytes, |offset, lsn, record| {
            let bad = |what: String| -> crate::Error {
                ErrorKind::Corrupt {
                    path: seg.path.clone(),
                    offset,
                    what,
                }
                .into()
            };
            if lsn <= prev || lsn < seg.first_lsn || lsn >= MAX_LSN {
                return Err(bad(format!(
                    "lsn {lsn} after {prev} in a segment from {}",
                    seg.first_lsn
                )));
            }
            prev = lsn;
            replay.apply(lsn, record).map_err(bad)
        });
        let next_first_lsn = segments.get(i + 1).map(|s| s.first_lsn);
        let damage = match damage {
            Ok(d) => d,
            Err(e) => match e.kind() {
                // A record that parses but does not replay: damage no kill
                // or power loss leaves (valid records follow it).
                ErrorKind::Corrupt { offset, what, .. } if salvage.on => Some(Damage {
                    offset: *offset,
                    what: what.clone(),
                    valid_after: true,
                    lost_sectors: false,
                }),
                _ => return Err(e),
            },
        };
        last_lsn = last_lsn.max(prev);
        recovery.log_bytes += damage.as_ref().map_or(bytes.len() as u64, |d| d.offset);
        let end = SegmentEnd {
            seg,
            len: bytes.len() as u64,
            last_lsn: prev,
            next_first_lsn,
            mark,
        };
        if let Some(cut) = end.check(damage, salvage)? {
            torn_at = Some(cut);
        }
    }
    recovery.records = replay.records;
    recovery.adds = replay.adds;
    recovery.replay_time = began.elapsed();
    recovery.salvaged = salvage.skipped.get();
    let next_id = max_snap_id.max(replay.max_id) + 1;
    let deleted = replay.deleted.iter().copied().collect();
    let mut filters: Vec<Rebuilt> = replay.filters.into_values().collect();
    filters.sort_by_key(|f| f.id);
    Ok(Recovered {
        filters,
        tail: Tail {
            segments,
            next_lsn: last_lsn + 1,
            log_bytes: recovery.log_bytes,
        },
        torn_at,
        next_id,
        deleted,
        recovery,
    })
}

/// How a segment's records end, as recovery found it.
struct SegmentEnd<'a> {
    seg: &'a SegmentFile,
    len: u64,
    /// The lsn of its last record (0: none).
    last_lsn: u64,
    /// Where the segment after it begins (`None`: it is the newest).
    next_first_lsn: Option<u64>,
    mark: Option<Mark>,
}

impl SegmentEnd<'_> {
    fn is_newest(&self) -> bool {
        self.next_first_lsn.is_none()
    }

    /// Checks the end of the segment's records (`damage`: where they stop
    /// short of its end) and returns, for the newest segment, the length
    /// to set it to before the log goes on: a torn tail and what a
    /// salvaging open skipped are cut off, a last record short of its
    /// padding is padded out. Anything a kill or a power loss cannot leave
    /// is corruption (skipped, with a warning, by a salvaging open).
    fn check(&self, damage: Option<Damage>, salvage: &Salvage) -> Result<Option<u64>> {
        let path = &self.seg.path;
        // A segment shorter than a sync made it lost records no kill or
        // power loss takes.
        if let Some(m) = self
            .mark
            .filter(|m| m.first_lsn == self.seg.first_lsn && m.offset > self.len)
        {
            let what = format!(
                "the segment ends before the {} bytes a sync made durable",
                m.offset
            );
            salvage.damaged(path, self.len, what, "nothing")?;
        }
        let Some(d) = damage else {
            // Records are 8-byte aligned: a newest segment that ends inside
            // its last record's padding is padded out, so that the next
            // record is written where a reader looks for it; an older one
            // was whole when the log moved on, and has lost its end.
            if self.len.is_multiple_of(8) {
                // The next segment begins right after this one's last
                // record (or earlier: a segment made by a roll that
                // failed, never used); a gap is records lost from its end.
                if let Some(next) = self
                    .next_first_lsn
                    .filter(|&next| self.last_lsn > 0 && self.last_lsn + 1 < next)
                {
                    let what = format!(
                        "the segment ends at lsn {}, and the next begins at lsn {next}",
                        self.last_lsn
                    );
                    salvage.damaged(path, self.len, what, "nothing")?;
                }
                return Ok(None);
            }
            if self.is_newest() {
                return Ok(Some(self.len.next_multiple_of(8)));
            }
            let what = "the segment ends inside a record's padding".to_string();
            salvage.damaged(path, self.len, what, "nothing")?;
            return Ok(None);
        };
        if self.is_newest() && is_torn(&d, self.seg, self.mark) {
            tracing::warn!(
                "{}: a torn record at offset {} ({}); cutting the log there",
                path.display(),
                d.offset,
                d.what
            );
        } else {
            salvage.damaged(path, d.offset, d.what, "the rest of the segment")?;
        }
        // The log goes on from the newest segment's last good record.
        Ok(self.is_newest().then_some(d.offset))
    }
}

/// Whether damage in the newest segment is what a kill or a power loss
/// leaves. Below the sync mark, no: a sync made those bytes durable.
/// Past it (or with the mark on an older segment: this one began after
/// it), what a power loss leaves: any sectors of what no sync covered may
/// be lost, valid records after them kept. With no mark (a run under
/// `no`), only an end with no valid record after it: a kill tears only the
/// last write.
fn is_torn(d: &Damage, seg: &SegmentFile, mark: Option<Mark>) -> bool {
    match mark {
        Some(m) if m.first_lsn == seg.first_lsn && d.offset < m.offset => false,
        Some(m) if m.first_lsn <= seg.first_lsn => d.lost_sectors,
        _ => !d.valid_after,
    }
}
