//! The write-ahead log: memory-mapped, preallocated segments with group
//! commit.
//!
//! A record is appended by copying it into a shared memory map of the
//! current segment file. The bytes are then in the kernel's page cache, so
//! they survive the process being killed (`kill -9`) at once; only a power
//! failure can lose what was not yet synced. Each segment is preallocated
//! with `fallocate` when it is created, so writing into the map can never
//! meet a full disk: a full disk shows up as an error when a segment is
//! created, and the mutation that needed it fails cleanly.
//!
//! Durability per [`FsyncPolicy`]:
//!
//! * `Always`: a mutation is acknowledged after an `fdatasync` that covers
//!   its record. Many concurrent writers share one sync (group commit): the
//!   first waiter syncs everything appended so far, the others wait for it.
//! * `EverySec`: a background thread syncs once a second; a power failure
//!   loses at most about the last second, a process kill nothing.
//! * `No`: the kernel writes back when it likes (Linux: within about 30 s);
//!   a process kill loses nothing.
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

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Duration;

use crossbeam_utils::CachePadded;
use memmap2::MmapRaw;

use crate::error::{io_err, ErrorKind, Result};
use crate::fs::{Fs, FsFile};
use crate::record::{parse, Parsed, Rec, Record};
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

pub(crate) fn segment_name(first_lsn: u64) -> String {
    format!("{first_lsn:020}.log")
}

pub(crate) fn parse_segment_name(path: &Path) -> Option<u64> {
    let name = path.file_name()?.to_str()?;
    let lsn = name.strip_suffix(".log")?;
    (lsn.len() == 20).then(|| lsn.parse().ok())?
}

struct Segment {
    first_lsn: u64,
    /// Written only under the `state` mutex; shared with the page helper,
    /// which only passes address ranges to `madvise`.
    map: Arc<MmapRaw>,
    /// Handle used to sync the segment (shared with the syncer).
    file: Arc<dyn FsFile>,
    offset: usize,
}

struct State {
    cur: Segment,
    next_lsn: u64,
    /// Rolled-away segments that may hold unsynced records.
    unsynced: Vec<Arc<dyn FsFile>>,
    /// Every live segment: first lsn and path, oldest first.
    segments: Vec<(u64, PathBuf)>,
}

/// The longest a writer waits for a running sync by yielding before it
/// sleeps on the condition variable.
const SPIN_WAIT: Duration = Duration::from_millis(2);

/// The longest a leader gathers before it syncs.
const GATHER_MAX: Duration = Duration::from_micros(200);

struct SyncState {
    synced_lsn: u64,
    in_progress: bool,
    poisoned: Option<String>,
    /// Records the last sync covered: more than one means writers are
    /// waiting together, and the next leader gathers before it syncs.
    last_batch: u64,
}

/// How far ahead of the append position the page helper keeps pages
/// mapped in, and the step in which it moves.
const PAGE_WINDOW: usize = 256 << 10;

/// How writers wake the page helper.
struct PageHelper {
    thread: std::thread::Thread,
    /// The segment and window the append position was in when the helper
    /// was last woken; writers wake it when they move into another one.
    window: AtomicU64,
}

/// The log.
///
/// What appends write (the state, `last_lsn`) and what syncs write sit on
/// cache lines of their own (`CachePadded`), apart from what every call
/// only reads (`poisoned`, the policy, ...): a read-mostly field sharing a
/// line with a written one costs a miss on every call, on every core.
pub(crate) struct Wal {
    fs: Arc<dyn Fs>,
    dir: PathBuf,
    policy: FsyncPolicy,
    segment_size: u64,
    state: CachePadded<Mutex<State>>,
    sync: CachePadded<Mutex<SyncState>>,
    synced_cv: Condvar,
    stop: AtomicBool,
    /// Mirrors of `State::next_lsn - 1` and `SyncState::poisoned`, so the
    /// hot path reads them without taking the locks.
    last_lsn: CachePadded<AtomicU64>,
    /// Mirrors of `SyncState::synced_lsn` and `in_progress`, read by
    /// waiters that spin before they sleep.
    synced_lsn: CachePadded<AtomicU64>,
    sync_running: AtomicBool,
    poisoned: AtomicBool,
    pages: std::sync::OnceLock<PageHelper>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic while holding these locks would be a bug in this module; the
    // data stays consistent (every update is a single assignment), so
    // recover it rather than propagate the poison.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Maps a preallocated segment file.
fn map(file: &dyn FsFile, path: &Path) -> Result<MmapRaw> {
    // The file is ours alone: the data directory is locked with flock for
    // the life of the store, and segments are never truncated or resized
    // while mapped. All writes through the map happen under the `state`
    // mutex (see `Segment::bytes_mut`).
    MmapRaw::map_raw(file.std_file()).map_err(|e| io_err("mmap", path, e))
}

/// Bytes of the record of one hash: a 9-byte header (lsn, kind), the
/// filter id and count (12), the hash (16), after the length and CRC (8),
/// padded to 8.
const ONE_RECORD: usize = (8 + ONE_LEN).next_multiple_of(8);

/// The part of [`ONE_RECORD`] its length field counts and its CRC covers.
const ONE_LEN: usize = 9 + 12 + 16;

/// Encodes the add or remove record of `hashes` into `buf` (exactly its
/// padded length): the layout of [`Record::encode`] for these kinds.
fn encode_hashes(buf: &mut [u8], kind: u8, id: u64, lsn: u64, hashes: &[ItemHash]) {
    let len = 9 + 12 + 16 * hashes.len();
    buf[0..4].copy_from_slice(&(len as u32).to_le_bytes());
    buf[8..16].copy_from_slice(&lsn.to_le_bytes());
    buf[16] = kind;
    buf[17..25].copy_from_slice(&id.to_le_bytes());
    buf[25..29].copy_from_slice(&(hashes.len() as u32).to_le_bytes());
    for (dst, h) in buf[29..29 + 16 * hashes.len()]
        .chunks_exact_mut(16)
        .zip(hashes)
    {
        dst.copy_from_slice(&h.to_le_bytes());
    }
    buf[8 + len..].fill(0);
    let crc = crc32fast::hash(&buf[8..8 + len]);
    buf[4..8].copy_from_slice(&crc.to_le_bytes());
}

/// A record of one hash, encoded before its append (see
/// [`Wal::prepare_one`]).
pub(crate) struct Prepared {
    bytes: [u8; ONE_RECORD],
    lsn: u64,
}

impl Prepared {
    /// Gives the record another lsn, and the CRC that goes with it (when
    /// another writer took the lsn it was made for).
    fn set_lsn(&mut self, lsn: u64) {
        self.lsn = lsn;
        self.bytes[8..16].copy_from_slice(&lsn.to_le_bytes());
        let crc = crc32fast::hash(&self.bytes[8..8 + ONE_LEN]);
        self.bytes[4..8].copy_from_slice(&crc.to_le_bytes());
    }
}

impl Segment {
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

impl Wal {
    /// Opens the log after recovery: appends continue in a fresh segment
    /// starting at `next_lsn`. `segments` are the existing segment files.
    pub(crate) fn open(
        fs: Arc<dyn Fs>,
        dir: PathBuf,
        policy: FsyncPolicy,
        segment_size: u64,
        next_lsn: u64,
        mut segments: Vec<(u64, PathBuf)>,
    ) -> Result<Arc<Wal>> {
        // A segment that starts at `next_lsn` holds no record: replace it.
        if segments.last().is_some_and(|(first, _)| *first == next_lsn) {
            segments.pop();
        }
        let cur = Self::new_segment(&*fs, &dir, segment_size, next_lsn)?;
        segments.push((next_lsn, dir.join(segment_name(next_lsn))));
        let wal = Arc::new(Wal {
            fs,
            dir,
            policy,
            segment_size,
            state: CachePadded::new(Mutex::new(State {
                cur,
                next_lsn,
                unsynced: Vec::new(),
                segments,
            })),
            sync: CachePadded::new(Mutex::new(SyncState {
                synced_lsn: next_lsn - 1,
                in_progress: false,
                last_batch: 0,
                poisoned: None,
            })),
            synced_cv: Condvar::new(),
            stop: AtomicBool::new(false),
            last_lsn: CachePadded::new(AtomicU64::new(next_lsn - 1)),
            synced_lsn: CachePadded::new(AtomicU64::new(next_lsn - 1)),
            sync_running: AtomicBool::new(false),
            poisoned: AtomicBool::new(false),
            pages: std::sync::OnceLock::new(),
        });
        Self::start_page_helper(&wal)?;
        if policy == FsyncPolicy::EverySec {
            let weak = Arc::downgrade(&wal);
            std::thread::Builder::new()
                .name("seen-wal-sync".into())
                .spawn(move || loop {
                    std::thread::sleep(Duration::from_secs(1));
                    let Some(wal) = weak.upgrade() else { return };
                    if wal.stop.load(Ordering::Relaxed) {
                        return;
                    }
                    let last = wal.last_lsn();
                    if let Err(e) = wal.sync_to(last) {
                        tracing::error!("background log sync failed: {e}");
                    }
                })
                .map_err(|e| io_err("spawn sync thread for", &wal_dir_of(&wal), e))?;
        }
        Ok(wal)
    }

    /// Starts the thread that maps pages in ahead of the append position
    /// and out behind it (see the module docs). It holds the log weakly,
    /// and ends when the log is dropped or closed.
    fn start_page_helper(wal: &Arc<Wal>) -> Result<()> {
        let weak = Arc::downgrade(wal);
        // Populating writes dirty (zero) pages, which a sync then writes
        // out before the records that fill them are written again: under
        // `always`, which syncs every moment, that would write the log
        // twice, so there the writers fault the pages in themselves.
        let populate = wal.policy != FsyncPolicy::Always;
        let handle = std::thread::Builder::new()
            .name("seen-wal-pages".into())
            .spawn(move || {
                // The segment last seen (by its first lsn), and how far
                // into it pages have been mapped in and unmapped.
                let (mut first, mut ahead, mut behind) = (u64::MAX, 0usize, 0usize);
                loop {
                    std::thread::park_timeout(Duration::from_millis(100));
                    let Some(wal) = weak.upgrade() else { return };
                    if wal.stop.load(Ordering::Relaxed) {
                        return;
                    }
                    let (map, offset, seg) = {
                        let st = lock(&wal.state);
                        (st.cur.map.clone(), st.cur.offset, st.cur.first_lsn)
                    };
                    drop(wal);
                    if seg != first {
                        (first, ahead, behind) = (seg, 0, 0);
                    }
                    let want = ((offset / PAGE_WINDOW + 2) * PAGE_WINDOW).min(map.len());
                    if want > ahead && populate {
                        let from = ahead.max(offset / PAGE_WINDOW * PAGE_WINDOW);
                        // Best effort: on a kernel before 5.14 this fails,
                        // and writers fault the pages in themselves.
                        let _ = map.advise_range(memmap2::Advice::PopulateWrite, from, want - from);
                        ahead = want;
                    }
                    // Every byte below the append position is written for
                    // good (appends only move forward), so the pages wholly
                    // below it can go.
                    let done = offset / PAGE_WINDOW * PAGE_WINDOW;
                    if done > behind {
                        // SAFETY: for a shared file mapping MADV_DONTNEED
                        // unmaps the pages but keeps their contents, dirty
                        // or not, in the page cache (a later access maps
                        // them back); no writer is in this range any more,
                        // and the map outlives the call (`map` holds it).
                        let _ = unsafe {
                            map.unchecked_advise_range(
                                memmap2::UncheckedAdvice::DontNeed,
                                behind,
                                done - behind,
                            )
                        };
                        behind = done;
                    }
                }
            })
            .map_err(|e| io_err("spawn page thread for", &wal.dir, e))?;
        let _ = wal.pages.set(PageHelper {
            thread: handle.thread().clone(),
            window: AtomicU64::new(u64::MAX),
        });
        Ok(())
    }

    /// Wakes the page helper when the append position has moved into
    /// another window, or another segment.
    fn after_append(&self, st: &State) {
        if let Some(p) = self.pages.get() {
            let w = (st.cur.first_lsn << 24) ^ (st.cur.offset / PAGE_WINDOW) as u64;
            if p.window.load(Ordering::Relaxed) != w {
                p.window.store(w, Ordering::Relaxed);
                p.thread.unpark();
            }
        }
    }

    fn new_segment(fs: &dyn Fs, dir: &Path, size: u64, first_lsn: u64) -> Result<Segment> {
        let path = dir.join(segment_name(first_lsn));
        let file = fs.create(&path).map_err(|e| io_err("create", &path, e))?;
        let setup = (|| {
            file.allocate(size)
                .map_err(|e| io_err("preallocate", &path, e))?;
            file.sync_data().map_err(|e| io_err("sync", &path, e))?;
            fs.sync_dir(dir)
                .map_err(|e| io_err("sync directory", dir, e))
        })();
        if let Err(e) = setup {
            // Leave no half-made segment behind.
            let _ = fs.remove(&path);
            return Err(e);
        }
        let map = Arc::new(map(&*file, &path)?);
        Ok(Segment {
            first_lsn,
            map,
            file: Arc::from(file),
            offset: 0,
        })
    }

    /// Appends a record; returns its lsn. The record survives a process kill
    /// as soon as this returns; see [`Wal::commit`] for power loss.
    pub(crate) fn append(&self, rec: &Record) -> Result<u64> {
        let mut st = lock(&self.state);
        let lsn = st.next_lsn;
        let bytes = rec.encode(lsn);
        if bytes.len() as u64 > self.segment_size {
            return Err(ErrorKind::WrongKind("a log record is larger than a log segment").into());
        }
        if st.cur.offset + bytes.len() > st.cur.map.len() {
            self.roll(&mut st, lsn)?;
        }
        let off = st.cur.offset;
        st.cur.bytes_mut(off, bytes.len()).copy_from_slice(&bytes);
        st.cur.offset += bytes.len();
        st.next_lsn += 1;
        self.last_lsn.store(lsn, Ordering::Release);
        self.after_append(&st);
        Ok(lsn)
    }

    /// Appends an add (`kind` 2) or remove (`kind` 3) record of `hashes`
    /// for filter `id`, encoding it straight into the segment (the hot
    /// path: no intermediate buffer). Same bytes as [`Record::encode`].
    pub(crate) fn append_hashes(&self, kind: u8, id: u64, hashes: &[ItemHash]) -> Result<u64> {
        let payload = 12 + 16 * hashes.len();
        let len = 9 + payload;
        let total = (8 + len).next_multiple_of(8);
        let mut st = lock(&self.state);
        let lsn = st.next_lsn;
        if total as u64 > self.segment_size {
            return Err(ErrorKind::WrongKind("a log record is larger than a log segment").into());
        }
        if st.cur.offset + total > st.cur.map.len() {
            self.roll(&mut st, lsn)?;
        }
        let off = st.cur.offset;
        encode_hashes(st.cur.bytes_mut(off, total), kind, id, lsn, hashes);
        st.cur.offset += total;
        st.next_lsn += 1;
        self.last_lsn.store(lsn, Ordering::Release);
        self.after_append(&st);
        Ok(lsn)
    }

    /// Encodes the add (`kind` 2) or remove (`kind` 3) record of one hash
    /// for filter `id` ahead of its [`append_prepared`](Self::append_prepared),
    /// for the lsn it will get if no other append comes first (always,
    /// with one writer). A caller prepares it while the filter's cache
    /// line is on its way, so that the encoding and its CRC run in the
    /// shadow of that miss rather than after it.
    pub(crate) fn prepare_one(&self, kind: u8, id: u64, hash: ItemHash) -> Prepared {
        let lsn = self.last_lsn.load(Ordering::Relaxed).wrapping_add(1);
        let mut bytes = [0u8; ONE_RECORD];
        encode_hashes(&mut bytes, kind, id, lsn, &[hash]);
        Prepared { bytes, lsn }
    }

    /// Appends a [`prepare_one`](Self::prepare_one)d record, re-encoding
    /// its lsn (and CRC) if another append took the one it was made for;
    /// returns its lsn. Same bytes as [`append_hashes`](Self::append_hashes).
    pub(crate) fn append_prepared(&self, rec: &mut Prepared) -> Result<u64> {
        let mut st = lock(&self.state);
        let lsn = st.next_lsn;
        if lsn != rec.lsn {
            rec.set_lsn(lsn);
        }
        if ONE_RECORD as u64 > self.segment_size {
            return Err(ErrorKind::WrongKind("a log record is larger than a log segment").into());
        }
        if st.cur.offset + ONE_RECORD > st.cur.map.len() {
            self.roll(&mut st, lsn)?;
        }
        let off = st.cur.offset;
        st.cur
            .bytes_mut(off, ONE_RECORD)
            .copy_from_slice(&rec.bytes);
        st.cur.offset += ONE_RECORD;
        st.next_lsn += 1;
        self.last_lsn.store(lsn, Ordering::Release);
        self.after_append(&st);
        Ok(lsn)
    }

    /// Starts a new segment if the current one holds any record, so that
    /// everything logged so far sits in segments a checkpoint can retire
    /// (and unmap: the old segment's pages stop counting as the process's
    /// memory).
    pub(crate) fn start_new_segment(&self) -> Result<()> {
        let mut st = lock(&self.state);
        if st.cur.offset == 0 {
            return Ok(());
        }
        let lsn = st.next_lsn;
        self.roll(&mut st, lsn)
    }

    /// Switches to a new segment starting at `lsn`.
    fn roll(&self, st: &mut State, lsn: u64) -> Result<()> {
        let next = Self::new_segment(&*self.fs, &self.dir, self.segment_size, lsn)?;
        let old = std::mem::replace(&mut st.cur, next);
        if self.policy != FsyncPolicy::No {
            st.unsynced.push(old.file.clone());
        }
        st.segments.push((lsn, self.dir.join(segment_name(lsn))));
        Ok(())
    }

    /// The lsn of the last record appended (0 if none ever was).
    pub(crate) fn last_lsn(&self) -> u64 {
        self.last_lsn.load(Ordering::Acquire)
    }

    /// Waits until `lsn` is as durable as the policy promises.
    pub(crate) fn commit(&self, lsn: u64) -> Result<()> {
        match self.policy {
            FsyncPolicy::Always => self.sync_to(lsn),
            FsyncPolicy::EverySec | FsyncPolicy::No => self.check_poisoned(),
        }
    }

    fn check_poisoned(&self) -> Result<()> {
        if !self.is_poisoned() {
            return Ok(());
        }
        match &lock(&self.sync).poisoned {
            Some(p) => Err(ErrorKind::Poisoned(p.clone()).into()),
            None => Ok(()),
        }
    }

    /// Whether a failed sync has made the log unusable.
    pub(crate) fn is_poisoned(&self) -> bool {
        self.poisoned.load(Ordering::Acquire)
    }

    /// Syncs everything appended up to at least `lsn` (group commit).
    pub(crate) fn sync_to(&self, lsn: u64) -> Result<()> {
        let mut s = lock(&self.sync);
        loop {
            if let Some(p) = &s.poisoned {
                return Err(ErrorKind::Poisoned(p.clone()).into());
            }
            if s.synced_lsn >= lsn {
                return Ok(());
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
        // Lead: sync everything appended so far, for us and every waiter.
        let (target, files, path) = {
            let mut st = lock(&self.state);
            let mut files = std::mem::take(&mut st.unsynced);
            files.push(st.cur.file.clone());
            let path = self.dir.join(segment_name(st.cur.first_lsn));
            (st.next_lsn - 1, files, path)
        };
        let result = files.iter().try_for_each(|f| f.sync_data());
        let mut s = lock(&self.sync);
        s.in_progress = false;
        self.sync_running.store(false, Ordering::Release);
        let out = match result {
            Ok(()) => {
                s.last_batch = target.saturating_sub(s.synced_lsn);
                s.synced_lsn = s.synced_lsn.max(target);
                self.synced_lsn.store(s.synced_lsn, Ordering::Release);
                Ok(())
            }
            Err(e) => {
                // After a failed fsync the kernel may have dropped the dirty
                // pages: a retry could "succeed" without the data. Refuse
                // until a checkpoint has rewritten everything.
                let msg = format!("sync {}: {e}", path.display());
                tracing::error!("{msg}");
                s.poisoned = Some(msg);
                self.poisoned.store(true, Ordering::Release);
                Err(io_err("sync", &path, e))
            }
        };
        self.synced_cv.notify_all();
        out
    }

    /// Starts a new segment at the next lsn and returns the paths of the
    /// segments that hold only records with lsn `<= upto`, removing them
    /// from the live list (the caller deletes the files once snapshots
    /// covering them are durable).
    pub(crate) fn retire_upto(&self, upto: u64) -> Vec<PathBuf> {
        let mut st = lock(&self.state);
        let cur_first = st.cur.first_lsn;
        let mut gone = Vec::new();
        // Segment i covers [first_i, first_{i+1} - 1].
        while st.segments.len() > 1 {
            let next_first = st.segments[1].0;
            if next_first - 1 <= upto && st.segments[0].0 != cur_first {
                gone.push(st.segments.remove(0).1);
            } else {
                break;
            }
        }
        gone
    }

    /// After a successful checkpoint of every filter, a poisoned log may be
    /// used again: everything it held is in durable snapshots. Starts a
    /// fresh segment so that no write lands in pages whose sync failed.
    pub(crate) fn reset_after_checkpoint(&self) -> Result<()> {
        let mut st = lock(&self.state);
        let lsn = st.next_lsn;
        let next = Self::new_segment(&*self.fs, &self.dir, self.segment_size, lsn)?;
        st.cur = next;
        st.unsynced.clear();
        st.segments.push((lsn, self.dir.join(segment_name(lsn))));
        drop(st);
        let mut s = lock(&self.sync);
        s.poisoned = None;
        self.poisoned.store(false, Ordering::Release);
        s.synced_lsn = s.synced_lsn.max(lsn - 1);
        self.synced_lsn.store(s.synced_lsn, Ordering::Release);
        Ok(())
    }

    /// Syncs everything and stops the background thread.
    pub(crate) fn close(&self) -> Result<()> {
        self.stop.store(true, Ordering::Relaxed);
        if self.policy == FsyncPolicy::No {
            return Ok(());
        }
        self.sync_to(self.last_lsn())
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

/// Reads every segment in order. A bad record in the newest segment that
/// no valid record follows is a torn tail (a crash mid-append): reading stops
/// there with a warning. A bad record anywhere else is corruption: an error
/// naming the file and offset, unless `salvage` is set, in which case the
/// rest of that segment is skipped with a warning.
pub(crate) fn read_all(
    fs: &dyn Fs,
    segments: &[(u64, PathBuf)],
    salvage: bool,
    mut on_record: impl FnMut(Found<'_>) -> Result<()>,
) -> Result<u64> {
    let mut last_lsn = 0u64;
    for (i, (first, path)) in segments.iter().enumerate() {
        let file = fs.open_read(path).map_err(|e| io_err("open", path, e))?;
        let len = file.metadata().map_err(|e| io_err("stat", path, e))?.len();
        // The segment is mapped, not copied: records are parsed where the
        // page cache holds them, and only the pages up to the last record
        // (segments are mostly zeros past it) are ever touched.
        let map = if len == 0 {
            None
        } else {
            // SAFETY: the data directory is locked by this store (see
            // `Store::open`), so no other store changes the file while it
            // is mapped; the map is read-only and dropped before the torn
            // tail, if any, is zeroed. (As with the writer's map, a disk
            // read error or another program truncating the file under us
            // is a SIGBUS, not an error.)
            let map = unsafe { memmap2::Mmap::map(&file) }.map_err(|e| io_err("map", path, e))?;
            let _ = map.advise(memmap2::Advice::Sequential);
            Some(map)
        };
        let data: &[u8] = map.as_deref().unwrap_or(&[]);
        let mut torn = None;
        let newest = i + 1 == segments.len();
        let mut off = 0usize;
        let mut expect = *first;
        if last_lsn != 0 && *first != last_lsn + 1 {
            // A missing segment: records in between are gone.
            let what =
                format!("segment starts at lsn {first}, but the log before it ends at {last_lsn}");
            damaged(path, 0, what, salvage)?;
        }
        loop {
            match parse(&data[off.min(data.len())..]) {
                Parsed::End => break,
                Parsed::Record(record, lsn, used) => {
                    if lsn != expect {
                        let what = format!("record lsn {lsn} where {expect} was expected");
                        damaged(path, off, what, salvage)?;
                        break;
                    }
                    on_record(Found {
                        record,
                        lsn,
                        bytes: used,
                    })?;
                    last_lsn = lsn;
                    expect += 1;
                    off += used;
                }
                Parsed::Bad(what) => {
                    let later = valid_record_after(data, off + 8, expect);
                    if newest && !later {
                        tracing::warn!(
                            "{}: torn record at offset {off} ({what}); the log ends at lsn {}",
                            path.display(),
                            expect - 1
                        );
                        // Zero the torn bytes (once the map is gone), so
                        // that a later recovery does not mistake them for
                        // corruption once newer segments follow.
                        torn = data[off..]
                            .iter()
                            .rposition(|&b| b != 0)
                            .map(|last| (off as u64, last + 1));
                        break;
                    }
                    damaged(path, off, what, salvage)?;
                    break;
                }
            }
        }
        drop(map);
        if let Some((offset, len)) = torn {
            zero_range(fs, path, offset, len)?;
        }
    }
    Ok(last_lsn)
}

/// Damage at `off` of a segment: an error naming the file and offset, or,
/// when salvaging, a warning (the caller then skips the rest of the segment).
fn damaged(path: &Path, off: usize, what: String, salvage: bool) -> Result<()> {
    if salvage {
        tracing::warn!(
            "{}: {what} at offset {off}; skipping the rest (salvage)",
            path.display()
        );
        return Ok(());
    }
    Err(ErrorKind::Corrupt {
        path: path.to_path_buf(),
        offset: off as u64,
        what,
    }
    .into())
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

/// Is there a valid record with an lsn at least `min_lsn` anywhere at an
/// 8-byte boundary from `from` on?
fn valid_record_after(data: &[u8], from: usize, min_lsn: u64) -> bool {
    let mut off = from.next_multiple_of(8);
    while off + 8 <= data.len() {
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
mod tests {
    use super::*;
    use crate::fs::RealFs;

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
        )
        .unwrap();
        (dir, fs, wal)
    }

    #[test]
    fn concurrent_appends_keep_every_record_whole_and_in_lsn_order() {
        let (_dir, fs, wal) = fresh_wal(FsyncPolicy::No, 1 << 16);
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
                            wal.append_hashes(kind, t, &hashes).unwrap();
                        }
                    }
                });
            }
        });
        let segments = wal.state.lock().unwrap().segments.clone();
        let mut next = 1;
        let mut counts = vec![0u64; threads as usize];
        read_all(&*fs, &segments, false, |f| {
            assert_eq!(f.lsn, next, "records out of lsn order");
            next += 1;
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
        assert_eq!(next - 1, threads * per);
        assert!(counts.iter().all(|&c| c == per), "{counts:?}");
    }

    #[test]
    fn append_hashes_writes_the_same_bytes_as_record_encode() {
        let (dir, fs, wal) = fresh_wal(FsyncPolicy::No, 1 << 16);
        let hashes: Vec<ItemHash> = (0..5).map(|i| ItemHash { lo: i, hi: !i }).collect();
        let a = wal.append_hashes(2, 9, &hashes).unwrap();
        let b = wal
            .append(&Record::Add {
                id: 9,
                hashes: hashes.clone(),
            })
            .unwrap();
        let c = wal.append_hashes(3, 9, &hashes[..1]).unwrap();
        assert_eq!((a, b, c), (1, 2, 3));
        let mut seen = Vec::new();
        let segments = vec![(1, dir.path().join(segment_name(1)))];
        read_all(&*fs, &segments, false, |f| {
            let Rec::Hashes { add, id, hashes } = f.record else {
                panic!("not an add or remove");
            };
            seen.push((f.lsn, add, id, hashes.to_vec()));
            Ok(())
        })
        .unwrap();
        assert_eq!(
            seen,
            vec![
                (1, true, 9, hashes.clone()),
                (2, true, 9, hashes.clone()),
                (3, false, 9, hashes[..1].to_vec()),
            ]
        );
        let data = std::fs::read(&segments[0].1).unwrap();
        let enc = Record::Add { id: 9, hashes }.encode(1);
        assert_eq!(&data[..enc.len()], &enc[..]);
    }

    proptest::proptest! {
        #[test]
        fn a_prepared_record_has_the_bytes_of_record_encode_for_the_lsn_it_gets(
            id: u64,
            lo: u64,
            hi: u64,
            add: bool,
            predicted in 0u64..u64::MAX,
            got in 0u64..u64::MAX,
        ) {
            let (_dir, _fs, wal) = fresh_wal(FsyncPolicy::No, 1 << 16);
            wal.last_lsn.store(predicted.wrapping_sub(1), Ordering::Relaxed);
            let h = ItemHash { lo, hi };
            let mut rec = wal.prepare_one(if add { 2 } else { 3 }, id, h);
            proptest::prop_assert_eq!(rec.lsn, predicted);
            rec.set_lsn(got);
            let hashes = vec![h];
            let want = if add {
                Record::Add { id, hashes }
            } else {
                Record::Remove { id, hashes }
            }
            .encode(got);
            proptest::prop_assert_eq!(&rec.bytes[..], &want[..]);
        }
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

    #[test]
    fn the_page_helper_unmaps_written_pages_and_loses_no_record() {
        let (dir, fs, wal) = fresh_wal(FsyncPolicy::EverySec, 32 << 20);
        let path = dir.path().join(segment_name(1));
        // 16-hash records of 288 bytes: about 10 MiB in all, in two halves
        // with a pause between them for the helper.
        let record =
            |i: u64| -> Vec<ItemHash> { (0..16).map(|j| ItemHash { lo: i, hi: j }).collect() };
        let n = 10 * (1 << 20) / 288;
        for i in 0..n {
            wal.append_hashes(2, 7, &record(i)).unwrap();
            if i == n / 2 {
                std::thread::sleep(Duration::from_millis(300));
            }
        }
        // The helper runs when the append position enters another window,
        // and at least every 100 ms.
        let mut resident = u64::MAX;
        for _ in 0..50 {
            std::thread::sleep(Duration::from_millis(20));
            resident = mapped_kib(&path);
            if resident <= 1 << 10 {
                break;
            }
        }
        assert!(
            resident <= 1 << 10,
            "{resident} KiB of the segment still mapped after 10 MiB were written"
        );
        // Every record reads back, byte for byte, from the page cache.
        let segments = vec![(1, path.clone())];
        let mut next = 0;
        read_all(&*fs, &segments, false, |f| {
            let Rec::Hashes { add, id, hashes } = f.record else {
                panic!("not an add");
            };
            assert_eq!((f.lsn, add, id), (next + 1, true, 7));
            assert_eq!(hashes.to_vec(), record(next));
            next += 1;
            Ok(())
        })
        .unwrap();
        assert_eq!(next, n);
    }
}
