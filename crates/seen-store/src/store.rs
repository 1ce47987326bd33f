//! [`Store`]: named filters in a data directory, durable through the log
//! and snapshots.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use seen_core::{AnyFilter, Charge, ItemHash, MemoryBudget, Removal, ScalableBloomFilter};

use crate::error::{ErrorKind, Result, Salvage};
use crate::filter::{self, apply_adds, apply_removes, plan_round, Hasher};
use crate::fs::{Fs, RealFs};
use crate::log::{lock, FsyncPolicy, Log};
use crate::record::{
    FilterSpec, Hashes, Record, MAX_CHUNK_PER_RECORD, MAX_HASHES_PER_RECORD, MAX_NAME_LEN,
};
use crate::recover::Recovery;
use crate::replay::Rebuilt;

/// How a [`Store`] behaves.
#[derive(Clone, Debug)]
pub struct StoreOptions {
    /// When the log is synced.
    pub fsync: FsyncPolicy,
    /// The size past which the log moves on to a new segment file (each
    /// checkpoint also begins one). Segments are not preallocated.
    pub segment_size: u64,
    /// Largest filter (bytes of bits) the store creates or loads.
    pub max_filter_bytes: u64,
    /// Most bytes of bits all filters together may hold (a server's
    /// `maxmemory`): a create, a load, or a scalable chain's growth that
    /// would pass it fails with [`seen_core::ErrorKind::TooLarge`]. The
    /// filters a reopen finds are kept even past it, and then only refuse
    /// to grow.
    pub max_memory: u64,
    /// Recover what can be recovered from a corrupt log or snapshot instead
    /// of refusing to open (losing the damaged part, with warnings). A
    /// damaged snapshot is renamed `<id>.snap.damaged` (or, if that name is
    /// taken, `<id>.snap.damaged.<n>`; kept, never read, its id given to no
    /// new filter). If anything was skipped ([`Recovery::salvaged`]), the
    /// open ends with a checkpoint, after which the directory opens without
    /// salvage. With nothing damaged, the open is an ordinary one. A
    /// snapshot that cannot be opened or read (an I/O error other than its
    /// end coming early), or whose sound filter is larger than
    /// `max_filter_bytes` ([`ErrorKind::CannotLoad`]), is not damage: it
    /// stops a salvaging open too.
    pub salvage: bool,
}

impl Default for StoreOptions {
    fn default() -> Self {
        StoreOptions {
            fsync: FsyncPolicy::EverySec,
            segment_size: 64 << 20,
            max_filter_bytes: seen_core::DEFAULT_MAX_BYTES,
            max_memory: u64::MAX,
            salvage: false,
        }
    }
}

/// The result of adding a batch: whether each item was new, and the error
/// that stopped the batch early, if one did (a full non-scaling filter).
#[derive(Debug)]
pub struct AddOutcome {
    /// `new[i]`: item `i` was not present before.
    pub new: Vec<bool>,
    /// Set when the batch stopped before its end.
    pub stopped: Option<seen_core::Error>,
}

/// A promise of durability to wait for: see [`Store::wait`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
#[must_use = "a result is acknowledged only after Store::wait"]
pub struct Pending(u64);

impl Pending {
    /// The later of two promises (waiting for it covers both).
    pub fn max(self, other: Pending) -> Pending {
        Pending(self.0.max(other.0))
    }
}

/// Runs a closure that may block for long; see [`Store::set_blocking_hook`].
pub type BlockingHook = Box<dyn Fn(&mut dyn FnMut()) + Send + Sync>;

/// How long [`Store::open`] waits for the directory's lock.
const LOCK_WAIT: Duration = Duration::from_millis(500);

/// How long after a failed recovery of a poisoned log a lookup fails at
/// once rather than try another.
const RECOVERY_RETRY: Duration = Duration::from_secs(1);

pub(crate) struct EntryState {
    pub(crate) filter: AnyFilter,
    pub(crate) expire_at_ms: i64,
    /// The lsn of its last record.
    pub(crate) last_lsn: u64,
    /// Deleted (gone from the store's map) while a caller waited for it.
    pub(crate) deleted: bool,
}

impl EntryState {
    fn expired(&self) -> bool {
        self.expire_at_ms != 0 && self.expire_at_ms <= now_ms()
    }
}

/// One filter. Its mutations hold `state` exclusively from logging their
/// record to applying it, so that the log holds them in the order they
/// were applied and replay rebuilds the same filter; lookups hold it
/// shared.
pub(crate) struct Entry {
    pub(crate) id: u64,
    pub(crate) name: Vec<u8>,
    hasher: Hasher,
    pub(crate) state: RwLock<EntryState>,
    /// Every record of the filter up to this lsn is in its snapshot (set
    /// by checkpoints, which hold `state` shared at most).
    pub(crate) snap_lsn: AtomicU64,
    /// Its bytes in the store's memory budget, given back when it goes.
    charge: Charge,
}

impl Entry {
    pub(crate) fn read(&self) -> RwLockReadGuard<'_, EntryState> {
        self.state.read().unwrap_or_else(|e| e.into_inner())
    }
    pub(crate) fn write(&self) -> RwLockWriteGuard<'_, EntryState> {
        self.state.write().unwrap_or_else(|e| e.into_inner())
    }
}

pub(crate) struct Inner {
    pub(crate) fs: Arc<dyn Fs>,
    pub(crate) snap_dir: PathBuf,
    pub(crate) opts: StoreOptions,
    pub(crate) log: Arc<Log>,
    pub(crate) filters: RwLock<HashMap<Vec<u8>, Arc<Entry>>>,
    next_id: AtomicU64,
    /// Filters deleted since the last checkpoint, with their delete's lsn:
    /// their snapshots go then.
    pub(crate) deleted: Mutex<Vec<(u64, u64)>>,
    budget: Arc<MemoryBudget>,
    pub(crate) checkpointing: Mutex<()>,
    /// When the last recovery of a poisoned log failed.
    recovering: Mutex<Option<Instant>>,
    hook: OnceLock<BlockingHook>,
    recovery: Recovery,
    _lock: Box<dyn Send + Sync>,
}

impl Drop for Inner {
    fn drop(&mut self) {
        self.log.close();
    }
}

/// Named filters in a data directory.
///
/// Every mutation is appended to the log (as item hashes, never item
/// bytes) before it is applied, and acknowledged only once the record is
/// as durable as the [`FsyncPolicy`] promises. Checkpoints write each
/// changed filter as a snapshot and remove the log segments the snapshots
/// cover.
#[derive(Clone)]
pub struct Store {
    pub(crate) inner: Arc<Inner>,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store")
            .field("filters", &self.len())
            .finish()
    }
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

impl Store {
    /// Opens (creating if needed) the data directory `dir`.
    pub fn open(dir: impl AsRef<Path>, opts: StoreOptions) -> Result<Store> {
        Self::open_with_fs(dir, opts, Arc::new(RealFs))
    }

    /// [`open`](Self::open) on a file system of the caller's.
    pub fn open_with_fs(
        dir: impl AsRef<Path>,
        opts: StoreOptions,
        fs: Arc<dyn Fs>,
    ) -> Result<Store> {
        let dir = dir.as_ref();
        let (snap_dir, log_dir) = (dir.join("snapshots"), dir.join("log"));
        for d in [dir, &snap_dir, &log_dir] {
            fs.create_dir_all(d)
                .map_err(|e| crate::error::io_err("create directory", d, e))?;
        }
        let dir_lock = take_lock(&*fs, dir)?;
        let salvage = Salvage::new(opts.salvage);
        let staged = crate::legacy::upgrade_if_needed(&*fs, dir, &opts, &salvage)?;
        let decode = seen_core::DecodeOptions {
            max_bytes: opts.max_filter_bytes,
        };
        let mut found = crate::recover::recover(&*fs, &snap_dir, &log_dir, &decode, &salvage)?;
        found.recovery.staged = staged;
        if let (Some(at), Some(newest)) = (found.torn_at, found.tail.segments.last()) {
            let cut = fs
                .open_rw(&newest.path)
                .and_then(|f| f.set_len(at).and_then(|()| f.sync_data()));
            cut.map_err(|e| crate::error::io_err("cut the torn tail of", &newest.path, e))?;
        }
        if opts.fsync != FsyncPolicy::No {
            // This run's answers build on what the last one left, synced or
            // not: make it durable before acknowledging anything.
            for s in &found.tail.segments {
                let synced = fs.open_read(&s.path).and_then(|f| f.sync_data());
                synced.map_err(|e| crate::error::io_err("sync", &s.path, e))?;
            }
            fs.sync_dir(&snap_dir)
                .map_err(|e| crate::error::io_err("sync directory", &snap_dir, e))?;
        }
        let log = Log::start(
            fs.clone(),
            &log_dir,
            opts.fsync,
            opts.segment_size,
            found.tail,
        )?;
        let budget = MemoryBudget::new(opts.max_memory);
        let store = Store {
            inner: Arc::new(Inner {
                fs,
                snap_dir,
                opts,
                log,
                filters: RwLock::default(),
                next_id: AtomicU64::new(found.next_id),
                deleted: Mutex::new(found.deleted.iter().map(|&id| (id, 0)).collect()),
                budget,
                checkpointing: Mutex::default(),
                recovering: Mutex::default(),
                hook: OnceLock::new(),
                recovery: std::mem::take(&mut found.recovery),
                _lock: dir_lock,
            }),
        };
        let mut older = Vec::new();
        for f in found.filters {
            if let Some(earlier) = store.insert_rebuilt(f) {
                older.push(earlier);
            }
        }
        // Two filters of one name: a power loss kept the later one but not
        // the earlier one's delete. The later keeps the name.
        for id in older {
            tracing::warn!("filter {id} shares its name with a later one; deleting it again");
            let lsn = store.inner.log.write(&Record::Delete { id })?;
            lock(&store.inner.deleted).push((id, lsn));
        }
        let (used, limit) = (store.memory_bytes(), store.inner.opts.max_memory);
        if used > limit {
            tracing::warn!(
                "{}: the filters hold {used} bytes, more than max_memory ({limit} bytes): they are kept, and no filter is created or grows until some are deleted",
                dir.display()
            );
        }
        if salvage.skipped() > 0 {
            crate::checkpoint::run(&store, crate::checkpoint::Source::Memory)?;
        }
        Ok(store)
    }

    /// Puts a filter the open rebuilt into the map; returns the id of the
    /// one of the same name it displaced, if any (the lower id).
    fn insert_rebuilt(&self, mut f: Rebuilt) -> Option<u64> {
        let charge = self
            .inner
            .budget
            .charge_anyway(filter::memory_bytes(&f.filter));
        if let AnyFilter::Scalable(c) = &mut f.filter {
            c.set_max_bytes(self.inner.opts.max_filter_bytes);
            c.set_charge(charge.clone());
        }
        let entry = Arc::new(Entry {
            id: f.id,
            hasher: Hasher::of(&f.filter),
            name: f.name.clone(),
            state: RwLock::new(EntryState {
                filter: f.filter,
                expire_at_ms: f.expire_at_ms,
                last_lsn: f.last_lsn,
                deleted: false,
            }),
            snap_lsn: AtomicU64::new(f.snap_lsn),
            charge,
        });
        let mut map = self.filters_mut();
        let earlier = map.insert(f.name, entry)?;
        earlier.charge.release();
        Some(earlier.id)
    }

    fn filters(&self) -> RwLockReadGuard<'_, HashMap<Vec<u8>, Arc<Entry>>> {
        self.inner.filters.read().unwrap_or_else(|e| e.into_inner())
    }

    fn filters_mut(&self) -> RwLockWriteGuard<'_, HashMap<Vec<u8>, Arc<Entry>>> {
        self.inner
            .filters
            .write()
            .unwrap_or_else(|e| e.into_inner())
    }

    fn entry(&self, name: &[u8]) -> Option<Arc<Entry>> {
        self.filters().get(name).cloned()
    }

    /// The filters now, for a checkpoint.
    pub(crate) fn entries(&self) -> Vec<Arc<Entry>> {
        self.filters().values().cloned().collect()
    }

    /// What the open found and how long it took.
    pub fn recovery(&self) -> &Recovery {
        &self.inner.recovery
    }

    /// Has the store run through `hook` the parts of its calls that may
    /// block for long: building a large filter, waiting for a sync overdue
    /// under `everysec`, and the checkpoint that makes a poisoned log usable
    /// again. A server on an async runtime passes a hook that tells the
    /// runtime so (tokio's `block_in_place`). The hook must call the
    /// closure it is given, on the calling thread, and must not call into
    /// the store. Only the first hook set is kept: returns false for a
    /// later one.
    pub fn set_blocking_hook(&self, hook: BlockingHook) -> bool {
        self.inner.hook.set(hook).is_ok()
    }

    fn blocking<R>(&self, f: impl FnOnce() -> R) -> R {
        let Some(hook) = self.inner.hook.get() else {
            return f();
        };
        let (mut f, mut out) = (Some(f), None);
        hook(&mut || out = f.take().map(|f| f()));
        out.unwrap_or_else(|| f.take().expect("the hook ran nothing")())
    }

    /// The live (not expired) entry for `name`, deleting it if it expired.
    fn live(&self, name: &[u8]) -> Result<Option<Arc<Entry>>> {
        let Some(e) = self.entry(name) else {
            return Ok(None);
        };
        if e.read().expired() {
            if let Err(err) = self.delete_entry(name, Some(e.id), true) {
                tracing::warn!(
                    "filter {:?} expired; its delete is not logged yet: {err}",
                    String::from_utf8_lossy(name)
                );
            }
            return Ok(None);
        }
        Ok(Some(e))
    }

    /// Before a mutation or an answer that rests on one: a poisoned log is
    /// recovered first (a lookup tries at most once a second).
    fn usable(&self, lookup: bool) -> Result<()> {
        if !self.inner.log.poisoned() {
            return Ok(());
        }
        let mut last = lock(&self.inner.recovering);
        if lookup && last.is_some_and(|t| t.elapsed() < RECOVERY_RETRY) {
            return Err(
                ErrorKind::Poisoned("a recovery failed less than a second ago".into()).into(),
            );
        }
        let r = self.blocking(|| crate::checkpoint::run(self, crate::checkpoint::Source::Memory));
        *last = r.is_err().then(Instant::now);
        r
    }

    /// Creates a filter. Fails with [`ErrorKind::Exists`] if the name is
    /// taken.
    pub fn create(&self, name: &[u8], spec: &FilterSpec) -> Result<()> {
        self.create_limited(name, spec, self.inner.opts.max_filter_bytes)
    }

    /// [`create`](Self::create), refusing a filter of more than `max_bytes`
    /// bytes (or of more than the store's own limit), before anything is
    /// allocated or logged.
    pub fn create_limited(&self, name: &[u8], spec: &FilterSpec, max_bytes: u64) -> Result<()> {
        let large = filter::builds_large(spec);
        self.create_with(
            name,
            max_bytes,
            large,
            |room| filter::build(spec, room),
            |id| Record::Create {
                id,
                spec: *spec,
                name,
            },
        )
    }

    /// `BF.LOADCHUNK name 1 header`: creates a zeroed RedisBloom chain from
    /// a dump header, refusing one of more than `max_bytes` (or the store's
    /// limit) before allocating. Fails with [`ErrorKind::Exists`] if the
    /// name is taken.
    pub fn load_redis_header(&self, name: &[u8], header: &[u8], max_bytes: u64) -> Result<()> {
        let make = |room| {
            Ok(AnyFilter::Scalable(ScalableBloomFilter::from_redis_header(
                header, room,
            )?))
        };
        self.create_with(name, max_bytes, true, make, |id| Record::LoadHeader {
            id,
            name,
            header,
        })
    }

    fn create_with<'a>(
        &self,
        name: &'a [u8],
        max_bytes: u64,
        large: bool,
        make: impl FnOnce(u64) -> Result<AnyFilter>,
        record: impl Fn(u64) -> Record<'a>,
    ) -> Result<()> {
        self.usable(false)?;
        if name.len() > MAX_NAME_LEN {
            return Err(ErrorKind::NameTooLong {
                len: name.len(),
                max: MAX_NAME_LEN,
            }
            .into());
        }
        if self.live(name)?.is_some() {
            return Err(ErrorKind::Exists.into());
        }
        let room = max_bytes.min(self.inner.opts.max_filter_bytes);
        let room_left = room.min(self.inner.budget.available());
        let mut filter = match large {
            true => self.blocking(|| make(room_left)),
            false => make(room_left),
        }
        .map_err(|e| match e.kind() {
            // Said against the store's whole budget when that is what
            // refused it.
            ErrorKind::Filter(f) if room_left < room => match f.kind() {
                seen_core::ErrorKind::TooLarge { needed, .. } => {
                    seen_core::Error::from(seen_core::ErrorKind::TooLarge {
                        needed: *needed,
                        limit: room_left,
                    })
                    .into()
                }
                _ => e,
            },
            _ => e,
        })?;
        let charge = self.inner.budget.charge(filter::memory_bytes(&filter))?;
        if let AnyFilter::Scalable(c) = &mut filter {
            c.set_max_bytes(self.inner.opts.max_filter_bytes);
            c.set_charge(charge.clone());
        }
        let lsn = {
            let mut map = self.filters_mut();
            if let Some(old) = map.get(name).cloned() {
                if !old.read().expired() {
                    charge.release();
                    return Err(ErrorKind::Exists.into());
                }
                // An expired filter of the name goes first.
                let mut st = old.write();
                let deleted = self.inner.log.write(&Record::Delete { id: old.id });
                let lsn = deleted.inspect_err(|_| charge.release())?;
                self.forget(&old, &mut st, lsn);
                map.remove(name);
            }
            let id = self.inner.next_id.fetch_add(1, Ordering::Relaxed);
            let lsn = self
                .inner
                .log
                .write(&record(id))
                .inspect_err(|_| charge.release())?;
            let entry = Arc::new(Entry {
                id,
                name: name.to_vec(),
                hasher: Hasher::of(&filter),
                state: RwLock::new(EntryState {
                    filter,
                    expire_at_ms: 0,
                    last_lsn: lsn,
                    deleted: false,
                }),
                snap_lsn: AtomicU64::new(0),
                charge,
            });
            map.insert(name.to_vec(), entry);
            lsn
        };
        self.wait(Pending(lsn))
    }

    /// Marks a filter deleted (its delete logged at `lsn`, its state held
    /// since): callers waiting for it look its name up again.
    fn forget(&self, e: &Entry, st: &mut EntryState, lsn: u64) {
        st.deleted = true;
        e.charge.release();
        lock(&self.inner.deleted).push((e.id, lsn));
    }

    /// Adds items to a filter, creating it with `create` first if it does
    /// not exist and `create` is given. Returns once the adds are as durable
    /// as the fsync policy promises.
    pub fn add(
        &self,
        name: &[u8],
        items: &[&[u8]],
        create: Option<&FilterSpec>,
    ) -> Result<AddOutcome> {
        let limit = self.inner.opts.max_filter_bytes;
        let (outcome, pending) = self.add_pending(name, items, create, limit)?;
        self.wait(pending)?;
        Ok(outcome)
    }

    /// [`add`](Self::add) without waiting for a sync: the adds are logged
    /// (a process kill cannot lose them) and applied, and the caller must
    /// [`wait`](Self::wait) for the returned [`Pending`] before it
    /// acknowledges them. A server answering a pipeline of commands waits
    /// once for all of them (one fsync per batch under `always`). A filter
    /// it creates is limited to `create_limit` bytes.
    pub fn add_pending(
        &self,
        name: &[u8],
        items: &[&[u8]],
        create: Option<&FilterSpec>,
        create_limit: u64,
    ) -> Result<(AddOutcome, Pending)> {
        self.usable(false)?;
        loop {
            let Some(entry) = self.live(name)? else {
                let spec = create.ok_or(ErrorKind::NotFound)?;
                match self.create_limited(name, spec, create_limit) {
                    Err(e) if !matches!(e.kind(), ErrorKind::Exists) => return Err(e),
                    _ => continue,
                }
            };
            let hashes = entry.hasher.hash_all(items);
            let mut st = entry.write();
            if st.deleted || st.expired() {
                continue;
            }
            let outcome = match filter::may_grow(&st.filter, hashes.len()) {
                true => self.blocking(|| self.add_hashes(&entry, &mut st, &hashes)),
                false => self.add_hashes(&entry, &mut st, &hashes),
            }?;
            drop(st);
            return Ok((outcome, Pending(self.inner.log.written())));
        }
    }

    /// Logs and applies adds, round by round (see [`plan_round`]).
    fn add_hashes(
        &self,
        e: &Entry,
        st: &mut EntryState,
        hashes: &[ItemHash],
    ) -> Result<AddOutcome> {
        let mut new = Vec::with_capacity(hashes.len());
        while new.len() < hashes.len() {
            let round = plan_round(&mut st.filter, &hashes[new.len()..]);
            let mut added = vec![false; round.considered];
            if !round.logged.is_empty() {
                let logged: Vec<ItemHash> = round
                    .logged
                    .iter()
                    .map(|&i| hashes[new.len() + i])
                    .collect();
                let record = Record::Add {
                    id: e.id,
                    hashes: Hashes::Decoded(&logged),
                };
                st.last_lsn = self.inner.log.write(&record)?;
                let results = apply_adds(&mut st.filter, Hashes::Decoded(&logged))?;
                round
                    .logged
                    .iter()
                    .zip(results)
                    .for_each(|(&i, n)| added[i] = n);
            }
            new.extend(added);
            if round.stopped.is_some() {
                return Ok(AddOutcome {
                    new,
                    stopped: round.stopped,
                });
            }
        }
        Ok(AddOutcome { new, stopped: None })
    }

    /// Looks items up; `None` if the filter does not exist.
    pub fn contains(&self, name: &[u8], items: &[&[u8]]) -> Result<Option<Vec<bool>>> {
        let (out, pending) = self.contains_pending(name, items)?;
        self.wait(pending)?;
        Ok(out)
    }

    /// [`contains`](Self::contains) without waiting: an answer of "present"
    /// may rest on an add that is not synced yet, so the caller must
    /// [`wait`](Self::wait) before it sends the answer.
    pub fn contains_pending(
        &self,
        name: &[u8],
        items: &[&[u8]],
    ) -> Result<(Option<Vec<bool>>, Pending)> {
        let Some(entry) = self.live(name)? else {
            return Ok((None, Pending(0)));
        };
        let hashes = entry.hasher.hash_all(items);
        let out = filter::contains(&entry.read().filter, &hashes);
        if !out.contains(&true) {
            return Ok((Some(out), Pending(0)));
        }
        self.usable(true)?;
        Ok((Some(out), Pending(self.inner.log.written())))
    }

    /// Waits until everything a [`Pending`] covers is as durable as the
    /// fsync policy promises: under `always` synced; under `everysec`
    /// written (it survives a process kill), and synced too once the last
    /// sync began over 1.5 s ago; under `no` written. Waiting for the
    /// largest of several `Pending`s covers them all.
    pub fn wait(&self, pending: Pending) -> Result<()> {
        let log = &self.inner.log;
        let must_sync = pending.0 > 0
            && match self.inner.opts.fsync {
                FsyncPolicy::Always => true,
                FsyncPolicy::EverySec => log.sync_overdue(),
                FsyncPolicy::No => false,
            };
        if !must_sync {
            return Ok(());
        }
        match self.inner.opts.fsync {
            FsyncPolicy::Always => log.sync_through(pending.0),
            _ => self.blocking(|| log.sync_through(pending.0)),
        }
    }

    /// Whether a mutation, or [`wait`](Self::wait) for one, blocks for a
    /// disk's time outside the blocking hook: under `always` (the wait is
    /// for an fsync). An async caller then moves its mutations off its
    /// event loop.
    pub fn may_block(&self) -> bool {
        self.inner.opts.fsync == FsyncPolicy::Always
    }

    /// `BF.LOADCHUNK name iter data` for a chunk of bits: copies `data` into
    /// an existing RedisBloom-layout chain. Fails with
    /// [`ErrorKind::NotFound`] if there is no such filter, and with a
    /// filter error (nothing logged or changed) if the chunk does not fit.
    pub fn load_redis_chunk(&self, name: &[u8], iter: u64, data: &[u8]) -> Result<()> {
        self.usable(false)?;
        let entry = self.live(name)?.ok_or(ErrorKind::NotFound)?;
        let lsn = {
            let mut st = entry.write();
            let AnyFilter::Scalable(chain) = &mut st.filter else {
                return Err(ErrorKind::WrongKind("only RedisBloom chains load dump chunks").into());
            };
            chain.redis_chunk_place(iter, data.len() as u64)?;
            // Pieces no larger than a record may be, each a valid chunk of
            // its own, applied as soon as it is logged.
            let base = iter - data.len() as u64;
            let mut at = 0;
            for piece in data.chunks(MAX_CHUNK_PER_RECORD) {
                at += piece.len() as u64;
                let record = Record::LoadChunk {
                    id: entry.id,
                    iter: base + at,
                    data: piece,
                };
                st.last_lsn = self.inner.log.write(&record)?;
                if let AnyFilter::Scalable(chain) = &mut st.filter {
                    chain.redis_load_chunk(base + at, piece)?;
                }
            }
            st.last_lsn
        };
        self.wait(Pending(lsn))
    }

    /// Removes items from a counting filter.
    pub fn remove(&self, name: &[u8], items: &[&[u8]]) -> Result<Vec<Removal>> {
        self.usable(false)?;
        let entry = self.live(name)?.ok_or(ErrorKind::NotFound)?;
        let hashes = entry.hasher.hash_all(items);
        let mut out = Vec::with_capacity(hashes.len());
        let lsn = {
            let mut st = entry.write();
            if !matches!(st.filter, AnyFilter::Counting(_)) {
                return Err(ErrorKind::WrongKind("only counting filters support remove").into());
            }
            for chunk in hashes.chunks(MAX_HASHES_PER_RECORD) {
                let record = Record::Remove {
                    id: entry.id,
                    hashes: Hashes::Decoded(chunk),
                };
                st.last_lsn = self.inner.log.write(&record)?;
                out.extend(apply_removes(&mut st.filter, Hashes::Decoded(chunk))?);
            }
            st.last_lsn
        };
        self.wait(Pending(lsn))?;
        Ok(out)
    }

    /// Deletes a filter; `false` if there was none, or only one that had
    /// expired (which goes all the same), as Redis's `DEL` counts keys.
    pub fn delete(&self, name: &[u8]) -> Result<bool> {
        self.usable(false)?;
        self.delete_entry(name, None, false)
    }

    /// Deletes the filter of `name` (with `only`, if it is still that one;
    /// with `expired_only`, if it has expired): whether it was there and
    /// live.
    pub(crate) fn delete_entry(
        &self,
        name: &[u8],
        only: Option<u64>,
        expired_only: bool,
    ) -> Result<bool> {
        let (live, lsn) = {
            let mut map = self.filters_mut();
            let Some(e) = map.get(name).cloned() else {
                return Ok(false);
            };
            if only.is_some_and(|id| id != e.id) {
                return Ok(false);
            }
            // Held while the delete is logged: no add of the filter comes
            // after it in the log.
            let mut st = e.write();
            let live = !st.expired();
            if expired_only && live {
                return Ok(false);
            }
            let lsn = self.inner.log.write(&Record::Delete { id: e.id })?;
            self.forget(&e, &mut st, lsn);
            drop(st);
            map.remove(name);
            (live, lsn)
        };
        self.wait(Pending(lsn))?;
        Ok(live)
    }

    /// Sets (or with `None` clears) the time a filter expires as a whole.
    pub fn expire_at(&self, name: &[u8], at: Option<SystemTime>) -> Result<bool> {
        self.usable(false)?;
        let Some(entry) = self.live(name)? else {
            return Ok(false);
        };
        let at_ms = at.map_or(0, |t| {
            t.duration_since(UNIX_EPOCH)
                .map_or(1, |d| d.as_millis() as i64)
                .max(1)
        });
        let lsn = {
            let mut st = entry.write();
            if st.deleted || st.expired() {
                drop(st);
                self.delete_entry(name, Some(entry.id), true)?;
                return Ok(false);
            }
            st.last_lsn = self.inner.log.write(&Record::Expire {
                id: entry.id,
                at_ms,
            })?;
            st.expire_at_ms = at_ms;
            st.last_lsn
        };
        self.wait(Pending(lsn))?;
        if at_ms != 0 && at_ms <= now_ms() {
            self.delete_entry(name, Some(entry.id), true)?;
        }
        Ok(true)
    }

    /// When the filter expires, if it does.
    pub fn expires_at(&self, name: &[u8]) -> Result<Option<Option<SystemTime>>> {
        let Some(entry) = self.live(name)? else {
            return Ok(None);
        };
        let at = entry.read().expire_at_ms;
        Ok(Some(
            (at != 0).then(|| UNIX_EPOCH + Duration::from_millis(at as u64)),
        ))
    }

    /// Runs `f` on a filter (for `BF.INFO`-style questions), with no
    /// mutation in progress. `None` if the filter does not exist.
    pub fn with_filter<R>(
        &self,
        name: &[u8],
        f: impl FnOnce(&AnyFilter) -> R,
    ) -> Result<Option<R>> {
        let Some(entry) = self.live(name)? else {
            return Ok(None);
        };
        let st = entry.read();
        Ok(Some(f(&st.filter)))
    }

    /// Names of all live filters.
    pub fn names(&self) -> Vec<Vec<u8>> {
        let entries = self.entries();
        entries
            .into_iter()
            .filter(|e| !e.read().expired())
            .map(|e| e.name.clone())
            .collect()
    }

    /// Number of filters (including expired ones not yet swept).
    pub fn len(&self) -> usize {
        self.filters().len()
    }

    /// True if there are no filters.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Writes a snapshot of every filter changed since the last checkpoint
    /// and removes the log segments all snapshots cover. Writers are not
    /// held up: each snapshot is rebuilt from the last one and the log, not
    /// copied from the live filter. After a failed sync (a poisoned log) it
    /// is the checkpoint that writes every filter from memory and makes the
    /// log usable again.
    pub fn checkpoint(&self) -> Result<()> {
        if self.inner.log.poisoned() {
            return self.usable(false);
        }
        crate::checkpoint::run(self, crate::checkpoint::Source::Log)
    }

    /// Writes and syncs everything logged so far (under `no`, writes it),
    /// and writes the sync mark: for a shutdown that does not checkpoint.
    pub fn sync(&self) -> Result<()> {
        self.inner.log.flush()
    }

    /// Checkpoints and syncs; the store can be reopened from its directory
    /// once every clone of it is dropped.
    pub fn close(self) -> Result<()> {
        self.checkpoint()?;
        self.sync()
    }

    /// Bytes of log written since the last checkpoint began (after an open,
    /// plus the log it read): about what a reopen would replay now.
    pub fn log_bytes(&self) -> u64 {
        self.inner.log.log_bytes()
    }

    /// Under [`FsyncPolicy::EverySec`], the longest an acknowledged
    /// mutation has stayed exposed to a power loss since the last call: from
    /// the start of one sync to the end of the next. `None` under the other
    /// policies, or if no sync has ended since the last call.
    pub fn take_sync_window(&self) -> Option<Duration> {
        self.inner.log.take_sync_window()
    }

    /// Under [`FsyncPolicy::EverySec`], how far back a power loss now could
    /// reach: the time since the last sync that succeeded began. Past 1.5 s
    /// every mutation first waits for a sync. `None` under the other
    /// policies.
    pub fn unsynced_for(&self) -> Option<Duration> {
        self.inner.log.unsynced_for()
    }

    /// Whether writing the log is failing, so that mutations fail: a sync
    /// failed (or the data directory went away) and no checkpoint has
    /// succeeded since, or the last write failed (a full disk: until a
    /// write succeeds).
    pub fn log_failed(&self) -> bool {
        self.inner.log.failing()
    }

    /// Bytes of filter memory (bits and counters) held by all filters.
    pub fn memory_bytes(&self) -> u64 {
        self.inner.budget.used()
    }

    /// Bytes of filter memory left under
    /// [`max_memory`](StoreOptions::max_memory) (0 when past it).
    pub fn memory_available(&self) -> u64 {
        self.inner.budget.available()
    }

    /// Directory of the log.
    pub fn log_dir(&self) -> &Path {
        self.inner.log.dir()
    }
}

/// Takes the data directory's lock, waiting up to [`LOCK_WAIT`].
fn take_lock(fs: &dyn Fs, dir: &Path) -> Result<Box<dyn Send + Sync>> {
    let path = dir.join("LOCK");
    let began = Instant::now();
    loop {
        match fs.try_lock(&path) {
            Ok(l) => return Ok(l),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                if began.elapsed() > LOCK_WAIT {
                    return Err(ErrorKind::Locked(dir.to_path_buf()).into());
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            Err(e) => return Err(crate::error::io_err("lock", &path, e)),
        }
    }
}
