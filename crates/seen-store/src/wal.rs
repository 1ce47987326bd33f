//! The write-ahead log: memory-mapped, preallocated segments with group
//! commit.
//!
//! A record is appended by copying it into a shared memory map of the
//! current segment file. The bytes are then in the kernel's page cache, so
//! they survive the process being killed (`kill -9`) at once; only a power
//! failure can lose what was not yet synced. Each segment is preallocated
//! when it is created (`fallocate`; under `Always` zeros written and
//! synced, see [`Wal::zero_fill`]), so writing into the map can never
//! meet a full disk: a full disk shows up as an error when a segment is
//! created, and the mutation that needed it fails cleanly.
//!
//! Durability per [`FsyncPolicy`]:
//!
//! * `Always`: a mutation is acknowledged after an `fdatasync` that covers
//!   its record. Many concurrent writers share one sync (group commit): the
//!   first waiter syncs everything appended so far, the others wait for it.
//! * `EverySec`: a background thread starts a sync every second; a power
//!   failure loses what was acknowledged since the last sync that ended
//!   had started (each sync first copies the adds staged in rings into
//!   the log, once the sync before it has ended; about a second, more on
//!   a machine whose CPU is saturated:
//!   see [`Wal::take_sync_window`]), a process kill nothing. Once the
//!   last sync that succeeded began more than [`SYNC_OVERDUE`] ago,
//!   mutations wait for a sync (see [`Wal::wait_for_overdue_sync`]), so
//!   that a power loss never takes more than about that much. Each
//!   sync then drops the log pages it made durable from the page cache
//!   (see [`Wal::drop_synced`]).
//! * `No`: the kernel writes back when it likes (Linux: within about 30 s);
//!   a process kill loses nothing.
//!
//! After its segments' sync, a sync under `EverySec` writes the sync
//! mark (under `Always`, one sync a second does), which tells the reader
//! after a power loss which damage the loss can explain (see
//! [`SyncMark`]).
//!
//! Staging. Under `EverySec` and `No` adds to fixed-size Bloom filters,
//! and adds to scalable chains with room reserved for them, are first
//! staged in a ring of the writer thread's (see the `ring` module and
//! [`Wal::stage`]), and reach a lane in batches of up to 256 hashes
//! ([`Wal::copy_ring`]): before each sync, each time the page helper wakes
//! (at least every 100 ms; it passes by a ring someone is copying, or
//! whose record no free lane takes at once), at each [`Wal::order_point`] of a filter
//! that stages, before a chain's add that may grow it or a dump chunk,
//! and whenever a ring holds 256.
//!
//! Lanes. Under `EverySec` and `No` the log has four lanes, each a
//! sequence of segments with a mutex of its own; every record takes its
//! lsn from one counter, under its lane's mutex (unordered adds 64 at a
//! time, see [`Wal::take_lsn`]), so that each lane is in lsn order and
//! recovery merges the lanes by lsn. A writer tries its
//! own lane first, then any free one: one preempted while it holds a lane
//! (50 writers sharing 2 cores) no longer stops the others, as it did when
//! the log had one mutex. A free lane that would have to make a segment
//! file first is passed by if another can take the record at once (see
//! [`Wal::lock_any`]). Only adds whose order against other records does
//! not matter go to any lane: adds to a fixed-size Bloom filter, and the
//! adds with reserved room to a scalable chain (bits only get set, so any
//! order gives the same filter). Every other record (create, delete,
//! expire, remove, the adds of counting filters and of chains near a
//! sub-filter's capacity, dump loads) goes to lane 0. A record that
//! depends on a lane-0 record (an add on its filter's create, say) is
//! appended after that one has returned, and so has the higher lsn (the
//! barrier of [`Wal::take_lsn`]); two adds that may go to any lane, from
//! two threads, can have their lsns in either order, which cannot change
//! the bits; one thread's records take rising lsns (while it appends to
//! one log: see [`Wal::take_lsn`]). Under `Always`
//! there is one lane: every commit syncs every lane that holds records,
//! and one file takes one `fdatasync`.
//!
//! A helper thread keeps the map's pages out of the writers' way: it maps
//! in the pages just ahead of the append position before a writer reaches
//! them (`MADV_POPULATE_WRITE`: the kernel zeroes each fresh page of the
//! preallocated file, which costs more than the appends that fill it; not
//! under `Always`, where the syncs would write those zero pages out before
//! the records that fill them), and
//! unmaps the pages behind it (`MADV_DONTNEED`: their bytes stay in the
//! page cache, dirty until synced, so nothing is lost; but a sync no longer
//! write-protects them one by one, with an interrupt to every core that
//! runs a writer, and they stop counting as the process's memory).
//! The helper unmaps a 2 MiB window at a time, and with 50 writers it
//! gets little CPU, so each sync under `EverySec` first unmaps, in one
//! call per lane, the written pages the helper has not (see
//! [`Wal::lead_sync`]).
//! It also makes each lane's next segment ahead (a spare: created,
//! preallocated and mapped under a temporary name), once an eighth of the
//! current one is used, or at once for a busy lane or one with no segment
//! that a writer passed by (see [`LaneState::spare_due`]); a checkpoint
//! gives each lane it rolls one before it writes its snapshots. So a roll renames a spare rather than
//! doing that I/O on a writer's path, where it took 200-300 ms, and up to
//! 1.5 s, behind a checkpoint's writeback (BENCHMARKS.md, sessions 9 and
//! 10). A spare is not synced when made (that waits for whatever the disk
//! is writing): the sync that first counts a record in it as synced syncs
//! the file, its preallocation with it, then the directory, so that the
//! new name is durable too.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

use crossbeam_utils::CachePadded;
use memmap2::MmapRaw;

use crate::error::{io_err, ErrorKind, Result, Salvage};
use crate::fs::{Fs, FsFile};
use crate::record::{
    encode_segment_end, encode_short, is_short, parse, short_crc, Parsed, Rec, Record, SEGMENT_END,
    SHORT_FLAG, SHORT_RECORD,
};
use crate::ring::{self, Ring, Rings};
use seen_core::ItemHash;

/// When the log is synced to disk; see the module docs for what each can
/// lose.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FsyncPolicy {
    /// Sync before acknowledging every mutation (group commit).
    Always,
    /// Sync once a second in the background.
    EverySec,
    /// Never sync explicitly.
    No,
}

impl std::str::FromStr for FsyncPolicy {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        match s.to_ascii_lowercase().as_str() {
            "always" => Ok(FsyncPolicy::Always),
            "everysec" => Ok(FsyncPolicy::EverySec),
            "no" => Ok(FsyncPolicy::No),
            _ => Err(format!(
                "fsync policy '{s}' is not one of always, everysec, no"
            )),
        }
    }
}

/// The file name of a segment: its first lsn (20 digits), its lane (2) and
/// its place in the lane (10 or more), e.g.
/// `00000000000000000001.00.0000000000.log`.
pub(crate) fn segment_name(first_lsn: u64, lane: usize, seq: u64) -> String {
    format!("{first_lsn:020}.{lane:02}.{seq:010}.log")
}

/// A segment [`Wal::retire_upto`] took out of its lane's list.
pub(crate) struct Retired {
    pub(crate) lane: usize,
    first: u64,
    pub(crate) path: PathBuf,
    last: Option<u64>,
}

/// A segment file found in the log directory.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct SegmentFile {
    pub(crate) lane: usize,
    /// Its place in the lane; `None` for a segment written before lanes
    /// (named `<first lsn>.log`, lane 0, before every numbered one).
    pub(crate) seq: Option<u64>,
    /// The lsn in its name: no record in it has a lower one.
    pub(crate) first_lsn: u64,
    pub(crate) path: PathBuf,
    /// The lsn of its last record (0 for none), once it has been read.
    pub(crate) last_lsn: Option<u64>,
}

pub(crate) fn parse_segment_name(path: &Path) -> Option<SegmentFile> {
    let name = path.file_name()?.to_str()?;
    let stem = name.strip_suffix(".log")?;
    let digits = |s: &str, min: usize| -> Option<u64> {
        (s.len() >= min && s.bytes().all(|b| b.is_ascii_digit()))
            .then(|| s.parse().ok())
            .flatten()
    };
    let mut parts = stem.split('.');
    let first = parts.next()?;
    if first.len() != 20 {
        return None;
    }
    // Numbers no log reaches (a name made by hand) are no segment's: the
    // arithmetic on them would overflow.
    let first_lsn = digits(first, 20).filter(|&l| l < MAX_LSN)?;
    let (lane, seq) = match (parts.next(), parts.next(), parts.next()) {
        (None, _, _) => (0, None),
        (Some(lane), Some(seq), None) if lane.len() == 2 => (
            digits(lane, 2)? as usize,
            Some(digits(seq, 10).filter(|&q| q < MAX_LSN)?),
        ),
        _ => return None,
    };
    Some(SegmentFile {
        lane,
        seq,
        first_lsn,
        path: path.to_path_buf(),
        last_lsn: None,
    })
}

struct Segment {
    first_lsn: u64,
    /// Its place in its lane.
    seq: u64,
    /// Written only under the `state` mutex; shared with the page helper,
    /// which only passes address ranges to `madvise`.
    map: Arc<MmapRaw>,
    /// Handle used to sync the segment (shared with the syncer).
    file: Arc<dyn FsFile>,
    offset: usize,
    path: PathBuf,
    /// The pages below this have been dropped from the page cache after a
    /// sync, or were mapped when that was done (see [`Wal::drop_synced`]).
    dropped: usize,
}

/// What one lane's appends write, under its mutex.
struct LaneState {
    /// The segment appends go to; `None` until the lane's first append
    /// (only lane 0 gets one when the log opens).
    cur: Option<Segment>,
    /// The place in the lane of its next segment.
    next_seq: u64,
    /// Rolled-away segments that may hold unsynced records, with their
    /// paths (for the error if their sync fails).
    unsynced: Vec<(PathBuf, Arc<dyn FsFile>)>,
    /// Every live segment of the lane, oldest first (the current one
    /// last): first lsn, path, and the lsn of its last record where it is
    /// known without a successor (segments found at open).
    segments: Vec<(u64, PathBuf, Option<u64>)>,
    /// Segment files that failed rolls made under their segments' names
    /// (see [`Wal::roll`]) and could not remove: each keeps its number,
    /// and joins `segments` (holding no records) at the next roll that
    /// succeeds, so that checkpoints retire it in its turn. Left out, it
    /// would stay while the segments after it were retired: a gap in the
    /// lane's numbers, which stops the next open as a lost segment.
    orphans: Vec<PathBuf>,
    /// The lsns this lane took from the counter for its unordered records
    /// and has not used yet: `block.0..block.1` (see [`Wal::take_lsn`]).
    block: (u64, u64),
    /// A segment file made ready ahead by the page helper or a checkpoint
    /// (created, preallocated and mapped, under a temporary name): a roll
    /// renames it instead of making one on the writer's path.
    spare: Option<Spare>,
    /// A writer passed the lane by since its last roll, for it would have
    /// had to make a segment file (see [`Wal::lock_any`]).
    wanted: bool,
    /// The lane's last roll was of a full segment, and its checkpoint
    /// roll, if any since, of one at least an eighth full: a busy lane,
    /// which gets its next spare at once (see [`LaneState::spare_due`]).
    busy: bool,
    /// Bytes of records in the lane's segments rolled away since the last
    /// checkpoint started (see [`Wal::log_bytes`]).
    rolled: u64,
}

impl LaneState {
    /// Should the lane get a spare now (from the page helper)? Once an
    /// eighth of its segment is used, so that a lane that hardly gets
    /// records has none until a checkpoint rolls it (which gives every lane
    /// it rolls a spare); a busy lane at once: made while a checkpoint's
    /// snapshots were written back, a spare took up to a second (create
    /// and preallocate wait behind them), and a lane that filled its
    /// segment first made one itself, its writers waiting 0.1-1.5 s
    /// (BENCHMARKS.md, session 10). A lane with no segment yet gets one
    /// once a writer has passed it by for that (see [`Wal::lock_any`]).
    fn spare_due(&self) -> bool {
        self.spare.is_none()
            && match &self.cur {
                Some(c) => self.busy || c.eighth_used(),
                None => self.wanted,
            }
    }

    /// Whether a record of `total` bytes goes into the lane with no
    /// segment file made on the way: its segment has room, or a spare
    /// waits.
    fn takes_at_once(&self, total: usize) -> bool {
        self.spare.is_some() || self.cur.as_ref().is_some_and(|c| c.has_room(total))
    }
}

/// See [`LaneState::spare`].
struct Spare {
    path: PathBuf,
    map: Arc<MmapRaw>,
    file: Arc<dyn FsFile>,
}

/// A name for a spare segment of lane `lane` (not a segment name: the log
/// reader passes it by, and open removes it), unique to the process and
/// the call: a log being dropped, whose helper may still be making one,
/// and the next log opened on the directory never share one.
fn spare_name(lane: usize) -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    format!("spare.{lane:02}.{}-{n}.tmp", std::process::id())
}

/// Whether `name` is a spare's (see [`spare_name`]).
fn is_spare_name(name: &str) -> bool {
    name.starts_with("spare.") && name.ends_with(".tmp")
}

impl LaneState {
    /// The first lsn of the lane's block not used yet (`u64::MAX` if the
    /// block is used up).
    fn unused_from(&self) -> u64 {
        let (next, end) = self.block;
        if next < end {
            next
        } else {
            u64::MAX
        }
    }
}

/// One of the log's lanes: a sequence of segments of its own, appended to
/// under its own mutex (see the module docs).
struct Lane {
    state: CachePadded<Mutex<LaneState>>,
    /// The segment and window the lane's append position was in when the
    /// page helper was last woken for it; writers wake it when they move
    /// into another one.
    window: AtomicU64,
}

/// Lanes that appends spread over under `EverySec` and `No`. Each has a
/// preallocated segment once it has been used.
const LANES: usize = 4;

/// Lsns a lane takes from the shared counter at a time for records that
/// may go to any lane: the counter's cache line then moves between cores
/// once per this many appends, not on every one.
const LSN_BLOCK: u64 = 64;

thread_local! {
    /// The lane this thread tries first (see [`Wal::lock_any`]).
    static HOME_LANE: std::cell::Cell<usize> = const { std::cell::Cell::new(usize::MAX) };
    /// The log (its [`Wal::id`]) this thread last appended to, and the
    /// lsn its record got (see [`Wal::take_lsn`]).
    static LAST_TAKEN: std::cell::Cell<(u64, u64)> = const { std::cell::Cell::new((0, 0)) };
}

/// Hands out [`Wal::id`]s.
static NEXT_WAL: AtomicU64 = AtomicU64::new(1);

/// Hands out home lanes to threads in turn.
static NEXT_HOME: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// A page of the log's memory maps.
const PAGE: usize = 4096;

/// The largest zero-filled segment (see [`Wal::zero_fill`]): writing the
/// zeros of 8 MiB and syncing them took about 50 ms here, 64 MiB 0.35-0.47 s,
/// which an open, a checkpoint, or a roll that found no spare ready would
/// wait for. It still holds the largest record a store writes (a dump
/// chunk's piece of at most 4 MiB).
const ZERO_FILLED_SEGMENT: u64 = 8 << 20;

/// The longest a writer waits for a running sync by yielding before it
/// sleeps on the condition variable.
const SPIN_WAIT: Duration = Duration::from_millis(2);

/// The longest a leader gathers before it syncs.
const GATHER_MAX: Duration = Duration::from_micros(200);

/// How long [`patiently`] goes without waiting for a lock before it waits
/// for the rings or lanes still left.
const COPY_PATIENCE: Duration = Duration::from_millis(50);

/// The most threads a sync syncs its files in (see [`sync_files`]).
const SYNC_THREADS: usize = 8;

/// The pause between two of [`patiently`]'s passes that wait for no lock.
const COPY_PASS_GAP: Duration = Duration::from_micros(200);

struct SyncState {
    synced_lsn: u64,
    in_progress: bool,
    poisoned: Option<String>,
    /// Times the log has been poisoned: a reset clears only the poisoning
    /// its checkpoint followed (see [`Wal::reset_after_checkpoint`]).
    poison_epoch: u64,
    /// Records the last sync covered: more than one means writers are
    /// waiting together, and the next leader gathers before it syncs.
    last_batch: u64,
}

/// How far ahead of the append position the page helper keeps pages
/// mapped in, and the step in which it moves: the reach of one page table
/// (512 pages of 4 KiB), so that the helper, mapping in the next windows,
/// and a writer, appending in the current one, seldom meet. With 256 KiB
/// windows a single writer spent 2.3% of its time spinning on the kernel's
/// page-table lock and 4.1% in page faults; with 2 MiB, 0.0% and 0.5%
/// (BENCHMARKS.md, session 8).
const PAGE_WINDOW: usize = 2 << 20;

/// How long a lane's append position stays where it is before the page
/// helper unmaps the lane's pages (at its next wake, within 100 ms).
const IDLE_UNMAP: Duration = Duration::from_millis(500);

/// Runs a call that may block for long: see
/// [`Store::set_blocking_hook`](crate::Store::set_blocking_hook). It must
/// call the closure it is given, and must not catch a panic of it (the
/// store then panics again).
pub type BlockingHook = Box<dyn Fn(&mut dyn FnMut()) + Send + Sync>;

/// The log.
///
/// What appends write (the lanes, `next_lsn`) and what syncs write sit on
/// cache lines of their own (`CachePadded`), apart from what every call
/// only reads (`poisoned`, the policy, ...): a read-mostly field sharing a
/// line with a written one costs a miss on every call, on every core.
pub(crate) struct Wal {
    /// Unique in the process (for the thread-local `LAST_TAKEN`).
    id: u64,
    fs: Arc<dyn Fs>,
    dir: PathBuf,
    policy: FsyncPolicy,
    segment_size: u64,
    /// Segments are preallocated by writing zeros (and syncing them), not
    /// by `fallocate`: under `Always` only. A sync of records written into
    /// blocks that `fallocate` reserved also converts them to written in
    /// the file's extent metadata, and waits for that to be written too
    /// (here, ext4 without a journal: a synchronous write of the inode's
    /// block). With 50 writers a sync so took 800-900 us rather than
    /// 350-400 us on this VM's disk (BENCHMARKS.md, session 12). The cost:
    /// an open and a checkpoint each write and sync 8 or 16 MiB of zeros
    /// (about 50 and 100 ms). Not under `EverySec` and `No`, whose writers
    /// log up to 100 MB/s and would have each segment written twice, for
    /// syncs that no writer waits for.
    zero_fill: bool,
    /// A sync drops what it made durable from the page cache (see
    /// [`FsFile::drop_cached`]): under `EverySec`. Its writers log up to
    /// 150 MB/s, and each page of log they fill is a fresh page of memory,
    /// which on this VM (nested virtualisation, free pages handed back to
    /// the host) costs microseconds to touch first; pages given back to the
    /// allocator a second later are taken again while still warm, and the
    /// log no longer fills the page cache. 50 writers of 100 items per
    /// call: 79% of the in-memory filter's adds/s before, 84% with it
    /// (BENCHMARKS.md, session 12). Not under `Always`, which syncs
    /// thousands of times a second, nor `No`, which does not sync.
    drop_synced: bool,
    /// The largest record an append takes: one that fits in a segment,
    /// and whose length stays below the short record's flag.
    max_record: u64,
    /// Every lane with live segments; appends go to the first `active`.
    lanes: Vec<Lane>,
    active: usize,
    /// The next lsn to hand out (taken under the appending lane's mutex).
    next_lsn: CachePadded<AtomicU64>,
    /// The highest lsn that a record going to any lane must exceed: that
    /// of the last record appended to lane 0, or of the last
    /// [`order_point`](Wal::order_point). Read by every such append,
    /// written rarely.
    barrier: CachePadded<AtomicU64>,
    sync: CachePadded<Mutex<SyncState>>,
    synced_cv: Condvar,
    stop: AtomicBool,
    /// The store is gone (`close`): a sync still running writes no mark,
    /// which could come after the next open's.
    closed: AtomicBool,
    /// Mirrors of `SyncState::synced_lsn` and `in_progress`, read by
    /// waiters that spin before they sleep.
    synced_lsn: CachePadded<AtomicU64>,
    sync_running: AtomicBool,
    /// Mirror of `SyncState::poisoned`, so the hot path reads it without
    /// taking the lock.
    poisoned: AtomicBool,
    pages: std::sync::OnceLock<std::thread::Thread>,
    /// The syncer thread (under `EverySec`), woken when the log stops.
    syncer: std::sync::OnceLock<std::thread::Thread>,
    /// The helper threads (page helper, syncer), for
    /// [`join_helpers`](Self::join_helpers).
    helpers: Mutex<Vec<std::thread::JoinHandle<()>>>,
    /// Syncs led so far (tests read it).
    syncs: AtomicU64,
    /// Under `EverySec`: the longest an acknowledged record has waited
    /// to be made durable since [`take_sync_window`](Wal::take_sync_window)
    /// last read it, in nanoseconds.
    sync_window: AtomicU64,
    /// Under `EverySec`: when the last sync of the whole log that
    /// succeeded began (the syncer's, or one a writer led, see
    /// [`wait_for_overdue_sync`](Wal::wait_for_overdue_sync)), in
    /// nanoseconds after `opened` (0 before the first).
    last_sync_began: AtomicU64,
    /// Under `EverySec`: the last sync that succeeded began more than
    /// [`SYNC_OVERDUE`] ago, so that a power loss now would take more than
    /// the policy promises. Every mutation reads it first; set and cleared
    /// by [`refresh_overdue`](Wal::refresh_overdue).
    overdue: CachePadded<AtomicBool>,
    /// A writer waiting for an overdue sync is leading one (see
    /// [`wait_for_overdue_sync`](Wal::wait_for_overdue_sync)).
    overdue_leader: AtomicBool,
    /// [`IDLE_UNMAP`], in milliseconds (tests lengthen or shorten it).
    idle_unmap_ms: AtomicU64,
    /// Set by `Store::set_blocking_hook`.
    blocking_hook: OnceLock<BlockingHook>,
    /// When the log was opened (the base of `last_sync_began`).
    opened: Instant,
    /// A spare has been renamed into a segment since the last sync: the
    /// next one syncs the directory too.
    dir_dirty: AtomicBool,
    /// Under `EverySec` and `Always`: the file a sync writes, after the
    /// segments, how far every lane is durable in (see [`SyncMark`]).
    mark: Option<Mutex<Box<dyn FsFile>>>,
    /// When the mark was last written by a sync, in nanoseconds after
    /// `opened` (0: at open).
    mark_written: AtomicU64,
    /// Under `Always`: 0, or one more than the `<seq>` of lane 0's segment
    /// from which syncs must write the mark whatever `mark_written` says,
    /// until one lists lane 0 there or later (set by
    /// [`reset_after_checkpoint`](Wal::reset_after_checkpoint)).
    mark_from_seq: AtomicU64,
    /// The machine's boot id, for the mark ([`Fs::boot_id`]).
    boot: [u8; 16],
    /// Where threads stage their unordered adds (see [`Wal::stage`]):
    /// under `EverySec` and `No`.
    rings: Option<Rings>,
    /// A copy of a ring into the log has failed (a full disk) since the
    /// last pass of [`copy_rings`](Wal::copy_rings) that copied them all:
    /// a thread then copies its own ring before it stages more, and so
    /// fails its add rather than acknowledge one the log cannot take.
    copy_failed: AtomicBool,
    /// The last roll of a lane failed to make its next segment (a full
    /// disk, say): the mutation that needed it failed (see
    /// [`write_failing`](Wal::write_failing)).
    roll_failed: AtomicBool,
    /// Failed copies so far: a pass clears `copy_failed` only if none
    /// failed since it began (see [`Wal::clear_copy_failed`]).
    copy_failures: AtomicU64,
    /// Tests: the page helper copies no ring while set, so that a test
    /// can hold adds staged across a moment it means to test.
    #[cfg(test)]
    pub(crate) helper_copies_paused: AtomicBool,
    /// Tests: every ring copy panics while set (a bug in the copy).
    #[cfg(test)]
    copies_panic: AtomicBool,
    /// When the syncer began each of its syncs.
    #[cfg(test)]
    timed_sync_starts: Mutex<Vec<Instant>>,
}

/// Under `Always`, the longest a sync goes without writing the sync mark
/// (see [`SyncMark`]): records synced since are taken, after a power loss,
/// for ones that may have been torn.
pub(crate) const MARK_EVERY: Duration = Duration::from_secs(1);

/// Under `EverySec`, how long the last sync that succeeded may have begun
/// ago before mutations wait for a sync (see
/// [`Wal::wait_for_overdue_sync`]): syncs start a second apart, and take a
/// few milliseconds to a few hundred on an idle machine, so that only a
/// machine whose syncs are slow (a busy disk, or cores too busy to give
/// the sync its share) reaches it.
pub(crate) const SYNC_OVERDUE: Duration = Duration::from_millis(1500);

/// The name of the file in the log directory that says how far each lane
/// was synced (docs/FORMAT.md, section 6.4).
pub(crate) const SYNC_MARK: &str = "SYNCED";

/// What the file [`SYNC_MARK`] holds: for each lane, a segment (its place
/// in the lane) and an offset in it below which, and in every earlier
/// segment of the lane, the log was durable when the file was written.
/// One 512-byte sector, written in place and synced after the segments'
/// sync: a disk writes a sector whole or not at all, so after a power
/// loss it holds the last such mark or the one before. Damage in a lane
/// at or past its mark can be a power loss's (an unsynced part of the log
/// reaches the disk in any order, sector by sector): the reader takes it
/// for the lane's end. Damage below it cannot, nor can a kill make any:
/// corruption, which stops the open, on any boot (on the boot that wrote
/// the mark, past it the rules of a log without one hold). Under
/// `EverySec` every sync writes it, so that past it is
/// exactly what no completed sync covered. Past its lane's entry, the
/// end of a segment's records without a segment-end record ends the lane
/// too when a later segment of it holds written bytes (see
/// `LaneReader::advance`). Under `Always` a sync writes it if the last was
/// written [`MARK_EVERY`] ago or more, and so does the sync of
/// [`sync_appended`](Wal::sync_appended) (a clean shutdown's): everything it acknowledged was
/// synced, and a power loss can only tear the records of
/// the sync in flight, but when that leaves a torn record or zeros with
/// valid ones after it (a page write whose later sector reached the disk
/// and an earlier one did not: 5 rounds in 100 of the power-loss test),
/// only a mark lets the open after a reboot take it for the log's end
/// rather than stop for salvage. Past an older mark are also records that
/// later syncs made durable; damage to them (a disk fault, which a power
/// loss cannot cause) would be taken for a torn tail too, with a warning:
/// the price of not writing the mark at every one of thousands of syncs
/// a second. `No` writes none (docs/FORMAT.md 6.4).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct SyncMark {
    /// The boot id of the machine when it was written ([`Fs::boot_id`]):
    /// a reader on the same boot knows that no power loss came since, and
    /// uses the mark only to tell damage below it.
    pub(crate) boot: [u8; 16],
    /// `(lane, seq, offset)`.
    pub(crate) lanes: Vec<(usize, u64, u64)>,
    /// Whether the run that wrote it ends each segment a roll leaves with
    /// a segment-end record (version 2 of the mark; runs that wrote
    /// version 1 did not): past the mark, a segment whose records end
    /// without one, followed by another of its lane, lost its end (see
    /// `LaneReader::advance`).
    pub(crate) ends: bool,
}

const MARK_MAGIC: &[u8; 8] = b"SEENSYNC";
const MARK_LANES: usize = (SECTOR - 32 - 4) / 24;

impl SyncMark {
    fn encode(&self) -> [u8; SECTOR] {
        let mut out = [0u8; SECTOR];
        out[..8].copy_from_slice(MARK_MAGIC);
        let version: u32 = if self.ends { 2 } else { 1 };
        out[8..12].copy_from_slice(&version.to_le_bytes());
        let n = self.lanes.len().min(MARK_LANES);
        out[12..16].copy_from_slice(&(n as u32).to_le_bytes());
        out[16..32].copy_from_slice(&self.boot);
        for (i, (lane, seq, off)) in self.lanes.iter().take(n).enumerate() {
            let at = 32 + 24 * i;
            out[at..at + 8].copy_from_slice(&(*lane as u64).to_le_bytes());
            out[at + 8..at + 16].copy_from_slice(&seq.to_le_bytes());
            out[at + 16..at + 24].copy_from_slice(&off.to_le_bytes());
        }
        let crc = crc32fast::hash(&out[..SECTOR - 4]);
        out[SECTOR - 4..].copy_from_slice(&crc.to_le_bytes());
        out
    }

    /// `None` for anything but a whole, valid mark of version 1 or 2.
    pub(crate) fn decode(bytes: &[u8]) -> Option<SyncMark> {
        let b = bytes.get(..SECTOR)?;
        let word = |at: usize| u32::from_le_bytes(b[at..at + 4].try_into().expect("4"));
        let long = |at: usize| u64::from_le_bytes(b[at..at + 8].try_into().expect("8"));
        if &b[..8] != MARK_MAGIC
            || !matches!(word(8), 1 | 2)
            || crc32fast::hash(&b[..SECTOR - 4]) != word(SECTOR - 4)
        {
            return None;
        }
        let n = word(12) as usize;
        if n > MARK_LANES {
            return None;
        }
        let lanes = (0..n)
            .map(|i| {
                let at = 32 + 24 * i;
                (long(at) as usize, long(at + 8), long(at + 16))
            })
            .collect();
        Some(SyncMark {
            boot: b[16..32].try_into().expect("16"),
            lanes,
            ends: word(8) == 2,
        })
    }

    /// Reads the mark in log directory `dir`, if it was written on another
    /// boot (a power loss may have come since): see
    /// [`read_any`](Self::read_any).
    #[cfg(test)]
    pub(crate) fn read(fs: &dyn Fs, dir: &Path) -> Option<SyncMark> {
        Self::read_any(fs, dir).and_then(|(m, same_boot)| (!same_boot).then_some(m))
    }

    /// Reads the mark in log directory `dir`, and whether it was written on
    /// this boot: `None` if there is none, or if it is damaged (then the
    /// reader keeps its rules for logs without one, and says so). A mark
    /// of this boot only says what was written (no power loss came since,
    /// and the page cache holds it): damage below it is corruption, even
    /// where it would pass for a torn tail, and past it the rules of a log
    /// without a mark hold.
    pub(crate) fn read_any(fs: &dyn Fs, dir: &Path) -> Option<(SyncMark, bool)> {
        let path = dir.join(SYNC_MARK);
        let mut bytes = Vec::new();
        match fs.open_read(&path) {
            Ok(mut f) => std::io::Read::read_to_end(&mut f, &mut bytes).ok()?,
            Err(_) => return None,
        };
        let mark = SyncMark::decode(&bytes);
        if mark.is_none() {
            tracing::warn!("{}: not a valid sync mark; ignored", path.display());
        }
        mark.map(|m| {
            let same_boot = m.boot == fs.boot_id();
            (m, same_boot)
        })
    }

    /// Lane `lane`'s entry: its segment `<seq>` and offset.
    pub(crate) fn entry(&self, lane: usize) -> Option<(u64, u64)> {
        self.lanes
            .iter()
            .find(|(l, ..)| *l == lane)
            .map(|&(_, s, o)| (s, o))
    }

    /// Is `off` of segment `seq` of lane `lane` below the mark, which says
    /// it was durable when the mark was written? (Not for a lane the mark
    /// does not list, nor a segment named without a `<seq>`.)
    pub(crate) fn covers(&self, lane: usize, seq: Option<u64>, off: usize) -> bool {
        let Some(seq) = seq else { return false };
        self.entry(lane)
            .is_some_and(|(s, o)| seq < s || (seq == s && (off as u64) < o))
    }

    /// Is `off` of segment `seq` of lane `lane` at or past the mark, where
    /// an unsynced part of the log may have been when it was written?
    pub(crate) fn unsynced(&self, lane: usize, seq: Option<u64>, off: usize) -> bool {
        let Some(seq) = seq else { return false };
        self.entry(lane)
            .is_some_and(|(s, o)| seq > s || (seq == s && off as u64 >= o))
    }
}

/// Creates the file of a segment (or spare, or staging ring) at `path`:
/// preallocated to `size` (zeros written and synced if `zero_fill`, see
/// [`Wal::zero_fill`]), synced if `sync`, and mapped. A failure removes it.
pub(crate) fn segment_file(
    fs: &dyn Fs,
    path: &Path,
    size: u64,
    sync: bool,
    zero_fill: bool,
) -> Result<(Arc<dyn FsFile>, Arc<MmapRaw>)> {
    let file = fs.create(path).map_err(|e| io_err("create", path, e))?;
    let made = (|| {
        if zero_fill {
            file.zero_fill(size)
        } else {
            file.allocate(size)
        }
        .map_err(|e| io_err("preallocate", path, e))?;
        if sync || zero_fill {
            file.sync_data().map_err(|e| io_err("sync", path, e))?;
        }
        map(&*file, path)
    })();
    match made {
        Ok(map) => Ok((Arc::from(file), Arc::new(map))),
        Err(e) => {
            drop(file);
            let _ = fs.remove(path);
            Err(e)
        }
    }
}

/// Syncs `files`, each in a thread of its own (up to [`SYNC_THREADS`]) if
/// `parallel` (and there are several), else one after the other; the
/// first error. A sync's kernel
/// work (writing back the file's pages) runs in the thread that syncs, at
/// that thread's share of the CPU: with 50 writers keeping both cores of
/// this VM busy, the syncs of one thread made records wait 3.6-4.4 s for
/// their sync under `EverySec`, those of a thread per file 2.2-3.2 s
/// (BENCHMARKS.md, session 16). A thread that cannot be started leaves its
/// file to this one. An error comes with the path of the file whose sync
/// failed.
fn sync_files(
    files: &[(PathBuf, Arc<dyn FsFile>)],
    parallel: bool,
) -> std::result::Result<(), (PathBuf, std::io::Error)> {
    let sync =
        |(path, f): &(PathBuf, Arc<dyn FsFile>)| f.sync_data().map_err(|e| (path.clone(), e));
    if !parallel || files.len() < 2 {
        return files.iter().try_for_each(sync);
    }
    // At most SYNC_THREADS, each syncing every SYNC_THREADS-th file.
    let n = files.len().min(SYNC_THREADS);
    let share = |i: usize| files.iter().skip(i).step_by(n);
    std::thread::scope(|scope| {
        let mut out = Ok(());
        let mut here = Vec::new();
        let mut threads = Vec::new();
        for i in 0..n {
            match std::thread::Builder::new()
                .name("seen-wal-fsync".into())
                .spawn_scoped(scope, move || share(i).try_for_each(sync))
            {
                Ok(t) => threads.push((i, t)),
                Err(_) => here.push(i),
            }
        }
        for i in here {
            out = out.and(share(i).try_for_each(sync));
        }
        for (i, t) in threads {
            let r = t.join().unwrap_or_else(|_| {
                let e = std::io::Error::other(
                    "a sync thread panicked (this file was the first of its share)",
                );
                Err((files[i].0.clone(), e))
            });
            out = out.and(r);
        }
        out
    })
}

/// Locks one of the crate's mutexes. A panic while holding one would be a
/// bug; the data stays consistent (every update is a single assignment),
/// so the lock is recovered rather than the poison propagated.
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// [`lock`] if the mutex is free now, else `None`.
fn try_lock<T>(m: &Mutex<T>) -> Option<MutexGuard<'_, T>> {
    match m.try_lock() {
        Ok(g) => Some(g),
        Err(std::sync::TryLockError::Poisoned(e)) => Some(e.into_inner()),
        Err(std::sync::TryLockError::WouldBlock) => None,
    }
}

/// Runs its closure when dropped, unless disarmed first: at the end of its
/// scope, and also when a panic (a bug) unwinds through it, so that a flag
/// set for the scope is not left set, holding every later caller up for
/// ever. Disarmed at the end of the normal path, it runs only on a panic.
pub(crate) struct Deferred<F: FnMut()>(pub(crate) Option<F>);

impl<F: FnMut()> Deferred<F> {
    pub(crate) fn disarm(mut self) {
        self.0 = None;
    }
}

impl<F: FnMut()> Drop for Deferred<F> {
    fn drop(&mut self) {
        if let Some(f) = &mut self.0 {
            f();
        }
    }
}

/// Takes each of `items` with `take(item, wait)`, which says whether it is
/// done with the item: first in passes with `wait` false, while `patient()`
/// (at least one pass, however long this thread waited for the CPU, and
/// up to [`COPY_PATIENCE`], [`COPY_PASS_GAP`] apart), then, with `wait`
/// true, each item still left, once. For the work a sync (and an order
/// point, a checkpoint) does for every ring or lane: an item held by a
/// thread the scheduler has preempted is passed by while the others are
/// done, rather than waited for in turn.
fn patiently<T>(
    mut items: Vec<T>,
    patient: impl Fn() -> bool,
    mut take: impl FnMut(&T, bool) -> bool,
) {
    let start = Instant::now();
    let mut first = true;
    while !items.is_empty() && patient() && (first || start.elapsed() < COPY_PATIENCE) {
        first = false;
        items.retain(|item| !take(item, false));
        if !items.is_empty() {
            std::thread::sleep(COPY_PASS_GAP);
        }
    }
    for item in &items {
        take(item, true);
    }
}

/// Unmaps the pages of the segment map `map` in `from..to`
/// (`MADV_DONTNEED`), best effort: for pages no writer will write again,
/// so that a sync does not write-protect them one by one and they stop
/// counting as the process's memory. Nothing is lost: their contents
/// stay in the page cache, dirty or not, and an access maps them back.
fn unmap_pages(map: &MmapRaw, from: usize, to: usize) {
    if to > from {
        // SAFETY: a segment's map is a shared file mapping, for which
        // MADV_DONTNEED drops only the page-table entries, never the
        // contents; `map` outlives the call.
        let _ = unsafe {
            map.unchecked_advise_range(memmap2::UncheckedAdvice::DontNeed, from, to - from)
        };
    }
}

/// Maps a preallocated segment file.
fn map(file: &dyn FsFile, path: &Path) -> Result<MmapRaw> {
    // The file is ours alone: the data directory is locked with flock for
    // the life of the store, and segments are never truncated or resized
    // while mapped. All writes through a segment's map happen under the
    // `state` mutex (see `Segment::bytes_mut`); a ring's, by the thread
    // that leases it and the copier under `copying` (see the `ring`
    // module).
    MmapRaw::map_raw(file.std_file()).map_err(|e| io_err("mmap", path, e))
}

/// Bytes of the record of one hash in the long form (the short form of
/// an add is shorter): its length and CRC (8), then [`ONE_LEN`], padded to
/// 8.
const ONE_RECORD: usize = (8 + ONE_LEN).next_multiple_of(8);

/// The part of a record of one hash that its length field counts and its
/// CRC covers.
const ONE_LEN: usize = hashes_len(1);

/// The part of an add or remove record of `n` hashes that its length field
/// counts and its CRC covers: the lsn and kind (9), the filter id and
/// count (12), the hashes.
const fn hashes_len(n: usize) -> usize {
    9 + 12 + 16 * n
}

/// Bytes of the add (`kind` 2) or remove (`kind` 3) record of `n` hashes
/// for filter `id`, padding included.
const fn hashes_record_len(kind: u8, id: u64, n: usize) -> usize {
    if is_short(kind, id, n) {
        SHORT_RECORD
    } else {
        (8 + hashes_len(n)).next_multiple_of(8)
    }
}

/// Encodes the add or remove record of `hashes` into `buf` (exactly its
/// [`hashes_record_len`]): the layout of [`Record::encode`] for these
/// kinds.
fn encode_hashes(buf: &mut [u8], kind: u8, id: u64, lsn: u64, hashes: &[ItemHash]) {
    if is_short(kind, id, hashes.len()) {
        return encode_short(buf, id, lsn, hashes[0]);
    }
    encode_long(buf, kind, id, lsn, hashes.len(), |dst| {
        for (dst, h) in dst.chunks_exact_mut(16).zip(hashes) {
            dst.copy_from_slice(&h.to_le_bytes());
        }
    });
}

/// Encodes the long form of an add or remove record of `n` hashes into
/// `buf` (exactly its [`hashes_record_len`]), `hashes` writing their
/// `16 * n` bytes (each hash's `lo`, then `hi`, little-endian).
fn encode_long(
    buf: &mut [u8],
    kind: u8,
    id: u64,
    lsn: u64,
    n: usize,
    hashes: impl FnOnce(&mut [u8]),
) {
    let len = hashes_len(n);
    buf[0..4].copy_from_slice(&(len as u32).to_le_bytes());
    buf[8..16].copy_from_slice(&lsn.to_le_bytes());
    buf[16] = kind;
    buf[17..25].copy_from_slice(&id.to_le_bytes());
    buf[25..29].copy_from_slice(&(n as u32).to_le_bytes());
    hashes(&mut buf[29..29 + 16 * n]);
    buf[8 + len..].fill(0);
    let crc = crc32fast::hash(&buf[8..8 + len]);
    buf[4..8].copy_from_slice(&crc.to_le_bytes());
}

/// A record of one hash, encoded before its append (see
/// [`Wal::prepare_one`]).
pub(crate) struct Prepared {
    /// The record in its first `len` bytes.
    bytes: [u8; ONE_RECORD],
    len: usize,
    lsn: u64,
}

impl Prepared {
    /// Gives the record another lsn, and the CRC that goes with it (when
    /// another writer took the lsn it was made for).
    fn set_lsn(&mut self, lsn: u64) {
        self.lsn = lsn;
        set_record_lsn(&mut self.bytes[..self.len], lsn);
    }
}

/// Gives an encoded record (`bytes`, as [`Record::encode`] makes them)
/// another lsn, and the CRC that goes with it.
fn set_record_lsn(bytes: &mut [u8], lsn: u64) {
    let word = u32::from_le_bytes(bytes[0..4].try_into().expect("4 bytes"));
    bytes[8..16].copy_from_slice(&lsn.to_le_bytes());
    let crc = if word & SHORT_FLAG != 0 {
        short_crc(bytes)
    } else {
        crc32fast::hash(&bytes[8..8 + word as usize])
    };
    bytes[4..8].copy_from_slice(&crc.to_le_bytes());
}

impl Segment {
    /// Whether a record of `total` bytes fits, with room left for the
    /// segment-end record a roll writes after it.
    fn has_room(&self, total: usize) -> bool {
        self.offset + total + SEGMENT_END <= self.map.len()
    }

    /// Is at least an eighth of it used? (A lane past that gets a spare;
    /// see [`LaneState::spare_due`].)
    fn eighth_used(&self) -> bool {
        self.offset >= self.map.len() / 8
    }

    /// The bytes at `off..off + len` of the map, to write a record into.
    fn bytes_mut(&mut self, off: usize, len: usize) -> &mut [u8] {
        assert!(off + len <= self.map.len(), "write past the segment's end");
        // SAFETY: the range is inside the map (checked above), which lives
        // as long as `self.map`. `&mut self` is only had under the `state`
        // mutex, so no other writer makes a reference into the map at the
        // same time, and nothing else ever does: the page helper only
        // hands address ranges to `madvise`, which leaves the bytes as
        // they are (it maps pages in, or unmaps pages whose bytes stay in
        // the page cache, and the next access maps them back).
        unsafe { std::slice::from_raw_parts_mut(self.map.as_mut_ptr().add(off), len) }
    }
}

impl Drop for Wal {
    /// Removes the lanes' spares (a killed process leaves them to the next
    /// open).
    fn drop(&mut self) {
        for lane in &self.lanes {
            let st = lane.state.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(spare) = &st.spare {
                let _ = self.fs.remove(&spare.path);
            }
        }
    }
}

impl Wal {
    /// Opens the log after recovery: appends continue at `next_lsn`, in a
    /// fresh segment of lane 0 (and of the other lanes when first used).
    /// `segments` are the existing segment files, each with the lsn of its
    /// last record.
    pub(crate) fn open(
        fs: Arc<dyn Fs>,
        dir: PathBuf,
        policy: FsyncPolicy,
        segment_size: u64,
        next_lsn: u64,
        mut segments: Vec<SegmentFile>,
        rings: Option<Rings>,
    ) -> Result<Arc<Wal>> {
        // Under `Always` every commit syncs every lane with records: one
        // lane, one fsync.
        let active = if policy == FsyncPolicy::Always {
            1
        } else {
            LANES
        };
        segments.sort();
        let count = segments
            .iter()
            .map(|s| s.lane + 1)
            .max()
            .unwrap_or(0)
            .max(active);
        let mut lanes: Vec<LaneState> = (0..count)
            .map(|_| LaneState {
                cur: None,
                next_seq: 0,
                unsynced: Vec::new(),
                segments: Vec::new(),
                orphans: Vec::new(),
                block: (0, 0),
                spare: None,
                wanted: false,
                busy: false,
                rolled: 0,
            })
            .collect();
        // Spares a killed process (or a log still being dropped) left.
        for path in fs.list(&dir).map_err(|e| io_err("list", &dir, e))? {
            if path
                .file_name()
                .and_then(|n| n.to_str())
                .is_some_and(is_spare_name)
            {
                match fs.remove(&path) {
                    Ok(()) => {}
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                    Err(e) => return Err(io_err("remove", &path, e)),
                }
            }
        }
        for s in segments {
            let lane = &mut lanes[s.lane];
            if let Some(seq) = s.seq {
                lane.next_seq = lane.next_seq.max(seq + 1);
            }
            lane.segments.push((s.first_lsn, s.path, s.last_lsn));
        }
        let zero_fill = policy == FsyncPolicy::Always;
        let segment_size = if zero_fill {
            segment_size.min(ZERO_FILLED_SEGMENT)
        } else {
            segment_size
        };
        let first = Self::new_segment(
            &*fs,
            &dir,
            segment_size,
            zero_fill,
            next_lsn,
            0,
            lanes[0].next_seq,
        )?;
        if policy != FsyncPolicy::No {
            Self::sync_found(&*fs, &dir, &lanes)?;
        }
        // The sync mark, written anew at open (see `first_mark`).
        let mark = if policy != FsyncPolicy::No {
            Some(Mutex::new(Self::first_mark(&*fs, &dir, &lanes)?))
        } else {
            // A mark an earlier run left would not know this run's
            // segments, which it would take for unsynced.
            let path = dir.join(SYNC_MARK);
            match fs.remove(&path) {
                Ok(()) => fs
                    .sync_dir(&dir)
                    .map_err(|e| io_err("sync directory", &dir, e))?,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(io_err("remove", &path, e)),
            }
            None
        };
        lanes[0].segments.push((next_lsn, first.path.clone(), None));
        lanes[0].next_seq += 1;
        lanes[0].cur = Some(first);
        let fs_boot = fs.boot_id();
        let wal = Arc::new(Wal {
            fs,
            dir,
            policy,
            segment_size,
            zero_fill,
            drop_synced: policy == FsyncPolicy::EverySec,
            max_record: segment_size
                .saturating_sub(SEGMENT_END as u64)
                .min(u64::from(SHORT_FLAG) - 1),
            lanes: lanes
                .into_iter()
                .map(|st| Lane {
                    state: CachePadded::new(Mutex::new(st)),
                    window: AtomicU64::new(u64::MAX),
                })
                .collect(),
            active,
            id: NEXT_WAL.fetch_add(1, Ordering::Relaxed),
            next_lsn: CachePadded::new(AtomicU64::new(next_lsn)),
            barrier: CachePadded::new(AtomicU64::new(next_lsn - 1)),
            sync: CachePadded::new(Mutex::new(SyncState {
                synced_lsn: next_lsn - 1,
                in_progress: false,
                last_batch: 0,
                poisoned: None,
                poison_epoch: 0,
            })),
            synced_cv: Condvar::new(),
            stop: AtomicBool::new(false),
            closed: AtomicBool::new(false),
            synced_lsn: CachePadded::new(AtomicU64::new(next_lsn - 1)),
            sync_running: AtomicBool::new(false),
            poisoned: AtomicBool::new(false),
            pages: std::sync::OnceLock::new(),
            syncer: std::sync::OnceLock::new(),
            helpers: Mutex::new(Vec::new()),
            syncs: AtomicU64::new(0),
            sync_window: AtomicU64::new(0),
            last_sync_began: AtomicU64::new(0),
            overdue: CachePadded::new(AtomicBool::new(false)),
            overdue_leader: AtomicBool::new(false),
            idle_unmap_ms: AtomicU64::new(IDLE_UNMAP.as_millis() as u64),
            blocking_hook: OnceLock::new(),
            opened: Instant::now(),
            dir_dirty: AtomicBool::new(false),
            mark,
            mark_written: AtomicU64::new(0),
            mark_from_seq: AtomicU64::new(0),
            boot: fs_boot,
            rings: rings.filter(|_| policy != FsyncPolicy::Always),
            copy_failed: AtomicBool::new(false),
            roll_failed: AtomicBool::new(false),
            copy_failures: AtomicU64::new(0),
            #[cfg(test)]
            helper_copies_paused: AtomicBool::new(false),
            #[cfg(test)]
            copies_panic: AtomicBool::new(false),
            #[cfg(test)]
            timed_sync_starts: Mutex::new(Vec::new()),
        });
        Self::start_page_helper(&wal)?;
        if policy == FsyncPolicy::EverySec {
            let weak = Arc::downgrade(&wal);
            let handle = std::thread::Builder::new()
                .name("seen-wal-sync".into())
                .spawn(move || {
                    // Each sync starts a second after the last one that
                    // succeeded started (at once after one that took
                    // longer; a writer may have led one meanwhile, see
                    // `wait_for_overdue_sync`), not a second after it
                    // ended; after a failed one, a second after it ended.
                    let mut next = Instant::now() + Duration::from_secs(1);
                    loop {
                        // Until `next`, or until the log stops
                        // (`stop_helpers` wakes it). A wake that is neither
                        // sleeps again: a scope's threads that the sync
                        // joined leave one pending (std's scope wakes the
                        // thread that made it), and a retry after a failed
                        // sync must still wait its second. The stop is
                        // looked at before each sleep too: its wake may
                        // have been taken by such a scope's join.
                        let wal = loop {
                            let Some(wal) = weak.upgrade() else { return };
                            if wal.stop.load(Ordering::Relaxed) {
                                return;
                            }
                            if Instant::now() >= next {
                                break wal;
                            }
                            drop(wal);
                            std::thread::park_timeout(
                                next.saturating_duration_since(Instant::now()),
                            );
                        };
                        let due = wal.last_sync_start() + Duration::from_secs(1);
                        if due > Instant::now() + Duration::from_millis(1) {
                            next = due;
                            continue;
                        }
                        // A panic (a bug) poisons the log if it came in
                        // the sync itself (`lead_sync`); this thread goes
                        // on, so that syncs resume after a checkpoint.
                        #[cfg(test)]
                        lock(&wal.timed_sync_starts).push(Instant::now());
                        let sync = std::panic::AssertUnwindSafe(|| wal.timed_sync());
                        let Ok((synced, copied)) = std::panic::catch_unwind(sync) else {
                            tracing::error!("background log sync panicked (a bug in seen-store)");
                            next = Instant::now() + Duration::from_secs(1);
                            continue;
                        };
                        if let (Ok(()), Err(e)) = (&synced, copied) {
                            tracing::error!("staged adds not copied into the log: {e}");
                        }
                        match synced {
                            Ok(()) => next = wal.last_sync_start() + Duration::from_secs(1),
                            Err(e) => {
                                tracing::error!("background log sync failed: {e}");
                                next = Instant::now() + Duration::from_secs(1);
                            }
                        }
                    }
                })
                .map_err(|e| io_err("spawn sync thread for", &wal_dir_of(&wal), e))?;
            let _ = wal.syncer.set(handle.thread().clone());
            lock(&wal.helpers).push(handle);
        }
        Ok(wal)
    }

    /// At open, under `Always` and `EverySec`: syncs the segments found,
    /// then the log's directory. A killed process can have left records in
    /// them that no sync covered (under any policy: a record of `always`
    /// whose sync had not ended, a second of `everysec`, anything of `no`),
    /// and a segment renamed from a spare whose name no sync has made
    /// durable. The store has replayed them already, so this run's answers
    /// depend on them: an add of an item they hold is answered "present"
    /// and logs nothing, and adds to a filter they create are logged as
    /// adds to it. Were they lost to a power loss after this run
    /// acknowledged such adds, those would be lost too. Not under `No`,
    /// which promises nothing across a power loss: its open would write
    /// out up to half a minute of a killed run's log (the kernel's
    /// writeback) for nothing it promises (a reopen of 77 MiB of such a
    /// log took 1.9 s rather than 0.9 s).
    fn sync_found(fs: &dyn Fs, dir: &Path, lanes: &[LaneState]) -> Result<()> {
        for st in lanes {
            for (_, path, _) in &st.segments {
                fs.open_rw(path)
                    .and_then(|f| f.sync_data())
                    .map_err(|e| io_err("sync", path, e))?;
            }
        }
        fs.sync_dir(dir)
            .map_err(|e| io_err("sync directory", dir, e))
    }

    /// Under `EverySec` and `Always`, at open, after [`sync_found`](Self::sync_found):
    /// writes the sync mark that says the segments found are durable:
    /// every segment made from now on is past it (see [`SyncMark`]).
    /// Returns the mark's file.
    fn first_mark(fs: &dyn Fs, dir: &Path, lanes: &[LaneState]) -> Result<Box<dyn FsFile>> {
        use std::os::unix::fs::FileExt;
        let path = dir.join(SYNC_MARK);
        let file = match fs.open_rw(&path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                fs.create(&path).map_err(|e| io_err("create", &path, e))?
            }
            Err(e) => return Err(io_err("open", &path, e)),
        };
        let mark = SyncMark {
            ends: true,
            boot: fs.boot_id(),
            lanes: lanes
                .iter()
                .enumerate()
                .map(|(i, st)| (i, st.next_seq, 0))
                .collect(),
        };
        file.std_file()
            .write_all_at(&mark.encode(), 0)
            .and_then(|()| file.sync_data())
            .map_err(|e| io_err("write", &path, e))?;
        fs.sync_dir(dir)
            .map_err(|e| io_err("sync directory", dir, e))?;
        Ok(file)
    }

    /// Starts the thread that maps pages in ahead of each lane's append
    /// position and out behind it (see the module docs). It holds the log
    /// weakly, and ends when the log is dropped or closed.
    fn start_page_helper(wal: &Arc<Wal>) -> Result<()> {
        let weak = Arc::downgrade(wal);
        // Populating writes dirty (zero) pages, which a sync then writes
        // out before the records that fill them are written again: under
        // `always`, which syncs every moment, that would write the log
        // twice, so there the writers fault the pages in themselves.
        let populate = wal.policy != FsyncPolicy::Always;
        let active = wal.active;
        let handle = std::thread::Builder::new()
            .name("seen-wal-pages".into())
            .spawn(move || {
                // Per lane: the segment last seen (by its first lsn), how
                // far into it pages have been mapped in and unmapped, and
                // the append position at the last wake, when it last
                // moved, and whether the lane's pages were unmapped since.
                let mut seen = vec![(u64::MAX, 0usize, 0usize); active];
                let mut still = vec![(usize::MAX, Instant::now(), false); active];
                // Whether its work panicked at the last wake.
                let mut failing = false;
                loop {
                    std::thread::park_timeout(Duration::from_millis(100));
                    let Some(wal) = weak.upgrade() else { return };
                    if wal.stop.load(Ordering::Relaxed) {
                        return;
                    }
                    let now: Vec<_> = wal.lanes[..active]
                        .iter()
                        .map(|lane| {
                            let st = lock(&lane.state);
                            st.cur
                                .as_ref()
                                .map(|c| (c.map.clone(), c.offset, c.first_lsn))
                        })
                        .collect();
                    let idle_unmap =
                        Duration::from_millis(wal.idle_unmap_ms.load(Ordering::Relaxed));
                    drop(wal);
                    for (((first, ahead, behind), (last, moved, trimmed)), now) in
                        seen.iter_mut().zip(still.iter_mut()).zip(now)
                    {
                        let Some((map, offset, seg)) = now else {
                            continue;
                        };
                        if seg != *first {
                            (*first, *ahead, *behind) = (seg, 0, 0);
                        }
                        if offset != *last {
                            (*last, *moved, *trimmed) = (offset, Instant::now(), false);
                        }
                        // An idle lane keeps nothing mapped: its pages
                        // stay in the page cache, and a write maps them
                        // back. Mapped, they count in the process's
                        // memory: 16 MiB over four lanes, which took an
                        // idle server's RSS past RedisBloom's. `ahead`
                        // stays: populating the pages again would dirty
                        // them, and the next sync write them again.
                        if moved.elapsed() >= idle_unmap {
                            if !*trimmed {
                                let done = offset / PAGE_WINDOW * PAGE_WINDOW;
                                let mapped = (*ahead).max(offset.next_multiple_of(PAGE));
                                unmap_pages(&map, done, mapped.min(map.len()));
                                *trimmed = true;
                            }
                            continue;
                        }
                        let want = ((offset / PAGE_WINDOW + 2) * PAGE_WINDOW).min(map.len());
                        if want > *ahead && populate {
                            let from = (*ahead).max(offset / PAGE_WINDOW * PAGE_WINDOW);
                            // Best effort: on a kernel before 5.14 this
                            // fails, and writers fault the pages in
                            // themselves.
                            let _ =
                                map.advise_range(memmap2::Advice::PopulateWrite, from, want - from);
                            *ahead = want;
                        }
                        // Every byte below the append position is written
                        // for good (appends only move forward), so the
                        // pages wholly below it can go.
                        let done = offset / PAGE_WINDOW * PAGE_WINDOW;
                        if done > *behind {
                            unmap_pages(&map, *behind, done);
                            *behind = done;
                        }
                    }
                    // Then, with the pages seen to, the next segments,
                    // and the adds staged in rings that no one is copying
                    // and a free lane can take (a failure is the syncer's
                    // to report). Spares first, and no waiting for a lock
                    // a writer holds: waiting for lanes behind 50 writers
                    // (of 100 items a call), the helper spent hundreds of
                    // milliseconds at a time in its ring copies, and in a
                    // 10-second run writers found no spare at 12 to 21
                    // rolls, making those segments themselves, 1 to 118
                    // ms each, holding their lane; 0 to 3 such rolls with
                    // this order and these copies (BENCHMARKS.md, session
                    // 15).
                    let Some(wal) = weak.upgrade() else { return };
                    if wal.stop.load(Ordering::Relaxed) {
                        return;
                    }
                    // A panic there (a bug) is logged, and the helper
                    // goes on: without it writers would make every
                    // segment themselves, and under `no` nothing would
                    // copy an idle thread's ring.
                    let work = std::panic::AssertUnwindSafe(|| {
                        wal.refresh_overdue();
                        for lane in 0..active {
                            wal.prepare_spare(lane);
                        }
                        #[cfg(test)]
                        let copy = !wal.helper_copies_paused.load(Ordering::Relaxed);
                        #[cfg(not(test))]
                        let copy = true;
                        // After a failed copy, a copy of every ring,
                        // waiting, is what lets writers batch again (under
                        // `no` no sync comes to do it).
                        if copy && wal.copy_failed.load(Ordering::Relaxed) {
                            let _ = wal.copy_rings();
                        } else if copy {
                            wal.copy_free_rings();
                        }
                    });
                    let failed = std::panic::catch_unwind(work).is_err();
                    // Logged once for a run of failing wakes.
                    if failed && !failing {
                        tracing::error!(
                            "the log's page helper panicked making spares or copying rings \
                             (a bug in seen-store); it goes on"
                        );
                    }
                    failing = failed;
                }
            })
            .map_err(|e| io_err("spawn page thread for", &wal.dir, e))?;
        let _ = wal.pages.set(handle.thread().clone());
        lock(&wal.helpers).push(handle);
        Ok(())
    }

    /// Wakes the page helper when lane `lane`'s append position has moved
    /// into another window, or another segment.
    #[inline]
    fn after_append(&self, lane: usize, cur: &Segment) {
        let w = (cur.first_lsn << 24) ^ (cur.offset / PAGE_WINDOW) as u64;
        let window = &self.lanes[lane].window;
        if window.load(Ordering::Relaxed) != w {
            window.store(w, Ordering::Relaxed);
            if let Some(helper) = self.pages.get() {
                helper.unpark();
            }
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn new_segment(
        fs: &dyn Fs,
        dir: &Path,
        size: u64,
        zero_fill: bool,
        first_lsn: u64,
        lane: usize,
        seq: u64,
    ) -> Result<Segment> {
        let path = dir.join(segment_name(first_lsn, lane, seq));
        let (file, map) = segment_file(fs, &path, size, true, zero_fill)?;
        if let Err(e) = fs.sync_dir(dir) {
            // Leave no half-made segment behind.
            let _ = fs.remove(&path);
            return Err(io_err("sync directory", dir, e));
        }
        Ok(Segment {
            first_lsn,
            seq,
            map,
            file,
            offset: 0,
            path,
            dropped: 0,
        })
    }

    /// Lane 0, where every record goes whose order against the records
    /// of its filter matters (see the module docs).
    fn lock_ordered(&self) -> (usize, MutexGuard<'_, LaneState>) {
        (0, lock(&self.lanes[0].state))
    }

    /// Some lane, for a record of `total` bytes that may go to any: the
    /// thread's own lane if it is free, else the first free one after it,
    /// else (all busy) the thread's own once it is free. A writer whose
    /// lane's holder has been preempted so goes on in another lane.
    ///
    /// A free lane that would have to make a segment file before it could
    /// take the record (it has none yet, or its segment is full, and no
    /// spare) is passed by: on a disk busy with a checkpoint's writeback,
    /// making one took up to 2.2 s, all of it a pause for the writer
    /// (BENCHMARKS.md, session 11). The lane is marked, so that the page
    /// helper makes it a spare. If no free lane can take the record at
    /// once, the writer waits for the first busy one (held for an append,
    /// most likely); with none busy, the first passed by makes its
    /// segment.
    fn lock_any(&self, total: usize) -> (usize, MutexGuard<'_, LaneState>) {
        if self.active == 1 {
            return self.lock_ordered();
        }
        let home = self.home_lane();
        // The first free lane passed by, and the first busy one.
        let mut slow = None;
        let mut busy = None;
        for k in 0..self.active {
            let i = (home + k) % self.active;
            let mut st = match self.lanes[i].state.try_lock() {
                Ok(st) => st,
                Err(std::sync::TryLockError::Poisoned(e)) => e.into_inner(),
                Err(std::sync::TryLockError::WouldBlock) => {
                    busy = busy.or(Some(i));
                    continue;
                }
            };
            if st.takes_at_once(total) {
                if busy == Some(home) {
                    // The thread's lane was held (by a writer that may
                    // have been preempted holding it, for a whole time
                    // slice of the others): this one becomes its own, so
                    // that its next appends try it first.
                    HOME_LANE.with(|h| h.set(i));
                }
                return (i, st);
            }
            if !st.wanted {
                st.wanted = true;
                if let Some(helper) = self.pages.get() {
                    helper.unpark();
                }
            }
            slow = slow.or(Some(i));
        }
        // No guard is held while waiting (that could deadlock).
        if let Some(b) = busy {
            let st = lock(&self.lanes[b].state);
            if slow.is_none() || st.takes_at_once(total) {
                return (b, st);
            }
        }
        let i = slow.unwrap_or(home);
        (i, lock(&self.lanes[i].state))
    }

    /// The lane this thread tries first (see [`lock_any`](Self::lock_any)).
    fn home_lane(&self) -> usize {
        HOME_LANE.with(|h| {
            if h.get() == usize::MAX {
                h.set(NEXT_HOME.fetch_add(1, Ordering::Relaxed));
            }
            h.get()
        }) % self.active
    }

    /// [`lock_any`](Self::lock_any) without waiting: a free lane that
    /// takes a record of `total` bytes at once, from the thread's own
    /// lane on, or `None`.
    fn try_lock_any(&self, total: usize) -> Option<(usize, MutexGuard<'_, LaneState>)> {
        let home = self.home_lane();
        (0..self.active).find_map(|k| {
            let i = (home + k) % self.active;
            let st = try_lock(&self.lanes[i].state)?;
            st.takes_at_once(total).then_some((i, st))
        })
    }

    /// Appends a record of `total` bytes to the lane held (`st`), written
    /// by `write` given its bytes in the segment and its lsn; returns the
    /// lsn.
    fn append_in(
        &self,
        lane: usize,
        st: &mut LaneState,
        ordered: bool,
        total: usize,
        write: impl FnOnce(&mut [u8], u64),
    ) -> Result<u64> {
        // No record goes into a poisoned log: a checkpoint of every filter,
        // which starts once the poisoning is seen, is about to stand for
        // all the records there are (see `reset_after_checkpoint`). Every
        // record is appended under a lock that the checkpoint also takes
        // (the filter's, or the map of filters'), so one that gets past
        // this check is in the checkpoint's snapshots.
        self.check_poisoned()?;
        if total as u64 > self.max_record {
            return Err(ErrorKind::WrongKind(
                if (total + SEGMENT_END) as u64 > self.segment_size {
                    "a log record does not fit in a log segment with the record that ends it"
                } else {
                    // Its length would read as the flag of a short record.
                    "a log record of 2 GiB or more"
                },
            )
            .into());
        }
        let lsn = self.take_lsn(st, ordered);
        if st.cur.as_ref().is_none_or(|c| !c.has_room(total)) {
            // An lsn taken by an append that fails here is never written:
            // replay takes gaps between lsns in its stride.
            let full = st.cur.is_some();
            self.roll(lane, st, lsn)?;
            st.busy |= full;
        }
        let cur = st.cur.as_mut().expect("a segment after the roll");
        let off = cur.offset;
        write(cur.bytes_mut(off, total), lsn);
        cur.offset += total;
        self.after_append(lane, cur);
        Ok(lsn)
    }

    /// The lsn of a record about to be appended to the lane held (`st`);
    /// taken under the lane's mutex, so a lane's records are in lsn order.
    /// A record that must keep its order (`ordered`, lane 0) takes the
    /// counter's next lsn and raises the barrier to it. Any other takes
    /// the next of its lane's block, unless the barrier has passed the
    /// block, or it is used up: then the lane takes a new block from the
    /// counter. A record appended after an ordered one has returned (an
    /// add after its filter's create, say) so always has the higher lsn.
    /// With one lane there are no blocks.
    ///
    /// A thread's records also take rising lsns (above the last this
    /// thread took: a lane's block may be behind it when the thread comes
    /// from another lane), so that replay applies one writer's adds in the
    /// order it made them. Out of order, an add whose bits the later adds
    /// had all set would count as present on replay, and the filter
    /// reopen with a count one lower (the bits are the same). The thread
    /// remembers one log: a thread that appends to two stores in turn gets
    /// no such order in either.
    fn take_lsn(&self, st: &mut LaneState, ordered: bool) -> u64 {
        let lsn = if ordered || self.active == 1 {
            let lsn = self.next_lsn.fetch_add(1, Ordering::AcqRel);
            if self.active > 1 {
                self.barrier.fetch_max(lsn, Ordering::AcqRel);
            }
            lsn
        } else {
            if let Some(next) = self.block_lsn(st) {
                st.block.0 += 1;
                next
            } else {
                let first = self.next_lsn.fetch_add(LSN_BLOCK, Ordering::AcqRel);
                st.block = (first + 1, first + LSN_BLOCK);
                first
            }
        };
        LAST_TAKEN.with(|l| l.set((self.id, lsn)));
        lsn
    }

    /// The next lsn of the lane's block, if a record that may go to any
    /// lane can take it (see [`take_lsn`](Self::take_lsn)): the block is
    /// not used up, and the lsn is above the barrier and above this
    /// thread's last.
    #[inline]
    fn block_lsn(&self, st: &LaneState) -> Option<u64> {
        let (next, end) = st.block;
        (next < end && next > self.barrier.load(Ordering::Acquire) && next > self.thread_last())
            .then_some(next)
    }

    /// The lsn of this thread's last record in this log (0 if none).
    fn thread_last(&self) -> u64 {
        match LAST_TAKEN.with(|l| l.get()) {
            (id, lsn) if id == self.id => lsn,
            _ => 0,
        }
    }

    /// The lsn that a snapshot of a filter taken now covers (call it with
    /// the filter held exclusively, so that none of its adds is between
    /// its lsn and its bits): every record of the filter appended so far
    /// has a lower or equal one, and every one appended from now on a
    /// higher one (it raises the barrier, see [`take_lsn`](Self::take_lsn)).
    /// With `staged` (a filter whose adds may be staged: a fixed-size Bloom
    /// filter or a chain), the rings are copied first; a counting filter's
    /// adds never are, and its writers need not wait for other filters'.
    pub(crate) fn order_point(&self, staged: bool) -> u64 {
        // Adds staged before this moment are records below it. One a ring
        // cannot copy now (a full disk) is copied later, mostly with a
        // higher lsn, replayed over the snapshot; but another copier can
        // take a lane's block lsn at or below the one read here before the
        // barrier rises, and replay then skips that record as covered.
        // Either way the snapshot holds the add: its bits were set under
        // the filter's shared hold, before the caller's exclusive one.
        if staged {
            if let Err(e) = self.copy_rings() {
                tracing::warn!("staged adds not yet in the log: {e}");
            }
        }
        let lsn = self.last_lsn();
        self.barrier.fetch_max(lsn, Ordering::AcqRel);
        lsn
    }

    /// Appends a record to lane 0; returns its lsn. The record survives a
    /// process kill as soon as this returns; see [`Wal::commit`] for power
    /// loss.
    pub(crate) fn append(&self, rec: &Record) -> Result<u64> {
        let mut bytes = rec.encode(0);
        let (lane, mut st) = self.lock_ordered();
        let total = bytes.len();
        self.append_in(lane, &mut st, true, total, |buf, lsn| {
            set_record_lsn(&mut bytes, lsn);
            buf.copy_from_slice(&bytes);
        })
    }

    /// Appends an add (`kind` 2) or remove (`kind` 3) record of `hashes`
    /// for filter `id`, encoding it straight into the segment (the hot
    /// path: no intermediate buffer); to any lane if `any_lane` (adds
    /// whose order does not matter, see the module docs), else to lane 0.
    /// Same bytes as [`Record::encode`].
    pub(crate) fn append_hashes(
        &self,
        kind: u8,
        id: u64,
        hashes: &[ItemHash],
        any_lane: bool,
    ) -> Result<u64> {
        let total = hashes_record_len(kind, id, hashes.len());
        let (lane, mut st) = if any_lane {
            self.lock_any(total)
        } else {
            self.lock_ordered()
        };
        self.append_in(lane, &mut st, !any_lane, total, |buf, lsn| {
            encode_hashes(buf, kind, id, lsn, hashes)
        })
    }

    /// Tests: adds staged in rings and not yet in the log.
    #[cfg(test)]
    pub(crate) fn staged(&self) -> u64 {
        self.rings.as_ref().map_or(0, |r| r.staged())
    }

    /// Whether adds may be staged in rings (under `EverySec` and `No`).
    #[inline]
    pub(crate) fn stages(&self) -> bool {
        self.rings.is_some()
    }

    /// Stages adds (`kind` 2) of `hashes` to filter `id` (a fixed-size
    /// Bloom filter, or a chain with room reserved for them) in this
    /// thread's ring (see the `ring` module): they survive a
    /// process kill once this returns, and reach the log in a batch.
    /// `Ok(false)` if there is no ring to stage in (under `Always`, or
    /// past the most rings a log makes): the caller appends them to a lane
    /// instead. A ring that holds [`ring::FLUSH_AT`] adds is first copied
    /// into the log; if that fails, nothing is staged.
    #[inline]
    pub(crate) fn stage(&self, id: u64, hashes: &[ItemHash]) -> Result<bool> {
        let Some(rings) = &self.rings else {
            return Ok(false);
        };
        if hashes.len() > ring::MAX_STAGE {
            return Ok(false);
        }
        rings
            .with_ring(|r| {
                let staged = r.head().load(Ordering::Relaxed) - r.copied().load(Ordering::Acquire);
                // While a copy has failed (a full disk), nothing is staged:
                // an add in a ring that the log cannot take would be
                // acknowledged, safe from a kill but, under `EverySec`,
                // in no sync for as long as the disk stays full. The
                // thread's ring goes into the log first, then its adds go
                // to a lane (the caller's fallback), which fails if the
                // log cannot take them.
                if self.copy_failed.load(Ordering::Relaxed) {
                    if staged > 0 {
                        self.copy_ring(r)?;
                    }
                    return Ok(false);
                }
                if staged >= ring::FLUSH_AT {
                    self.copy_ring(r)?;
                    // A clock read per FLUSH_AT adds of this thread, so
                    // that a late sync is seen soon even if the page
                    // helper is slow to wake.
                    self.refresh_overdue();
                }
                // SAFETY: the ring is this thread's lease (`with_ring`),
                // and holds at most FLUSH_AT - 1 adds now (copied above),
                // so that MAX_STAGE more fit.
                unsafe { r.stage(id, hashes) };
                Ok(true)
            })
            .unwrap_or(Ok(false))
    }

    /// Hashes in one add record of a ring's copy: [`ring::FLUSH_AT`], or
    /// fewer where a segment is too small for such a record.
    pub(crate) fn max_staged_run(&self) -> usize {
        let overhead = hashes_record_len(2, u64::MAX, 0) as u64;
        let fit = (self.max_record.saturating_sub(overhead) / 16) as usize;
        fit.clamp(1, ring::FLUSH_AT as usize)
    }

    /// Appends the adds staged in `ring` to the log, in the ring's order,
    /// as add records (any lane) of up to [`max_staged_run`](Self::max_staged_run)
    /// hashes, encoded straight from the ring into the segment, moving
    /// its copied mark past each.
    pub(crate) fn copy_ring(&self, ring: &Ring) -> Result<()> {
        self.copy_ring_waiting(ring, true)
    }

    /// [`copy_ring`](Self::copy_ring); unless `wait`, it copies only
    /// while the ring's `copying` mutex and a lane that takes the next
    /// record at once are free.
    fn copy_ring_waiting(&self, ring: &Ring, wait: bool) -> Result<()> {
        let copied = self.copy_ring_entries(ring, wait);
        if copied.is_err() {
            self.copy_failures.fetch_add(1, Ordering::SeqCst);
            self.copy_failed.store(true, Ordering::SeqCst);
        }
        copied
    }

    /// Clears `copy_failed` after a pass that copied every ring, unless a
    /// copy failed since the pass began (`failures`: `copy_failures` then):
    /// a writer's own copy that failed meanwhile keeps it set. The second
    /// look puts it back for a failure counted between the first look and
    /// the store.
    fn clear_copy_failed(&self, failures: u64) {
        if self.copy_failures.load(Ordering::SeqCst) == failures
            && self.copy_failed.load(Ordering::SeqCst)
        {
            self.copy_failed.store(false, Ordering::SeqCst);
            if self.copy_failures.load(Ordering::SeqCst) != failures {
                self.copy_failed.store(true, Ordering::SeqCst);
            }
        }
    }

    /// [`copy_ring_waiting`](Self::copy_ring_waiting), but for noting a
    /// failure.
    fn copy_ring_entries(&self, ring: &Ring, wait: bool) -> Result<()> {
        #[cfg(test)]
        if self.copies_panic.load(Ordering::Relaxed) {
            panic!("a ring copy panics (test)");
        }
        let mut last = if wait {
            lock(&ring.copying)
        } else {
            match try_lock(&ring.copying) {
                Some(g) => g,
                None => return Ok(()),
            }
        };
        let head = ring.head().load(Ordering::Acquire);
        let mut copied = ring.copied().load(Ordering::Relaxed);
        let run = self.max_staged_run() as u64;
        // SAFETY (each `id_at`, `hash_at` and `copy_hashes` below): entries
        // `copied..head`, with `head` read above with acquire ordering and
        // the copied mark moved only here, under `copying`.
        while copied < head {
            // A run of adds to one filter.
            let id = unsafe { ring.id_at(copied) };
            let most = (head - copied).min(run);
            let mut n = 1;
            while n < most && unsafe { ring.id_at(copied + n) } == id {
                n += 1;
            }
            // The ring's records take rising lsns: above its last, as
            // above this thread's last (`take_lsn`).
            let floor = self.thread_last().max(*last);
            LAST_TAKEN.with(|l| l.set((self.id, floor)));
            let total = hashes_record_len(2, id, n as usize);
            let (lane, mut st) = if wait {
                self.lock_any(total)
            } else {
                match self.try_lock_any(total) {
                    Some(held) => held,
                    None => return Ok(()),
                }
            };
            *last = self.append_in(lane, &mut st, false, total, |buf, lsn| {
                if is_short(2, id, n as usize) {
                    encode_short(buf, id, lsn, unsafe { ring.hash_at(copied) });
                } else {
                    encode_long(buf, 2, id, lsn, n as usize, |dst| unsafe {
                        ring.copy_hashes(copied, dst)
                    });
                }
            })?;
            drop(st);
            copied += n;
            ring.copied().store(copied, Ordering::Release);
        }
        Ok(())
    }

    /// Copies every ring's staged adds into the log (see
    /// [`copy_ring`](Self::copy_ring)): at least those staged before the
    /// call, which is what a sync, an order point and a checkpoint need.
    /// The first error, after trying every ring.
    ///
    /// Passes that wait for no lock come first ([`patiently`]): each copies
    /// the rings that no one is copying, into lanes that are free and take
    /// the records at once, until every ring is copied as far as its head
    /// at the call, or [`COPY_PATIENCE`] has passed; then it waits, for the
    /// rings still left. Waiting for each ring in turn, under 50 writers
    /// (of 100 items a call) on this 2-core VM, the syncer's copy took up
    /// to 5.7 s: behind each ring's owner copying it, the owner itself
    /// waiting for lanes whose holders had been preempted, for up to 100 ms
    /// each. The once-a-second sync then left records waiting 9.0-9.4 s
    /// for it, and a power loss could have taken that much (BENCHMARKS.md,
    /// session 16). After a failed copy (a full disk) it waits from the
    /// start: the passes would find no lane to take the records.
    pub(crate) fn copy_rings(&self) -> Result<()> {
        let Some(rings) = &self.rings else {
            return Ok(());
        };
        let failures = self.copy_failures.load(Ordering::SeqCst);
        // Each ring with adds to copy, and its head now.
        let left: Vec<(Arc<Ring>, u64)> = rings
            .all()
            .into_iter()
            .filter_map(|r| {
                let head = r.head().load(Ordering::Acquire);
                (r.copied().load(Ordering::Acquire) < head).then_some((r, head))
            })
            .collect();
        let mut out = Ok(());
        patiently(
            left,
            || !self.copy_failed.load(Ordering::Relaxed),
            |(r, head), wait| {
                let copied = || r.copied().load(Ordering::Acquire) >= *head;
                if copied() {
                    return true;
                }
                match self.copy_ring_waiting(r, wait) {
                    Ok(()) => wait || copied(),
                    Err(e) => {
                        if out.is_ok() {
                            out = Err(e);
                        }
                        true
                    }
                }
            },
        );
        // Every ring is copied as far as it was at the call: the log
        // takes copies again.
        if out.is_ok() {
            self.clear_copy_failed(failures);
        }
        out
    }

    /// The page helper's pass over the rings: it copies those that no one
    /// is copying and whose next record a free lane takes at once, and
    /// passes by the others (a writer copies its own ring at
    /// [`ring::FLUSH_AT`] adds, and a sync copies them all,
    /// [`copy_rings`](Self::copy_rings)). A failure sets `copy_failed`.
    fn copy_free_rings(&self) {
        let Some(rings) = &self.rings else {
            return;
        };
        for r in rings.all() {
            if r.head().load(Ordering::Acquire) != r.copied().load(Ordering::Acquire) {
                let _ = self.copy_ring_waiting(&r, false);
            }
        }
    }

    /// Encodes the add (`kind` 2) record of one hash for filter `id`
    /// ahead of its [`append_prepared`](Self::append_prepared), for the
    /// lsn it will get if no other append comes first (always, with one
    /// writer). A caller prepares it while the filter's cache line is on
    /// its way, so that the encoding and its CRC run in the shadow of that
    /// miss rather than after it.
    pub(crate) fn prepare_one(&self, kind: u8, id: u64, hash: ItemHash) -> Prepared {
        // The lsn after the one this thread's last record got: the next of
        // its lane's block, most of the time.
        let lsn = match self.thread_last() {
            0 => self.next_lsn.load(Ordering::Relaxed),
            last => last.wrapping_add(1),
        };
        let mut bytes = [0u8; ONE_RECORD];
        let len = hashes_record_len(kind, id, 1);
        encode_hashes(&mut bytes[..len], kind, id, lsn, &[hash]);
        Prepared { bytes, len, lsn }
    }

    /// Appends a [`prepare_one`](Self::prepare_one)d add to any lane,
    /// re-encoding its lsn (and CRC) if another append took the one it was
    /// made for; returns its lsn. Same bytes as
    /// [`append_hashes`](Self::append_hashes).
    pub(crate) fn append_prepared(&self, rec: &mut Prepared) -> Result<u64> {
        let (lane, mut st) = self.lock_any(rec.len);
        let lsn = self.append_in(lane, &mut st, false, rec.len, |buf, lsn| {
            if lsn != rec.lsn {
                rec.set_lsn(lsn);
            }
            buf.copy_from_slice(&rec.bytes[..rec.len]);
        })?;
        drop(st);
        Ok(lsn)
    }

    /// Starts a new segment in every lane whose current one holds any
    /// record, so that everything logged so far sits in segments a
    /// checkpoint can retire (and unmap: the old segments' pages stop
    /// counting as the process's memory).
    pub(crate) fn start_new_segment(&self) -> Result<()> {
        for (i, lane) in self.lanes.iter().enumerate() {
            // The new segment is made ahead, holding no lock, so that the
            // lane's writers wait only for the rename.
            let needs = {
                let st = lock(&lane.state);
                st.spare.is_none() && st.cur.as_ref().is_some_and(|c| c.offset > 0)
            };
            if needs {
                self.add_spare(i);
            }
            let mut st = lock(&lane.state);
            let used = st.cur.as_ref().is_some_and(|c| c.offset > 0);
            if used {
                st.busy = st.cur.as_ref().is_some_and(Segment::eighth_used);
                // Every record in the lane so far has a lower lsn (they
                // took theirs under this mutex).
                let first = self.next_lsn.load(Ordering::Acquire);
                self.roll(i, &mut st, first)?;
                // Lsns of the block are below the new segment's name.
                st.block = (0, 0);
            }
            // What the checkpoint starting now will cover.
            st.rolled = 0;
            drop(st);
            // A lane in use gets its next spare now, before the checkpoint
            // writes its snapshots: made during their writeback, a spare
            // took up to a second (create and preallocate wait behind it),
            // and a lane that filled its segment first made one itself,
            // its writers waiting 0.1-1.5 s (BENCHMARKS.md, session 10).
            if used {
                self.add_spare(i);
            }
        }
        Ok(())
    }

    /// Sets the blocking hook (see `Store::set_blocking_hook`); false if
    /// one was set already.
    pub(crate) fn set_blocking_hook(&self, hook: BlockingHook) -> bool {
        self.blocking_hook.set(hook).is_ok()
    }

    /// Runs `f`, which may block for long, through the blocking hook.
    pub(crate) fn blocking<R>(&self, f: impl FnOnce() -> R) -> R {
        let Some(hook) = self.blocking_hook.get() else {
            return f();
        };
        let mut f = Some(f);
        let mut out = None;
        hook(&mut || {
            if let Some(f) = f.take() {
                out = Some(f());
            }
        });
        match (out, f) {
            (Some(r), _) => r,
            (None, Some(f)) => f(),
            // `f` was taken only by the call that set `out`.
            (None, None) => unreachable!("the blocking hook's call gave no result"),
        }
    }

    /// Switches lane `lane` to a new segment named after `first_lsn`.
    fn roll(&self, lane: usize, st: &mut LaneState, first_lsn: u64) -> Result<()> {
        let seq = st.next_seq;
        // Made under its own name: only where a spare cannot be renamed.
        let own_name = || {
            Self::new_segment(
                &*self.fs,
                &self.dir,
                self.segment_size,
                self.zero_fill,
                first_lsn,
                lane,
                seq,
            )
        };
        let next = match st.spare.take() {
            Some(spare) => match self.use_spare(spare, first_lsn, lane, seq) {
                Ok(next) => Ok(next),
                // A directory where renames fail: another spare would
                // fail the same way.
                Err(_) => self.blocking(own_name),
            },
            // No spare ready: this writer makes the segment (1-118 ms
            // measured under 50 writers, BENCHMARKS.md session 15), as a
            // spare is made, so that a failure to make it (a full disk, a
            // failed sync) leaves no file under a segment's name: only, if
            // its removal failed too, a spare's, which the next open
            // removes. (Until 2026-11-29 it was made under its segment's
            // name. One that could not be removed sat in the lane, holding
            // no records, between the segments before and after it; and
            // after a power loss the reader took it for a segment that
            // lost its end, and dropped the records after it: helper-37.)
            None => self.blocking(|| {
                let spare = self.spare_file(lane)?;
                self.use_spare(spare, first_lsn, lane, seq)
                    .or_else(|_| own_name())
            }),
        };
        self.roll_failed.store(next.is_err(), Ordering::Relaxed);
        let next = next.inspect_err(|_| {
            // A file the failed attempt could not remove keeps its number,
            // so that no two segments of the lane share one.
            // (One that cannot be looked at counts as there: a missing
            // one in the list is as good as removed when it is retired.)
            let left = self.dir.join(segment_name(first_lsn, lane, st.next_seq));
            if left.try_exists().unwrap_or(true) {
                st.next_seq += 1;
                st.orphans.push(left);
            }
        })?;
        st.next_seq += 1;
        // Those files hold no records: each ends where the new segment
        // begins, as its predecessor does (in memory: its name's lsn may
        // be below its predecessor's last records, which the reader
        // allows).
        for left in std::mem::take(&mut st.orphans) {
            st.segments.push((first_lsn, left, None));
        }
        st.segments.push((first_lsn, next.path.clone(), None));
        st.wanted = false;
        if let Some(mut old) = st.cur.replace(next) {
            // Its records end here, and the lane goes on in the next
            // segment: after a power loss, zeros where they stop with no
            // such record are a lost end (see `LaneReader::advance`). Every
            // append left room for it (`Segment::has_room`); synced with
            // the segment (`unsynced`, below).
            let (off, seq) = (old.offset, old.seq);
            if off + SEGMENT_END <= old.map.len() {
                encode_segment_end(old.bytes_mut(off, SEGMENT_END), seq, first_lsn);
                old.offset += SEGMENT_END;
            } else {
                // Only a test that moves `offset` by hand gets here. A real
                // one would make the segment read, after a power loss past
                // the mark, as one that lost its end.
                tracing::error!(
                    "{}: no room for the record that ends it",
                    old.path.display()
                );
            }
            st.rolled += old.offset as u64;
            if self.policy != FsyncPolicy::No {
                st.unsynced.push((old.path.clone(), old.file.clone()));
            }
        }
        Ok(())
    }

    /// Bytes of log records written since the last checkpoint started (or,
    /// before the first, since the log was opened, plus what the open
    /// replayed: see [`count_replayed`](Self::count_replayed)): about what
    /// a reopen would read now beyond what the snapshots cover. A server
    /// checkpoints when it passes a limit, so that the log's disk use and
    /// a restart's replay stay bounded.
    pub(crate) fn log_bytes(&self) -> u64 {
        let lanes: u64 = self
            .lanes
            .iter()
            .map(|lane| {
                let st = lock(&lane.state);
                st.rolled + st.cur.as_ref().map_or(0, |c| c.offset as u64)
            })
            .sum();
        // Adds still staged, which a reopen would replay too: their hashes.
        lanes + self.rings.as_ref().map_or(0, |r| 16 * r.staged())
    }

    /// Counts `bytes` of log found at open in [`log_bytes`](Self::log_bytes)
    /// until the first checkpoint.
    pub(crate) fn count_replayed(&self, bytes: u64) {
        lock(&self.lanes[0].state).rolled += bytes;
    }

    /// The highest lsn handed out (0 if none ever was). Its record, and
    /// every one before it, is written once no append that took one is
    /// still running.
    pub(crate) fn last_lsn(&self) -> u64 {
        self.next_lsn.load(Ordering::Acquire) - 1
    }

    /// Waits until `lsn` is as durable as the policy promises. A poisoned
    /// log refuses, unless a sync that succeeded before the poisoning
    /// covered `lsn` (say, an add that found its item present, or a lookup,
    /// waiting for a record synced long ago).
    #[inline]
    pub(crate) fn commit(&self, lsn: u64) -> Result<()> {
        match self.policy {
            FsyncPolicy::Always => self.sync_to(lsn),
            FsyncPolicy::EverySec | FsyncPolicy::No => {
                if !self.is_poisoned() || self.synced_past(lsn) {
                    return Ok(());
                }
                self.poisoned_error()
            }
        }
    }

    /// Whether everything up to `lsn` was synced by a sync that succeeded
    /// (or is covered by the checkpoint that followed a poisoning).
    pub(crate) fn synced_past(&self, lsn: u64) -> bool {
        self.synced_lsn.load(Ordering::Acquire) >= lsn
    }

    #[inline]
    fn check_poisoned(&self) -> Result<()> {
        if !self.is_poisoned() {
            return Ok(());
        }
        self.poisoned_error()
    }

    /// The error of a poisoned log (`Ok` if a reset came first).
    #[cold]
    pub(crate) fn poisoned_error(&self) -> Result<()> {
        match &lock(&self.sync).poisoned {
            Some(p) => Err(ErrorKind::Poisoned(p.clone()).into()),
            None => Ok(()),
        }
    }

    /// Whether the log's writing is failing: a failed sync has poisoned
    /// it, a lane's last roll could not make a segment, or a copy of
    /// staged adds into the log has failed since the rings were last all
    /// copied (the last two: a full disk, until space returns).
    pub(crate) fn write_failing(&self) -> bool {
        self.is_poisoned()
            || self.roll_failed.load(Ordering::Relaxed)
            || self.copy_failed.load(Ordering::Relaxed)
    }

    /// Whether a failed sync has made the log unusable.
    pub(crate) fn is_poisoned(&self) -> bool {
        self.poisoned.load(Ordering::Acquire)
    }

    /// Which poisoning the log is in, if it is: what a checkpoint that
    /// starts now must hand to [`reset_after_checkpoint`](Self::reset_after_checkpoint).
    pub(crate) fn poison_epoch(&self) -> Option<u64> {
        if !self.is_poisoned() {
            return None;
        }
        let s = lock(&self.sync);
        s.poisoned.as_ref().map(|_| s.poison_epoch)
    }

    /// Under `EverySec`, the longest an acknowledged record has waited to
    /// be made durable (exposed to a power loss) since the last call: from
    /// the start of one sync of the whole log (the syncer's, or one a
    /// writer led; or the open) to the end of the next. `None` under other
    /// policies, or if no such sync has ended since the last call.
    pub(crate) fn take_sync_window(&self) -> Option<Duration> {
        match self.sync_window.swap(0, Ordering::Relaxed) {
            0 => None,
            n => Some(Duration::from_nanos(n)),
        }
    }

    /// Under `EverySec`, how long ago the last sync of the whole log that
    /// succeeded began (the syncer's, or one a writer led; before the
    /// first, the open): a sync covers every record appended before it
    /// began, so this is the most a power loss now could take (see
    /// [`take_sync_window`](Self::take_sync_window) for the longest it has
    /// been). It moves when a sync ends, so it reaches the length of one
    /// sync plus the gap to the next: about 1-1.1 s, more when syncs are
    /// slow; past [`SYNC_OVERDUE`] mutations wait for a sync. Other syncs
    /// (a checkpoint's, a close's) do not move it, which errs on the long
    /// side. One exception errs on the short side: a sync whose copy of
    /// the rings failed (a full disk) moves it, though adds staged before
    /// the disk filled stay in their rings until space returns
    /// (docs/FORMAT.md 6.5). `None` under the other policies.
    pub(crate) fn unsynced_for(&self) -> Option<Duration> {
        if self.policy != FsyncPolicy::EverySec {
            return None;
        }
        let began = Duration::from_nanos(self.last_sync_began.load(Ordering::Relaxed));
        Some(self.opened.elapsed().saturating_sub(began))
    }

    /// When the last sync of the whole log that succeeded began (the
    /// open, before the first).
    fn last_sync_start(&self) -> Instant {
        self.opened + Duration::from_nanos(self.last_sync_began.load(Ordering::Acquire))
    }

    /// [`sync_all`](Self::sync_all), timed: once it succeeds, what it
    /// covers counts from its start ([`unsynced_for`](Self::unsynced_for)),
    /// and a record appended just after the last one began waited until
    /// now ([`take_sync_window`](Self::take_sync_window)).
    /// Returns the sync's result, then the ring copy's: a copy that failed
    /// is already seen by the writers (they copy their own rings before
    /// they stage, and fail their adds if that fails, see `stage`).
    fn timed_sync(&self) -> (Result<()>, Result<()>) {
        let start = self.opened.elapsed().as_nanos() as u64;
        // As `sync_all`. A ring copy that failed (a full disk) leaves the
        // adds it could not copy staged, but the sync of the rest counts:
        // while copies fail no add is staged (see `stage`), so only adds
        // staged before the disk filled are left out (docs/FORMAT.md 6.5),
        // and writers are not held up by a sync for each mutation.
        let (synced, copied) = self.sync_copying(false);
        if synced.is_ok() {
            let end = self.opened.elapsed().as_nanos() as u64;
            let before = self.last_sync_began.fetch_max(start, Ordering::AcqRel);
            self.sync_window
                .fetch_max(end.saturating_sub(before), Ordering::Relaxed);
        }
        self.refresh_overdue();
        // Writers waiting in `wait_for_overdue_sync` look again (the
        // sync's own wake-up came before `last_sync_began` moved).
        drop(lock(&self.sync));
        self.synced_cv.notify_all();
        (synced, copied)
    }

    /// Whether a sync is overdue (see [`SYNC_OVERDUE`]): a relaxed read of
    /// one flag, for every mutation.
    #[inline]
    pub(crate) fn is_overdue(&self) -> bool {
        self.overdue.load(Ordering::Relaxed)
    }

    /// Sets or clears the overdue flag by the clock (under `EverySec`):
    /// the page helper does at each wake (every 100 ms or so, unless it is
    /// held up making a spare or copying rings), a writer at each copy of
    /// its ring, and every sync as it ends. Whether it is overdue.
    pub(crate) fn refresh_overdue(&self) -> bool {
        let late = self.unsynced_for().is_some_and(|d| d > SYNC_OVERDUE);
        if self.overdue.load(Ordering::Relaxed) != late {
            self.overdue.store(late, Ordering::Relaxed);
        }
        late
    }

    /// Under `EverySec`, when the last sync that succeeded began more
    /// than [`SYNC_OVERDUE`] ago: waits until a sync that began after this
    /// call has succeeded, leading one if none is running (the syncer can
    /// be late: with 50 writers keeping both cores of the project's VM
    /// busy, syncs took 0.6-2.1 s, and records waited up to 3.5 s for one,
    /// BENCHMARKS.md, session 21). So a power loss takes at most the
    /// mutations that came within about [`SYNC_OVERDUE`] (plus the delay
    /// of the flag's refresh) after the last sync that succeeded began;
    /// when the disk cannot sync that fast, the writers go at its pace.
    /// The caller holds no lock. Fails, without waiting, if the log is
    /// poisoned, or if the sync this call led fails.
    #[cold]
    pub(crate) fn wait_for_overdue_sync(&self) -> Result<()> {
        let arrived = self.opened.elapsed().as_nanos() as u64;
        loop {
            if !self.refresh_overdue() || self.last_sync_began.load(Ordering::Acquire) >= arrived {
                return Ok(());
            }
            // One waiting writer at a time leads a sync (after the one
            // running, if any, which may have begun before it came); the
            // others wait for it rather than each lead one in turn.
            if self
                .overdue_leader
                .compare_exchange(false, true, Ordering::AcqRel, Ordering::Relaxed)
                .is_ok()
            {
                // The flag goes down after the sync, or if the sync panics
                // (a bug), so that the writers waiting here do not wait
                // for ever.
                let leading = Deferred(Some(|| {
                    self.overdue_leader.store(false, Ordering::Release);
                }));
                let (led, _) = self.timed_sync();
                drop(leading);
                drop(lock(&self.sync));
                self.synced_cv.notify_all();
                led?;
                continue;
            }
            let s = lock(&self.sync);
            if let Some(p) = &s.poisoned {
                return Err(ErrorKind::Poisoned(p.clone()).into());
            }
            // The leader lets go of the flag before it takes the lock to
            // wake its waiters: seen here, it has not woken them yet.
            if self.overdue_leader.load(Ordering::Acquire) {
                let _ = self.synced_cv.wait_timeout(s, Duration::from_millis(100));
            }
        }
    }

    /// Syncs everything appended up to at least `lsn` (group commit).
    pub(crate) fn sync_to(&self, lsn: u64) -> Result<()> {
        let mut s = lock(&self.sync);
        loop {
            // Synced before any poisoning: durable all the same.
            if s.synced_lsn >= lsn {
                return Ok(());
            }
            if let Some(p) = &s.poisoned {
                return Err(ErrorKind::Poisoned(p.clone()).into());
            }
            if !s.in_progress {
                s.in_progress = true;
                self.sync_running.store(true, Ordering::Release);
                break;
            }
            // A sync is running. Wait for it yielding the core rather than
            // sleeping, for up to SPIN_WAIT: many writers waking from a
            // condition variable at once cost as much as the sync itself.
            drop(s);
            let start = std::time::Instant::now();
            while self.synced_lsn.load(Ordering::Acquire) < lsn
                && self.sync_running.load(Ordering::Acquire)
                && !self.is_poisoned()
                && start.elapsed() < SPIN_WAIT
            {
                std::thread::yield_now();
            }
            // Only a successful sync moves synced_lsn forward.
            if self.synced_lsn.load(Ordering::Acquire) >= lsn {
                return Ok(());
            }
            s = lock(&self.sync);
            if s.in_progress && s.synced_lsn < lsn && s.poisoned.is_none() {
                s = self.synced_cv.wait(s).unwrap_or_else(|e| e.into_inner());
            }
        }
        let gather = s.last_batch > 1;
        drop(s);
        if gather {
            // The writers the last sync woke up are appending their next
            // records: let them (yielding the core), and start the sync
            // once no new record has come in since the previous look, or
            // after GATHER_MAX. One fsync then covers them all, instead
            // of the first of them alone. A lone writer whose last call
            // logged several records yields once here.
            let start = std::time::Instant::now();
            let mut seen = self.last_lsn();
            loop {
                std::thread::yield_now();
                let now = self.last_lsn();
                if now == seen || start.elapsed() > GATHER_MAX {
                    break;
                }
                seen = now;
            }
        }
        self.lead_sync(false)
    }

    /// Syncs everything appended so far, whatever the lsns: for the
    /// once-a-second sync and `close`. (An lsn can stand for records still
    /// to come, the unused part of a lane's block, so "synced up to the
    /// last lsn" would not say that every record written is synced.) Waits
    /// for a sync already running, which may have gathered its files
    /// before the latest records, then leads one.
    pub(crate) fn sync_all(&self) -> Result<()> {
        // Staged adds first, so that this sync covers them too. Those that
        // cannot be copied now (a full disk: no segment can be made) stay
        // staged, safe from a process kill but not yet from a power loss;
        // from then on no add is staged, or acknowledged, until copies
        // succeed again (`copy_failed`), and each sync tries again. The
        // error is this sync's, after the sync of the rest.
        let (synced, copied) = self.sync_copying(false);
        synced.and(copied)
    }

    /// Syncs the log's records up to `lsn` (none under `No`): for a
    /// checkpoint about to put a snapshot in place, which a full disk that
    /// stops ring copies must not stop (the checkpoint is what frees the
    /// disk). Under `EverySec` the sync, when one is needed, copies the
    /// rings first, as every sync does (see [`sync_copying`](Self::sync_copying)),
    /// but goes on if that copy fails. (Until 2026-11-28 it left them
    /// alone, and its mark could follow that of a sync which ended while
    /// adds were being staged that neither covered: the power-loss test,
    /// which counts on each sync that writes a mark covering what was
    /// acknowledged before the mark before it, lost such adds in some runs
    /// of 100 rounds. The promise itself, a second or so, held: the next
    /// timed sync copied them.)
    pub(crate) fn sync_through(&self, lsn: u64) -> Result<()> {
        match self.policy {
            FsyncPolicy::No => Ok(()),
            _ if self.synced_past(lsn) => Ok(()),
            FsyncPolicy::Always => self.sync_to(lsn),
            FsyncPolicy::EverySec => {
                let (synced, copied) = self.sync_copying(false);
                if let Err(e) = copied {
                    tracing::warn!("staged adds not yet in the log: {e}");
                }
                synced
            }
        }
    }

    /// Leads a sync of everything appended so far, once no other sync is
    /// running; the rings (under `everysec` and `no`) are first copied into
    /// the log, by this sync, after the one before it has ended, so that it
    /// covers every add staged before it began (the power-loss test counts
    /// on each sync that writes a mark covering what was acknowledged
    /// before the mark before it: with the copy made before the wait, as
    /// until 2026-11-28, a sync that waited for another covered only what
    /// was staged before its wait began). `mark`: write the sync mark whether
    /// or not one is due (see `lead_sync`). Returns the sync's result,
    /// then the copy's (a copy that fails, on a full disk, leaves the adds
    /// it could not copy in their rings; the rest is synced all the same).
    fn sync_copying(&self, mark: bool) -> (Result<()>, Result<()>) {
        let mut s = lock(&self.sync);
        loop {
            if let Some(p) = &s.poisoned {
                return (Err(ErrorKind::Poisoned(p.clone()).into()), Ok(()));
            }
            if !s.in_progress {
                s.in_progress = true;
                self.sync_running.store(true, Ordering::Release);
                break;
            }
            s = self.synced_cv.wait(s).unwrap_or_else(|e| e.into_inner());
        }
        drop(s);
        let copied = if self.rings.is_some() {
            // A copy that panics (a bug) lets go of the sync it holds, so
            // that no later sync waits for it for ever; it poisons
            // nothing, since nothing was synced.
            let release = Deferred(Some(|| {
                let mut s = lock(&self.sync);
                s.in_progress = false;
                self.sync_running.store(false, Ordering::Release);
                drop(s);
                self.synced_cv.notify_all();
            }));
            let copied = self.copy_rings();
            release.disarm();
            copied
        } else {
            Ok(())
        };
        (self.lead_sync(mark), copied)
    }

    /// After a sync that panicked (a bug): lets go of `in_progress` and
    /// poisons the log, as a failed sync does. Writers then get an error
    /// instead of waiting for ever, and a checkpoint makes the log usable
    /// again ([`reset_after_checkpoint`](Self::reset_after_checkpoint)).
    ///
    /// Poisoning is needed, not only cautious: the sync had already taken
    /// each lane's `unsynced` files and the `dir_dirty` flag, so a next
    /// sync that merely ran again would not sync those files or the
    /// directory, and would still count their records as synced.
    ///
    /// `release`: the sync had not let go of `in_progress` yet (after it
    /// has, the flag may be another leader's).
    #[cold]
    fn poison_after_panic(&self, release: bool) {
        let mut s = lock(&self.sync);
        if release {
            s.in_progress = false;
            self.sync_running.store(false, Ordering::Release);
        }
        if s.poisoned.is_none() {
            let msg = "a sync panicked (a bug in seen-store); what it made durable is unknown";
            tracing::error!("{msg}");
            self.poison(&mut s, msg.to_string());
        }
        drop(s);
        self.synced_cv.notify_all();
    }

    /// Poisons the log (`s`, its sync state, held): no record is taken
    /// until a checkpoint's reset for this poisoning.
    fn poison(&self, s: &mut SyncState, msg: String) {
        s.poisoned = Some(msg);
        s.poison_epoch += 1;
        self.poisoned.store(true, Ordering::Release);
    }

    /// Tests: poisons the log, as a failed sync does.
    #[cfg(test)]
    pub(crate) fn poison_for_test(&self) {
        self.poison(&mut lock(&self.sync), "sync failed (test)".into());
    }

    /// The sync of a leader (`in_progress` set by the caller): every lane's
    /// files, then `synced_lsn` moved to what they cover.
    fn lead_sync(&self, force_mark: bool) -> Result<()> {
        // A panic from here to the end (a bug) must not leave `in_progress`
        // set: every later sync would wait for it for ever, and under
        // `always` every writer with it. `released`: whether this sync has
        // let go of the flag already; past that point another writer may
        // lead a sync, whose flag a panic here must not clear.
        let released = std::cell::Cell::new(false);
        let leading = Deferred(Some(|| {
            // Disarmed at the end: only a panic comes here, never an
            // early return (there is none).
            debug_assert!(std::thread::panicking());
            self.poison_after_panic(!released.get())
        }));
        // Lead: sync everything appended so far, for us and every waiter.
        // Every lsn up to `target` has been handed out; taking each lane's
        // mutex waits for any append still writing one of them.
        let mut target = self.last_lsn();
        let mut files = Vec::new();
        // What the sync lets go from the page cache: (file, from, to).
        let mut drops = Vec::new();
        // What it unmaps before it syncs: (map, from, to).
        let mut unmaps = Vec::new();
        let mut mark = SyncMark {
            boot: self.boot,
            lanes: Vec::new(),
            ends: true,
        };
        let mut visit = |i: usize, st: &mut LaneState| {
            // How far this sync makes the lane durable: the append position
            // now, or, for a lane with no segment, every segment it makes
            // from here on is past it.
            mark.lanes.push(match st.cur.as_mut() {
                Some(c) => (i, c.seq, c.offset as u64),
                None => (i, st.next_seq, 0),
            });
            if self.drop_synced {
                drops.extend(st.unsynced.iter().map(|(_, f)| (f.clone(), 0, u64::MAX)));
            }
            files.append(&mut st.unsynced);
            if let Some(cur) = &mut st.cur {
                files.push((cur.path.clone(), cur.file.clone()));
                if self.drop_synced {
                    // Below the append position's page, written for good;
                    // again from where the page helper may still have had
                    // pages mapped last time.
                    let to = cur.offset / PAGE * PAGE;
                    let from = cur.dropped.saturating_sub(2 * PAGE_WINDOW);
                    if to > from {
                        drops.push((cur.file.clone(), from as u64, to as u64));
                        unmaps.push((cur.map.clone(), from, to));
                        cur.dropped = to;
                    }
                }
            }
            // Lsns of the lane's block not used yet are records to come,
            // which this sync does not cover.
            target = target.min(st.unused_from() - 1);
        };
        // With several lanes, each taken as it is free, for up to
        // COPY_PATIENCE, before waiting ([`patiently`]): waiting for each lane in turn, a
        // sync under 50 writers on this 2-core VM waited 0.4-0.6 s in all,
        // behind holders preempted for up to 100 ms each (BENCHMARKS.md,
        // session 16). One lane (`Always`) is waited for at once: its
        // holders append and let go in microseconds.
        patiently(
            (0..self.lanes.len()).collect(),
            || self.active > 1,
            |&i, wait| {
                let lane = &self.lanes[i].state;
                let st = if wait {
                    Some(lock(lane))
                } else {
                    try_lock(lane)
                };
                st.map(|mut st| visit(i, &mut st)).is_some()
            },
        );
        mark.lanes.sort_unstable();
        // The written pages still mapped, unmapped in one call per lane:
        // the sync's writeback would otherwise write-protect each mapped
        // dirty page, one TLB shootdown (an interrupt to every core that
        // runs a writer) per page. With 50 writers that was 5% of all CPU
        // time, in the sync threads alone (BENCHMARKS.md, session 18).
        // Each range is below its lane's append position when the lane's
        // mutex was held, where no writer writes any more (appends only
        // move forward).
        for (map, from, to) in unmaps {
            unmap_pages(&map, from, to);
        }
        // After the files are gathered: a roll that put a record this sync
        // covers into a renamed spare did so under its lane's mutex, taken
        // above.
        let dir_dirty = self.dir_dirty.swap(false, Ordering::AcqRel);
        // On an error, the path of the file (or directory) that failed.
        let mut result = sync_files(&files, self.active > 1);
        if dir_dirty && result.is_ok() {
            result = self
                .fs
                .sync_dir(&self.dir)
                .map_err(|e| (self.dir.clone(), e));
        }
        // The mark: after every sync under `EverySec`, at most every
        // MARK_EVERY under `Always` (see `SyncMark`), and after a reset
        // until a mark lists lane 0 in the segment the reset began.
        let now = self.opened.elapsed().as_nanos() as u64;
        let from_seq = self.mark_from_seq.load(Ordering::Acquire);
        let mark_due = self.policy == FsyncPolicy::EverySec
            || force_mark
            || from_seq != 0
            || now.saturating_sub(self.mark_written.load(Ordering::Relaxed))
                >= MARK_EVERY.as_nanos() as u64;
        let open = !self.closed.load(Ordering::Acquire);
        if let (Some(file), true, true, true) = (&self.mark, mark_due, result.is_ok(), open) {
            use std::os::unix::fs::FileExt;
            let file = lock(file);
            result = file
                .std_file()
                .write_all_at(&mark.encode(), 0)
                .and_then(|()| file.sync_data())
                .map_err(|e| (self.dir.join(SYNC_MARK), e));
            if result.is_ok() {
                self.mark_written.store(now, Ordering::Relaxed);
                if mark.entry(0).is_some_and(|(seq, _)| seq + 1 >= from_seq) {
                    let _ = self.mark_from_seq.compare_exchange(
                        from_seq,
                        0,
                        Ordering::AcqRel,
                        Ordering::Relaxed,
                    );
                }
            }
        }
        self.syncs.fetch_add(1, Ordering::Relaxed);
        let mut s = lock(&self.sync);
        s.in_progress = false;
        self.sync_running.store(false, Ordering::Release);
        released.set(true);
        if result.is_ok() {
            for (f, from, to) in &drops {
                f.drop_cached(*from, *to);
            }
        }
        let out = match result {
            Ok(()) => {
                s.last_batch = target.saturating_sub(s.synced_lsn);
                s.synced_lsn = s.synced_lsn.max(target);
                self.synced_lsn.store(s.synced_lsn, Ordering::Release);
                Ok(())
            }
            Err((path, e)) => {
                // After a failed fsync the kernel may have dropped the dirty
                // pages: a retry could "succeed" without the data. Refuse
                // until a checkpoint has rewritten everything.
                let msg = format!("sync {}: {e}", path.display());
                tracing::error!("{msg}");
                self.poison(&mut s, msg);
                Err(io_err("sync", &path, e))
            }
        };
        // Up to here a panic poisons the log and wakes the waiters (`s`,
        // declared later, is let go of first).
        leading.disarm();
        self.synced_cv.notify_all();
        out
    }

    /// Renames a spare into the segment `(first_lsn, lane, seq)`; the next
    /// sync makes the name durable (`dir_dirty`), before any record in it
    /// counts as synced. An error if the rename fails (the spare is
    /// removed, and the roll makes its segment under its own name).
    fn use_spare(&self, spare: Spare, first_lsn: u64, lane: usize, seq: u64) -> Result<Segment> {
        let path = self.dir.join(segment_name(first_lsn, lane, seq));
        if let Err(e) = self.fs.rename(&spare.path, &path) {
            tracing::warn!("rename {} to {}: {e}", spare.path.display(), path.display());
            let _ = self.fs.remove(&spare.path);
            return Err(io_err("rename", &spare.path, e));
        }
        self.dir_dirty.store(true, Ordering::Release);
        Ok(Segment {
            first_lsn,
            seq,
            map: spare.map,
            file: spare.file,
            offset: 0,
            path,
            dropped: 0,
        })
    }

    /// Makes lane `lane` a spare segment if it is due one (see
    /// [`LaneState::spare_due`]; the page helper, off the writers' path).
    fn prepare_spare(&self, lane: usize) {
        {
            let st = lock(&self.lanes[lane].state);
            if !st.spare_due() {
                return;
            }
        }
        self.add_spare(lane);
    }

    /// Makes lane `lane` a spare, holding no lock, and gives it to the
    /// lane (best effort: see [`make_spare`](Self::make_spare)).
    fn add_spare(&self, lane: usize) {
        if let Some(spare) = self.make_spare(lane) {
            self.install_spare(lane, spare);
        }
    }

    /// A spare segment for lane `lane`: created, preallocated (not synced
    /// unless zero-filled) and mapped, holding no lock. `None` if the log is closing, or on a
    /// failure (a roll then makes its segment itself, and reports the
    /// failure if it has it too).
    fn make_spare(&self, lane: usize) -> Option<Spare> {
        if self.stop.load(Ordering::Relaxed) {
            return None;
        }
        match self.spare_file(lane) {
            Ok(spare) => Some(spare),
            Err(e) => {
                tracing::debug!("spare log segment: {e}");
                None
            }
        }
    }

    /// The file of a spare segment for lane `lane`, under a temporary name
    /// (see [`spare_name`]): created, preallocated and mapped; removed on
    /// a failure. Not synced (unless zero-filled, under `Always`: a first
    /// sync of the file would otherwise write all its zeros while a writer
    /// waits): that waits for whatever the disk is writing (a checkpoint's
    /// gigabyte took 0.4-1 s). The sync that first counts a record in it
    /// as synced syncs the file, its preallocation with it (`fdatasync`
    /// writes the metadata that reading the data needs), and then the
    /// directory (`dir_dirty`, set when it is renamed into the lane).
    fn spare_file(&self, lane: usize) -> Result<Spare> {
        let path = self.dir.join(spare_name(lane));
        let (file, map) = segment_file(&*self.fs, &path, self.segment_size, false, self.zero_fill)?;
        Ok(Spare { path, map, file })
    }

    /// Gives lane `lane` the spare, unless it got one meanwhile or the log
    /// is closing (then the file goes).
    fn install_spare(&self, lane: usize, spare: Spare) {
        let mut st = lock(&self.lanes[lane].state);
        // A closing log takes no more (`drop` has removed, or is about to
        // remove, the spares it has).
        if st.spare.is_none() && !self.stop.load(Ordering::Relaxed) {
            st.spare = Some(spare);
        } else {
            drop(st);
            let _ = self.fs.remove(&spare.path);
        }
    }

    /// Returns the segments that hold only records with lsn `<= upto`
    /// (none of them a lane's current segment), oldest first per lane,
    /// removing them from the live list (the caller deletes the files once
    /// snapshots covering them are durable, and gives back with
    /// [`unretire`](Self::unretire) those it could not delete).
    pub(crate) fn retire_upto(&self, upto: u64) -> Vec<Retired> {
        let mut gone = Vec::new();
        for (i, lane) in self.lanes.iter().enumerate() {
            let mut st = lock(&lane.state);
            let cur = st.cur.as_ref().map(|c| c.path.clone());
            let mut segments = std::mem::take(&mut st.segments).into_iter().peekable();
            // Only the lane's oldest segments go: recovery takes a gap in a
            // lane's numbers for a lost segment. (Across a reopen a
            // segment's end can fall below its predecessor's: an empty one
            // ends where the lane's records did, and a name can be an lsn
            // that was never written.)
            while let Some((first, path, last)) = segments.next() {
                // A segment's records end where its successor's begin, or
                // at the last lsn read from it at open.
                let end = segments.peek().map(|next| next.0 - 1).or(last);
                if cur.as_ref() == Some(&path) || end.is_none_or(|end| end > upto) {
                    st.segments.push((first, path, last));
                    break;
                }
                gone.push(Retired {
                    lane: i,
                    first,
                    path,
                    last,
                });
            }
            st.segments.extend(segments);
        }
        gone
    }

    /// Puts back, at the head of their lanes' lists, retired segments whose
    /// files are still there (a removal failed, and the lane's later ones
    /// were kept so that the lane has no gap), in the order
    /// [`retire_upto`](Self::retire_upto) gave them. Left out of the list,
    /// they would be skipped by the next checkpoint, which would retire
    /// the lane's newer segments behind them: a gap in the lane's numbers,
    /// which stops the next open as a lost segment.
    pub(crate) fn unretire(&self, back: Vec<Retired>) {
        for (i, lane) in self.lanes.iter().enumerate() {
            let mine: Vec<(u64, PathBuf, Option<u64>)> = back
                .iter()
                .filter(|r| r.lane == i)
                .map(|r| (r.first, r.path.clone(), r.last))
                .collect();
            if !mine.is_empty() {
                let mut st = lock(&lane.state);
                let rest = std::mem::take(&mut st.segments);
                st.segments = mine.into_iter().chain(rest).collect();
            }
        }
    }

    /// After a successful checkpoint of every filter that started once the
    /// log was poisoned (`epoch`, from [`poison_epoch`](Self::poison_epoch)),
    /// the log may be used again: no record was appended since the
    /// poisoning, and every record before it is in the checkpoint's durable
    /// snapshots, so every lsn handed out so far counts as synced. Starts a
    /// fresh segment in lane 0 (the other lanes start theirs when next
    /// used), so that no write lands in pages whose sync failed.
    ///
    /// Does nothing if that poisoning was cleared already (by another
    /// writer's checkpoint): records appended since are not in this
    /// checkpoint, and must not count as synced. (While the log is
    /// poisoned no sync runs, so no later poisoning can have come.)
    pub(crate) fn reset_after_checkpoint(&self, epoch: u64) -> Result<()> {
        {
            let s = lock(&self.sync);
            if s.poisoned.is_none() || s.poison_epoch != epoch {
                return Ok(());
            }
        }
        let lsn = self.next_lsn.load(Ordering::Acquire);
        for (i, lane) in self.lanes.iter().enumerate() {
            let mut st = lock(&lane.state);
            // Read under the lane's mutex: every record of the lane so far
            // has a lower lsn.
            let next = self.next_lsn.load(Ordering::Acquire);
            st.unsynced.clear();
            st.block = (0, 0);
            st.rolled = 0;
            if i == 0 {
                self.roll(0, &mut st, next)?;
                st.unsynced.clear();
                // No sync covers the end record that roll wrote (the list
                // of files to sync was just given up): until a mark lists
                // lane 0 in the new segment, records acknowledged there
                // would be past the mark behind a segment whose end a power
                // loss can take, and the reader would end the lane before
                // them (see `LaneReader::advance`). So the next sync writes
                // the mark, under `Always` too.
                if let Some(cur) = &st.cur {
                    self.mark_from_seq.store(cur.seq + 1, Ordering::Release);
                }
            } else if st.cur.take().is_some() {
                // The segment given up has no successor to say where its
                // records end: say it here, so that it can be retired.
                if let Some(last) = st.segments.last_mut() {
                    last.2 = Some(next - 1);
                }
            }
        }
        let mut s = lock(&self.sync);
        s.poisoned = None;
        self.poisoned.store(false, Ordering::Release);
        s.synced_lsn = s.synced_lsn.max(lsn - 1);
        self.synced_lsn.store(s.synced_lsn, Ordering::Release);
        Ok(())
    }

    /// Stops the background threads (at their next wake-up): the store
    /// is going, and a later store of the same directory must not see
    /// this log write after it has read the directory.
    pub(crate) fn stop_helpers(&self) {
        self.stop.store(true, Ordering::Relaxed);
        // So that they end now, not after their sleep (up to a second for
        // the syncer's): a dropped store leaves no thread behind.
        for t in [self.pages.get(), self.syncer.get()].into_iter().flatten() {
            t.unpark();
        }
    }

    /// The store is gone: stops the background threads, and no sync still
    /// running writes the sync mark (a later store of the directory may
    /// have written its own, which a stale one must not replace: it could
    /// end a lane before that store's records after a power loss).
    pub(crate) fn close(&self) {
        self.closed.store(true, Ordering::Release);
        self.stop_helpers();
    }

    /// Once the helpers are stopped and none holds the log
    /// ([`wait_for_helpers`](Self::wait_for_helpers)): waits for their
    /// threads to end, which they do at once, so that a dropped store
    /// leaves none behind.
    pub(crate) fn join_helpers(&self) {
        let me = std::thread::current().id();
        for h in std::mem::take(&mut *lock(&self.helpers)) {
            if h.thread().id() != me {
                let _ = h.join();
            }
        }
    }

    /// Once the helpers are stopped: waits until none holds the log (a
    /// sync or copy still running), for at most `limit`; whether none does.
    pub(crate) fn wait_for_helpers(self: &Arc<Self>, limit: Duration) -> bool {
        let began = Instant::now();
        while Arc::strong_count(self) > 1 {
            if began.elapsed() > limit {
                return false;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        true
    }

    /// Makes everything appended so far as durable as a sync can (under
    /// `No`, copies the rings into the log), with a sync mark past it all
    /// (see [`SyncMark`]). The background threads go on:
    /// a store's other clones may still write, and under `EverySec` rely
    /// on the syncer. They stop when the store is dropped
    /// ([`stop_helpers`](Self::stop_helpers)), or the log is.
    pub(crate) fn sync_appended(&self) -> Result<()> {
        if self.policy == FsyncPolicy::No {
            return self.copy_rings();
        }
        // With a fresh sync mark, also under `Always`: after a clean
        // shutdown every record is below it, so damage to any is
        // corruption, not a torn tail, on this boot and after a reboot.
        let (synced, copied) = self.sync_copying(true);
        synced.and(copied)
    }

    pub(crate) fn dir(&self) -> &Path {
        &self.dir
    }
}

fn wal_dir_of(w: &Wal) -> PathBuf {
    w.dir.clone()
}

/// One record found while reading the log.
pub(crate) struct Found<'a> {
    pub(crate) record: Rec<'a>,
    pub(crate) lsn: u64,
    /// Bytes the record occupies in its segment (padding included).
    pub(crate) bytes: usize,
}

/// Reads the log: every lane's segments in their order, the records of
/// all lanes merged in lsn order. Within a lane lsns must rise; between
/// lanes they may leave gaps (lsns handed to appends that never wrote).
/// A bad record that no valid record of its lane follows (in its segment
/// or a later one of the lane) is a torn tail: in the lane's newest
/// segment, a crash mid-append; in an older one, only a record that a power
/// loss cut (the sync writing the end of a segment that a roll had already
/// followed, see `cut_by_power_loss`). That lane's reading stops there
/// with a warning, and the torn bytes, and any in the lane's later
/// segments, are zeroed. A bad record anywhere
/// else, a segment missing from a lane, or an lsn met twice is corruption:
/// an error naming the file and offset, unless `salvage` is set, in which
/// case the rest of that segment is skipped with a warning. Returns the
/// highest lsn read, and fills in each segment's `last_lsn`.
pub(crate) fn read_all(
    fs: &dyn Fs,
    segments: &mut [SegmentFile],
    salvage: &Salvage,
    mut on_record: impl FnMut(Found<'_>) -> Result<()>,
) -> Result<u64> {
    segments.sort();
    let mark = segments
        .first()
        .and_then(|s| s.path.parent())
        .and_then(|dir| SyncMark::read_any(fs, dir));
    let mut lanes: Vec<LaneReader<'_>> = Vec::new();
    for seg in segments.iter_mut() {
        match lanes.last_mut() {
            Some(l) if l.lane == seg.lane => l.segments.push(seg),
            _ => lanes.push(LaneReader::new(fs, seg.lane, salvage, seg, mark.clone())),
        }
    }
    for lane in &mut lanes {
        lane.check_sequence()?;
        lane.advance()?;
    }
    let mut last_lsn = 0u64;
    loop {
        // The lane whose next record comes first, and the lsn after which
        // another lane's comes.
        let mut best: Option<(usize, u64)> = None;
        let mut bound = u64::MAX;
        for (i, lane) in lanes.iter().enumerate() {
            let Some(next) = lane.next else { continue };
            match best {
                Some((_, b)) if next >= b => bound = bound.min(next),
                _ => {
                    if let Some((_, b)) = best {
                        bound = bound.min(b);
                    }
                    best = Some((i, next));
                }
            }
        }
        let Some((i, next)) = best else { break };
        if next == bound {
            // Two lanes hold the same lsn.
            lanes[i].damaged_here(format!("lsn {next} is in another lane's segment too"))?;
        } else {
            lanes[i].deliver(bound, &mut on_record)?;
            last_lsn = last_lsn.max(lanes[i].prev);
        }
        lanes[i].advance()?;
    }
    for lane in &mut lanes {
        lane.finish()?;
    }
    Ok(last_lsn)
}

/// One lane's segments being read, for [`read_all`].
struct LaneReader<'s> {
    fs: &'s dyn Fs,
    lane: usize,
    salvage: &'s Salvage,
    segments: Vec<&'s mut SegmentFile>,
    /// The segment being read (an index into `segments`) and its map.
    at: usize,
    map: Option<memmap2::Mmap>,
    opened: bool,
    off: usize,
    /// The lsn of the last record delivered from the lane (0 for none).
    prev: u64,
    /// The lsn of the valid record at `off`, when there is one.
    next: Option<u64>,
    /// The written bytes of a torn tail and of the lane's segments after
    /// it, to zero once the map is gone: path, offset, length.
    torn: Vec<(PathBuf, u64, usize)>,
    /// How far the lanes were last synced, where the log says.
    mark: Option<SyncMark>,
    /// Whether `mark` was written on this boot: then it only tells damage
    /// below it (no power loss came since), and past it the rules of a
    /// log without a mark hold.
    same_boot: bool,
}

impl<'s> LaneReader<'s> {
    fn new(
        fs: &'s dyn Fs,
        lane: usize,
        salvage: &'s Salvage,
        first: &'s mut SegmentFile,
        mark: Option<(SyncMark, bool)>,
    ) -> Self {
        let (mark, same_boot) = match mark {
            Some((m, same)) => (Some(m), same),
            None => (None, false),
        };
        LaneReader {
            fs,
            lane,
            salvage,
            segments: vec![first],
            at: 0,
            map: None,
            opened: false,
            off: 0,
            prev: 0,
            next: None,
            torn: Vec::new(),
            mark,
            same_boot,
        }
    }

    /// Is `off` of segment `seq` of this lane past the mark of another
    /// boot, where what was not synced may have been lost in any order?
    fn past_mark(&self, seq: Option<u64>, off: usize) -> bool {
        !self.same_boot
            && self
                .mark
                .as_ref()
                .is_some_and(|m| m.unsynced(self.lane, seq, off))
    }

    /// Numbered segments of a lane follow each other without a gap.
    fn check_sequence(&self) -> Result<()> {
        for pair in self.segments.windows(2) {
            if let (Some(a), Some(b)) = (pair[0].seq, pair[1].seq) {
                if b != a + 1 {
                    let what = format!(
                        "lane {} segment {b} follows segment {a}: the segments between are missing",
                        self.lane
                    );
                    self.salvage.damaged(&pair[1].path, 0, what, "the gap")?;
                }
            }
        }
        Ok(())
    }

    /// Damage at the current position: an error, or (salvaging) the rest
    /// of the segment skipped.
    fn damaged_here(&mut self, what: String) -> Result<()> {
        let path = &self.segments[self.at].path;
        self.salvage
            .damaged(path, self.off as u64, what, "the rest")?;
        self.close_segment();
        Ok(())
    }

    /// Ends the lane at the current position: no segment of it is read
    /// further, and the bytes `zero` names (path, offset, length) are
    /// zeroed once the maps are gone (see [`finish`](Self::finish)), so
    /// that a later recovery does not mistake them for corruption once
    /// newer records follow.
    fn end_lane(&mut self, zero: impl IntoIterator<Item = (PathBuf, u64, usize)>) {
        self.torn.extend(zero);
        while self.at < self.segments.len() {
            self.close_segment();
        }
    }

    fn close_segment(&mut self) {
        self.segments[self.at].last_lsn = Some(self.prev);
        self.map = None;
        self.opened = false;
        self.off = 0;
        self.next = None;
        self.at += 1;
    }

    /// Moves to the next valid record of the lane, setting `next` (`None`
    /// at the lane's end).
    fn advance(&mut self) -> Result<()> {
        enum Step {
            End,
            Record(u64),
            /// A whole record that is wrong all the same.
            Damaged(String),
            /// What is wrong, whether a valid record follows, the written
            /// bytes from here on (offset, length), and whether a power
            /// loss can have cut it.
            Bad(String, bool, Option<(u64, usize)>, bool),
            /// Past the lane's sync mark, the segment's records end and
            /// later segments of the lane follow.
            EndPastMark,
        }
        self.next = None;
        while self.at < self.segments.len() {
            if !self.opened {
                self.open_segment()?;
            }
            let first = self.segments[self.at].first_lsn;
            let off = self.off;
            let step = {
                let data: &[u8] = self.map.as_deref().unwrap_or(&[]);
                let seq = self.segments[self.at].seq;
                // Where the segment's written bytes end, and those from
                // `off` on (for zeroing a torn tail), when they are needed.
                let written_end = || data.iter().rposition(|&b| b != 0).map_or(0, |i| i + 1);
                let written = |end: usize| (end > off).then(|| (off as u64, end - off));
                // A bad record (or a hole), for the rules that tell a torn
                // tail from damage (`Step::Bad`, below).
                let bad = |what: String| {
                    let end = written_end();
                    Step::Bad(
                        what,
                        valid_record_after(data, off + 8, (self.prev + 1).max(first)),
                        written(end),
                        cut_by_power_loss(data, off, end),
                    )
                };
                match parse(&data[off.min(data.len())..]) {
                    // Past the lane's sync mark, zeros with written bytes
                    // after them are a hole a power loss left (what was
                    // not synced reaches the disk in any order): the lane
                    // ends here, as at a torn record, so that it is
                    // replayed as a prefix.
                    Parsed::End if self.past_mark(seq, off) => {
                        match written(written_end()) {
                            Some(w) => {
                                Step::Bad("zeros, then written bytes".into(), true, Some(w), false)
                            }
                            // With no segment-end record here, past the
                            // mark of a run that writes them.
                            None if self.at + 1 < self.segments.len()
                                && self.mark.as_ref().is_some_and(|m| m.ends) =>
                            {
                                Step::EndPastMark
                            }
                            None => Step::End,
                        }
                    }
                    // Below the offset the mark gives for this very
                    // segment, records were written when it was synced:
                    // zeros there are damage, with or without written
                    // bytes after them.
                    Parsed::End
                        if self
                            .mark
                            .as_ref()
                            .and_then(|m| m.entry(self.lane))
                            .is_some_and(|(s, o)| seq == Some(s) && (off as u64) < o) =>
                    {
                        Step::Bad(
                            "zeros below the offset the sync mark says was written".into(),
                            false,
                            written(written_end()),
                            false,
                        )
                    }
                    // Zeros where a record should start, then written
                    // bytes: no append leaves that (a lane's records are
                    // written in order, under its mutex). It is a record killed
                    // while its first bytes were still unwritten, a power
                    // loss's hole, or damage, which the rules for a bad
                    // record tell apart, rather than an end that drops
                    // the rest of the segment silently. Looked for within
                    // [`HOLE_SCAN`] bytes: past its records a segment is
                    // zeros to its end (up to its size, 64 MiB), which
                    // every open would otherwise read.
                    Parsed::End => {
                        let near = &data[off.min(data.len())..(off + HOLE_SCAN).min(data.len())];
                        if near.iter().all(|&b| b == 0) {
                            Step::End
                        } else {
                            bad("zeros, then written bytes".into())
                        }
                    }
                    Parsed::Record(rec, lsn, _) if !in_range(rec.id(), lsn) => Step::Damaged(
                        format!("record of filter id {}, lsn {lsn}: out of range", rec.id()),
                    ),
                    Parsed::Record(_, lsn, _) => Step::Record(lsn),
                    // A roll ended the segment here: the lane goes on in
                    // the next one. Nothing is written after the record
                    // (a roll and every append hold the lane's mutex), so
                    // written bytes after it are damage, looked for as
                    // after a lane's last record (within `HOLE_SCAN`).
                    Parsed::SegmentEnd(s) if seq.is_none_or(|q| q == s) => {
                        let from = (off + SEGMENT_END).min(data.len());
                        let near = &data[from..(from + HOLE_SCAN).min(data.len())];
                        match near.iter().position(|&b| b != 0) {
                            None => Step::End,
                            Some(p) => Step::Damaged(format!(
                                "written bytes at offset {} after the record that ends the \
                                 segment",
                                from + p
                            )),
                        }
                    }
                    Parsed::SegmentEnd(s) => {
                        Step::Damaged(format!("the end record of segment {s} in another segment"))
                    }
                    Parsed::Bad(what) => bad(what),
                }
            };
            match step {
                Step::End => self.close_segment(),
                // A roll ends a segment with a segment-end record, so past
                // the mark, zeros where the records stop, with a later
                // segment of the lane holding records, are a lost end: a
                // power loss took the segment's last records (and that
                // record) while a later segment's reached the disk (the
                // kernel writes unsynced pages back in any order). Replayed
                // after such a gap, the lane would be no prefix, and for a
                // counting filter a remove kept without the add before it
                // leaves the item's count below its durable adds. So the
                // lane ends here, as at a torn record. What the later
                // segments hold was synced by no completed sync (one that
                // had would have synced this segment's end record too:
                // the roll wrote it before any record of the next, and
                // left this segment for the next sync): a loss `EverySec`
                // allows, and under `Always` none of it was acknowledged.
                // (After a kill, or a clean shutdown, every segment a roll
                // left holds its end record, and the lane goes on.)
                Step::EndPastMark => {
                    let after = self.written_after(false)?.expect("all of it");
                    if after.is_empty() {
                        self.close_segment();
                        continue;
                    }
                    let path = &self.segments[self.at].path;
                    tracing::warn!(
                        "{}: past the sync mark, the lane's records end at offset {off} and later \
                         segments follow, which may come after lost ones; lane {} ends at lsn {}",
                        path.display(),
                        self.lane,
                        self.prev
                    );
                    self.end_lane(after);
                }
                Step::Damaged(what) => self.damaged_here(what)?,
                Step::Record(lsn) if lsn < first => {
                    self.damaged_here(format!(
                        "record lsn {lsn} in a segment that starts at lsn {first}"
                    ))?;
                }
                Step::Record(lsn) if lsn <= self.prev => {
                    self.damaged_here(format!(
                        "record lsn {lsn} after lsn {} in the same lane",
                        self.prev
                    ))?;
                }
                Step::Record(lsn) => {
                    self.next = Some(lsn);
                    return Ok(());
                }
                Step::Bad(what, follows, written, cut) => {
                    // Past the lane's sync mark, any damage can be a power
                    // loss's: what was not synced reaches the disk in any
                    // order, sector by sector (see `SyncMark`), and the
                    // lane ends here, whatever follows.
                    let seg = &self.segments[self.at];
                    let unsynced = self.past_mark(seg.seq, off);
                    // Otherwise: appends and rolls run under the lane's
                    // mutex, so a killed process tears only a lane's newest
                    // segment; in an older one only a power loss can have,
                    // and only so. Then only the lane's later segments can
                    // still show that this is no tail (their written bytes,
                    // for zeroing).
                    // Below the lane's entry in the mark, what is there
                    // was synced before the power loss: no kill or power
                    // loss tore it, so it is damage even as a lane's last
                    // record.
                    let covered = self
                        .mark
                        .as_ref()
                        .is_some_and(|m| m.covers(self.lane, seg.seq, off));
                    let newest = self.at + 1 == self.segments.len();
                    // A roll writes a segment's end record once the next
                    // segment is in place, before anything is written in
                    // it: a kill part-way through that record leaves in
                    // the lane's last segment but one some of the record's
                    // bytes (naming this segment and the next one's first
                    // lsn), the others still zeros, and nothing after them
                    // or in the next segment (checked below). Any other
                    // bad record there (a record the next open has since
                    // moved past, damaged) is damage.
                    let end_torn = self.at + 2 == self.segments.len()
                        && written.is_none_or(|(_, l)| l <= SEGMENT_END)
                        && self.segments[self.at].seq.is_some_and(|seq| {
                            let mut whole = [0u8; SEGMENT_END];
                            encode_segment_end(
                                &mut whole,
                                seq,
                                self.segments[self.at + 1].first_lsn,
                            );
                            let data = self.map.as_deref().unwrap_or(&[]);
                            data.get(off..off + SEGMENT_END).is_some_and(|got| {
                                got.iter().zip(&whole).all(|(&g, &w)| g == 0 || g == w)
                            })
                        });
                    let after = if unsynced {
                        Some(self.written_after(false)?.expect("all of it"))
                    } else if covered {
                        None
                    } else if !follows && (newest || cut) {
                        self.written_after(true)?
                    } else if !follows && end_torn {
                        self.written_after(true)?.filter(|w| w.is_empty())
                    } else {
                        None
                    };
                    let Some(after) = after else {
                        self.damaged_here(what)?;
                        continue;
                    };
                    let path = self.segments[self.at].path.clone();
                    tracing::warn!(
                        "{}: torn record at offset {off} ({what}); lane {} ends at lsn {}",
                        path.display(),
                        self.lane,
                        self.prev
                    );
                    self.end_lane(written.map(|(o, l)| (path, o, l)).into_iter().chain(after));
                }
            }
        }
        Ok(())
    }

    fn open_segment(&mut self) -> Result<()> {
        let path = self.segments[self.at].path.clone();
        let file = self
            .fs
            .open_read(&path)
            .map_err(|e| io_err("open", &path, e))?;
        let len = file.metadata().map_err(|e| io_err("stat", &path, e))?.len();
        // The segment is mapped, not copied: records are parsed where the
        // page cache holds them, and only the pages up to the last record
        // (segments are mostly zeros past it) are ever touched.
        self.map = if len == 0 {
            None
        } else {
            // SAFETY: the data directory is locked by this store (see
            // `Store::open`), so no other store changes the file while it
            // is mapped; the map is read-only and dropped before the torn
            // tail, if any, is zeroed. (As with the writer's map, a disk
            // read error or another program truncating the file under us
            // is a SIGBUS, not an error.)
            let map = unsafe { memmap2::Mmap::map(&file) }.map_err(|e| io_err("map", &path, e))?;
            let _ = map.advise(memmap2::Advice::Sequential);
            Some(map)
        };
        self.opened = true;
        self.off = 0;
        Ok(())
    }

    /// Delivers the lane's records from `next` on while their lsns stay
    /// below `bound` (where another lane's next record comes), each parsed
    /// once.
    fn deliver(
        &mut self,
        bound: u64,
        on_record: &mut impl FnMut(Found<'_>) -> Result<()>,
    ) -> Result<()> {
        let data: &[u8] = self.map.as_deref().unwrap_or(&[]);
        let mut off = self.off;
        let mut prev = self.prev;
        while let Parsed::Record(record, lsn, used) = parse(&data[off.min(data.len())..]) {
            // Out of order or out of range: `advance` looks at it next.
            if lsn <= prev || lsn >= bound || !in_range(record.id(), lsn) {
                break;
            }
            on_record(Found {
                record,
                lsn,
                bytes: used,
            })?;
            prev = lsn;
            off += used;
        }
        self.off = off;
        self.prev = prev;
        Ok(())
    }

    /// For a bad record in the current segment that no valid record of
    /// that segment follows (`stop_at_valid`): `None` if one of the lane's later segments
    /// holds a valid record with a higher lsn than the last delivered (then
    /// the bad record is no tail), else the written bytes of those
    /// segments (path, offset 0, length up to the last non-zero byte).
    /// With `stop_at_valid` false, never `None`: the written bytes of all
    /// of them (the damage is past the lane's sync mark).
    fn written_after(&self, stop_at_valid: bool) -> Result<Option<Vec<(PathBuf, u64, usize)>>> {
        let mut written = Vec::new();
        for seg in &self.segments[self.at + 1..] {
            let file = self
                .fs
                .open_read(&seg.path)
                .map_err(|e| io_err("open", &seg.path, e))?;
            let len = file
                .metadata()
                .map_err(|e| io_err("stat", &seg.path, e))?
                .len();
            if len == 0 {
                continue;
            }
            // SAFETY: as in `open_segment`: the directory is locked by this
            // store and the map is read-only and dropped here.
            let map =
                unsafe { memmap2::Mmap::map(&file) }.map_err(|e| io_err("map", &seg.path, e))?;
            if stop_at_valid && valid_record_after(&map, 0, (self.prev + 1).max(seg.first_lsn)) {
                return Ok(None);
            }
            if let Some(last) = map.iter().rposition(|&b| b != 0) {
                written.push((seg.path.clone(), 0, last + 1));
            }
        }
        Ok(Some(written))
    }

    /// Zeroes the torn tail found, if any.
    fn finish(&mut self) -> Result<()> {
        self.map = None;
        for (path, offset, len) in std::mem::take(&mut self.torn) {
            zero_range(self.fs, &path, offset, len)?;
        }
        Ok(())
    }
}

/// Overwrites `len` bytes at `offset` of a segment with zeros, durably.
fn zero_range(fs: &dyn Fs, path: &Path, offset: u64, len: usize) -> Result<()> {
    use std::os::unix::fs::FileExt;
    let file = fs.open_rw(path).map_err(|e| io_err("open", path, e))?;
    file.std_file()
        .write_all_at(&vec![0u8; len], offset)
        .map_err(|e| io_err("truncate torn record in", path, e))?;
    file.sync_data().map_err(|e| io_err("sync", path, e))
}

/// The least a disk writes whole, or not at all, at a power loss.
const SECTOR: usize = 512;

/// Lsns from here up are damage wherever they are read (a record, a
/// snapshot), so that the next lsn an open computes (one past the
/// highest) cannot overflow. A log that took 15 million records a second
/// would reach it in about 9,700 years.
pub(crate) const MAX_LSN: u64 = 1 << 62;

/// Filter ids from here up are damage wherever they are read, for the
/// same reason: the open's next id is one past the highest.
pub(crate) const MAX_ID: u64 = 1 << 62;

/// Whether a record's filter id and lsn are below [`MAX_ID`] and
/// [`MAX_LSN`].
fn in_range(id: u64, lsn: u64) -> bool {
    id < MAX_ID && lsn < MAX_LSN
}

/// How far past zeros where a record should start the reader looks for
/// written bytes (see `LaneReader::advance`): a zeroed sector or page in
/// the middle of a segment shows, and an open reads at most this much of
/// a segment's unwritten rest.
const HOLE_SCAN: usize = 1 << 20;

/// Could the bad record at `off` of a segment be one that a power loss cut
/// while a sync was writing it? Then it crosses a sector boundary, and
/// nothing of the segment is written past the last boundary it crosses:
/// its first sectors reached the disk and the rest did not (a segment is
/// preallocated, so what was never written reads as zeros). A record within
/// one sector is never cut, and written bytes past it are other damage.
/// `written_end`: where the segment's written (non-zero) bytes end.
fn cut_by_power_loss(data: &[u8], off: usize, written_end: usize) -> bool {
    let Some(head) = data.get(off..off + 4) else {
        return false;
    };
    let word = u32::from_le_bytes(head.try_into().expect("4"));
    let size = if word & SHORT_FLAG != 0 {
        SHORT_RECORD
    } else {
        8 + word as usize
    };
    if off + size > data.len() {
        return false; // no record is longer than its segment
    }
    let last_boundary = (off + size - 1) / SECTOR * SECTOR;
    last_boundary > off && written_end <= last_boundary
}

/// Is there a valid record with an lsn at least `min_lsn` anywhere at an
/// 8-byte boundary from `from` on?
///
/// Only offsets whose lsn field (bytes 8..16 of either form) lies in
/// `min_lsn..min_lsn + 2^48` are parsed (callers give at least the
/// segment's first lsn, so that the reach holds in a log of any age): a record's CRC covers up to its
/// length, and in damaged bytes nearly every offset would claim one, so
/// that checking them all took time that grew with the square of the
/// segment: for 64 MiB of random bytes about a terabyte of CRC (minutes),
/// for bytes that all claim long records hours. No log reaches 2^48
/// records past any record it holds.
fn valid_record_after(data: &[u8], from: usize, min_lsn: u64) -> bool {
    const REACH: u64 = 1 << 48;
    let mut off = from.next_multiple_of(8);
    while off + 8 <= data.len() {
        let plausible = data
            .get(off + 8..off + 16)
            .map(|b| u64::from_le_bytes(b.try_into().expect("8")))
            .is_some_and(|lsn| lsn.wrapping_sub(min_lsn) < REACH);
        if !plausible {
            off += 8;
            continue;
        }
        if let Parsed::Record(_, lsn, _) = parse(&data[off..]) {
            if lsn >= min_lsn {
                return true;
            }
        }
        off += 8;
    }
    false
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::fs::{RealFile, RealFs};

    /// The segments in `dir`, as the store finds them at open.
    pub(crate) fn segments_of(dir: &Path) -> Vec<SegmentFile> {
        std::fs::read_dir(dir)
            .unwrap()
            .filter_map(|e| parse_segment_name(&e.unwrap().path()))
            .collect()
    }

    /// Every record of the log in `dir` as (lsn, add?, filter id, hashes);
    /// each must be an add or a remove.
    fn hash_records(fs: &dyn Fs, dir: &Path) -> Vec<(u64, bool, u64, Vec<ItemHash>)> {
        let mut seen = Vec::new();
        read_all(fs, &mut segments_of(dir), &Salvage::default(), |f| {
            let Rec::Hashes { add, id, hashes } = f.record else {
                panic!("not an add or remove");
            };
            seen.push((f.lsn, add, id, hashes.to_vec()));
            Ok(())
        })
        .unwrap();
        seen
    }

    /// The lsns of [`hash_records`].
    fn lsns_of(fs: &dyn Fs, dir: &Path) -> Vec<u64> {
        hash_records(fs, dir).iter().map(|r| r.0).collect()
    }

    /// A new log, starting at lsn 1, in a new temporary directory.
    fn fresh_wal(
        policy: FsyncPolicy,
        segment_size: u64,
    ) -> (tempfile::TempDir, Arc<dyn Fs>, Arc<Wal>) {
        let dir = tempfile::tempdir().unwrap();
        let fs: Arc<dyn Fs> = Arc::new(RealFs);
        let wal = Wal::open(
            fs.clone(),
            dir.path().to_path_buf(),
            policy,
            segment_size,
            1,
            vec![],
            None,
        )
        .unwrap();
        // No lane's pages unmapped for being idle, unless a test asks.
        wal.idle_unmap_ms.store(3_600_000, Ordering::Relaxed);
        (dir, fs, wal)
    }

    #[test]
    fn concurrent_appends_keep_every_record_whole_and_in_lsn_order() {
        let (dir, fs, wal) = fresh_wal(FsyncPolicy::No, 1 << 16);
        let threads = 4u64;
        let per = 5_000u64;
        std::thread::scope(|s| {
            for t in 0..threads {
                let wal = &wal;
                s.spawn(move || {
                    for i in 0..per {
                        let n = 1 + (i % 3) as usize;
                        let hashes: Vec<ItemHash> =
                            (0..n as u64).map(|j| ItemHash { lo: i, hi: j }).collect();
                        let kind = 2 + (i % 2) as u8;
                        if n == 1 && t % 2 == 1 {
                            // Prepared for an lsn that the other threads
                            // often take first.
                            let mut rec = wal.prepare_one(kind, t, hashes[0]);
                            wal.append_prepared(&mut rec).unwrap();
                        } else {
                            wal.append_hashes(kind, t, &hashes, true).unwrap();
                        }
                    }
                });
            }
        });
        // (Which lanes the threads used depends on their home lanes and on
        // timing; `lanes_are_merged_in_lsn_order...` merges fixed lanes.)
        let mut segments = segments_of(dir.path());
        let mut prev = 0;
        let mut records = 0;
        let mut counts = vec![0u64; threads as usize];
        read_all(&*fs, &mut segments, &Salvage::default(), |f| {
            // Lanes take lsns in blocks: gaps, but never out of order.
            assert!(f.lsn > prev, "records out of lsn order");
            prev = f.lsn;
            records += 1;
            let Rec::Hashes { add, id, hashes } = f.record else {
                panic!("not an add or remove");
            };
            let hashes = hashes.to_vec();
            let i = hashes[0].lo;
            assert_eq!(add, i % 2 == 0);
            assert_eq!(hashes.len(), 1 + (i % 3) as usize);
            assert!(hashes
                .iter()
                .enumerate()
                .all(|(j, h)| h.lo == i && h.hi == j as u64));
            counts[id as usize] += 1;
            Ok(())
        })
        .unwrap();
        assert_eq!(records, threads * per);
        assert!(counts.iter().all(|&c| c == per), "{counts:?}");
    }

    #[test]
    fn append_hashes_writes_the_same_bytes_as_record_encode() {
        let (dir, fs, wal) = fresh_wal(FsyncPolicy::No, 1 << 16);
        let hashes: Vec<ItemHash> = (0..5).map(|i| ItemHash { lo: i, hi: !i }).collect();
        let a = wal.append_hashes(2, 9, &hashes, false).unwrap();
        let b = wal
            .append(&Record::Add {
                id: 9,
                hashes: hashes.clone(),
            })
            .unwrap();
        let c = wal.append_hashes(3, 9, &hashes[..1], false).unwrap();
        // An add of one hash takes the short form.
        let d = wal.append_hashes(2, 9, &hashes[..1], false).unwrap();
        assert_eq!((a, b, c, d), (1, 2, 3, 4));
        assert_eq!(
            hash_records(&*fs, dir.path()),
            vec![
                (1, true, 9, hashes.clone()),
                (2, true, 9, hashes.clone()),
                (3, false, 9, hashes[..1].to_vec()),
                (4, true, 9, hashes[..1].to_vec()),
            ]
        );
        let data = std::fs::read(dir.path().join(segment_name(1, 0, 0))).unwrap();
        let mut at = 0;
        for (lsn, rec) in [
            (
                1,
                Record::Add {
                    id: 9,
                    hashes: hashes.clone(),
                },
            ),
            (
                2,
                Record::Add {
                    id: 9,
                    hashes: hashes.clone(),
                },
            ),
            (
                3,
                Record::Remove {
                    id: 9,
                    hashes: hashes[..1].to_vec(),
                },
            ),
            (
                4,
                Record::Add {
                    id: 9,
                    hashes: hashes[..1].to_vec(),
                },
            ),
        ] {
            let enc = rec.encode(lsn);
            assert_eq!(&data[at..at + enc.len()], &enc[..], "lsn {lsn}");
            at += enc.len();
        }
        assert_eq!(at, 2 * 112 + 48 + 32);
    }

    #[test]
    fn a_record_prepared_for_an_lsn_another_append_took_gets_the_next_one() {
        // One lane (no blocks of lsns), so the lsns are known.
        let (dir, fs, wal) = fresh_wal(FsyncPolicy::Always, 1 << 16);
        let h = ItemHash { lo: 7, hi: 8 };
        let mut first = wal.prepare_one(2, 5, h);
        assert_eq!(first.lsn, 1);
        let mut second = wal.prepare_one(3, 5, h);
        // Taken by another append between the prepare and its own.
        assert_eq!(wal.append_hashes(2, 6, &[h], false).unwrap(), 1);
        assert_eq!(wal.append_prepared(&mut first).unwrap(), 2);
        assert_eq!(wal.append_prepared(&mut second).unwrap(), 3);
        assert_eq!(
            hash_records(&*fs, dir.path()),
            vec![
                (1, true, 6, vec![h]),
                (2, true, 5, vec![h]),
                (3, false, 5, vec![h]),
            ]
        );
    }

    #[test]
    fn a_record_for_any_lane_comes_after_an_ordered_one_and_an_order_point() {
        let (_dir, _fs, wal) = fresh_wal(FsyncPolicy::No, 1 << 16);
        let h = [ItemHash { lo: 1, hi: 2 }];
        // The first takes a block of lsns (the lane's, most of the time;
        // another's if the page helper held it for a moment).
        let a = wal.append_hashes(2, 1, &h, true).unwrap();
        // An ordered record takes the counter's next lsn, past the block.
        let create = wal.append(&Record::Delete { id: 9 }).unwrap();
        assert!(create >= a + LSN_BLOCK, "{create} after {a}");
        // A record for any lane appended after it gets a higher lsn,
        // though the lane's block has room.
        let b = wal.append_hashes(2, 1, &h, true).unwrap();
        assert!(b > create, "{b} after {create}");
        // So does one after an order point.
        let point = wal.order_point(true);
        let c = wal.append_hashes(2, 1, &h, true).unwrap();
        assert!(c > point, "{c} after {point}");
    }

    #[test]
    fn a_sync_covers_only_the_records_written_not_a_lanes_unused_lsns() {
        // `No`: no background sync to count along (sync_all is the same
        // under every policy).
        let (_dir, _fs, wal) = fresh_wal(FsyncPolicy::No, 1 << 16);
        let h = [ItemHash { lo: 1, hi: 2 }];
        let a = wal.append_hashes(2, 1, &h, true).unwrap();
        // The lane took a block: lsns up to its end are handed out, but
        // only `a` is written, and that is all a sync can say it covers.
        assert!(wal.last_lsn() > a);
        wal.sync_all().unwrap();
        assert_eq!(wal.synced_lsn.load(Ordering::Acquire), a);
        // The once-a-second sync (and close) sync whatever was appended
        // since, though lsns up to the last handed out count as synced
        // for neither.
        let before = wal.syncs.load(Ordering::Relaxed);
        let b = wal.append_hashes(2, 1, &h, true).unwrap();
        assert!(wal.synced_lsn.load(Ordering::Acquire) < b);
        wal.sync_all().unwrap();
        assert_eq!(wal.syncs.load(Ordering::Relaxed), before + 1);
        wal.sync_all().unwrap();
        assert_eq!(wal.syncs.load(Ordering::Relaxed), before + 2);
    }

    /// The real file system, but the sync of the file created (or opened)
    /// at the path in `fail`, when it holds one, fails with EIO; every
    /// file's sync panics while `panic` is set; removing a snapshot
    /// (`*.snap`) panics while `panic_snapshot_removes` is set; and with
    /// `other_boot`, after a reboot: another boot id, so that the reader
    /// uses the sync mark.
    #[derive(Default)]
    pub(crate) struct TestFs {
        fail: Arc<Mutex<Option<PathBuf>>>,
        panic: Arc<AtomicBool>,
        pub(crate) panic_snapshot_removes: Arc<AtomicBool>,
        /// Removing a staging ring fails (EIO).
        fail_ring_removes: bool,
        other_boot: bool,
    }

    impl TestFs {
        /// One whose removes of staging rings fail.
        pub(crate) fn failing_ring_removes() -> TestFs {
            TestFs {
                fail_ring_removes: true,
                ..TestFs::default()
            }
        }

        pub(crate) fn other_boot() -> TestFs {
            TestFs {
                other_boot: true,
                ..TestFs::default()
            }
        }
    }

    struct FailSyncFile {
        inner: Box<dyn FsFile>,
        created: PathBuf,
        fail: Arc<Mutex<Option<PathBuf>>>,
        panic: Arc<AtomicBool>,
    }

    impl FsFile for FailSyncFile {
        fn write_all(&mut self, buf: &[u8]) -> std::io::Result<()> {
            self.inner.write_all(buf)
        }
        fn sync_data(&self) -> std::io::Result<()> {
            if self.panic.load(Ordering::SeqCst) {
                panic!("sync of {} (test)", self.created.display());
            }
            if lock(&self.fail).as_ref() == Some(&self.created) {
                return Err(std::io::Error::from_raw_os_error(libc::EIO));
            }
            self.inner.sync_data()
        }
        fn allocate(&self, len: u64) -> std::io::Result<()> {
            self.inner.allocate(len)
        }
        fn std_file(&self) -> &std::fs::File {
            self.inner.std_file()
        }
        fn drop_cached(&self, from: u64, to: u64) {
            self.inner.drop_cached(from, to)
        }
        fn write_behind(&self, written_to: u64, upto: u64) -> std::io::Result<()> {
            self.inner.write_behind(written_to, upto)
        }
        fn try_clone(&self) -> std::io::Result<Box<dyn FsFile>> {
            Ok(Box::new(FailSyncFile {
                inner: self.inner.try_clone()?,
                created: self.created.clone(),
                fail: self.fail.clone(),
                panic: self.panic.clone(),
            }))
        }
    }

    impl Fs for TestFs {
        fn create(&self, path: &Path) -> std::io::Result<Box<dyn FsFile>> {
            Ok(Box::new(FailSyncFile {
                inner: RealFs.create(path)?,
                created: path.to_path_buf(),
                fail: self.fail.clone(),
                panic: self.panic.clone(),
            }))
        }
        fn open_rw(&self, path: &Path) -> std::io::Result<Box<dyn FsFile>> {
            Ok(Box::new(FailSyncFile {
                inner: RealFs.open_rw(path)?,
                created: path.to_path_buf(),
                fail: self.fail.clone(),
                panic: self.panic.clone(),
            }))
        }
        fn open_read(&self, path: &Path) -> std::io::Result<std::fs::File> {
            RealFs.open_read(path)
        }
        fn rename(&self, from: &Path, to: &Path) -> std::io::Result<()> {
            RealFs.rename(from, to)
        }
        fn remove(&self, path: &Path) -> std::io::Result<()> {
            let snapshot = path.extension().is_some_and(|x| x == "snap");
            if snapshot && self.panic_snapshot_removes.load(Ordering::SeqCst) {
                panic!("removing {} (test)", path.display());
            }
            if self.fail_ring_removes && path.extension().is_some_and(|x| x == "ring") {
                return Err(std::io::Error::from_raw_os_error(libc::EIO));
            }
            RealFs.remove(path)
        }
        fn create_dir_all(&self, path: &Path) -> std::io::Result<()> {
            RealFs.create_dir_all(path)
        }
        fn sync_dir(&self, path: &Path) -> std::io::Result<()> {
            RealFs.sync_dir(path)
        }
        fn list(&self, path: &Path) -> std::io::Result<Vec<PathBuf>> {
            RealFs.list(path)
        }
        fn boot_id(&self) -> [u8; 16] {
            let mut id = RealFs.boot_id();
            if self.other_boot {
                id[0] ^= 0xff;
            }
            id
        }
    }

    /// A log under `policy` over a [`TestFs`] whose syncs of the path in
    /// the returned mutex fail (none yet), with lane 0 rolled once: its
    /// first segment (returned) and a second one, both unsynced.
    #[allow(clippy::type_complexity)]
    fn two_segments_over_failing_fs(
        policy: FsyncPolicy,
    ) -> (
        tempfile::TempDir,
        Arc<Mutex<Option<PathBuf>>>,
        Arc<Wal>,
        PathBuf,
    ) {
        let dir = tempfile::tempdir().unwrap();
        let fail = Arc::new(Mutex::new(None));
        let fs: Arc<dyn Fs> = Arc::new(TestFs {
            fail: fail.clone(),
            ..TestFs::default()
        });
        let wal = Wal::open(
            fs,
            dir.path().to_path_buf(),
            policy,
            1 << 16,
            1,
            vec![],
            None,
        )
        .unwrap();
        let [first] = &segments_of(dir.path())[..] else {
            panic!("not one segment at open");
        };
        let first = first.path.clone();
        let h: Vec<ItemHash> = (0..100).map(|i| ItemHash { lo: i, hi: 7 }).collect();
        while segments_of(dir.path()).len() < 2 {
            wal.append_hashes(2, 1, &h, false).unwrap();
        }
        (dir, fail, wal, first)
    }

    #[test]
    fn a_failed_sync_names_the_segment_whose_sync_failed() {
        // A sync syncs a lane's rolled-away segments with its current one;
        // the error (and the poisoning) named the current segment whichever
        // failed.
        let (_dir, fail, wal, first) = two_segments_over_failing_fs(FsyncPolicy::Always);
        let h: Vec<ItemHash> = (0..100).map(|i| ItemHash { lo: i, hi: 7 }).collect();
        *lock(&fail) = Some(first.clone());
        let e = wal.sync_all().unwrap_err().to_string();
        let name = first.file_name().unwrap().to_str().unwrap();
        assert!(e.contains(name), "{e} does not name {name}");
        // The log stays poisoned, with the same file named.
        let e = wal.append_hashes(2, 1, &h, false).unwrap_err().to_string();
        assert!(e.contains(name), "{e} does not name {name}");
    }

    /// After a background sync fails, the syncer tries again a second
    /// later, not at once. A sync of several files syncs them from scoped
    /// threads, whose joins leave the syncer's thread a pending wake (std's
    /// scope wakes the thread that made it), and the syncer's first
    /// `park_timeout` (bab6721) returned on it at once: a second sync ran
    /// right after the failed one (found by review, session 26).
    #[test]
    fn the_syncer_waits_a_second_after_a_failed_sync() {
        // Two segments of lane 0 for the first background sync.
        let (_dir, fail, wal, first) = two_segments_over_failing_fs(FsyncPolicy::EverySec);
        *lock(&fail) = Some(first);
        let began = Instant::now();
        while lock(&wal.timed_sync_starts).len() < 2 {
            assert!(began.elapsed() < Duration::from_secs(10), "no second sync");
            std::thread::sleep(Duration::from_millis(10));
        }
        assert!(wal.poison_epoch().is_some(), "the first sync failed");
        let starts = lock(&wal.timed_sync_starts).clone();
        let gap = starts[1] - starts[0];
        assert!(gap >= Duration::from_millis(900), "retried after {gap:?}");
    }

    #[test]
    fn a_poisoned_log_takes_no_record_until_the_reset_for_its_poisoning() {
        let (_dir, _fs, wal) = fresh_wal(FsyncPolicy::No, 1 << 16);
        let h = [ItemHash { lo: 1, hi: 2 }];
        wal.append_hashes(2, 1, &h, true).unwrap();
        wal.poison_for_test();
        let epoch = wal.poison_epoch().unwrap();
        let before = wal.last_lsn();
        for ordered in [false, true] {
            let e = wal.append_hashes(2, 1, &h, !ordered).unwrap_err();
            assert!(matches!(e.kind(), ErrorKind::Poisoned(_)), "{e}");
            let mut rec = wal.prepare_one(2, 1, h[0]);
            assert!(wal.append_prepared(&mut rec).is_err());
        }
        assert!(wal.append(&Record::Delete { id: 1 }).is_err());
        assert_eq!(wal.last_lsn(), before, "a refused append took no lsn");
        // A reset for an older poisoning (one another writer's checkpoint
        // cleared) leaves this one.
        wal.reset_after_checkpoint(epoch - 1).unwrap();
        assert!(wal.is_poisoned());
        wal.reset_after_checkpoint(epoch).unwrap();
        assert!(!wal.is_poisoned());
        assert_eq!(wal.poison_epoch(), None);
        let lsn = wal.append_hashes(2, 1, &h, true).unwrap();
        assert!(lsn > before);
        // Cleared already: a second reset for the same poisoning, after
        // records came in, does not count them as synced.
        let synced = wal.synced_lsn.load(Ordering::Acquire);
        wal.reset_after_checkpoint(epoch).unwrap();
        assert_eq!(wal.synced_lsn.load(Ordering::Acquire), synced);
        assert!(synced < lsn);
    }

    #[test]
    fn one_threads_records_take_rising_lsns_across_lanes() {
        let (_dir, _fs, wal) = fresh_wal(FsyncPolicy::No, 1 << 16);
        HOME_LANE.with(|h| h.set(0));
        wal.add_spare(1);
        assert!(lock(&wal.lanes[1].state).spare.is_some());
        // No helper holding a lane for a moment: the writer would then
        // wait for lane 0, which the holder below keeps till it is done.
        stop_helper(&wal);
        let h = [ItemHash { lo: 1, hi: 2 }];
        let a = wal.append_hashes(2, 1, &h, true).unwrap();
        // Lane 0 held elsewhere: the record goes to lane 1 (its spare),
        // from a block of lsns above lane 0's.
        let (held, release) = (std::sync::mpsc::channel(), std::sync::mpsc::channel::<()>());
        let holder = {
            let wal = wal.clone();
            std::thread::spawn(move || {
                let _st = lock(&wal.lanes[0].state);
                held.0.send(()).unwrap();
                release.1.recv().unwrap();
            })
        };
        held.1.recv().unwrap();
        let b = wal.append_hashes(2, 1, &h, true).unwrap();
        release.0.send(()).unwrap();
        holder.join().unwrap();
        assert!(lock(&wal.lanes[1].state).cur.is_some(), "went to lane 1");
        // Its lane was held: lane 1 is now this thread's own.
        assert_eq!(HOME_LANE.with(|h| h.get()), 1);
        // Back in lane 0, whose block is behind `b`: a new block.
        HOME_LANE.with(|h| h.set(0));
        let c = wal.append_hashes(2, 1, &h, true).unwrap();
        assert!(lock(&wal.lanes[0].state).block.0 > b);
        assert!(a < b && b < c, "{a} {b} {c}");
    }

    /// Waits up to 2 s for `cond` (of the page helper's doing), failing
    /// the test without it.
    fn eventually(what: &str, cond: impl Fn() -> bool) {
        eventually_within(what, Duration::from_secs(2), cond)
    }

    /// [`eventually`], waiting up to `limit`.
    fn eventually_within(what: &str, limit: Duration, cond: impl Fn() -> bool) {
        let start = std::time::Instant::now();
        while start.elapsed() < limit {
            if cond() {
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        panic!("no {what} after {limit:?}");
    }

    /// Stops the page helper of `wal` (it makes and installs no more
    /// spares, and holds no lane's mutex from now on).
    fn stop_helper(wal: &Wal) {
        wal.stop.store(true, Ordering::Relaxed);
        if let Some(helper) = wal.pages.get() {
            helper.unpark();
        }
        std::thread::sleep(Duration::from_millis(200));
    }

    /// A new log under `No` with staging rings, in `wal/` and `rings/` of
    /// a new temporary directory.
    fn staging_wal(segment_size: u64) -> (tempfile::TempDir, Arc<Wal>) {
        staging_wal_under(FsyncPolicy::No, segment_size)
    }

    /// [`staging_wal`], under `policy`.
    fn staging_wal_under(policy: FsyncPolicy, segment_size: u64) -> (tempfile::TempDir, Arc<Wal>) {
        let dir = tempfile::tempdir().unwrap();
        let fs: Arc<dyn Fs> = Arc::new(RealFs);
        let (wal_dir, ring_dir) = (dir.path().join("wal"), dir.path().join("rings"));
        std::fs::create_dir(&wal_dir).unwrap();
        std::fs::create_dir(&ring_dir).unwrap();
        let rings = Rings::new(fs.clone(), ring_dir, [7; 16]);
        let wal = Wal::open(fs, wal_dir, policy, segment_size, 1, vec![], Some(rings)).unwrap();
        (dir, wal)
    }

    #[test]
    fn the_page_helper_makes_spares_while_a_ring_it_would_copy_is_being_copied() {
        // A writer in the middle of copying its own ring holds the ring's
        // `copying` mutex: the helper passes the ring by and goes on with
        // its other work (it used to wait there, and writers then found no
        // spare at their rolls), and copies the ring once it is free.
        let (_dir, wal) = staging_wal(64 << 10);
        let h = |i: u64| [ItemHash { lo: i, hi: 3 }];
        assert!(wal.stage(1 << 40, &h(0)).unwrap(), "staged");
        let ring = wal.rings.as_ref().unwrap().all().pop().unwrap();
        let held = lock(&ring.copying);
        let wake = || wal.pages.get().unwrap().unpark();
        // The helper's passes meet the ring while it is held.
        for _ in 0..5 {
            wake();
            std::thread::sleep(Duration::from_millis(50));
        }
        // Past an eighth of lane 0's segment: the helper makes it a spare.
        let mut n = 1;
        while n * 48 < 40 << 10 {
            wal.append_hashes(2, 1 << 40, &h(n), false).unwrap();
            n += 1;
        }
        eventually("spare for lane 0", || {
            wake();
            lock(&wal.lanes[0].state).spare.is_some()
        });
        let staged = || ring.head().load(Ordering::Acquire) - ring.copied().load(Ordering::Acquire);
        assert_eq!(staged(), 1, "not copied while its copier holds it");
        drop(held);
        eventually("copy of the released ring", || {
            wake();
            staged() == 0
        });
    }

    #[test]
    fn copying_the_rings_goes_past_a_ring_being_copied_and_waits_for_it_last() {
        // A sync (or order point, or checkpoint) copies every ring's staged
        // adds. A ring whose owner is copying it (and may be preempted, or
        // waiting for a lane) is passed by at first: the other rings are
        // copied meanwhile, and the held one once it is free. Waiting for
        // each ring in turn, the syncer under 50 writers copied for seconds.
        let (dir, wal) = staging_wal(1 << 20);
        wal.helper_copies_paused.store(true, Ordering::Relaxed);
        let h = |i: u64| [ItemHash { lo: i, hi: 3 }];
        // This thread's ring first, then another thread's.
        assert!(wal.stage(1 << 40, &h(1)).unwrap(), "staged");
        let w = wal.clone();
        std::thread::spawn(move || assert!(w.stage(1 << 40, &h(2)).unwrap(), "staged"))
            .join()
            .unwrap();
        let all = wal.rings.as_ref().unwrap().all();
        let [held, free] = [&all[0], &all[1]];
        let staged =
            |r: &Ring| r.head().load(Ordering::Acquire) - r.copied().load(Ordering::Acquire);
        assert_eq!((staged(held), staged(free)), (1, 1));
        let guard = lock(&held.copying);
        let w = wal.clone();
        let copy = std::thread::spawn(move || w.copy_rings());
        eventually("copy of the ring no one holds", || staged(free) == 0);
        assert_eq!(staged(held), 1, "not copied while its copier holds it");
        assert!(!copy.is_finished(), "returned before every ring was copied");
        drop(guard);
        copy.join().unwrap().unwrap();
        assert_eq!(staged(held), 0, "copied once free");
        let mut hashes: Vec<u64> = hash_records(&RealFs, &dir.path().join("wal"))
            .iter()
            .flat_map(|(_, _, _, hashes)| hashes.iter().map(|h| h.lo))
            .collect();
        hashes.sort_unstable();
        assert_eq!(hashes, vec![1, 2], "both rings' adds in the log");
    }

    /// While a copy has failed, a thread stages nothing, even in an empty
    /// ring (which used to stage, so that one add per ring was
    /// acknowledged without the log having taken it): its ring goes into
    /// the log, and its adds to a lane.
    #[test]
    fn while_a_copy_has_failed_nothing_is_staged_even_in_an_empty_ring() {
        let (_dir, wal) = staging_wal(1 << 20);
        // The helper's pass over the rings would clear the flag.
        stop_helper(&wal);
        let h = |i| [ItemHash { lo: i, hi: i }];
        assert!(wal.stage(1, &h(1)).unwrap(), "staged normally");
        assert_eq!(wal.staged(), 1);
        wal.copy_failed.store(true, Ordering::SeqCst);
        // A ring holding an add: copied, and the new add not staged.
        assert!(!wal.stage(1, &h(2)).unwrap());
        assert_eq!(wal.staged(), 0, "the ring went into the log");
        // An empty ring, on another thread.
        let w = wal.clone();
        let staged = std::thread::spawn(move || w.stage(1, &h(3)).unwrap())
            .join()
            .unwrap();
        assert!(
            !staged,
            "an empty ring staged an add while a copy had failed"
        );
        assert_eq!(wal.staged(), 0);
        wal.copy_failed.store(false, Ordering::SeqCst);
        assert!(wal.stage(1, &h(4)).unwrap(), "staged again once cleared");
    }

    #[test]
    fn a_copy_that_failed_during_a_pass_keeps_writers_copying_their_own_rings() {
        // A pass over the rings that copied all it had to clears
        // `copy_failed`, but not if a writer's own copy failed meanwhile
        // (a full disk): that writer's ring still holds adds the log could
        // not take, and every writer must go on copying before it stages.
        let (_dir, wal) = staging_wal(1 << 20);
        let failure = || {
            wal.copy_failures.fetch_add(1, Ordering::SeqCst);
            wal.copy_failed.store(true, Ordering::SeqCst);
        };
        failure();
        let before = wal.copy_failures.load(Ordering::SeqCst);
        failure();
        wal.clear_copy_failed(before);
        assert!(
            wal.copy_failed.load(Ordering::SeqCst),
            "a failure since the pass began"
        );
        let now = wal.copy_failures.load(Ordering::SeqCst);
        wal.clear_copy_failed(now);
        assert!(!wal.copy_failed.load(Ordering::SeqCst), "none since");
        // And through copy_rings: nothing staged, nothing fails.
        failure();
        wal.copy_rings().unwrap();
        assert!(
            !wal.copy_failed.load(Ordering::SeqCst),
            "cleared by a whole pass"
        );
    }

    #[test]
    fn the_syncer_reports_how_long_acknowledged_records_waited_for_a_sync() {
        let (_dir, _fs, wal) = fresh_wal(FsyncPolicy::EverySec, 1 << 20);
        assert_eq!(wal.take_sync_window(), None, "no sync has ended yet");
        wal.append_hashes(2, 1 << 40, &[ItemHash { lo: 1, hi: 2 }], false)
            .unwrap();
        // Syncs start a second apart: a record appended just after one
        // started waits at least that second, for the next one.
        eventually_within("a sync window", Duration::from_secs(5), || {
            wal.take_sync_window().is_some()
        });
        std::thread::sleep(Duration::from_millis(2500));
        let w = wal
            .take_sync_window()
            .expect("syncs ended since the last look");
        assert!(w >= Duration::from_secs(1), "{w:?}");
        let (_dir, _fs, no) = fresh_wal(FsyncPolicy::No, 1 << 20);
        std::thread::sleep(Duration::from_millis(1200));
        assert_eq!(no.take_sync_window(), None, "no syncer under `No`");
        assert_eq!(no.unsynced_for(), None);
    }

    #[test]
    fn how_long_the_log_has_gone_unsynced_is_counted_from_the_last_sync_that_began() {
        let (_dir, _fs, wal) = fresh_wal(FsyncPolicy::EverySec, 1 << 20);
        // Before the first sync: since the open.
        let open = wal.unsynced_for().expect("under `EverySec`");
        assert!(open <= wal.opened.elapsed(), "{open:?}");
        // After syncs have succeeded: since the last of them began, which
        // is after the open.
        eventually_within("a sync", Duration::from_secs(5), || {
            wal.last_sync_began.load(Ordering::Relaxed) > 0
        });
        let began = Duration::from_nanos(wal.last_sync_began.load(Ordering::Relaxed));
        let since = wal.unsynced_for().unwrap();
        assert!(since + began <= wal.opened.elapsed(), "{since:?} {began:?}");
        // A failed sync does not move it: it keeps growing. (A sync that
        // succeeds after the poisoning began before it.)
        wal.poison_for_test();
        std::thread::sleep(Duration::from_millis(2200));
        assert!(wal.sync_all().is_err(), "a poisoned log's sync fails");
        let since = wal.unsynced_for().unwrap();
        assert!(since >= Duration::from_millis(2200), "{since:?}");
        for policy in [FsyncPolicy::Always, FsyncPolicy::No] {
            let (_dir, _fs, other) = fresh_wal(policy, 1 << 20);
            assert_eq!(other.unsynced_for(), None, "{policy:?}");
        }
    }

    #[test]
    fn writers_lead_one_sync_the_syncer_is_late_for() {
        let (_dir, _fs, wal) = fresh_wal(FsyncPolicy::EverySec, 1 << 20);
        // No syncer from here on (nor page helper): a sync is overdue
        // SYNC_OVERDUE after the last one began.
        stop_helper(&wal);
        let lsn = wal
            .append_hashes(2, 1 << 40, &[ItemHash { lo: 1, hi: 2 }], false)
            .unwrap();
        let last = wal.last_sync_began.load(Ordering::Relaxed);
        std::thread::sleep(SYNC_OVERDUE + Duration::from_millis(100));
        assert!(wal.refresh_overdue() && wal.is_overdue());
        assert!(wal.synced_lsn.load(Ordering::Acquire) < lsn);
        // Eight writers come at once: one leads a sync and the others
        // wait for it (one more at most, for those that came after it
        // began), rather than each lead one in turn.
        let syncs = wal.syncs.load(Ordering::Relaxed);
        let all = std::sync::Barrier::new(8);
        std::thread::scope(|s| {
            for _ in 0..8 {
                s.spawn(|| {
                    all.wait();
                    wal.wait_for_overdue_sync().unwrap();
                });
            }
        });
        let led = wal.syncs.load(Ordering::Relaxed) - syncs;
        assert!((1..=2).contains(&led), "{led} syncs for 8 waiting writers");
        assert!(wal.synced_lsn.load(Ordering::Acquire) >= lsn);
        assert!(wal.last_sync_began.load(Ordering::Relaxed) > last);
        assert!(!wal.is_overdue(), "{:?}", wal.unsynced_for());
        assert!(wal.take_sync_window().unwrap() > SYNC_OVERDUE);
    }

    #[test]
    fn a_writer_waiting_for_an_overdue_sync_fails_on_a_poisoned_log() {
        let (_dir, _fs, wal) = fresh_wal(FsyncPolicy::EverySec, 1 << 20);
        // A poisoned log's syncs fail: overdue once the last that
        // succeeded began SYNC_OVERDUE ago, and a writer waiting for a
        // sync gets the poisoning at once rather than wait.
        wal.poison_for_test();
        eventually_within("overdue", Duration::from_secs(5), || wal.is_overdue());
        assert!(wal.unsynced_for().unwrap() > SYNC_OVERDUE);
        let start = Instant::now();
        let e = wal.wait_for_overdue_sync().unwrap_err();
        assert!(matches!(e.kind(), ErrorKind::Poisoned(_)), "{e}");
        assert!(start.elapsed() < Duration::from_millis(500));
        // Other policies have no such deadline.
        for policy in [FsyncPolicy::Always, FsyncPolicy::No] {
            let (_dir, _fs, other) = fresh_wal(policy, 1 << 20);
            assert!(!other.refresh_overdue(), "{policy:?}");
        }
    }

    /// `f()` on a thread of its own: its result, or a panic naming `what`
    /// if it has not returned within 10 s (it waits for ever).
    fn within_10s<T: Send + 'static>(what: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let _ = tx.send(f());
        });
        rx.recv_timeout(Duration::from_secs(10))
            .unwrap_or_else(|_| panic!("{what}: still waiting after 10 s"))
    }

    /// A new log under `EverySec` on a [`TestFs`], and the switch that
    /// makes its syncs panic.
    fn panicking_wal() -> (tempfile::TempDir, Arc<AtomicBool>, Arc<Wal>) {
        let dir = tempfile::tempdir().unwrap();
        let fs = TestFs::default();
        let panic = fs.panic.clone();
        let wal = Wal::open(
            Arc::new(fs),
            dir.path().to_path_buf(),
            FsyncPolicy::EverySec,
            1 << 20,
            1,
            vec![],
            None,
        )
        .unwrap();
        (dir, panic, wal)
    }

    #[test]
    fn a_sync_that_panics_poisons_the_log_rather_than_hold_up_every_later_one() {
        // A panic in a sync (a bug) left its `in_progress` flag set, and an
        // overdue sync's leader its flag: every later sync, and every
        // writer waiting for an overdue one, waited for ever.
        let (_dir, panic, wal) = panicking_wal();
        // No syncer from here on (nor page helper).
        stop_helper(&wal);
        let h = [ItemHash { lo: 1, hi: 2 }];
        wal.append_hashes(2, 1, &h, false).unwrap();
        // A sync overdue: this writer leads it, and it panics.
        std::thread::sleep(SYNC_OVERDUE + Duration::from_millis(100));
        assert!(wal.refresh_overdue());
        panic.store(true, Ordering::SeqCst);
        let overdue =
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| wal.wait_for_overdue_sync()));
        assert!(overdue.is_err(), "the sync did not panic");
        panic.store(false, Ordering::SeqCst);
        assert!(!wal.overdue_leader.load(Ordering::Acquire));
        assert!(!lock(&wal.sync).in_progress);
        // The next sync, and the next writer to find one overdue, get the
        // poisoning at once.
        assert!(wal.is_poisoned());
        let w = wal.clone();
        let e = within_10s("a sync after one that panicked", move || w.sync_all()).unwrap_err();
        assert!(matches!(e.kind(), ErrorKind::Poisoned(_)), "{e}");
        assert!(e.to_string().contains("panicked"), "{e}");
        let w = wal.clone();
        let e = within_10s("a writer waiting for an overdue sync", move || {
            w.wait_for_overdue_sync()
        })
        .unwrap_err();
        assert!(matches!(e.kind(), ErrorKind::Poisoned(_)), "{e}");
        assert!(wal.append_hashes(2, 1, &h, false).is_err());
        // A checkpoint's reset makes the log usable again, and its syncs
        // work.
        wal.reset_after_checkpoint(wal.poison_epoch().unwrap())
            .unwrap();
        let lsn = wal.append_hashes(2, 1, &h, false).unwrap();
        let w = wal.clone();
        within_10s("a sync after the reset", move || w.sync_all()).unwrap();
        assert!(wal.synced_lsn.load(Ordering::Acquire) >= lsn);
    }

    #[test]
    fn a_ring_copy_that_panics_holds_up_no_writer_waiting_for_an_overdue_sync() {
        // The panic of session 23: in the ring copy that a sync makes
        // first. It poisons nothing (no sync began), but its leader's flag
        // stayed set and every other writer waited for it for ever.
        let (_dir, wal) = staging_wal_under(FsyncPolicy::EverySec, 1 << 20);
        stop_helper(&wal);
        let h = [ItemHash { lo: 1, hi: 2 }];
        assert!(wal.stage(1, &h).unwrap(), "no ring to stage in");
        std::thread::sleep(SYNC_OVERDUE + Duration::from_millis(100));
        assert!(wal.refresh_overdue());
        assert_eq!(
            wal.staged(),
            1,
            "copied before the test could make copies panic"
        );
        wal.copies_panic.store(true, Ordering::SeqCst);
        let led =
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| wal.wait_for_overdue_sync()));
        assert!(led.is_err(), "the copy did not panic");
        assert!(!wal.overdue_leader.load(Ordering::Acquire));
        assert!(!wal.is_poisoned());
        // Once copies work, the next writer to come leads a sync that
        // covers the staged add.
        wal.copies_panic.store(false, Ordering::SeqCst);
        let w = wal.clone();
        within_10s("a writer waiting for an overdue sync", move || {
            w.wait_for_overdue_sync()
        })
        .unwrap();
        assert_eq!(wal.staged(), 0);
        assert!(!wal.is_overdue());
    }

    #[test]
    fn a_checkpoints_sync_under_everysec_covers_the_adds_staged_before_it() {
        // Every sync under `EverySec` writes a sync mark; the checkpoint's
        // (for a counting filter's snapshot) copied no ring, so an add
        // staged before it was still out of the log after it.
        let (dir, wal) = staging_wal_under(FsyncPolicy::EverySec, 1 << 20);
        stop_helper(&wal);
        let lsn = wal
            .append_hashes(2, 1, &[ItemHash { lo: 1, hi: 2 }], false)
            .unwrap();
        assert!(
            wal.stage(1, &[ItemHash { lo: 5, hi: 2 }]).unwrap(),
            "staged"
        );
        assert_eq!(wal.staged(), 1);
        let syncs = wal.syncs.load(Ordering::Relaxed);
        wal.sync_through(lsn).unwrap();
        assert_eq!(wal.syncs.load(Ordering::Relaxed), syncs + 1, "no sync");
        assert_eq!(wal.staged(), 0, "the staged add is not in the log");
        assert!(wal.synced_past(lsn));
        let mut hashes: Vec<u64> = hash_records(&RealFs, &dir.path().join("wal"))
            .iter()
            .flat_map(|(_, _, _, hashes)| hashes.iter().map(|h| h.lo))
            .collect();
        hashes.sort_unstable();
        assert_eq!(hashes, vec![1, 5]);
    }

    #[test]
    fn a_sync_that_waits_for_another_covers_the_adds_staged_while_it_waited() {
        // Its copy of the rings came before its wait (until 2026-11-28):
        // an add staged while it waited for the sync running was left out
        // of it, though its mark came after the other sync's. The
        // power-loss test lost such adds now and then under load.
        let (_dir, wal) = staging_wal_under(FsyncPolicy::EverySec, 1 << 20);
        stop_helper(&wal);
        // Another sync is running.
        {
            let mut s = lock(&wal.sync);
            s.in_progress = true;
            wal.sync_running.store(true, Ordering::Release);
        }
        let w = wal.clone();
        let waiting = std::thread::spawn(move || w.sync_all());
        std::thread::sleep(Duration::from_millis(200));
        assert!(!waiting.is_finished(), "did not wait for the sync running");
        assert!(
            wal.stage(1, &[ItemHash { lo: 5, hi: 2 }]).unwrap(),
            "staged"
        );
        {
            let mut s = lock(&wal.sync);
            s.in_progress = false;
            wal.sync_running.store(false, Ordering::Release);
        }
        wal.synced_cv.notify_all();
        waiting.join().unwrap().unwrap();
        assert_eq!(
            wal.staged(),
            0,
            "the add staged during the wait is not in the sync"
        );
    }

    #[test]
    fn the_page_helper_goes_on_after_a_ring_copy_of_its_panics() {
        // Under `no` only the page helper copies an idle thread's ring;
        // a panic in its copy ended its thread, and the ring's adds stayed
        // out of the log until a checkpoint or close.
        let (_dir, wal) = staging_wal(1 << 20);
        wal.copies_panic.store(true, Ordering::SeqCst);
        let h = [ItemHash { lo: 1, hi: 2 }];
        assert!(wal.stage(1, &h).unwrap(), "no ring to stage in");
        // A few of the helper's wakes (every 100 ms), each copy panicking.
        std::thread::sleep(Duration::from_millis(350));
        assert_eq!(wal.staged(), 1);
        wal.copies_panic.store(false, Ordering::SeqCst);
        eventually_within("the helper's next copy", Duration::from_secs(5), || {
            wal.staged() == 0
        });
    }

    #[test]
    fn the_syncer_goes_on_after_a_sync_of_its_panics() {
        // A panic in the background sync (a bug) ended its thread: after
        // the checkpoint that makes the poisoned log usable again, no
        // sync came unless a writer found one overdue.
        let (_dir, panic, wal) = panicking_wal();
        let h = [ItemHash { lo: 1, hi: 2 }];
        wal.append_hashes(2, 1, &h, false).unwrap();
        panic.store(true, Ordering::SeqCst);
        eventually_within("the syncer's sync panics", Duration::from_secs(5), || {
            wal.is_poisoned()
        });
        panic.store(false, Ordering::SeqCst);
        wal.reset_after_checkpoint(wal.poison_epoch().unwrap())
            .unwrap();
        let syncs = wal.syncs.load(Ordering::Relaxed);
        let lsn = wal.append_hashes(2, 1, &h, false).unwrap();
        eventually_within("the syncer's next sync", Duration::from_secs(5), || {
            wal.synced_lsn.load(Ordering::Acquire) >= lsn
        });
        assert!(wal.syncs.load(Ordering::Relaxed) > syncs);
        assert!(!wal.is_poisoned());
    }

    #[test]
    fn a_writer_waits_for_a_busy_lane_rather_than_make_a_segment() {
        let (dir, _fs, wal) = fresh_wal(FsyncPolicy::No, 1 << 16);
        stop_helper(&wal);
        // Lane 0, the only one with a segment, is held for a moment;
        // the others have no segment and no spare.
        HOME_LANE.with(|h| h.set(2));
        let held = std::sync::mpsc::channel();
        let holder = {
            let wal = wal.clone();
            std::thread::spawn(move || {
                let _st = lock(&wal.lanes[0].state);
                held.0.send(()).unwrap();
                std::thread::sleep(Duration::from_millis(100));
            })
        };
        held.1.recv().unwrap();
        let h = [ItemHash { lo: 3, hi: 4 }];
        wal.append_hashes(2, 1, &h, true).unwrap();
        holder.join().unwrap();
        // It went to lane 0, once free: no lane made a segment.
        let lanes: Vec<usize> = segments_of(dir.path()).iter().map(|s| s.lane).collect();
        assert_eq!(lanes, [0]);
        assert!(lock(&wal.lanes[2].state).wanted);
    }

    #[test]
    fn a_writer_passes_by_a_lane_that_would_have_to_make_a_segment() {
        let (dir, fs, wal) = fresh_wal(FsyncPolicy::No, 64 << 10);
        let lanes = || -> Vec<usize> {
            let mut l: Vec<usize> = segments_of(dir.path()).iter().map(|s| s.lane).collect();
            l.sort();
            l
        };
        assert_eq!(lanes(), [0]);
        // This thread's own lane is lane 2, which has no segment yet: the
        // record goes to lane 0, which has room, and lane 2 gets a spare
        // from the page helper rather than a segment made on this path.
        HOME_LANE.with(|h| h.set(2));
        let h = |i: u64| [ItemHash { lo: i, hi: 5 }];
        wal.append_hashes(2, 1, &h(0), true).unwrap();
        assert_eq!(lanes(), [0]);
        assert!(lock(&wal.lanes[2].state).wanted);
        assert!(lock(&wal.lanes[2].state).cur.is_none());
        eventually("a spare for lane 2", || {
            lock(&wal.lanes[2].state).spare.is_some()
        });
        // No helper holding lane 2 for a moment from here on (the writer
        // would go elsewhere, and make that lane its own).
        stop_helper(&wal);
        // Now lane 2 takes the next record, renaming its spare.
        wal.append_hashes(2, 1, &h(1), true).unwrap();
        assert_eq!(lanes(), [0, 2]);
        // A lane whose segment is full and that has no spare is passed by
        // too, while another can take the record at once.
        let in_lane = |lane: usize| lanes().iter().filter(|&&l| l == lane).count();
        let mut n = 2;
        {
            let mut st = lock(&wal.lanes[2].state);
            let cur = st.cur.as_mut().unwrap();
            cur.offset = cur.map.len() - 8;
            st.spare = None;
        }
        wal.append_hashes(2, 1, &h(n), true).unwrap();
        n += 1;
        assert_eq!(in_lane(2), 1);
        // With no lane able to take it at once, the own lane rolls. (The
        // helper stops first, so that it makes no spare meanwhile.)
        stop_helper(&wal);
        for lane in &wal.lanes {
            let mut st = lock(&lane.state);
            st.spare = None;
            if let Some(cur) = st.cur.as_mut() {
                cur.offset = cur.map.len() - 8;
            }
        }
        wal.append_hashes(2, 1, &h(n), true).unwrap();
        n += 1;
        assert_eq!(in_lane(2), 2);
        // Every record reads back.
        let seen = hash_records(&*fs, dir.path());
        assert_eq!(seen.len() as u64, n);
    }

    #[test]
    fn a_roll_renames_the_spare_the_helper_made_and_the_next_sync_syncs_the_name() {
        // `Always`: one lane, and no background sync to clear `dir_dirty`.
        let (dir, fs, wal) = fresh_wal(FsyncPolicy::Always, 64 << 10);
        let spares = || -> Vec<PathBuf> {
            std::fs::read_dir(dir.path())
                .unwrap()
                .map(|e| e.unwrap().path())
                .filter(|p| is_spare_name(p.file_name().unwrap().to_str().unwrap()))
                .collect()
        };
        let h = |i: u64| [ItemHash { lo: i, hi: 3 }];
        let mut n = 0;
        // Past an eighth of a segment: the helper then makes the lane's
        // spare.
        while n * 48 < 40 << 10 {
            wal.append_hashes(2, 1 << 40, &h(n), false).unwrap();
            n += 1;
        }
        eventually("a spare", || lock(&wal.lanes[0].state).spare.is_some());
        let spare = lock(&wal.lanes[0].state)
            .spare
            .as_ref()
            .unwrap()
            .path
            .clone();
        assert_eq!(spares(), std::slice::from_ref(&spare));
        wal.sync_all().unwrap();
        assert!(!wal.dir_dirty.load(Ordering::Acquire));
        // Just past the segment's end: the roll takes the spare.
        while n * 48 < 66 << 10 {
            wal.append_hashes(2, 1 << 40, &h(n), false).unwrap();
            n += 1;
        }
        assert_eq!(segments_of(dir.path()).len(), 2);
        assert!(!spare.exists(), "renamed");
        assert!(wal.dir_dirty.load(Ordering::Acquire), "a rename to sync");
        wal.sync_all().unwrap();
        assert!(!wal.dir_dirty.load(Ordering::Acquire));
        // The lane rolled a full segment: it is busy, and gets its next
        // spare at once, with its new segment hardly used.
        assert!(lock(&wal.lanes[0].state).busy);
        eventually("a spare for the busy lane", || {
            wal.pages.get().unwrap().unpark();
            lock(&wal.lanes[0].state).spare.is_some()
        });
        let st = lock(&wal.lanes[0].state);
        let cur = st.cur.as_ref().unwrap();
        assert!(!cur.eighth_used(), "{}", cur.offset);
        drop(st);
        // Every record reads back, in order, across the renamed spare.
        let seen = hash_records(&*fs, dir.path());
        assert_eq!(seen.len() as u64, n);
        assert!(seen.iter().enumerate().all(|(i, r)| r.3 == h(i as u64)));
        // A log dropped removes its spares; one a killed process left is
        // removed at open.
        let spare = wal.make_spare(0).unwrap();
        wal.install_spare(0, spare);
        assert_eq!(spares().len(), 1);
        drop(wal);
        // (The helper holds the log for a moment at most.)
        for _ in 0..100 {
            if spares().is_empty() {
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        assert_eq!(spares(), Vec::<PathBuf>::new());
        let left = dir.path().join("spare.02.1-1.tmp");
        std::fs::write(&left, b"left").unwrap();
        let _wal = Wal::open(
            fs.clone(),
            dir.path().to_path_buf(),
            FsyncPolicy::No,
            64 << 10,
            n + 1,
            segments_of(dir.path()),
            None,
        )
        .unwrap();
        assert!(!left.exists());
    }

    #[test]
    fn only_a_lanes_oldest_segments_are_retired() {
        let dir = tempfile::tempdir().unwrap();
        let fs: Arc<dyn Fs> = Arc::new(RealFs);
        // Lane 2 as a reopen may find it: segment 4 holds records up to
        // 120 and is followed by segment 5, named 500 (an lsn handed out
        // and never written) and empty, so read as ending at 120 too.
        let seg = |first: u64, seq: u64| {
            let path = dir.path().join(segment_name(first, 2, seq));
            std::fs::write(&path, b"").unwrap();
            SegmentFile {
                lane: 2,
                seq: Some(seq),
                first_lsn: first,
                path,
                last_lsn: Some(120),
            }
        };
        let segments = vec![seg(10, 4), seg(500, 5)];
        let wal = Wal::open(
            fs,
            dir.path().to_path_buf(),
            FsyncPolicy::No,
            1 << 16,
            121,
            segments,
            None,
        )
        .unwrap();
        // Segment 4 ends below 500, above 200: it stays, and so must 5.
        assert!(wal.retire_upto(200).is_empty());
        assert_eq!(wal.retire_upto(600).len(), 2);
    }

    /// Appends `n` single-hash adds to lane 0 of a fresh log, closes it,
    /// and returns the directory and its segments.
    fn lane0_log(n: u64) -> (tempfile::TempDir, Arc<dyn Fs>) {
        let (dir, fs, wal) = fresh_wal(FsyncPolicy::No, 1 << 16);
        for i in 0..n {
            wal.append_hashes(2, 1, &[ItemHash { lo: i, hi: i }], false)
                .unwrap();
        }
        wal.sync_appended().unwrap();
        (dir, fs)
    }

    /// A name whose first lsn or number no log reaches (made by hand) is
    /// no segment's: `seq + 1` on it overflowed, a panic in a checked
    /// build (found by review, session 25).
    #[test]
    fn segment_names_with_numbers_past_the_log_s_are_no_segments() {
        let dir = Path::new("/x");
        let max = u64::MAX;
        for name in [
            format!("{max:020}.00.0000000001.log"),
            format!("00000000000000000001.00.{max}.log"),
            format!("00000000000000000001.00.{}.log", MAX_LSN),
        ] {
            assert!(parse_segment_name(&dir.join(&name)).is_none(), "{name}");
        }
        let fine = format!("00000000000000000001.00.{}.log", MAX_LSN - 1);
        assert!(parse_segment_name(&dir.join(fine)).is_some());
    }

    #[test]
    fn a_segment_named_before_lanes_is_read_as_lane_0() {
        let (dir, fs) = lane0_log(3);
        std::fs::rename(
            dir.path().join(segment_name(1, 0, 0)),
            dir.path().join(format!("{:020}.log", 1)),
        )
        .unwrap();
        let mut segments = segments_of(dir.path());
        assert_eq!(segments.len(), 1);
        assert_eq!((segments[0].lane, segments[0].seq), (0, None));
        let mut lsns = Vec::new();
        let last = read_all(&*fs, &mut segments, &Salvage::default(), |f| {
            lsns.push(f.lsn);
            Ok(())
        })
        .unwrap();
        assert_eq!((lsns, last), (vec![1, 2, 3], 3));
        assert_eq!(segments[0].last_lsn, Some(3));
    }

    #[test]
    fn a_segment_missing_from_a_lane_stops_the_read_unless_salvaging() {
        let (dir, fs) = lane0_log(2);
        // The lane's segment 1 is gone; segment 2 holds lsn 9.
        let later = dir.path().join(segment_name(9, 0, 2));
        let mut bytes = vec![0u8; 1 << 12];
        encode_hashes(
            &mut bytes[..hashes_record_len(2, 1, 1)],
            2,
            1,
            9,
            &[ItemHash { lo: 9, hi: 9 }],
        );
        std::fs::write(&later, &bytes).unwrap();
        let mut segments = segments_of(dir.path());
        let e = read_all(&*fs, &mut segments, &Salvage::default(), |_| Ok(())).unwrap_err();
        assert!(
            matches!(e.kind(), ErrorKind::Corrupt { path, .. } if *path == later),
            "{e}"
        );
        assert!(e.to_string().contains("missing"), "{e}");
        let mut lsns = Vec::new();
        let salvage = Salvage::new(true);
        read_all(&*fs, &mut segments_of(dir.path()), &salvage, |f| {
            lsns.push(f.lsn);
            Ok(())
        })
        .unwrap();
        // Salvaging reads on past the gap, and counts it.
        assert_eq!(lsns, vec![1, 2, 9]);
        assert_eq!(salvage.skipped(), 1);
    }

    #[test]
    fn lanes_are_merged_in_lsn_order_and_an_lsn_in_two_lanes_is_corruption() {
        let (dir, fs) = lane0_log(0);
        let write = |lane: usize, lsns: &[u64]| {
            let mut bytes = vec![0u8; 1 << 12];
            let size = hashes_record_len(2, 1, 1);
            for (k, &lsn) in lsns.iter().enumerate() {
                let at = k * size;
                let h = ItemHash {
                    lo: lsn,
                    hi: lane as u64,
                };
                encode_hashes(&mut bytes[at..at + size], 2, 1, lsn, &[h]);
            }
            let path = dir.path().join(segment_name(lsns[0], lane, 0));
            std::fs::write(&path, &bytes).unwrap();
            path
        };
        write(1, &[2, 3, 7]);
        write(2, &[4, 9]);
        let third = write(3, &[5, 6]);
        let mut order = Vec::new();
        let last = read_all(
            &*fs,
            &mut segments_of(dir.path()),
            &Salvage::default(),
            |f| {
                let Rec::Hashes { hashes, .. } = f.record else {
                    panic!("not an add");
                };
                let h = hashes.to_vec()[0];
                assert_eq!(h.lo, f.lsn);
                order.push((f.lsn, h.hi));
                Ok(())
            },
        )
        .unwrap();
        assert_eq!(last, 9);
        assert_eq!(
            order,
            vec![(2, 1), (3, 1), (4, 2), (5, 3), (6, 3), (7, 1), (9, 2)]
        );
        std::fs::remove_file(third).unwrap();
        write(3, &[3]);
        let e = read_all(
            &*fs,
            &mut segments_of(dir.path()),
            &Salvage::default(),
            |_| Ok(()),
        )
        .unwrap_err();
        assert!(e.to_string().contains("lsn 3 is in another lane"), "{e}");
    }

    proptest::proptest! {
        #[test]
        fn a_prepared_record_has_the_bytes_of_record_encode_for_the_lsn_it_gets(
            id: u64,
            short_id: bool,
            lo: u64,
            hi: u64,
            add: bool,
            predicted in 0u64..u64::MAX,
            got in 0u64..u64::MAX,
        ) {
            // Ids that take the short form of an add, and others.
            let id = if short_id { id % u64::from(SHORT_FLAG) } else { id };
            let h = ItemHash { lo, hi };
            let kind = if add { 2 } else { 3 };
            let mut bytes = [0u8; ONE_RECORD];
            let len = hashes_record_len(kind, id, 1);
            encode_hashes(&mut bytes[..len], kind, id, predicted, &[h]);
            let mut rec = Prepared { bytes, len, lsn: predicted };
            rec.set_lsn(got);
            let hashes = vec![h];
            let want = if add {
                Record::Add { id, hashes }
            } else {
                Record::Remove { id, hashes }
            }
            .encode(got);
            proptest::prop_assert_eq!(&rec.bytes[..rec.len], &want[..]);
        }
    }

    /// A log under `EverySec` in segments of 4 KiB (127 records of one
    /// hash each, then the segment's end), all in lane 0 (whose lsns then
    /// follow each other): lsns 1 to 400, the mark written after the
    /// fourth, and the segments in their order.
    fn log_past_the_mark() -> (tempfile::TempDir, Vec<SegmentFile>) {
        let (dir, _fs, wal) = fresh_wal(FsyncPolicy::EverySec, 1 << 12);
        stop_helper(&wal);
        HOME_LANE.with(|h| h.set(0));
        let hashes: Vec<ItemHash> = (1..=400).map(|i| ItemHash { lo: i, hi: i }).collect();
        for h in &hashes[..4] {
            wal.append_hashes(2, 5, &[*h], true).unwrap();
        }
        wal.sync_all().unwrap();
        for h in &hashes[4..] {
            wal.append_hashes(2, 5, &[*h], true).unwrap();
        }
        drop(wal);
        let mut segs = segments_of(dir.path());
        segs.sort();
        assert!(segs.len() >= 3, "{segs:?}");
        (dir, segs)
    }

    #[test]
    fn past_the_sync_mark_a_hole_ends_the_lane_on_another_boot() {
        // The records run over several segments, all past the mark but
        // the first few.
        let (dir, segs) = log_past_the_mark();
        // A power loss kept the second segment's later sectors but not its
        // second one.
        let mut data = std::fs::read(&segs[1].path).unwrap();
        data[SECTOR..2 * SECTOR].fill(0);
        std::fs::write(&segs[1].path, &data).unwrap();
        let other = hash_records(&TestFs::other_boot(), dir.path());
        let lsns: Vec<u64> = other.iter().map(|r| r.0).collect();
        // A prefix of the lane: every record up to the hole, none after.
        let n = lsns.len();
        assert!((4..400).contains(&n), "{n}");
        assert_eq!(lsns, (1..=n as u64).collect::<Vec<_>>());
        // The rest was zeroed: the same boot now reads the same prefix.
        let again = lsns_of(&RealFs, dir.path());
        assert_eq!(again, lsns);
    }

    #[test]
    fn past_the_sync_mark_a_lane_ends_where_a_segment_ends_before_a_later_one() {
        // Records of one hash in a segment of 4 KiB, before its end.
        const PER: usize = ((1 << 12) - SEGMENT_END) / SHORT_RECORD;
        let (dir, segs) = log_past_the_mark();
        assert!(segs.iter().all(|s| s.lane == 0), "{segs:?}");
        // Every record, through the segments' ends, as it was written.
        let all = lsns_of(&TestFs::other_boot(), dir.path());
        assert_eq!(all, (1..=400).collect::<Vec<_>>());
        // A power loss took the second segment's last 27 records and its
        // end record, whose sectors never reached the disk, and kept the
        // third's: read as they are, the second would look like a
        // segment whose records end where the lane stood, and the lane
        // would go on after a gap.
        let mut data = std::fs::read(&segs[1].path).unwrap();
        assert_eq!(parse(&data[PER * SHORT_RECORD..]), Parsed::SegmentEnd(1));
        data[100 * SHORT_RECORD..].fill(0);
        std::fs::write(&segs[1].path, &data).unwrap();
        let lsns = lsns_of(&TestFs::other_boot(), dir.path());
        // A prefix of the lane, up to the cut.
        assert_eq!(lsns, (1..=(PER + 100) as u64).collect::<Vec<_>>());
        // The later segments were zeroed: the same boot reads the same.
        let again = lsns_of(&RealFs, dir.path());
        assert_eq!(again, lsns);
    }

    /// A kill during a roll, once the next segment is in place, can leave
    /// the old segment's end record torn (its fields stored one by one,
    /// the CRC last), and nothing written in the next: a torn tail, which
    /// the open truncates, not damage that stops it (found by review,
    /// session 25). With a record in the next segment it is damage.
    #[test]
    fn a_segment_end_record_torn_by_a_kill_during_a_roll_is_a_torn_tail() {
        let end_at = 10 * SHORT_RECORD;
        // The end record's fields as a kill leaves them: its length alone,
        // everything but the CRC, the CRC alone (the compiler may order
        // the stores otherwise); and everything but the CRC with a record
        // in the next segment.
        for (stored, later_record) in [
            (4, false),
            (SEGMENT_END, false),
            (8, false),
            (SEGMENT_END, true),
        ] {
            // Under `No`: no sync, and no sync mark, follows the roll, as
            // none can after a kill in the middle of it (a mark written
            // after the roll would say the end record was whole).
            let (dir, fs, wal) = fresh_wal(FsyncPolicy::No, 1 << 16);
            for i in 1..=10 {
                wal.append_hashes(2, 1, &[ItemHash { lo: i, hi: i }], false)
                    .unwrap();
            }
            wal.start_new_segment().unwrap();
            if later_record {
                wal.append_hashes(2, 1, &[ItemHash { lo: 11, hi: 11 }], false)
                    .unwrap();
            }
            drop(wal);
            let old = dir.path().join(segment_name(1, 0, 0));
            let mut data = std::fs::read(&old).unwrap();
            assert!(matches!(parse(&data[end_at..]), Parsed::SegmentEnd(0)));
            if stored == 8 {
                data[end_at..end_at + 4].fill(0);
                data[end_at + 8..end_at + SEGMENT_END].fill(0);
            } else {
                data[end_at + 4..end_at + 8].fill(0);
                data[end_at + stored.max(8)..end_at + SEGMENT_END].fill(0);
            }
            std::fs::write(&old, &data).unwrap();
            let read = read_lsns(&*fs, dir.path(), false);
            if later_record {
                let e = read.unwrap_err();
                assert!(is_damage_at(&e, &old, end_at), "{e}");
                continue;
            }
            assert_eq!(
                read.unwrap(),
                (1..=10).collect::<Vec<_>>(),
                "{stored} bytes"
            );
            // Truncated: the next read finds zeros there.
            let data = std::fs::read(&old).unwrap();
            assert!(data[end_at..].iter().all(|&b| b == 0), "{stored} bytes");
            assert_eq!(read_lsns(&*fs, dir.path(), false).unwrap().len(), 10);
        }
    }

    /// A damaged last record of a segment that an open moved past (each
    /// open starts a new segment, and writes nothing in it if the run adds
    /// nothing) is damage, not a segment-end record torn by a kill: the
    /// open stops (the rule for the latter must not take it; found by
    /// review, session 25).
    #[test]
    fn a_damaged_last_record_before_an_empty_segment_is_no_torn_roll() {
        let (dir, fs) = lane0_log(10);
        // The segment the next open made, and a flipped bit in the last
        // record (its CRC now wrong).
        std::fs::write(dir.path().join(segment_name(11, 0, 1)), vec![0u8; 1 << 16]).unwrap();
        let seg = dir.path().join(segment_name(1, 0, 0));
        let mut data = std::fs::read(&seg).unwrap();
        let last = 9 * SHORT_RECORD;
        data[last + 20] ^= 1;
        std::fs::write(&seg, &data).unwrap();
        let e = read_lsns(&*fs, dir.path(), false).unwrap_err();
        assert!(is_damage_at(&e, &seg, last), "{e}");
    }

    /// Nothing is written after a segment's end record, so a written byte
    /// there is damage, on this boot and another, and not ignored.
    #[test]
    fn written_bytes_after_a_segment_end_record_are_damage() {
        let (dir, fs, wal) = fresh_wal(FsyncPolicy::Always, 1 << 12);
        for i in 1..=10 {
            wal.append_hashes(2, 1, &[ItemHash { lo: i, hi: i }], false)
                .unwrap();
        }
        // Too long for the rest of the segment: the roll ends it early.
        let many: Vec<ItemHash> = (0..250).map(|i| ItemHash { lo: i, hi: i }).collect();
        wal.append_hashes(2, 1, &many, false).unwrap();
        wal.sync_appended().unwrap();
        drop(wal);
        let end_at = 10 * SHORT_RECORD;
        let seg = dir.path().join(segment_name(1, 0, 0));
        let mut data = std::fs::read(&seg).unwrap();
        assert!(matches!(parse(&data[end_at..]), Parsed::SegmentEnd(0)));
        let written = end_at + SEGMENT_END + 7;
        data[written] = 0x5a;
        std::fs::write(&seg, &data).unwrap();
        for fs in [&TestFs::other_boot() as &dyn Fs, &*fs] {
            let e = read_lsns(fs, dir.path(), false).unwrap_err();
            assert!(is_damage_at(&e, &seg, end_at), "{e}");
            let what = format!("written bytes at offset {written} after the record that ends");
            assert!(e.to_string().contains(&what), "{e}");
        }
        // No record was there: salvage reads the whole lane.
        let lsns = read_lsns(&*fs, dir.path(), true).unwrap();
        assert_eq!(lsns, (1..=11).collect::<Vec<_>>());
    }

    #[test]
    fn past_the_sync_mark_the_lane_goes_on_through_the_segments_rolls_ended() {
        // Under `Always` the mark is written at most once a second, so
        // acknowledged records can be in segments after the one it lists;
        // under `EverySec` a killed process, or a store dropped unsynced,
        // leaves such records too, and a reboot before the next open finds
        // them past the mark. Each segment a roll left ends with its end
        // record: on another boot the lane goes on through them all.
        for policy in [FsyncPolicy::Always, FsyncPolicy::EverySec] {
            let (dir, _fs, wal) = fresh_wal(policy, 1 << 12);
            stop_helper(&wal);
            // No mark falls due by the clock.
            wal.mark_written.store(u64::MAX, Ordering::Relaxed);
            for i in 1..=300 {
                let lsn = wal
                    .append_hashes(2, 5, &[ItemHash { lo: i, hi: i }], false)
                    .unwrap();
                wal.commit(lsn).unwrap();
            }
            let lane0 = segments_of(dir.path())
                .iter()
                .filter(|s| s.lane == 0)
                .count();
            assert!(lane0 >= 3, "{policy:?}: {lane0} segments");
            let mark = SyncMark::read(&TestFs::other_boot(), dir.path()).unwrap();
            assert_eq!(mark.entry(0), Some((0, 0)), "{policy:?}: the open's mark");
            drop(wal);
            let lsns = lsns_of(&TestFs::other_boot(), dir.path());
            assert_eq!(lsns, (1..=300).collect::<Vec<_>>(), "{policy:?}");
        }
    }

    #[test]
    fn under_always_the_first_sync_after_a_poisoned_log_is_reset_writes_the_mark() {
        // The reset after a failed sync rolls lane 0, writing the end
        // record of a segment that no later sync covers (the reset gives
        // up the lanes' lists of files to sync). Records acknowledged after
        // it, within a second of the last mark, would then be past the mark
        // behind a segment with no end record: after a power loss that
        // took that record, the lane would end before them.
        let (dir, _fs, wal) = fresh_wal(FsyncPolicy::Always, 1 << 12);
        stop_helper(&wal);
        // No mark falls due by the clock.
        wal.mark_written.store(u64::MAX, Ordering::Relaxed);
        let add = |i: u64| {
            let lsn = wal
                .append_hashes(2, 5, &[ItemHash { lo: i, hi: i }], false)
                .unwrap();
            wal.commit(lsn).unwrap();
            lsn
        };
        for i in 1..=10 {
            add(i);
        }
        // A checkpoint's roll, then the failed sync, then the reset.
        wal.start_new_segment().unwrap();
        wal.poison_for_test();
        let epoch = wal.poison_epoch().unwrap();
        wal.reset_after_checkpoint(epoch).unwrap();
        let acked: Vec<u64> = (11..=20).map(add).collect();
        drop(wal);
        // The power loss took the end record no sync covered.
        let mut segs = segments_of(dir.path());
        segs.sort();
        let emptied = segs
            .iter()
            .filter(|s| {
                let mut data = std::fs::read(&s.path).unwrap();
                let ended = parse(&data) == Parsed::SegmentEnd(s.seq.unwrap());
                if ended {
                    data[..SEGMENT_END].fill(0);
                    std::fs::write(&s.path, &data).unwrap();
                }
                ended
            })
            .count();
        assert_eq!(emptied, 1, "{segs:?}");
        let lsns = lsns_of(&TestFs::other_boot(), dir.path());
        assert!(
            acked.iter().all(|l| lsns.contains(l)),
            "{lsns:?}, acknowledged {acked:?}"
        );
    }

    #[test]
    fn a_mark_of_a_run_that_wrote_no_segment_ends_keeps_its_lanes_going() {
        // A log written before segments had end records (a data directory
        // of format 5, whose mark is of version 1), its run killed and the
        // machine rebooted before this build opens it: its rolled segments
        // end in zeros, which are no sign of a loss there.
        let (dir, _fs, wal) = fresh_wal(FsyncPolicy::EverySec, 1 << 12);
        stop_helper(&wal);
        for i in 1..=300 {
            wal.append_hashes(2, 5, &[ItemHash { lo: i, hi: i }], false)
                .unwrap();
        }
        drop(wal);
        let mut mark = SyncMark::read(&TestFs::other_boot(), dir.path()).unwrap();
        assert!(mark.ends);
        mark.ends = false;
        std::fs::write(dir.path().join(SYNC_MARK), mark.encode()).unwrap();
        let mut ends = 0;
        for seg in segments_of(dir.path()) {
            let mut data = std::fs::read(&seg.path).unwrap();
            let mut off = 0;
            while let Parsed::Record(_, _, used) = parse(&data[off..]) {
                off += used;
            }
            if let Parsed::SegmentEnd(_) = parse(&data[off..]) {
                data[off..off + SEGMENT_END].fill(0);
                std::fs::write(&seg.path, &data).unwrap();
                ends += 1;
            }
        }
        assert!(ends >= 2, "{ends} segment ends");
        let lsns = lsns_of(&TestFs::other_boot(), dir.path());
        assert_eq!(lsns, (1..=300).collect::<Vec<_>>());
    }

    #[test]
    fn below_the_sync_mark_damage_is_corruption_on_another_boot_too() {
        let (dir, _fs, wal) = fresh_wal(FsyncPolicy::EverySec, 1 << 16);
        stop_helper(&wal);
        let hashes: Vec<ItemHash> = (1..=100).map(|i| ItemHash { lo: i, hi: i }).collect();
        for h in &hashes[..60] {
            wal.append_hashes(2, 5, &[*h], true).unwrap();
        }
        wal.sync_all().unwrap();
        for h in &hashes[60..] {
            wal.append_hashes(2, 5, &[*h], true).unwrap();
        }
        drop(wal);
        let segs = segments_of(dir.path());
        let seg = &segs.iter().find(|s| s.lane == 0).unwrap().path;
        // A flipped byte in the 20th record, which the sync made durable.
        let mut data = std::fs::read(seg).unwrap();
        data[19 * SHORT_RECORD + 12] ^= 1;
        std::fs::write(seg, &data).unwrap();
        let err = read_all(
            &TestFs::other_boot(),
            &mut segments_of(dir.path()),
            &Salvage::default(),
            |_| Ok(()),
        )
        .expect_err("damage below the mark");
        assert!(
            matches!(err.kind(), ErrorKind::Corrupt { offset, .. } if *offset == (19 * SHORT_RECORD) as u64),
            "{err}"
        );
        // Past it, the same damage ends the lane instead.
        let mut data = std::fs::read(seg).unwrap();
        data[19 * SHORT_RECORD + 12] ^= 1;
        data[80 * SHORT_RECORD + 12] ^= 1;
        std::fs::write(seg, &data).unwrap();
        let lsns = lsns_of(&TestFs::other_boot(), dir.path());
        assert_eq!(lsns, (1..=80).collect::<Vec<_>>());
    }

    #[test]
    fn a_sync_mark_reads_back_and_says_what_is_past_it() {
        let mark = SyncMark {
            boot: [7; 16],
            lanes: vec![(0, 3, 4096), (1, 5, 0)],
            ends: true,
        };
        let bytes = mark.encode();
        assert_eq!(SyncMark::decode(&bytes), Some(mark.clone()));
        // Version 1, of runs that wrote no segment ends.
        let old = SyncMark {
            ends: false,
            ..mark.clone()
        };
        assert_eq!(
            u32::from_le_bytes(old.encode()[8..12].try_into().unwrap()),
            1
        );
        assert_eq!(SyncMark::decode(&old.encode()), Some(old));
        for at in [0, 12, 20, 40, 300, SECTOR - 1] {
            let mut bad = bytes;
            bad[at] ^= 1;
            assert_eq!(SyncMark::decode(&bad), None, "byte {at}");
        }
        assert_eq!(SyncMark::decode(&bytes[..SECTOR - 1]), None);
        // Lane 0: synced below offset 4096 of segment 3.
        assert!(!mark.unsynced(0, Some(2), 1 << 20));
        assert!(!mark.unsynced(0, Some(3), 4095));
        assert!(mark.unsynced(0, Some(3), 4096));
        assert!(mark.unsynced(0, Some(4), 0));
        // Lane 1 had no segment: every one from segment 5 on is past it.
        assert!(!mark.unsynced(1, Some(4), 100));
        assert!(mark.unsynced(1, Some(5), 0));
        // A lane it does not list, and a segment named before lanes.
        assert!(!mark.unsynced(2, Some(9), 0));
        assert!(!mark.unsynced(0, None, 1 << 20));
    }

    #[test]
    fn a_sync_mark_is_read_with_whether_this_boot_wrote_it() {
        let dir = tempfile::tempdir().unwrap();
        let write = |boot: [u8; 16]| {
            let mark = SyncMark {
                boot,
                lanes: vec![(0, 0, 0)],
                ends: true,
            };
            std::fs::write(dir.path().join(SYNC_MARK), mark.encode()).unwrap();
        };
        write(RealFs.boot_id());
        assert_eq!(SyncMark::read(&RealFs, dir.path()), None);
        assert!(SyncMark::read_any(&RealFs, dir.path()).is_some_and(|(_, same)| same));
        let mut other = RealFs.boot_id();
        other[3] ^= 1;
        write(other);
        assert!(SyncMark::read(&RealFs, dir.path()).is_some());
        assert!(SyncMark::read_any(&RealFs, dir.path()).is_some_and(|(_, same)| !same));
    }

    /// The resident size of this process's map of `path`, from
    /// /proc/self/smaps.
    fn mapped_kib(path: &Path) -> u64 {
        let smaps = std::fs::read_to_string("/proc/self/smaps").unwrap();
        let name = path.to_str().unwrap();
        let mut total = 0;
        let mut ours = false;
        for line in smaps.lines() {
            let first = line.split_whitespace().next().unwrap_or("");
            if first.contains('-') && first.chars().all(|c| c.is_ascii_hexdigit() || c == '-') {
                // A mapping's header: "start-end perms offset dev inode path".
                ours = line.ends_with(name);
            } else if let (true, Some(kb)) = (ours, line.strip_prefix("Rss:")) {
                total += kb
                    .trim()
                    .trim_end_matches("kB")
                    .trim()
                    .parse::<u64>()
                    .unwrap();
            }
        }
        total
    }

    /// The hashes of the test record `i` of 16 hashes (288 bytes).
    fn record16(i: u64) -> Vec<ItemHash> {
        (0..16).map(|j| ItemHash { lo: i, hi: j }).collect()
    }

    /// Checks that the log holds `n` records of filter 7, lsns 1 to `n`,
    /// record `i` being `record16(i - 1)`.
    fn reads_back_in_order(fs: &dyn Fs, segments: &mut [SegmentFile], n: u64) {
        let mut next = 0;
        read_all(fs, segments, &Salvage::default(), |f| {
            let Rec::Hashes { add, id, hashes } = f.record else {
                panic!("not an add");
            };
            assert_eq!((f.lsn, add, id), (next + 1, true, 7));
            assert_eq!(hashes.to_vec(), record16(next));
            next += 1;
            Ok(())
        })
        .unwrap();
        assert_eq!(next, n);
    }

    #[test]
    fn a_sync_under_everysec_drops_what_it_made_durable_from_the_page_cache() {
        /// Pages of `path` in the page cache (mincore over a fresh map).
        fn cached_pages(path: &Path) -> usize {
            let file = std::fs::File::open(path).unwrap();
            // A read-only map that nothing reads through: mincore only
            // looks at which of its pages are cached.
            let map = memmap2::MmapOptions::new()
                .map_raw_read_only(&file)
                .unwrap();
            let pages = map.len().div_ceil(PAGE);
            let mut v = vec![0u8; pages];
            // SAFETY: `v` has one byte per page of the mapping, which lives
            // until the end of the function.
            let rc = unsafe { libc::mincore(map.as_mut_ptr().cast(), map.len(), v.as_mut_ptr()) };
            assert_eq!(rc, 0);
            v.iter().filter(|&&b| b & 1 != 0).count()
        }
        let (dir, fs, wal) = fresh_wal(FsyncPolicy::EverySec, 4 << 20);
        // About 10 MiB of 288-byte records, one lane: two segments and
        // more. (The once-a-second sync may run meanwhile too.)
        let n = 10 * (1 << 20) / 288;
        for i in 0..n {
            wal.append_hashes(2, 7, &record16(i), false).unwrap();
        }
        let mut segments = segments_of(dir.path());
        segments.sort();
        assert!(segments.len() >= 3);
        wal.sync_all().unwrap();
        // The segments rolled away from are gone from the page cache
        // (where the file system drops pages at all: not tmpfs).
        let probe = dir.path().join("probe");
        std::fs::write(&probe, vec![1u8; 1 << 20]).unwrap();
        let f = std::fs::File::open(&probe).unwrap();
        f.sync_all().unwrap();
        RealFile(f).drop_cached(0, u64::MAX);
        if cached_pages(&probe) == 0 {
            for seg in &segments[..segments.len() - 1] {
                assert_eq!(cached_pages(&seg.path), 0, "{}", seg.path.display());
            }
        } else {
            eprintln!("this file system keeps dropped pages: not checked");
        }
        // Every record reads back, from the disk.
        reads_back_in_order(&*fs, &mut segments, n);
    }

    #[test]
    fn a_sync_under_everysec_unmaps_the_written_pages_before_it_syncs_them() {
        // Left mapped, each dirty page would be write-protected by the
        // sync's writeback, one TLB shootdown per page.
        let (dir, fs, wal) = fresh_wal(FsyncPolicy::EverySec, 32 << 20);
        // No helper to unmap pages behind the writer (nor a background
        // sync); it may have mapped in the first two windows already.
        stop_helper(&wal);
        let path = dir.path().join(segment_name(1, 0, 0));
        // 12 MiB of records with no sync meanwhile: a background sync
        // that was under way when the helper was stopped gets another 12.
        let per = 12 * (1 << 20) / 288;
        let mut n = 0;
        for _ in 0..2 {
            let syncs = wal.syncs.load(Ordering::Relaxed);
            for i in n..n + per {
                wal.append_hashes(2, 7, &record16(i), false).unwrap();
            }
            n += per;
            if wal.syncs.load(Ordering::Relaxed) == syncs {
                break;
            }
        }
        let before = mapped_kib(&path);
        assert!(before >= 11 << 10, "{before} KiB mapped before the sync");
        wal.sync_all().unwrap();
        // What may stay: the append position's page, and what the helper
        // mapped in ahead of it.
        let after = mapped_kib(&path);
        let most = (2 * PAGE_WINDOW + PAGE) as u64 / 1024;
        assert!(after <= most, "{after} KiB still mapped after the sync");
        let mut segments = segments_of(dir.path());
        reads_back_in_order(&*fs, &mut segments, n);
    }

    /// A writer that must make its lane's next segment itself (no spare
    /// ready) does it in the blocking hook; one that renames a spare does
    /// not.
    #[test]
    fn a_segment_made_without_a_spare_is_made_in_the_blocking_hook() {
        let (dir, fs, wal) = fresh_wal(FsyncPolicy::No, 1 << 16);
        // The spares the helper made before it stopped are all there are.
        stop_helper(&wal);
        let calls = Arc::new(AtomicU64::new(0));
        let count = calls.clone();
        assert!(wal.set_blocking_hook(Box::new(move |f| {
            count.fetch_add(1, Ordering::SeqCst);
            f()
        })));
        let spares = wal.lanes[..wal.active]
            .iter()
            .filter(|l| lock(&l.state).spare.is_some())
            .count() as u64;
        let before = segments_of(dir.path()).len() as u64;
        // About 2.3 MiB of 16-hash records: some 30 segments of 64 KiB.
        let n = 8000;
        for i in 0..n {
            wal.append_hashes(2, 7, &record16(i), false).unwrap();
        }
        let made = segments_of(dir.path()).len() as u64 - before;
        assert!(made > spares + 10, "{made} segments, {spares} spares");
        assert_eq!(calls.load(Ordering::SeqCst), made - spares);
        let mut segments = segments_of(dir.path());
        reads_back_in_order(&*fs, &mut segments, n);
    }

    /// A lane idle for [`IDLE_UNMAP`] keeps no page mapped (before, the
    /// window of the append position and the next stayed mapped: up to 4
    /// MiB a lane, counted in the process's memory); once it moves, the
    /// helper maps the windows ahead of it again, and every record reads
    /// back.
    #[test]
    fn the_page_helper_unmaps_an_idle_lane_and_maps_it_again_when_it_moves() {
        let (dir, fs, wal) = fresh_wal(FsyncPolicy::EverySec, 32 << 20);
        wal.idle_unmap_ms
            .store(IDLE_UNMAP.as_millis() as u64, Ordering::Relaxed);
        let path = dir.path().join(segment_name(1, 0, 0));
        // 3 MiB of 16-hash records (288 bytes each): into the second window.
        let n = 3 * (1 << 20) / 288;
        for i in 0..n {
            wal.append_hashes(2, 7, &record16(i), false).unwrap();
        }
        wal.pages.get().unwrap().unpark();
        let start = Instant::now();
        let mut idle = mapped_kib(&path);
        while idle > 0 && start.elapsed() < Duration::from_secs(10) {
            std::thread::sleep(Duration::from_millis(20));
            idle = mapped_kib(&path);
        }
        assert_eq!(idle, 0, "{idle} KiB still mapped with the lane idle");
        // No more unmapping for idleness: what stays mapped after a sync
        // (which unmaps the written pages) is what the helper mapped in
        // ahead of the append position.
        wal.idle_unmap_ms.store(3_600_000, Ordering::Relaxed);
        for i in n..2 * n {
            wal.append_hashes(2, 7, &record16(i), false).unwrap();
        }
        wal.pages.get().unwrap().unpark();
        let start = Instant::now();
        let ahead = loop {
            wal.sync_all().unwrap();
            let now = mapped_kib(&path);
            if now >= 1024 || start.elapsed() > Duration::from_secs(10) {
                break now;
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        assert!(
            ahead >= 1024,
            "{ahead} KiB mapped ahead once the lane moved"
        );
        let mut segments = segments_of(dir.path());
        reads_back_in_order(&*fs, &mut segments, 2 * n);
    }

    #[test]
    fn the_page_helper_unmaps_written_pages_and_loses_no_record() {
        let (dir, fs, wal) = fresh_wal(FsyncPolicy::EverySec, 32 << 20);
        let path = dir.path().join(segment_name(1, 0, 0));
        // 16-hash records of 288 bytes: about 24 MiB in all, in two halves
        // with a pause between them for the helper.
        let n = 24 * (1 << 20) / 288;
        for i in 0..n {
            wal.append_hashes(2, 7, &record16(i), false).unwrap();
            if i == n / 2 {
                std::thread::sleep(Duration::from_millis(300));
            }
        }
        // The helper runs when the append position enters another window,
        // and at least every 100 ms. What stays mapped: the window of the
        // append position and the next (and a window of slack).
        let most = 3 * PAGE_WINDOW as u64 / 1024;
        let mut resident = u64::MAX;
        for _ in 0..50 {
            std::thread::sleep(Duration::from_millis(20));
            resident = mapped_kib(&path);
            if resident <= most {
                break;
            }
        }
        assert!(
            resident <= most,
            "{resident} KiB of the segment still mapped after 24 MiB were written"
        );
        // Every record reads back, byte for byte, from the page cache.
        let mut segments = segments_of(dir.path());
        reads_back_in_order(&*fs, &mut segments, n);
    }

    /// The bytes of lane 0's segment in `dir`, changed by `edit`; its path.
    fn edit_lane0(dir: &Path, edit: impl FnOnce(&mut Vec<u8>)) -> PathBuf {
        let seg = segments_of(dir)
            .into_iter()
            .find(|s| s.lane == 0)
            .unwrap()
            .path;
        let mut data = std::fs::read(&seg).unwrap();
        edit(&mut data);
        std::fs::write(&seg, &data).unwrap();
        seg
    }

    fn read_lsns(fs: &dyn Fs, dir: &Path, salvage: bool) -> Result<Vec<u64>> {
        let mut lsns = Vec::new();
        read_all(fs, &mut segments_of(dir), &Salvage::new(salvage), |f| {
            lsns.push(f.lsn);
            Ok(())
        })?;
        Ok(lsns)
    }

    fn is_damage_at(e: &crate::Error, seg: &Path, at: usize) -> bool {
        matches!(e.kind(), ErrorKind::Corrupt { path, offset, .. } if path == seg && *offset == at as u64)
    }

    /// Zeros where a record should start, with records after them, used to
    /// end the segment's read silently (and reading went on in the lane's
    /// next segment): 16 of 100 records read, and no error.
    #[test]
    fn zeros_where_a_record_should_start_with_records_after_them_stop_the_read() {
        let (dir, fs) = lane0_log(100);
        // Sector 1 (records 17 to 32, of 32 bytes each) zeroed, as by a
        // disk.
        let seg = edit_lane0(dir.path(), |d| d[SECTOR..2 * SECTOR].fill(0));
        let e = read_lsns(&*fs, dir.path(), false).unwrap_err();
        assert!(is_damage_at(&e, &seg, SECTOR), "{e}");
        assert!(e.to_string().contains("zeros, then written bytes"), "{e}");
        // Salvage keeps the records before them.
        let lsns = read_lsns(&*fs, dir.path(), true).unwrap();
        assert_eq!(lsns, (1..=16).collect::<Vec<u64>>());
    }

    /// A record killed while its first bytes (length and CRC) were still
    /// zeros and later ones were written is a torn tail, as one killed
    /// with its CRC unwritten is: the lane ends before it, with no error,
    /// and its bytes are zeroed.
    #[test]
    fn a_last_record_killed_before_its_first_bytes_were_written_is_a_torn_tail() {
        let (dir, fs) = lane0_log(100);
        let last = 99 * SHORT_RECORD;
        let seg = edit_lane0(dir.path(), |d| d[last..last + 8].fill(0));
        let lsns = read_lsns(&*fs, dir.path(), false).unwrap();
        assert_eq!(lsns, (1..=99).collect::<Vec<u64>>());
        let data = std::fs::read(&seg).unwrap();
        assert!(data[last..].iter().all(|&b| b == 0), "the torn bytes stay");
    }

    /// Looking for a valid record after a bad one skips offsets whose lsn
    /// field is out of reach, and still finds one in reach after a MiB of
    /// garbage (each 8-byte word claiming a record of 1 KiB, so that
    /// parsing every offset would check a CRC over each).
    #[test]
    fn a_valid_record_is_found_after_garbage_and_an_lsn_out_of_reach_is_not() {
        let mut data = vec![0u8; (1 << 20) + 64];
        for w in data.chunks_exact_mut(8).take((1 << 20) / 8) {
            w.copy_from_slice(&[0, 4, 0, 0, 0xde, 0xad, 0xbe, 0xef]);
        }
        let at = 1 << 20;
        let lsn = (1 << 48) + 100;
        encode_hashes(
            &mut data[at..at + SHORT_RECORD],
            2,
            1,
            lsn,
            &[ItemHash { lo: 1, hi: 2 }],
        );
        assert!(valid_record_after(&data, 0, 101));
        assert!(!valid_record_after(&data, 0, lsn + 1), "below the floor");
        assert!(!valid_record_after(&data, 0, 100), "out of reach");
    }

    /// A record whose lsn is `MAX_LSN` or more, or whose filter id is
    /// `MAX_ID` or more (its CRC good) is damage: one past it, the next
    /// lsn or id, could overflow.
    #[test]
    fn a_record_lsn_or_filter_id_out_of_range_is_damage() {
        let (dir, fs) = lane0_log(3);
        let at = SHORT_RECORD;
        let seg = edit_lane0(dir.path(), |d| {
            encode_hashes(
                &mut d[at..at + SHORT_RECORD],
                2,
                1,
                u64::MAX,
                &[ItemHash { lo: 1, hi: 1 }],
            )
        });
        let e = read_lsns(&*fs, dir.path(), false).unwrap_err();
        assert!(is_damage_at(&e, &seg, at), "{e}");
        assert!(e.to_string().contains("out of range"), "{e}");
        // And a filter id of `MAX_ID` or more (a long record of 48 bytes,
        // over the last two short ones).
        let (dir, fs) = lane0_log(3);
        let seg = edit_lane0(dir.path(), |d| {
            let len = hashes_record_len(2, MAX_ID, 1);
            encode_hashes(
                &mut d[at..at + len],
                2,
                MAX_ID,
                2,
                &[ItemHash { lo: 1, hi: 1 }],
            )
        });
        let e = read_lsns(&*fs, dir.path(), false).unwrap_err();
        assert!(is_damage_at(&e, &seg, at), "{e}");
        assert!(e.to_string().contains("filter id"), "{e}");
    }

    /// An `everysec` log of `n` records of one hash, all synced (so the
    /// mark says they are durable), closed without a checkpoint.
    fn synced_everysec_log(n: u64) -> tempfile::TempDir {
        let (dir, _fs, wal) = fresh_wal(FsyncPolicy::EverySec, 1 << 16);
        stop_helper(&wal);
        for i in 1..=n {
            wal.append_hashes(2, 5, &[ItemHash { lo: i, hi: i }], false)
                .unwrap();
        }
        wal.sync_all().unwrap();
        drop(wal);
        dir
    }

    /// Below the sync mark's entry no power loss can have torn or holed
    /// anything, nor a kill: zeros there (in the middle, or at the end of
    /// what the mark says was written) and a bad last record are damage,
    /// not an end or a torn tail, read on another boot and on this one.
    /// On another boot the last used to be truncated with a warning (99 of
    /// 100 records read); on this one, until session 26, all three were
    /// (the mark was not used on the boot that wrote it: a log whose end
    /// was zeroed read as a shorter log, found by the `store_dir` fuzz
    /// target).
    #[test]
    fn below_the_sync_mark_zeros_and_a_bad_last_record_are_damage() {
        let both = [&RealFs as &dyn Fs, &TestFs::other_boot()];
        let dir = synced_everysec_log(100);
        let seg = edit_lane0(dir.path(), |d| d[SECTOR..2 * SECTOR].fill(0));
        for fs in both {
            let e = read_lsns(fs, dir.path(), false).unwrap_err();
            assert!(is_damage_at(&e, &seg, SECTOR), "{e}");
        }

        let dir = synced_everysec_log(100);
        let end = 96 * SHORT_RECORD;
        let seg = edit_lane0(dir.path(), |d| d[end..end + 4 * SHORT_RECORD].fill(0));
        for fs in both {
            let e = read_lsns(fs, dir.path(), false).unwrap_err();
            assert!(is_damage_at(&e, &seg, end), "{e}");
            assert!(e.to_string().contains("sync mark"), "{e}");
        }

        let dir = synced_everysec_log(100);
        let last = 99 * SHORT_RECORD;
        let seg = edit_lane0(dir.path(), |d| d[last + 20] ^= 1);
        for fs in both {
            let e = read_lsns(fs, dir.path(), false).unwrap_err();
            assert!(is_damage_at(&e, &seg, last), "{e}");
        }
        // Salvage reads the rest.
        let lsns = read_lsns(&RealFs, dir.path(), true).unwrap();
        assert_eq!(lsns, (1..=99).collect::<Vec<u64>>());
    }
}
