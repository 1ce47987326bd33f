//! The write-ahead log: records appended to the newest segment with
//! ordinary writes, group commit, and the syncs each [`FsyncPolicy`]
//! promises.
//!
//! One mutex guards the log's state. A caller of [`Log::write`] encodes its
//! record into the pending buffer under it, and then either waits while
//! another caller writes, or becomes the writer itself: it takes the whole
//! buffer (its own record and every record appended while the last write
//! ran), writes it to the segment outside the mutex, and wakes the others.
//! Syncs work the same way, apart from writes: one runs at a time, and
//! covers everything written when it began. So many writers share one
//! `write` and one `fdatasync`, as in raft-engine's write barrier and
//! okaywal's commit.
//!
//! A write that fails (a full disk, an I/O error) cuts the segment back to
//! where the batch began and fails every call whose record was in it; the
//! next batch tries again, so writes resume as soon as the disk takes them.
//! A sync that fails poisons the log (the kernel may have dropped what it
//! was to write): it takes no record until a checkpoint has written every
//! filter from memory and begun a new segment.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::error::{io_err, ErrorKind, Result};
use crate::fs::{open_or_create, Fs, FsFile};
use crate::options::FsyncPolicy;
use crate::record::Record;
use crate::segment::{self, Mark, SegmentFile, MARK};

mod syncer;

pub(crate) use syncer::Callback;

/// How often the syncer runs: a sync under `everysec`, and under every
/// policy a look at whether the data directory is still there.
const SYNC_EVERY: Duration = Duration::from_secs(1);

/// Under `everysec`, once the last sync that succeeded began this long
/// ago, a mutation waits for a sync before it is acknowledged: a power
/// loss then takes at most about this much.
const SYNC_OVERDUE: Duration = Duration::from_millis(1500);

/// The largest write buffer kept for the next write.
const SPARE_MAX: usize = 1 << 20;

/// What a caller of the log waits for: a batch written, or the end of
/// the sync of a generation (see [`Log::sync_through`]).
#[derive(Clone, Copy)]
enum Event {
    Written,
    Synced(u64),
}

impl Event {
    /// Its condition variable: syncs of even and odd generations take
    /// turns.
    fn slot(self) -> usize {
        match self {
            Event::Written => 0,
            Event::Synced(generation) => 1 + (generation % 2) as usize,
        }
    }
}

/// The segment records are appended to.
struct Segment {
    file: Box<dyn FsFile>,
    name: SegmentFile,
    /// Bytes written; changed only by the caller writing a batch.
    len: AtomicU64,
}

/// A batch whose write failed: its records were cut off again, and each
/// of its callers gets the error.
struct FailedBatch {
    lsns: std::ops::RangeInclusive<u64>,
    error: io::Error,
    path: PathBuf,
    callers_left: usize,
}

struct State {
    next_lsn: u64,
    /// Records appended and not handed to a write yet, the lsn of the
    /// first, and how many callers appended them.
    pending: Vec<u8>,
    pending_first: u64,
    pending_callers: usize,
    /// The buffer of the last write, kept for the next one (if it is no
    /// larger than [`SPARE_MAX`]).
    spare: Vec<u8>,
    /// Every batch up to this lsn has been written, or has failed.
    done: u64,
    /// Every record up to this lsn that was not in a failed batch is in
    /// the log's files (it survives a process kill)...
    written: u64,
    /// ... and durable (it survives a power loss).
    synced: u64,
    writing: bool,
    syncing: bool,
    /// The generation of the last sync begun, and what it syncs through.
    sync_generation: u64,
    sync_target: u64,
    failed: Vec<FailedBatch>,
    current: Arc<Segment>,
    /// The segments before `current`, oldest first.
    closed: Vec<SegmentFile>,
    /// Why the log takes no record, if it does not.
    poisoned: Option<String>,
    last_write_failed: bool,
    /// Callers waiting for each [`Event::slot`].
    waiting: [usize; 3],
    /// When the last sync that succeeded began, and the last sync mark.
    sync_began: Instant,
    mark_written: Instant,
    /// Bytes written since the last roll for a checkpoint.
    log_bytes: u64,
    /// Calls waiting for a sync through their lsn (see
    /// [`Log::when_synced`]).
    callbacks: Vec<(u64, Callback)>,
    closing: bool,
}

impl State {
    fn usable(&self) -> Result<()> {
        match &self.poisoned {
            Some(why) => Err(ErrorKind::Poisoned(why.clone()).into()),
            None => Ok(()),
        }
    }

    fn poison(&mut self, why: String) {
        tracing::error!("the log is poisoned: {why}");
        self.poisoned.get_or_insert(why);
    }

    /// What became of the batch that held `lsn`, once done.
    fn outcome(&mut self, lsn: u64) -> Result<()> {
        let Some(i) = self.failed.iter().position(|b| b.lsns.contains(&lsn)) else {
            return Ok(());
        };
        let b = &mut self.failed[i];
        b.callers_left -= 1;
        let e = match b.error.raw_os_error() {
            Some(code) => io::Error::from_raw_os_error(code),
            None => io::Error::new(b.error.kind(), b.error.to_string()),
        };
        let err = io_err("write", &b.path, e);
        if b.callers_left == 0 {
            self.failed.remove(i);
        }
        Err(err)
    }
}

/// Where the log goes on at open: the segments found (the last one is
/// appended to), the lsn after the last record read, and the bytes read.
pub(crate) struct Tail {
    pub(crate) segments: Vec<SegmentFile>,
    pub(crate) next_lsn: u64,
    pub(crate) log_bytes: u64,
}

pub(crate) struct Log {
    fs: Arc<dyn Fs>,
    dir: PathBuf,
    policy: FsyncPolicy,
    segment_size: u64,
    state: Mutex<State>,
    /// Signalled when a batch is written, and when a sync ends, for the
    /// callers waiting for one (by [`Event::slot`]). Apart, so that a write
    /// does not wake every caller waiting for a sync, nor a sync the
    /// callers that need the next one.
    done: [Condvar; 3],
    /// Signalled when the log closes or a callback waits, for the syncer.
    syncer_work: Condvar,
    syncer: Mutex<Option<JoinHandle<()>>>,
}

impl Log {
    /// Opens the log for appending after `tail`, starting a segment if
    /// there is none, and starts its syncer.
    pub(crate) fn start(
        fs: Arc<dyn Fs>,
        dir: &Path,
        policy: FsyncPolicy,
        segment_size: u64,
        mut tail: Tail,
    ) -> Result<Arc<Log>> {
        let name = tail.segments.pop().unwrap_or_else(|| SegmentFile {
            first_lsn: tail.next_lsn,
            path: segment::path(dir, tail.next_lsn),
        });
        let file = open_or_create(&*fs, &name.path)?;
        let len = file.size().map_err(|e| io_err("stat", &name.path, e))?;
        let (now, last_lsn) = (Instant::now(), tail.next_lsn - 1);
        let log = Arc::new(Log {
            fs,
            dir: dir.to_path_buf(),
            policy,
            segment_size: segment_size.max(1),
            state: Mutex::new(State {
                next_lsn: tail.next_lsn,
                pending: Vec::new(),
                pending_first: 0,
                pending_callers: 0,
                spare: Vec::new(),
                done: last_lsn,
                written: last_lsn,
                synced: last_lsn,
                writing: false,
                syncing: false,
                sync_generation: 0,
                sync_target: last_lsn,
                failed: Vec::new(),
                current: Arc::new(Segment {
                    file,
                    name,
                    len: AtomicU64::new(len),
                }),
                closed: tail.segments,
                poisoned: None,
                last_write_failed: false,
                waiting: [0; 3],
                sync_began: now,
                mark_written: now,
                log_bytes: tail.log_bytes,
                callbacks: Vec::new(),
                closing: false,
            }),
            done: [Condvar::new(), Condvar::new(), Condvar::new()],
            syncer_work: Condvar::new(),
            syncer: Mutex::new(None),
        });
        if policy != FsyncPolicy::No {
            log.sync_dir()?;
            log.write_mark()?;
        }
        let syncer = log.clone();
        let syncer = std::thread::Builder::new()
            .name("seen-log-sync".into())
            .spawn(move || syncer.run_syncer())
            .map_err(|e| io_err("start the syncer for", dir, e))?;
        *lock(&log.syncer) = Some(syncer);
        Ok(log)
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        lock(&self.state)
    }

    fn wait<'a>(&self, mut st: MutexGuard<'a, State>, event: Event) -> MutexGuard<'a, State> {
        st.waiting[event.slot()] += 1;
        let cond = &self.done[event.slot()];
        let mut st = cond.wait(st).unwrap_or_else(|e| e.into_inner());
        st.waiting[event.slot()] -= 1;
        st
    }

    /// Wakes the callers waiting for `event`, if any (a wake costs a system
    /// call even with no one to wake).
    fn wake(&self, st: &State, event: Event) {
        if st.waiting[event.slot()] > 0 {
            self.done[event.slot()].notify_all();
        }
    }

    fn sync_dir(&self) -> Result<()> {
        let dir = &self.dir;
        self.fs
            .sync_dir(dir)
            .map_err(|e| io_err("sync directory", dir, e))
    }

    /// Appends `record` and returns its lsn once it is written: from then
    /// on a process kill cannot lose it (see [`sync_through`](Self::sync_through)
    /// for a power loss).
    pub(crate) fn write(&self, record: &Record<'_>) -> Result<u64> {
        let mut st = self.lock();
        st.usable()?;
        let lsn = st.next_lsn;
        st.next_lsn += 1;
        if st.pending.is_empty() {
            st.pending_first = lsn;
        }
        record.encode(lsn, &mut st.pending);
        st.pending_callers += 1;
        while st.done < lsn {
            st = match st.writing {
                true => self.wait(st, Event::Written),
                false => self.write_pending(st, false).0,
            };
        }
        st.outcome(lsn).map(|()| lsn)
    }

    /// Writes the pending records as one batch, the caller taking the
    /// writer's part; with `roll` (or once the segment is full) the log then
    /// moves on to a new segment. Returns the lsn of the batch's last record
    /// (later ones go to the next batch) and why the roll failed, if it did.
    fn write_pending<'a>(
        &'a self,
        mut st: MutexGuard<'a, State>,
        roll: bool,
    ) -> (MutexGuard<'a, State>, u64, Option<crate::Error>) {
        st.writing = true;
        let fresh = std::mem::take(&mut st.spare);
        let mut batch = std::mem::replace(&mut st.pending, fresh);
        let lsns = st.pending_first..=st.next_lsn - 1;
        let callers = std::mem::take(&mut st.pending_callers);
        let (seg, poisoned, written_before) =
            (st.current.clone(), st.poisoned.is_some(), st.written);
        drop(st);
        let _unwind = Unwind(self, |st| st.writing = false);
        let failed = append(&seg, &batch);
        // An empty segment is not left for another: the new one would have
        // its name. The next segment begins right after the last record
        // written (a failed batch's records are not), so that a reader can
        // tell a segment that lost its end from one that ended there.
        let len = seg.len.load(Ordering::Relaxed);
        let last_written = if failed.is_none() {
            *lsns.end()
        } else {
            written_before
        };
        let next = (len > 0 && (roll || (len >= self.segment_size && failed.is_none())))
            .then(|| self.next_segment(&seg, last_written + 1, poisoned));
        let mut st = self.lock();
        match failed {
            None => {
                st.written = *lsns.end();
                st.log_bytes += batch.len() as u64;
                st.last_write_failed = false;
            }
            Some(Failed { error, cut }) => {
                tracing::error!(
                    "{}: a write of the log failed: {error}",
                    seg.name.path.display()
                );
                st.last_write_failed = true;
                if let Some(cut) = cut {
                    let path = seg.name.path.display();
                    st.poison(format!("write {path}: {error}; cutting it back: {cut}"));
                }
                if callers > 0 {
                    let (path, callers_left) = (seg.name.path.clone(), callers);
                    let lsns = lsns.clone();
                    st.failed.push(FailedBatch {
                        lsns,
                        error,
                        path,
                        callers_left,
                    });
                }
            }
        }
        st.done = *lsns.end();
        // A batch of large records (dump chunks) is not kept: its memory
        // goes back rather than stay with the log.
        if batch.capacity() <= SPARE_MAX {
            batch.clear();
            st.spare = batch;
        }
        let roll_failed = match next {
            Some(Ok(next)) => {
                if !poisoned && self.policy != FsyncPolicy::No {
                    st.synced = st.synced.max(st.written);
                }
                let old = std::mem::replace(&mut st.current, next);
                st.closed.push(old.name.clone());
                None
            }
            Some(Err(e)) => {
                match e.kind() {
                    ErrorKind::Poisoned(why) => st.poison(why.clone()),
                    _ => tracing::warn!("the log could not begin a new segment: {e}"),
                }
                Some(e)
            }
            None => None,
        };
        st.writing = false;
        self.wake(&st, Event::Written);
        (st, *lsns.end(), roll_failed)
    }

    /// The segment after `old`, starting at `first_lsn`. Only the newest
    /// segment may end torn: `old` is synced before the next takes a record
    /// (a sync that fails poisons the log; in a poisoned log, whose
    /// checkpoint writes every filter anew, it is not synced), and the new
    /// one's name is made durable.
    fn next_segment(&self, old: &Segment, first_lsn: u64, poisoned: bool) -> Result<Arc<Segment>> {
        if self.policy != FsyncPolicy::No && !poisoned {
            let path = old.name.path.display();
            let synced = old.file.sync_data();
            synced.map_err(|e| ErrorKind::Poisoned(format!("sync {path}: {e}")))?;
        }
        let path = segment::path(&self.dir, first_lsn);
        let file = self
            .fs
            .create(&path)
            .map_err(|e| io_err("create", &path, e))?;
        if self.policy != FsyncPolicy::No {
            self.sync_dir()?;
        }
        Ok(Arc::new(Segment {
            file,
            name: SegmentFile { first_lsn, path },
            len: AtomicU64::new(0),
        }))
    }

    /// Waits until every record up to `lsn` (at most the last written) is
    /// synced, syncing if no sync is running. A caller the running sync
    /// does not cover waits for the next one, on the other condition
    /// variable: the end of a sync wakes only the callers it covers, and
    /// one of the others to begin the next.
    pub(crate) fn sync_through(&self, lsn: u64) -> Result<()> {
        let mut st = self.lock();
        while st.synced < lsn {
            st.usable()?;
            let generation = st.sync_generation + u64::from(lsn > st.sync_target);
            st = match st.syncing {
                true => self.wait(st, Event::Synced(generation)),
                false => self.sync_once(st),
            };
        }
        Ok(())
    }

    /// One sync of everything written, the caller taking the syncer's part;
    /// under `everysec` it writes the sync mark too, under `always` at most
    /// once a second.
    fn sync_once<'a>(&'a self, mut st: MutexGuard<'a, State>) -> MutexGuard<'a, State> {
        st.syncing = true;
        st.sync_generation += 1;
        st.sync_target = st.written;
        let (generation, target, seg) = (st.sync_generation, st.written, st.current.clone());
        let mark_due = self.policy == FsyncPolicy::EverySec
            || (self.policy == FsyncPolicy::Always && st.mark_written.elapsed() >= SYNC_EVERY);
        drop(st);
        let _unwind = Unwind(self, |st| st.syncing = false);
        let began = Instant::now();
        let mark = Mark {
            first_lsn: seg.name.first_lsn,
            offset: seg.len.load(Ordering::Relaxed),
        };
        let mut result = seg
            .file
            .sync_data()
            .map_err(|e| io_err("sync", &seg.name.path, e));
        if result.is_ok() && mark_due {
            result = self.put_mark(mark);
        }
        let mut st = self.lock();
        st.syncing = false;
        match result {
            Ok(()) => {
                st.synced = st.synced.max(target);
                st.sync_began = began;
                if mark_due {
                    st.mark_written = began;
                }
            }
            Err(e) => st.poison(e.to_string()),
        }
        self.wake(&st, Event::Synced(generation));
        if st.poisoned.is_some() {
            self.wake(&st, Event::Synced(generation + 1));
        } else if st.waiting[Event::Synced(generation + 1).slot()] > 0 {
            self.done[Event::Synced(generation + 1).slot()].notify_one();
        }
        // Callbacks synced through, or all of them in a poisoned log.
        let (synced, poisoned) = (st.synced, st.poisoned.clone());
        let ready: Vec<_> = (st.callbacks)
            .extract_if(.., |(lsn, _)| *lsn <= synced || poisoned.is_some())
            .collect();
        if ready.is_empty() {
            return st;
        }
        drop(st);
        for (lsn, callback) in ready {
            callback(match (&poisoned, lsn <= synced) {
                (Some(why), false) => Err(ErrorKind::Poisoned(why.clone()).into()),
                _ => Ok(()),
            });
        }
        self.lock()
    }

    fn put_mark(&self, mark: Mark) -> Result<()> {
        let path = self.dir.join(MARK);
        let file = open_or_create(&*self.fs, &path)?;
        file.write_all_at(&mark.encode(), 0)
            .and_then(|()| file.sync_data())
            .map_err(|e| io_err("write", &path, e))
    }

    /// Syncs the current segment and writes the sync mark at its end: for
    /// the open, a clean close and [`Store::sync`](crate::Store::sync).
    fn write_mark(&self) -> Result<()> {
        let seg = self.lock().current.clone();
        // The length before the sync: what a writer appends after the
        // sync began may not be durable, and the mark must not claim it.
        let offset = seg.len.load(Ordering::Relaxed);
        seg.file
            .sync_data()
            .map_err(|e| io_err("sync", &seg.name.path, e))?;
        self.put_mark(Mark {
            first_lsn: seg.name.first_lsn,
            offset,
        })
    }

    /// Writes and syncs everything appended so far (`no`: writes only).
    pub(crate) fn flush(&self) -> Result<()> {
        let mut st = self.lock();
        while st.writing || !st.pending.is_empty() {
            st = match st.writing {
                true => self.wait(st, Event::Written),
                false => self.write_pending(st, false).0,
            };
        }
        let written = st.written;
        drop(st);
        if self.policy != FsyncPolicy::No {
            self.sync_through(written)?;
            self.write_mark()?;
        }
        Ok(())
    }

    /// Moves the log on to a new segment, for a checkpoint: returns the lsn
    /// of the last record the segments before it hold, and those segments.
    /// Runs on a poisoned log too (whose recovery it begins).
    pub(crate) fn roll(&self) -> Result<(u64, Vec<SegmentFile>)> {
        // Most of the segment synced first, writers going on: the roll's
        // own sync of it, which they wait for, then has little left to do.
        let mut st = self.lock();
        if self.policy != FsyncPolicy::No && st.poisoned.is_none() {
            let written = st.written;
            drop(st);
            self.sync_through(written)?;
            st = self.lock();
        }
        while st.writing {
            st = self.wait(st, Event::Written);
        }
        let (mut st, last, failed) = self.write_pending(st, true);
        if let Some(e) = failed {
            return Err(e);
        }
        st.log_bytes = 0;
        Ok((last, st.closed.clone()))
    }

    /// Removes segments a checkpoint's snapshots cover (oldest first,
    /// stopping at one that cannot be removed, so that the log keeps no
    /// gap), then syncs the directory.
    pub(crate) fn retire(&self, segments: &[SegmentFile]) -> Result<()> {
        for s in segments {
            match self.fs.remove(&s.path) {
                Err(e) if e.kind() != io::ErrorKind::NotFound => {
                    tracing::warn!("{}: not removed yet: {e}", s.path.display());
                    break;
                }
                _ => lock(&self.state).closed.retain(|c| c != s),
            }
        }
        self.sync_dir()
    }

    /// Once a checkpoint has written every filter from memory after the log
    /// was poisoned (and retired its segments): takes records again.
    pub(crate) fn clear_poison(&self) {
        let mut st = self.lock();
        st.poisoned = None;
        st.synced = st.written;
        st.sync_began = Instant::now();
    }

    pub(crate) fn poisoned(&self) -> bool {
        self.lock().poisoned.is_some()
    }

    /// Whether writing is failing: a poisoned log, or a last write that
    /// failed.
    pub(crate) fn failing(&self) -> bool {
        let st = self.lock();
        st.poisoned.is_some() || st.last_write_failed
    }

    pub(crate) fn log_bytes(&self) -> u64 {
        self.lock().log_bytes
    }

    /// Under `everysec`: whether an answer must wait for a sync first.
    pub(crate) fn sync_overdue(&self) -> bool {
        let st = self.lock();
        self.policy == FsyncPolicy::EverySec
            && st.written > st.synced
            && st.sync_began.elapsed() > SYNC_OVERDUE
    }

    /// Under `everysec`: the time since the last sync that succeeded began.
    pub(crate) fn unsynced_for(&self) -> Option<Duration> {
        (self.policy == FsyncPolicy::EverySec).then(|| self.lock().sync_began.elapsed())
    }

    pub(crate) fn dir(&self) -> &Path {
        &self.dir
    }
}

/// A failed write of a batch, and the failure to cut it back off, if that
/// failed too.
struct Failed {
    error: io::Error,
    cut: Option<io::Error>,
}

/// Appends `batch` to `seg`. Nothing may follow the bytes of a failed
/// batch: they are cut off again, or the log takes no more.
fn append(seg: &Segment, batch: &[u8]) -> Option<Failed> {
    if batch.is_empty() {
        return None;
    }
    let at = seg.len.load(Ordering::Relaxed);
    match seg.file.write_all_at(batch, at) {
        Ok(()) => {
            seg.len.store(at + batch.len() as u64, Ordering::Relaxed);
            None
        }
        Err(error) => Some(Failed {
            error,
            cut: seg.file.set_len(at).err(),
        }),
    }
}

/// Gives up the writer's or the syncer's part when its holder panics (a
/// bug): the log is poisoned, and the others go on to fail, or to the
/// checkpoint that recovers it, rather than wait for ever.
struct Unwind<'a>(&'a Log, fn(&mut State));

impl Drop for Unwind<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            let mut st = self.0.lock();
            (self.1)(&mut st);
            st.poison("a write or sync of the log panicked".into());
            self.0.done.iter().for_each(Condvar::notify_all);
        }
    }
}

/// Locks a mutex whose data stays consistent even if a holder panicked
/// (every update under these locks is a few assignments).
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}
