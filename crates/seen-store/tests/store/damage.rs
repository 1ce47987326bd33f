//! Damage: a torn end of the log, flipped bytes in the log or in a
//! snapshot, two filters of one name, and what salvage does with each.

use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;

use seen_store::{ErrorKind, FsyncPolicy, Store, StoreOptions};

use crate::basics::bloom;
use crate::faults::{check_acked, item, reopen};
use crate::faulty::FaultyFs;

/// The store in `dir`, opened asking to salvage what can be.
fn open_salvaging(dir: &Path) -> Store {
    let opts = StoreOptions {
        salvage: true,
        ..Default::default()
    };
    Store::open(dir, opts).unwrap()
}

/// The log's segment files, oldest first.
fn segments(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir.join("log"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "log"))
        .collect();
    v.sort();
    v
}

/// The offsets of a segment's records (docs/FORMAT.md, section 6.1: each
/// 8 bytes more than its length, padded to 8).
fn record_offsets(data: &[u8]) -> Vec<usize> {
    let mut offsets = Vec::new();
    let mut off = 0;
    while off + 8 <= data.len() {
        offsets.push(off);
        let len = u32::from_le_bytes(data[off..off + 4].try_into().unwrap()) as usize;
        off += (8 + len).next_multiple_of(8);
    }
    offsets
}

/// A store in `dir` with filter `f` holding items 0 to 49, added one by
/// one, then dropped (its log synced, under `always` and `everysec`, and
/// the sync mark written at its end).
fn add_fifty(dir: &Path, fsync: FsyncPolicy) {
    let s = Store::open(
        dir,
        StoreOptions {
            fsync,
            ..Default::default()
        },
    )
    .unwrap();
    s.create(b"f", &bloom()).unwrap();
    for i in 0..50 {
        s.add(b"f", &[&item(i)], None).unwrap();
    }
}

/// [`add_fifty`] in a new directory: it, its newest segment and the
/// segment's bytes.
fn fifty_in_newest_segment(fsync: FsyncPolicy) -> (tempfile::TempDir, PathBuf, Vec<u8>) {
    let dir = tempfile::tempdir().unwrap();
    add_fifty(dir.path(), fsync);
    let seg = segments(dir.path()).pop().unwrap();
    let data = std::fs::read(&seg).unwrap();
    (dir, seg, data)
}

#[test]
fn torn_tail_is_cut_off_and_everything_before_it_kept() {
    // A kill in the middle of a write after the last good record: a
    // record's length and part of its bytes.
    for fsync in [FsyncPolicy::Always, FsyncPolicy::No] {
        let (dir, seg, mut data) = fifty_in_newest_segment(fsync);
        let end = data.len();
        data.extend_from_slice(&40u32.to_le_bytes());
        data.extend_from_slice(&[0xab; 16]);
        std::fs::write(&seg, &data).unwrap();
        check_acked(dir.path(), &(0..50).collect::<Vec<_>>());
        let data = std::fs::read(&seg).unwrap();
        assert_eq!(data.len(), end, "{fsync:?}: the torn bytes were cut off");
        // And it opens cleanly again after that.
        check_acked(dir.path(), &(0..50).collect::<Vec<_>>());
    }
}

/// A power cut that loses the end of a sector whose start a sync had made
/// durable, and keeps the next sector: zeros from a record past the sync
/// mark to the end of its sector, then valid records. A torn tail, not
/// corruption: everything before it is kept.
#[test]
fn past_the_sync_mark_a_sector_with_a_lost_end_is_a_torn_tail() {
    let (dir, seg, mut data) = fifty_in_newest_segment(FsyncPolicy::Always);
    let offsets = record_offsets(&data);
    assert_eq!(offsets.len(), 51, "a create and fifty adds");
    // A record starting inside a sector, with a record starting after
    // that sector's end.
    let k = (1..offsets.len())
        .find(|&k| {
            let end = offsets[k].next_multiple_of(512);
            !offsets[k].is_multiple_of(512) && offsets.iter().any(|&o| o >= end)
        })
        .expect("records spanning more than a sector");
    let lost_from = offsets[k];
    data[lost_from..lost_from.next_multiple_of(512)].fill(0);
    std::fs::write(&seg, &data).unwrap();
    // The mark: this segment durable up to the record before the loss.
    let first_lsn: u64 = seg.file_stem().unwrap().to_str().unwrap().parse().unwrap();
    let mut mark = [0u8; 512];
    mark[..8].copy_from_slice(b"SEENMARK");
    mark[8..16].copy_from_slice(&first_lsn.to_le_bytes());
    mark[16..24].copy_from_slice(&(lost_from as u64).to_le_bytes());
    let crc = crc32fast::hash(&mark[..24]);
    mark[24..28].copy_from_slice(&crc.to_le_bytes());
    std::fs::write(dir.path().join("log/SYNCED"), mark).unwrap();
    // Record 0 creates the filter; record i + 1 adds item i.
    check_acked(dir.path(), &(0..k - 1).collect::<Vec<_>>());
    let data = std::fs::read(&seg).unwrap();
    assert_eq!(data.len(), lost_from, "the torn tail was cut off");
}

/// A salvaging open of a log whose newest segment is damaged from its
/// first record on: the log goes on from there, and what is added after
/// the open survives a reopen (the log once began a new segment under the
/// damaged one's name, and the open's checkpoint removed it).
#[test]
fn adds_after_salvaging_a_newest_segment_damaged_from_its_start_survive() {
    for fsync in [FsyncPolicy::Always, FsyncPolicy::EverySec] {
        let (dir, seg, mut data) = fifty_in_newest_segment(fsync);
        data[11..].fill(0);
        std::fs::write(&seg, &data).unwrap();
        let s = open_salvaging(dir.path());
        s.create(b"after", &bloom()).unwrap();
        s.add(b"after", &[b"added after the open"], None).unwrap();
        drop(s);
        let s = reopen(dir.path());
        assert_eq!(
            s.contains(b"after", &[b"added after the open"]).unwrap(),
            Some(vec![true]),
            "{fsync:?}"
        );
    }
}

/// A newest segment cut inside its last record's padding: the record is
/// whole and kept, and the log goes on at the next 8-byte boundary, where
/// the next open reads it.
#[test]
fn a_segment_cut_inside_its_last_padding_keeps_the_record_and_takes_more() {
    // (Under `no`, no sync mark holds the segment to its full length.)
    let (dir, seg, data) = fifty_in_newest_segment(FsyncPolicy::No);
    let last = *record_offsets(&data).last().unwrap();
    let body = u32::from_le_bytes(data[last..last + 4].try_into().unwrap()) as usize;
    assert_ne!((8 + body) % 8, 0, "the last record has padding");
    std::fs::write(&seg, &data[..last + 8 + body]).unwrap();
    let s = Store::open(dir.path(), StoreOptions::default()).unwrap();
    s.create(b"after", &bloom()).unwrap();
    s.add(b"after", &[b"added after the open"], None).unwrap();
    drop(s);
    check_acked(dir.path(), &(0..50).collect::<Vec<_>>());
    let s = reopen(dir.path());
    assert_eq!(
        s.contains(b"after", &[b"added after the open"]).unwrap(),
        Some(vec![true])
    );
}

/// The sync mark says how far a sync made the log durable: no kill and no
/// power loss can have torn or zeroed anything below it. So after a drop
/// (which syncs and writes the mark), the log's last record zeroed or
/// damaged is corruption, named by file and offset, not a shorter log.
#[test]
fn below_the_sync_mark_a_damaged_end_of_the_log_is_corruption() {
    for fsync in [FsyncPolicy::Always, FsyncPolicy::EverySec] {
        for zero in [true, false] {
            let (dir, seg, mut data) = fifty_in_newest_segment(fsync);
            let last = *record_offsets(&data).last().unwrap();
            if zero {
                data[last..].fill(0);
            } else {
                data[last + 20] ^= 1;
            }
            std::fs::write(&seg, &data).unwrap();
            let e = Store::open(dir.path(), StoreOptions::default()).unwrap_err();
            match e.kind() {
                ErrorKind::Corrupt { path, offset, .. } => {
                    assert_eq!((path, *offset), (&seg, last as u64), "{e}")
                }
                _ => panic!("{fsync:?}, zeroed {zero}: not corruption: {e}"),
            }
            // Salvage opens it, with what the damaged record did not hold.
            let s = open_salvaging(dir.path());
            assert!(s.contains(b"f", &[&item(0)]).unwrap().unwrap()[0]);
        }
    }
}

/// Only the newest segment can end torn (a roll syncs the segment it
/// leaves before the next takes a record): damage at the end of an older
/// one is corruption, whatever follows it.
#[test]
fn a_damaged_end_of_a_segment_before_the_newest_is_corruption() {
    let dir = four_hundred_in_small_segments();
    let segs = segments(dir.path());
    assert!(segs.len() > 3, "{segs:?}");
    let seg = &segs[1];
    let mut data = std::fs::read(seg).unwrap();
    let last = *record_offsets(&data).last().unwrap();
    data.truncate(last + 20);
    std::fs::write(seg, &data).unwrap();
    let e = Store::open(dir.path(), StoreOptions::default()).unwrap_err();
    match e.kind() {
        ErrorKind::Corrupt { path, offset, .. } => assert_eq!((path, *offset), (seg, last as u64)),
        other => panic!("expected corruption, got {other}"),
    }
    // Salvage skips the damaged record and keeps the rest of the log.
    let s = open_salvaging(dir.path());
    let found = s.contains(b"f", &[&item(0), &item(399)]).unwrap().unwrap();
    assert_eq!(found, [true, true]);
}

/// A store holding items 0 to 399 of filter `f`, one add each, in log
/// segments of 4 KiB, dropped.
fn four_hundred_in_small_segments() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let opts = StoreOptions {
        fsync: FsyncPolicy::EverySec,
        segment_size: 4 << 10,
        ..Default::default()
    };
    let s = Store::open(dir.path(), opts).unwrap();
    s.create(b"f", &bloom()).unwrap();
    for i in 0..400 {
        s.add(b"f", &[&item(i)], None).unwrap();
    }
    dir
}

/// An older segment that lost its end, cut at a record's end or inside its
/// padding: the records left are whole, but the segment was whole when the
/// log moved on, and the next one begins after its last record: corruption
/// at the cut.
#[test]
fn an_older_segment_that_lost_its_end_is_corruption() {
    let dir = four_hundred_in_small_segments();
    let segs = segments(dir.path());
    let seg = &segs[1];
    let data = std::fs::read(seg).unwrap();
    let offsets = record_offsets(&data);
    let last = offsets[offsets.len() - 2];
    let body = u32::from_le_bytes(data[last..last + 4].try_into().unwrap()) as usize;
    assert_ne!((8 + body) % 8, 0, "the record has padding");
    for cut in [last, last + 8 + body] {
        std::fs::write(seg, &data[..cut]).unwrap();
        let e = Store::open(dir.path(), StoreOptions::default()).unwrap_err();
        match e.kind() {
            ErrorKind::Corrupt { path, offset, .. } => {
                assert_eq!((path, *offset), (seg, cut as u64), "{e}")
            }
            other => panic!("cut at {cut}: expected corruption, got {other}"),
        }
    }
}

/// The snapshots of `dir`, in order.
fn snap_files(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir.join("snapshots"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "snap"))
        .collect();
    v.sort();
    v
}

/// What a power loss that keeps a later filter (its create, or its
/// snapshot) but not the delete of an earlier one of the same name leaves:
/// here filter "f" holding item 1, deleted, and a second "f" holding item
/// 2, then the first one's snapshot put back. Returns its path.
fn two_filters_of_one_name(dir: &Path) -> PathBuf {
    let older = {
        let s = reopen(dir);
        s.create(b"f", &bloom()).unwrap();
        s.add(b"f", &[&item(1)], None).unwrap();
        s.checkpoint().unwrap();
        let older = snap_files(dir);
        assert_eq!(older.len(), 1);
        let kept = (older[0].clone(), std::fs::read(&older[0]).unwrap());
        assert!(s.delete(b"f").unwrap());
        s.create(b"f", &bloom()).unwrap();
        s.add(b"f", &[&item(2)], None).unwrap();
        s.close().unwrap();
        kept
    };
    assert!(!older.0.exists(), "the checkpoint removed the deleted one");
    std::fs::write(&older.0, &older.1).unwrap();
    older.0
}

#[test]
fn two_filters_of_one_name_keep_the_later_for_good() {
    // Every open must take the later, and the next checkpoint must remove
    // the older, or a later open could bring it back over what the later
    // one holds.
    let dir = tempfile::tempdir().unwrap();
    let older = two_filters_of_one_name(dir.path());
    for _ in 0..3 {
        let s = reopen(dir.path());
        assert_eq!(
            s.contains(b"f", &[&item(1), &item(2)]).unwrap().unwrap(),
            vec![false, true]
        );
    }
    {
        let s = reopen(dir.path());
        s.add(b"f", &[&item(3)], None).unwrap();
        s.checkpoint().unwrap();
    }
    assert!(!older.exists(), "the next checkpoint removed the older one");
    assert_eq!(snap_files(dir.path()).len(), 1);
    let s = reopen(dir.path());
    assert_eq!(
        s.contains(b"f", &[&item(1), &item(2), &item(3)])
            .unwrap()
            .unwrap(),
        vec![false, true, true]
    );
}

/// The later of two filters of one name deleted (or expired) in its turn,
/// and the process killed before a checkpoint: the earlier one stays
/// deleted (the open that chose the later one logged the earlier one's
/// delete again).
#[test]
fn the_later_of_two_filters_of_one_name_deleted_does_not_bring_the_earlier_back() {
    for expire in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        two_filters_of_one_name(dir.path());
        {
            let s = reopen(dir.path());
            if expire {
                let past = std::time::SystemTime::now() - std::time::Duration::from_secs(1);
                assert!(s.expire_at(b"f", Some(past)).unwrap());
            } else {
                assert!(s.delete(b"f").unwrap());
            }
            assert_eq!(s.contains(b"f", &[&item(1)]).unwrap(), None);
            s.sync().unwrap();
            // Dropped without a checkpoint, as by a kill.
        }
        let s = reopen(dir.path());
        assert_eq!(
            s.contains(b"f", &[&item(1), &item(2)]).unwrap(),
            None,
            "expire {expire}: the earlier filter came back"
        );
    }
}

#[test]
fn flipped_byte_in_the_middle_of_the_log_stops_the_open() {
    for fsync in [FsyncPolicy::Always, FsyncPolicy::No] {
        // Damaged in the middle: records follow the damage, and under
        // `always` the sync mark is past it, so it is no torn tail.
        let (dir, seg, mut data) = fifty_in_newest_segment(fsync);
        let end = data.len();
        assert!(end >= 10 * 48, "{end}");
        data[end / 2] ^= 0x10;
        std::fs::write(&seg, &data).unwrap();
        let e = Store::open(dir.path(), StoreOptions::default()).unwrap_err();
        match e.kind() {
            ErrorKind::Corrupt { path, offset, .. } => {
                assert_eq!(path, &seg);
                assert!(*offset <= (end / 2) as u64, "{offset}");
            }
            other => panic!("expected corruption, got {other}"),
        }
        assert!(e.to_string().contains(seg.to_str().unwrap()), "{e}");
        // Asked to salvage, it opens with what precedes the damage.
        let s = open_salvaging(dir.path());
        assert!(s.contains(b"f", &[&item(0)]).unwrap().unwrap()[0]);
    }
}

#[test]
fn flipped_byte_in_a_snapshot_stops_the_open() {
    let dir = tempfile::tempdir().unwrap();
    {
        let s = Store::open(dir.path(), StoreOptions::default()).unwrap();
        s.create(b"f", &bloom()).unwrap();
        s.add(b"f", &[&item(1)], None).unwrap();
        s.close().unwrap();
    }
    let snap = std::fs::read_dir(dir.path().join("snapshots"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let mut data = std::fs::read(&snap).unwrap();
    let mid = data.len() / 2;
    data[mid] ^= 1;
    std::fs::write(&snap, &data).unwrap();
    let e = Store::open(dir.path(), StoreOptions::default()).unwrap_err();
    assert!(matches!(e.kind(), ErrorKind::Corrupt { .. }), "{e}");
    assert!(e.to_string().contains(snap.to_str().unwrap()), "{e}");
    assert!(e.to_string().contains("checksum"), "{e}");
}

/// A salvaging open leaves a directory that opens without salvage, with
/// what the salvage kept: it ends with a checkpoint, which retires the
/// damaged log, and it puts a damaged snapshot aside
/// (`<id>.snap.damaged`, kept for a look).
#[test]
fn after_a_salvaging_open_the_directory_opens_without_salvage() {
    let items: Vec<Vec<u8>> = (0..50).map(item).collect();
    let refs: Vec<&[u8]> = items.iter().map(|v| v.as_slice()).collect();
    // A flipped byte in the log's last record, below the sync mark.
    let dir = tempfile::tempdir().unwrap();
    {
        let always = StoreOptions {
            fsync: FsyncPolicy::Always,
            ..Default::default()
        };
        let s = Store::open(dir.path(), always).unwrap();
        s.create(b"f", &bloom()).unwrap();
        for it in &refs {
            s.add(b"f", &[it], None).unwrap();
        }
        s.sync().unwrap();
    }
    let seg = segments(dir.path()).pop().unwrap();
    let mut data = std::fs::read(&seg).unwrap();
    let last = *record_offsets(&data).last().unwrap();
    data[last + 20] ^= 1;
    std::fs::write(&seg, &data).unwrap();
    assert!(Store::open(dir.path(), StoreOptions::default()).is_err());
    let salvaged = open_salvaging(dir.path());
    assert_eq!(salvaged.recovery().salvaged, 1);
    let kept = salvaged.contains(b"f", &refs).unwrap().unwrap();
    drop(salvaged);
    assert_eq!(kept.iter().filter(|&&k| k).count(), 49, "{kept:?}");
    let s = Store::open(dir.path(), StoreOptions::default()).unwrap();
    assert_eq!(s.contains(b"f", &refs).unwrap().unwrap(), kept);
    drop(s);

    // A flipped byte in the middle of the first of several segments:
    // salvage skips the rest of that segment.
    let dir = tempfile::tempdir().unwrap();
    let many: Vec<Vec<u8>> = (0..5000).map(item).collect();
    {
        let always = StoreOptions {
            fsync: FsyncPolicy::Always,
            segment_size: 64 << 10,
            ..Default::default()
        };
        let s = Store::open(dir.path(), always).unwrap();
        s.create(b"f", &bloom()).unwrap();
        for it in &many {
            s.add(b"f", &[it], None).unwrap();
        }
        s.sync().unwrap();
    }
    let segs = segments(dir.path());
    assert!(segs.len() >= 3, "{segs:?}");
    let mut data = std::fs::read(&segs[0]).unwrap();
    let mid = data.len() / 2;
    data[mid + 20] ^= 0x10;
    std::fs::write(&segs[0], &data).unwrap();
    assert!(Store::open(dir.path(), StoreOptions::default()).is_err());
    let refs_many: Vec<&[u8]> = many.iter().map(|v| v.as_slice()).collect();
    let salvaged = open_salvaging(dir.path());
    assert!(salvaged.recovery().salvaged >= 1);
    let kept = salvaged.contains(b"f", &refs_many).unwrap().unwrap();
    drop(salvaged);
    let n = kept.iter().filter(|&&k| k).count();
    assert!(n > 0 && n < 5000, "salvage kept {n}");
    let s = Store::open(dir.path(), StoreOptions::default()).unwrap();
    assert_eq!(s.contains(b"f", &refs_many).unwrap().unwrap(), kept);
    drop(s);

    // A flipped byte in a snapshot: its filter is lost, the other kept.
    let dir = tempfile::tempdir().unwrap();
    let (snaps, data) = two_snapshots_second_damaged(dir.path(), &refs);
    assert!(Store::open(dir.path(), StoreOptions::default()).is_err());
    assert_eq!(open_salvaging(dir.path()).recovery().salvaged, 1);
    let s = Store::open(dir.path(), StoreOptions::default()).unwrap();
    assert_eq!(s.names(), [b"f".to_vec()]);
    assert!(s.contains(b"f", &refs).unwrap().unwrap().iter().all(|&k| k));
    let mut aside = snaps[1].clone().into_os_string();
    aside.push(".damaged");
    assert_eq!(
        std::fs::read(&aside).unwrap(),
        data,
        "the damaged snapshot is kept aside"
    );
}

/// Filters `f` and `g` holding `refs`, checkpointed, then a byte in the
/// middle of `g`'s snapshot (the second: `g` has the higher id) flipped.
/// Returns both snapshots' paths and `g`'s damaged bytes.
fn two_snapshots_second_damaged(dir: &Path, refs: &[&[u8]]) -> (Vec<PathBuf>, Vec<u8>) {
    {
        let s = Store::open(dir, StoreOptions::default()).unwrap();
        for name in [b"f", b"g"] {
            s.create(name, &bloom()).unwrap();
            s.add(name, refs, None).unwrap();
        }
        s.checkpoint().unwrap();
    }
    let snaps = snap_files(dir);
    assert_eq!(snaps.len(), 2);
    let damaged = flip_middle(&snaps[1]);
    (snaps, damaged)
}

/// Flips a bit of the byte in the middle of file `path`: its new bytes.
fn flip_middle(path: &Path) -> Vec<u8> {
    let mut data = std::fs::read(path).unwrap();
    let mid = data.len() / 2;
    data[mid] ^= 1;
    std::fs::write(path, &data).unwrap();
    data
}

/// A salvaging open that finds nothing damaged changes nothing: no
/// checkpoint (a server may be started with salvage every time), nothing
/// skipped.
#[test]
fn a_salvaging_open_that_finds_no_damage_writes_no_checkpoint() {
    let dir = tempfile::tempdir().unwrap();
    let items: Vec<Vec<u8>> = (0..100).map(item).collect();
    let refs: Vec<&[u8]> = items.iter().map(|v| v.as_slice()).collect();
    {
        let s = Store::open(dir.path(), StoreOptions::default()).unwrap();
        s.create(b"f", &bloom()).unwrap();
        s.add(b"f", &refs, None).unwrap();
    }
    let logged = segments(dir.path());
    let s = open_salvaging(dir.path());
    assert_eq!(s.recovery().salvaged, 0);
    assert!(s.contains(b"f", &refs).unwrap().unwrap().iter().all(|&k| k));
    assert!(
        snap_files(dir.path()).is_empty(),
        "a checkpoint was written"
    );
    let now = segments(dir.path());
    assert!(
        logged.iter().all(|f| now.contains(f)),
        "the log was retired: {logged:?}, now {now:?}"
    );
    drop(s);
    let s = reopen(dir.path());
    assert!(s.contains(b"f", &refs).unwrap().unwrap().iter().all(|&k| k));
}

/// A snapshot put aside keeps its id from new filters, and one of the same
/// id put aside later does not overwrite it.
#[test]
fn a_snapshot_put_aside_keeps_its_id_and_is_not_overwritten() {
    let dir = tempfile::tempdir().unwrap();
    let items: Vec<Vec<u8>> = (0..50).map(item).collect();
    let refs: Vec<&[u8]> = items.iter().map(|v| v.as_slice()).collect();
    // `g`, the newest filter, damaged: its id is the highest.
    let (snaps, damaged) = two_snapshots_second_damaged(dir.path(), &refs);
    let mut aside = snaps[1].clone().into_os_string();
    aside.push(".damaged");
    let aside = PathBuf::from(aside);
    // A filter made later takes a new id, not the one put aside: in the
    // salvaging open that put it aside, and after a later open (which
    // reads it from the name).
    for (name, salvaging) in [(b"h", true), (b"i", false)] {
        let s = if salvaging {
            open_salvaging(dir.path())
        } else {
            reopen(dir.path())
        };
        assert_eq!(s.recovery().salvaged, u64::from(salvaging));
        s.create(name, &bloom()).unwrap();
        s.add(name, &refs, None).unwrap();
        s.checkpoint().unwrap();
        drop(s);
        assert!(std::fs::read(&aside).unwrap() == damaged, "not put aside");
        let now = snap_files(dir.path());
        assert_eq!(now[0], snaps[0]);
        assert!(
            now[1..].iter().all(|p| *p > snaps[1]),
            "a new filter took the id put aside: {now:?}"
        );
    }
    // The same id damaged again (here: `f`'s, with a file of its id put
    // aside by hand): the second goes beside the first.
    let mut first = snaps[0].clone().into_os_string();
    first.push(".damaged");
    std::fs::write(&first, b"put aside before").unwrap();
    let again = flip_middle(&snaps[0]);
    let s = open_salvaging(dir.path());
    assert_eq!(s.recovery().salvaged, 1);
    let mut names = s.names();
    names.sort();
    assert_eq!(names, [b"h".to_vec(), b"i".to_vec()]);
    drop(s);
    assert_eq!(
        std::fs::read(&first).unwrap(),
        b"put aside before",
        "overwritten"
    );
    first.push(".1");
    assert!(std::fs::read(&first).unwrap() == again, "not put aside");
    assert!(std::fs::read(&aside).unwrap() == damaged, "changed");
}

/// The ids in snapshot file names are not checked as records are: a junk
/// name at the top of the range, put aside or found damaged, reserves
/// nothing, and the next filter still gets a valid id.
#[test]
fn junk_ids_in_snapshot_names_leave_the_next_id_in_range() {
    let dir = tempfile::tempdir().unwrap();
    let items: Vec<Vec<u8>> = (0..50).map(item).collect();
    let refs: Vec<&[u8]> = items.iter().map(|v| v.as_slice()).collect();
    {
        let s = reopen(dir.path());
        s.create(b"f", &bloom()).unwrap();
        s.add(b"f", &refs[..25], None).unwrap();
        s.checkpoint().unwrap();
    }
    let snaps = dir.path().join("snapshots");
    for junk in [
        "3fffffffffffffff.snap.damaged",
        "4000000000000000.snap",
        "ffffffffffffffff.snap",
    ] {
        std::fs::write(snaps.join(junk), b"not a snapshot").unwrap();
    }
    let s = open_salvaging(dir.path());
    assert_eq!(s.recovery().salvaged, 2);
    s.create(b"g", &bloom()).unwrap();
    s.add(b"g", &refs, None).unwrap();
    s.add(b"f", &refs[25..], None).unwrap();
    drop(s);
    // Replayed from the log, then from a snapshot.
    for _ in 0..2 {
        let s = reopen(dir.path());
        for name in [b"f", b"g"] {
            let found = s.contains(name, &refs).unwrap().unwrap();
            assert!(found.iter().all(|&k| k), "items of {name:?} lost");
        }
        s.checkpoint().unwrap();
    }
}

/// A directory whose one filter, `f`, has `items()`'s first 50 in a
/// snapshot and the other 50 in the log only: the snapshot's path and
/// bytes.
fn snapshot_and_logged_adds(dir: &Path) -> (PathBuf, Vec<u8>) {
    let items: Vec<Vec<u8>> = (0..100).map(item).collect();
    let refs: Vec<&[u8]> = items.iter().map(|v| v.as_slice()).collect();
    let s = Store::open(dir, StoreOptions::default()).unwrap();
    s.create(b"f", &bloom()).unwrap();
    s.add(b"f", &refs[..50], None).unwrap();
    s.checkpoint().unwrap();
    s.add(b"f", &refs[50..], None).unwrap();
    drop(s);
    let snaps = snap_files(dir);
    assert_eq!(snaps.len(), 1);
    let bytes = std::fs::read(&snaps[0]).unwrap();
    (snaps[0].clone(), bytes)
}

/// `snap` holds `bytes` still, nothing was moved aside, and an open
/// without salvage finds all 100 items of `f`, logged ones too.
fn assert_kept_whole(dir: &Path, snap: &Path, bytes: &[u8], why: &str) {
    assert_eq!(
        std::fs::read(snap).unwrap(),
        bytes,
        "{why}: snapshot changed"
    );
    let files: Vec<PathBuf> = std::fs::read_dir(dir.join("snapshots"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(files, [snap], "{why}: something was moved aside");
    let items: Vec<Vec<u8>> = (0..100).map(item).collect();
    let refs: Vec<&[u8]> = items.iter().map(|v| v.as_slice()).collect();
    let s = Store::open(dir, StoreOptions::default()).unwrap();
    let found = s.contains(b"f", &refs).unwrap().unwrap();
    assert!(found.iter().all(|&k| k), "{why}: items lost");
}

#[test]
fn a_salvaging_open_stops_on_a_snapshot_too_large_for_its_limit_and_keeps_it() {
    // A sound snapshot whose filter is larger than `max_filter_bytes` is
    // not damage: moved aside, its closing checkpoint would retire the
    // adds logged after it.
    let dir = tempfile::tempdir().unwrap();
    let (snap, before) = snapshot_and_logged_adds(dir.path());
    let small = StoreOptions {
        salvage: true,
        max_filter_bytes: 1000,
        ..Default::default()
    };
    let Err(e) = Store::open(dir.path(), small) else {
        panic!("the open succeeded");
    };
    match e.kind() {
        ErrorKind::CannotLoad { path, source } => {
            assert_eq!(path, &snap);
            assert!(
                matches!(
                    source.kind(),
                    seen_core::ErrorKind::TooLarge { limit: 1000, .. }
                ),
                "{source}"
            );
        }
        other => panic!("not CannotLoad: {other}"),
    }
    assert!(
        e.to_string().contains("more than the limit of 1000 bytes"),
        "{e}"
    );
    assert_kept_whole(dir.path(), &snap, &before, "too large");
}

#[test]
fn a_salvaging_open_stops_on_a_snapshot_it_cannot_open_or_read_and_keeps_it() {
    // An I/O error says nothing of the file's bytes: moved aside, a
    // sound snapshot would be lost with the adds logged after it.
    let dir = tempfile::tempdir().unwrap();
    let (snap, before) = snapshot_and_logged_adds(dir.path());
    for (open_fails, op, errno) in [(true, "open", libc::EACCES), (false, "read", libc::EIO)] {
        let (fs, faults) = FaultyFs::new();
        faults.snap_open_fails.store(open_fails, Ordering::SeqCst);
        faults.snap_read_fails.store(!open_fails, Ordering::SeqCst);
        let salvaging = StoreOptions {
            salvage: true,
            ..Default::default()
        };
        let Err(e) = Store::open_with_fs(dir.path(), salvaging, fs) else {
            panic!("the open succeeded ({op} failing)");
        };
        match e.kind() {
            ErrorKind::Io {
                op: failed,
                path,
                source,
            } => {
                assert_eq!((*failed, path), (op, &snap), "{e}");
                assert_eq!(source.raw_os_error(), Some(errno), "{e}");
            }
            other => panic!("not Io ({op} failing): {other}"),
        }
        assert_kept_whole(dir.path(), &snap, &before, op);
    }
}
