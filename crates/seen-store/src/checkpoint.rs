//! Checkpoints: a snapshot of every filter changed since the last one,
//! then the log they cover removed (docs/FORMAT.md, section 6.3).
//!
//! A checkpoint first moves the log on to a new segment: every record up
//! to the lsn `upto` is then in the segments before it, which nothing
//! writes any more. Each changed filter's snapshot at `upto` is rebuilt
//! from its last snapshot and those segments, as an open would rebuild it,
//! rather than copied from the live filter: its writers go on meanwhile,
//! never held up, and every checkpoint replays the log the way an open
//! will. Filters are rebuilt in groups of at most [`GROUP_BYTES`] (one
//! filter larger than that on its own), one pass over the segments per
//! group, so a checkpoint holds at most about that much memory beyond the
//! filters (or the largest filter).
//!
//! After a failed sync the log's files cannot be trusted: the checkpoint
//! that makes the log usable again writes every changed filter from memory
//! instead (its writers are refused meanwhile anyway), and so does the one
//! that ends a salvaging open, whose log is damaged.

use std::collections::HashSet;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use crate::entry::Entry;
use crate::error::{io_err, ErrorKind, Result};
use crate::fs::read_all;
use crate::inner::Inner;
use crate::log::lock;
use crate::replay::Replay;
use crate::segment::{self, SegmentFile};
use crate::snapshot::{self, Header};

/// Where a checkpoint takes its snapshots from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Source {
    /// Rebuilt from the last snapshots and the log.
    Log,
    /// The filters in memory, each held shared while it is written.
    Memory,
}

/// Filter bytes rebuilt per pass over the log's segments.
const GROUP_BYTES: u64 = 256 << 20;

pub(crate) fn run(inner: &Inner, source: Source) -> Result<()> {
    let _one = lock(&inner.checkpointing);
    let (upto, closed) = inner.log.roll()?;
    let changed: Vec<Arc<Entry>> = inner
        .entries()
        .into_iter()
        .filter(|e| e.read().last_lsn > e.snap_lsn.load(Ordering::Relaxed))
        .collect();
    match source {
        Source::Memory => changed.iter().try_for_each(|e| from_memory(inner, e))?,
        Source::Log => from_log(inner, &changed, upto, &closed)?,
    }
    // The snapshots of filters deleted by now go before the log that says
    // they were deleted: a crash between must not bring one back.
    let gone: Vec<u64> = {
        let mut deleted = lock(&inner.deleted);
        let (gone, later) = deleted.drain(..).partition(|&(_, lsn)| lsn <= upto);
        *deleted = later;
        gone.into_iter().map(|(id, _)| id).collect()
    };
    for id in &gone {
        let path = inner.snap_dir.join(snapshot::file_name(*id));
        match inner.fs.remove(&path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                return Err(io_err("remove", &path, e));
            }
            _ => {}
        }
    }
    if !gone.is_empty() {
        let dir = &inner.snap_dir;
        inner
            .fs
            .sync_dir(dir)
            .map_err(|e| io_err("sync directory", dir, e))?;
    }
    inner.log.retire(&closed)?;
    if source == Source::Memory {
        inner.log.clear_poison();
    }
    Ok(())
}

/// Writes `e`'s snapshot from memory, at its last record.
fn from_memory(inner: &Inner, e: &Entry) -> Result<()> {
    let st = e.read();
    let header = Header {
        id: e.id,
        lsn: st.last_lsn,
        expire_at_ms: e.expire_at_ms.load(Ordering::Relaxed),
        name: &e.name,
    };
    snapshot::write(&*inner.fs, &inner.snap_dir, &header, &st.filter)?;
    e.snap_lsn.fetch_max(st.last_lsn, Ordering::Relaxed);
    Ok(())
}

/// Rebuilds the snapshots of the `changed` filters at `upto` from their
/// last snapshots and the `closed` segments, a group at a time.
fn from_log(
    inner: &Inner,
    changed: &[Arc<Entry>],
    upto: u64,
    closed: &[SegmentFile],
) -> Result<()> {
    let mut sized: Vec<(u64, &Arc<Entry>)> = changed
        .iter()
        .map(|e| (crate::filter::memory_bytes(&e.read().filter), e))
        .collect();
    sized.sort_by_key(|&(bytes, _)| bytes);
    let mut group = Vec::new();
    let mut bytes = 0;
    for (size, e) in sized {
        if !group.is_empty() && bytes + size > GROUP_BYTES {
            rebuild_group(inner, &std::mem::take(&mut group), upto, closed)?;
            bytes = 0;
        }
        group.push(e.clone());
        bytes += size;
    }
    if !group.is_empty() {
        rebuild_group(inner, &group, upto, closed)?;
    }
    Ok(())
}

fn rebuild_group(
    inner: &Inner,
    group: &[Arc<Entry>],
    upto: u64,
    closed: &[SegmentFile],
) -> Result<()> {
    let fs = &*inner.fs;
    let ids: HashSet<u64> = group.iter().map(|e| e.id).collect();
    let mut replay = Replay {
        only: Some(ids.clone()),
        ..Default::default()
    };
    let unlimited = seen_core::DecodeOptions {
        max_bytes: u64::MAX,
    };
    for id in &ids {
        let path = inner.snap_dir.join(snapshot::file_name(*id));
        match snapshot::read(fs, &path, &unlimited) {
            Ok(l) => {
                replay.filters.insert(*id, l.into());
            }
            Err(e) if matches!(e.kind(), ErrorKind::Io { source, .. } if source.kind() == std::io::ErrorKind::NotFound) =>
                {}
            Err(e) => return Err(e),
        }
    }
    for seg in closed {
        let file = fs
            .open_read(&seg.path)
            .map_err(|e| io_err("open", &seg.path, e))?;
        let bytes = read_all(&*file).map_err(|e| io_err("read", &seg.path, e))?;
        let damage = segment::read_records(&bytes, |offset, lsn, record| {
            if lsn > upto {
                return Ok(());
            }
            replay.apply(lsn, record).map_err(|what| {
                ErrorKind::Corrupt {
                    path: seg.path.clone(),
                    offset,
                    what,
                }
                .into()
            })
        })?;
        if let Some(d) = damage {
            return Err(ErrorKind::Corrupt {
                path: seg.path.clone(),
                offset: d.offset,
                what: d.what,
            }
            .into());
        }
    }
    for e in group {
        let Some(f) = replay.filters.get(&e.id) else {
            let st = e.read();
            if st.deleted || st.last_lsn > upto {
                continue; // deleted, or made after `upto`
            }
            let what = format!("filter {} is in neither its snapshot nor the log", e.id);
            return Err(ErrorKind::Corrupt {
                path: inner.snap_dir.join(snapshot::file_name(e.id)),
                offset: 0,
                what,
            }
            .into());
        };
        let header = Header {
            id: e.id,
            lsn: upto,
            expire_at_ms: f.expire_at_ms,
            name: &f.name,
        };
        snapshot::write(fs, &inner.snap_dir, &header, &f.filter)?;
        e.snap_lsn.fetch_max(upto, Ordering::Relaxed);
    }
    Ok(())
}
