//! The one-way upgrade of a data directory of format 6 or earlier
//! (docs/FORMAT.md, section 6.4): its state is read once, the old way, and
//! written as snapshots of this format; its log and staging rings then go.
//!
//! What the old format has that this one does not: a log in up to four
//! lanes (`wal/<lsn>.<lane>.<seq>.log`, or `wal/<lsn>.log` before lanes)
//! whose records are merged by lsn, preallocated segments whose unwritten
//! rest is zeros, a 32-byte short form of an add of one hash, a record that
//! ends a segment a roll left, staging rings (`rings/`) of adds not yet in
//! the log, and snapshots copied while adds went on, whose counts hold
//! only once the log is replayed up to a later point. An interrupted
//! upgrade is run again by the next open: every snapshot it has written
//! already holds everything the old log had, which replays over it
//! without changing it.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use seen_core::{blocked_block_index, AnyFilter, DecodeOptions, ItemHash};

use crate::error::{io_err, ErrorKind, Result, Salvage};
use crate::fs::{read_all, Fs};
use crate::record::{parse, Hashes, Parsed, Record};
use crate::replay::Replay;
use crate::snapshot::{self, CopiedWhileAdding, Header};
use crate::StoreOptions;

/// The format this build writes. Format 8 is format 7 with import records
/// and Guava-layout filters, which a reader of format 7 would take for
/// damage: a directory of format 7 is only marked 8 when opened, so that
/// an older seen refuses it as later rather than salvaging it.
pub(crate) const FORMAT: u32 = 8;
/// The earliest format opened as it is (only marked as [`FORMAT`]); an
/// earlier one is upgraded.
const OPENED_AS_IS_FROM: u32 = 7;
const FORMAT_LINE: &str = "seen-store data directory, format ";

/// Reads the directory's `FORMAT` file: refuses a later format, upgrades an
/// earlier one, marks a new directory as of [`FORMAT`] (and leaves one of
/// [`FORMAT`] as it is). Returns how many
/// adds an upgrade took from staging rings.
pub(crate) fn upgrade_if_needed(
    fs: &dyn Fs,
    dir: &Path,
    opts: &StoreOptions,
    salvage: &Salvage,
) -> Result<u64> {
    let path = dir.join("FORMAT");
    let found = match fs.open_read(&path) {
        Ok(f) => {
            let text = read_all(&*f).map_err(|e| io_err("read", &path, e))?;
            let text = String::from_utf8_lossy(&text);
            let n = text
                .trim_end()
                .strip_prefix(FORMAT_LINE)
                .and_then(|n| n.parse::<u32>().ok());
            match n {
                Some(FORMAT) => return Ok(0),
                Some(n) => n,
                None => {
                    let what = format!("not a format line: {:?}", text.trim_end());
                    return Err(ErrorKind::Format { path, what }.into());
                }
            }
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            // Format 1 had no such file, but a log in `wal/`.
            match fs.list(&dir.join("wal")) {
                Ok(_) => 1,
                Err(_) => FORMAT,
            }
        }
        Err(e) => return Err(io_err("open", &path, e)),
    };
    if found > FORMAT {
        let what = format!(
            "format {found}, written by a later seen; this one reads formats up to {FORMAT}"
        );
        return Err(ErrorKind::Format { path, what }.into());
    }
    let mut staged = 0;
    if found < OPENED_AS_IS_FROM {
        tracing::warn!(
            "{}: upgrading a data directory of format {found} to {FORMAT}",
            dir.display()
        );
        staged = upgrade(fs, dir, opts, salvage)?;
    }
    let tmp = dir.join("FORMAT.tmp");
    let f = fs.create(&tmp).map_err(|e| io_err("create", &tmp, e))?;
    let line = format!("{FORMAT_LINE}{FORMAT}\n");
    if let Err(e) = f.write_all_at(line.as_bytes(), 0) {
        let _ = fs.remove(&tmp);
        return Err(io_err("write", &tmp, e));
    }
    crate::fs::install(fs, dir, f, &tmp, &path)?;
    Ok(staged)
}

fn upgrade(fs: &dyn Fs, dir: &Path, opts: &StoreOptions, salvage: &Salvage) -> Result<u64> {
    let (snap_dir, wal_dir, ring_dir) = (dir.join("snapshots"), dir.join("wal"), dir.join("rings"));
    let mut replay = Replay::default();
    let mut copies = HashMap::new();
    let decode = DecodeOptions {
        max_bytes: opts.max_filter_bytes,
    };
    let listed = fs
        .list(&snap_dir)
        .map_err(|e| io_err("list", &snap_dir, e))?;
    for path in &listed {
        let Some(id) = snapshot::parse_file_name(path) else {
            continue;
        };
        let mut l = match snapshot::read(fs, path, &decode) {
            Ok(l) => l,
            Err(e) if matches!(e.kind(), ErrorKind::Corrupt { .. }) && salvage.on => {
                salvage.damaged(path, 0, e.to_string(), "the snapshot")?;
                crate::recover::put_aside(fs, &snap_dir, path, &listed, &mut replay, id);
                continue;
            }
            Err(e) => return Err(e),
        };
        if let Some(c) = l.copied_while_adding.take() {
            // A chain copied while adds went on counts none of them in its
            // newest sub-filter until the count lsn (see `settle`).
            if matches!(l.filter, AnyFilter::Scalable(_)) {
                set_count(&mut l.filter, 0, path)?;
            }
            copies.insert(id, c);
        }
        replay.filters.insert(id, l.into());
    }
    let mut last_lsn = replay.max_snap_lsn();
    for (lsn, bytes) in merged_lanes(fs, &wal_dir, salvage)? {
        settle(&mut replay, &mut copies, |c| c.count_lsn < lsn, &wal_dir)?;
        let Parsed::Record(record, ..) = parse(&bytes) else {
            unreachable!("parsed when read")
        };
        // A counting filter copied in pieces holds the records up to each
        // piece's lsn: those hashes are not applied again.
        let filtered;
        let record = match (copies.get(&record.id()), record) {
            (Some(c), Record::Add { id, hashes } | Record::Remove { id, hashes })
                if !c.piece_lsns.is_empty() =>
            {
                let Some(AnyFilter::Counting(f)) = replay.filters.get(&id).map(|f| &f.filter)
                else {
                    continue;
                };
                let held = |h: &ItemHash| c.holds(blocked_block_index(*h, f.blocks()), lsn);
                filtered = Hashes::bytes_of(hashes.iter().filter(|h| !held(h)));
                match record {
                    Record::Add { .. } => Record::Add {
                        id,
                        hashes: Hashes(&filtered),
                    },
                    _ => Record::Remove {
                        id,
                        hashes: Hashes(&filtered),
                    },
                }
            }
            (_, r) => r,
        };
        let path = wal_dir.clone();
        (replay.apply(lsn, record)).map_err(|what| ErrorKind::Corrupt {
            path,
            offset: 0,
            what,
        })?;
        last_lsn = last_lsn.max(lsn);
    }
    settle(&mut replay, &mut copies, |_| true, &wal_dir)?;
    let staged = staged_adds(fs, &ring_dir, salvage)?;
    for &(id, hash) in &staged {
        if let Some(f) = replay.filters.get_mut(&id) {
            crate::filter::apply_adds(&mut f.filter, Hashes(&hash.to_le_bytes()))?;
        }
    }
    for f in replay.filters.values() {
        let header = Header {
            id: f.id,
            lsn: last_lsn,
            expire_at_ms: f.expire_at_ms,
            name: &f.name,
        };
        snapshot::write(fs, &snap_dir, &header, &f.filter)?;
    }
    for id in &replay.deleted {
        let path = snap_dir.join(snapshot::file_name(*id));
        match fs.remove(&path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                return Err(io_err("remove", &path, e))
            }
            _ => {}
        }
    }
    for d in [&wal_dir, &ring_dir] {
        for p in fs.list(d).unwrap_or_default() {
            fs.remove(&p).map_err(|e| io_err("remove", &p, e))?;
        }
    }
    fs.sync_dir(&snap_dir)
        .map_err(|e| io_err("sync directory", &snap_dir, e))?;
    Ok(staged.len() as u64)
}

/// Gives the filters copied while adds went on their counts, once the log
/// has passed their count lsns (`passed`).
fn settle(
    replay: &mut Replay,
    copies: &mut HashMap<u64, CopiedWhileAdding>,
    passed: impl Fn(&CopiedWhileAdding) -> bool,
    at: &Path,
) -> Result<()> {
    let due: Vec<u64> = copies
        .iter()
        .filter(|(_, c)| passed(c))
        .map(|(&id, _)| id)
        .collect();
    for id in due {
        let count = copies.remove(&id).expect("listed").count;
        let Some(f) = replay.filters.get_mut(&id) else {
            continue;
        };
        set_count(&mut f.filter, count, at)?;
    }
    Ok(())
}

/// Sets a filter's count to `count` (a chain's newest sub-filter takes
/// what its older ones do not hold): through the byte format
/// (docs/FORMAT.md, section 4), whose header holds each sub-filter's count,
/// so that the library keeps its counts to itself. The upgrade runs once
/// per directory; the filter's bytes are copied once here.
fn set_count(f: &mut AnyFilter, count: u64, at: &Path) -> Result<()> {
    let mut b = Vec::new();
    f.encode(&mut b)?;
    let links = u32::from_le_bytes(b[52..56].try_into().expect("4")) as usize;
    let items_at = |i: usize| 56 + 40 * i + 32;
    let older: u64 = (0..links - 1)
        .map(|i| u64::from_le_bytes(b[items_at(i)..items_at(i) + 8].try_into().expect("8")))
        .sum();
    let newest = count.saturating_sub(older);
    b[items_at(links - 1)..items_at(links - 1) + 8].copy_from_slice(&newest.to_le_bytes());
    b[40..48].copy_from_slice(&(older + newest).to_le_bytes());
    let crc_at = 56 + 40 * links;
    let crc = crc32fast::hash(&b[..crc_at]);
    b[crc_at..crc_at + 4].copy_from_slice(&crc.to_le_bytes());
    let unlimited = DecodeOptions {
        max_bytes: u64::MAX,
    };
    *f = seen_core::decode(&b[..], &unlimited).map_err(|e| ErrorKind::Corrupt {
        path: at.to_path_buf(),
        offset: 0,
        what: format!("a filter's counts: {e}"),
    })?;
    Ok(())
}

/// What is at an offset of an old segment.
enum Old {
    /// A record's lsn and its bytes in the long form, and the bytes it took.
    Record(u64, Vec<u8>, usize),
    /// Zeros, or the record that ends a segment a roll left: the lane goes
    /// on in its next segment.
    End,
    Bad(String),
}

fn parse_old(b: &[u8]) -> Old {
    if b.len() < 8 || b[..8] == [0; 8] {
        return Old::End;
    }
    let word = u32::from_le_bytes(b[0..4].try_into().expect("4"));
    let crc = u32::from_le_bytes(b[4..8].try_into().expect("4"));
    if word & (1 << 31) != 0 {
        // The short add: id | flag, CRC of bytes 8..32 seeded with the
        // first word, lsn, one hash.
        let Some(rest) = b.get(8..32) else {
            return Old::Bad("short record does not fit".into());
        };
        let mut h = crc32fast::Hasher::new_with_initial(word);
        h.update(rest);
        if h.finalize() != crc {
            return Old::Bad("record checksum mismatch".into());
        }
        let lsn = u64::from_le_bytes(rest[0..8].try_into().expect("8"));
        let (id, mut long) = (u64::from(word & !(1 << 31)), Vec::new());
        Record::Add {
            id,
            hashes: Hashes(&rest[8..24]),
        }
        .encode(lsn, &mut long);
        return Old::Record(lsn, long, 32);
    }
    if word == 17 && b.len() >= 32 && b[16] == 8 && crc32fast::hash(&b[8..25]) == crc {
        return Old::End;
    }
    match parse(b) {
        Parsed::Record(_, lsn, used) => Old::Record(lsn, b[..used].to_vec(), used),
        Parsed::Bad(what) => Old::Bad(what),
    }
}

/// The old log's records, its lanes merged in lsn order. A bad record with
/// no valid one after it in its lane is the lane's torn end; anywhere else
/// it is corruption.
fn merged_lanes(fs: &dyn Fs, wal_dir: &Path, salvage: &Salvage) -> Result<Vec<(u64, Vec<u8>)>> {
    let mut lanes: HashMap<u64, Vec<(u64, u64, PathBuf)>> = HashMap::new();
    for path in fs.list(wal_dir).unwrap_or_default() {
        let Some(stem) = path
            .file_name()
            .and_then(|n| n.to_str())
            .and_then(|n| n.strip_suffix(".log"))
        else {
            continue;
        };
        let parts: Vec<&str> = stem.split('.').collect();
        let num = |s: &str| s.parse::<u64>().ok();
        let key = match parts[..] {
            [lsn] => num(lsn).map(|l| (0, 0, l)),
            [lsn, lane, seq] => num(lsn)
                .zip(num(lane))
                .zip(num(seq))
                .map(|((l, lane), seq)| (lane, seq + 1, l)),
            _ => None,
        };
        if let Some((lane, seq, first)) = key {
            lanes.entry(lane).or_default().push((seq, first, path));
        }
    }
    let mut all = Vec::new();
    for segments in lanes.values_mut() {
        segments.sort();
        let mut records = Vec::new();
        'lane: for (i, (_, _, path)) in segments.iter().enumerate() {
            let file = fs.open_read(path).map_err(|e| io_err("open", path, e))?;
            let bytes = read_all(&*file).map_err(|e| io_err("read", path, e))?;
            let mut at = 0;
            while at < bytes.len() {
                match parse_old(&bytes[at..]) {
                    Old::Record(lsn, r, used) => {
                        records.push((lsn, r));
                        at += used;
                    }
                    Old::End => break,
                    Old::Bad(what) => {
                        let later = (at + 8..bytes.len())
                            .step_by(8)
                            .any(|o| matches!(parse_old(&bytes[o..]), Old::Record(..)))
                            || i + 1 < segments.len();
                        if !later {
                            tracing::warn!(
                                "{}: a torn record at offset {at} ({what}); the lane ends there",
                                path.display()
                            );
                            break 'lane;
                        }
                        salvage.damaged(path, at as u64, what, "the rest of the segment")?;
                        break;
                    }
                }
            }
        }
        all.extend(records);
    }
    all.sort_by_key(|(lsn, _)| *lsn);
    Ok(all)
}

/// The adds staged in rings of this boot that the log may not hold.
fn staged_adds(fs: &dyn Fs, ring_dir: &Path, salvage: &Salvage) -> Result<Vec<(u64, ItemHash)>> {
    const HEADER: usize = 4096;
    const ENTRY: usize = 24;
    const CAPACITY: u64 = 1024;
    let boot = boot_id();
    let mut adds = Vec::new();
    for path in fs.list(ring_dir).unwrap_or_default() {
        let file = fs.open_read(&path).map_err(|e| io_err("open", &path, e))?;
        let b = read_all(&*file).map_err(|e| io_err("read", &path, e))?;
        let word = |at: usize| u64::from_le_bytes(b[at..at + 8].try_into().expect("8"));
        let whole = b.len() >= HEADER + ENTRY * CAPACITY as usize
            && &b[0..8] == b"SEENRING"
            && b[8..16] == [1, 0, 0, 0, 24, 0, 0, 0]
            && word(16) == CAPACITY
            && b[40..44] == crc32fast::hash(&b[..40]).to_le_bytes();
        // A ring of another boot holds nothing: a power loss came between.
        if !whole || b[24..40] != boot {
            continue;
        }
        let (head, copied) = (word(64), word(128));
        if copied > head || head - copied > CAPACITY {
            let what = format!("staging ring's copied mark {copied} and head {head} cannot be");
            salvage.damaged(&path, 64, what, "the ring")?;
            continue;
        }
        for n in copied..head {
            let o = HEADER + ENTRY * (n % CAPACITY) as usize;
            adds.push((
                word(o),
                ItemHash::from_le_bytes(b[o + 8..o + 24].try_into().expect("16")),
            ));
        }
    }
    Ok(adds)
}

/// The machine's boot id (Linux), as the old rings recorded it.
fn boot_id() -> [u8; 16] {
    let mut id = [0u8; 16];
    if let Ok(text) = std::fs::read_to_string("/proc/sys/kernel/random/boot_id") {
        let hex: Vec<u8> = text.bytes().filter(u8::is_ascii_hexdigit).collect();
        for (i, pair) in hex.chunks(2).take(16).enumerate() {
            id[i] = u8::from_str_radix(std::str::from_utf8(pair).unwrap_or("0"), 16).unwrap_or(0);
        }
    }
    id
}
