//! [`Store`]: named filters in a data directory, durable through the log
//! and snapshots.

use std::collections::HashMap;
use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::{Arc, RwLockReadGuard, RwLockWriteGuard};
use std::time::{Duration, Instant};

use seen_core::{AnyFilter, ItemHash, Removal};

use crate::entry::{Entry, EntryState};
use crate::error::{ErrorKind, Result};
use crate::filter::{self, apply_adds, apply_removes, plan_round};
use crate::inner::{BlockingHook, Inner};
use crate::log::lock;
use crate::options::FsyncPolicy;
use crate::record::{FilterSpec, Hashes, Record, MAX_CHUNK_PER_RECORD, MAX_HASHES_PER_RECORD};
use crate::recover::Recovery;

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
pub struct Pending(pub(crate) u64);

impl Pending {
    /// The later of two promises (waiting for it covers both).
    pub fn max(self, other: Pending) -> Pending {
        Pending(self.0.max(other.0))
    }
}

/// How long after a failed recovery of a poisoned log a lookup fails at
/// once rather than try another.
const RECOVERY_RETRY: Duration = Duration::from_secs(1);

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

impl Store {
    pub(crate) fn filters(&self) -> RwLockReadGuard<'_, HashMap<Vec<u8>, Arc<Entry>>> {
        self.inner.filters.read().unwrap_or_else(|e| e.into_inner())
    }

    pub(crate) fn filters_mut(&self) -> RwLockWriteGuard<'_, HashMap<Vec<u8>, Arc<Entry>>> {
        self.inner
            .filters
            .write()
            .unwrap_or_else(|e| e.into_inner())
    }

    pub(crate) fn entry(&self, name: &[u8]) -> Option<Arc<Entry>> {
        self.filters().get(name).cloned()
    }

    pub(crate) fn entries(&self) -> Vec<Arc<Entry>> {
        self.inner.entries()
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

    pub(crate) fn blocking<R>(&self, f: impl FnOnce() -> R) -> R {
        let Some(hook) = self.inner.hook.get() else {
            return f();
        };
        let (mut f, mut out) = (Some(f), None);
        hook(&mut || out = f.take().map(|f| f()));
        out.unwrap_or_else(|| f.take().expect("the hook ran nothing")())
    }

    /// The live (not expired) entry for `name`, deleting it if it expired.
    pub(crate) fn live(&self, name: &[u8]) -> Result<Option<Arc<Entry>>> {
        let Some(e) = self.entry(name) else {
            return Ok(None);
        };
        if e.expired() {
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
    pub(crate) fn usable(&self, lookup: bool) -> Result<()> {
        if !self.inner.log.poisoned() {
            return Ok(());
        }
        let mut last = lock(&self.inner.recovering);
        if lookup && last.is_some_and(|t| t.elapsed() < RECOVERY_RETRY) {
            return Err(
                ErrorKind::Poisoned("a recovery failed less than a second ago".into()).into(),
            );
        }
        let r = self
            .blocking(|| crate::checkpoint::run(&self.inner, crate::checkpoint::Source::Memory));
        *last = r.is_err().then(Instant::now);
        r
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
            if st.deleted || entry.expired() {
                continue;
            }
            let outcome = match filter::may_grow(&st.filter, hashes.len()) {
                true => self.blocking(|| self.add_hashes(&entry, &mut st, &hashes)),
                false => self.add_hashes(&entry, &mut st, &hashes),
            }?;
            // The answers rest on this filter's records, all written by
            // now, up to its last.
            return Ok((outcome, Pending(st.last_lsn)));
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
                let logged = Hashes::bytes_of(round.logged.iter().map(|&i| hashes[new.len() + i]));
                let record = Record::Add {
                    id: e.id,
                    hashes: Hashes(&logged),
                };
                st.last_lsn = self.inner.log.write(&record)?;
                let results = apply_adds(&mut st.filter, Hashes(&logged))?;
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
        let st = entry.read();
        let (out, last_lsn) = (filter::contains(&st.filter, &hashes), st.last_lsn);
        drop(st);
        if !out.contains(&true) {
            return Ok((Some(out), Pending(0)));
        }
        self.usable(true)?;
        Ok((Some(out), Pending(last_lsn)))
    }

    /// Waits until everything a [`Pending`] covers is as durable as the
    /// fsync policy promises: under `always` synced; under `everysec`
    /// written (it survives a process kill), and synced too once the last
    /// sync began over 1.5 s ago; under `no` written. Waiting for the
    /// largest of several `Pending`s covers them all.
    pub fn wait(&self, pending: Pending) -> Result<()> {
        if !self.must_sync(pending) {
            return Ok(());
        }
        let log = &self.inner.log;
        match self.inner.opts.fsync {
            FsyncPolicy::Always => log.sync_through(pending.0),
            _ => self.blocking(|| log.sync_through(pending.0)),
        }
    }

    /// [`wait`](Self::wait) without blocking: calls `done` once what
    /// `pending` covers is as durable as the fsync policy promises (or with
    /// the error that prevents it), at once if it is, else from the thread
    /// whose sync makes it so. `done` must be short and must not call into
    /// the store. For a server on an async runtime, whose connections go on
    /// meanwhile: every connection waiting shares the next sync.
    pub fn when_durable(&self, pending: Pending, done: impl FnOnce(Result<()>) + Send + 'static) {
        match self.must_sync(pending) {
            true => self.inner.log.when_synced(pending.0, Box::new(done)),
            false => done(Ok(())),
        }
    }

    fn must_sync(&self, pending: Pending) -> bool {
        pending.0 > 0
            && match self.inner.opts.fsync {
                FsyncPolicy::Always => true,
                FsyncPolicy::EverySec => self.inner.log.sync_overdue(),
                FsyncPolicy::No => false,
            }
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
                let bytes = Hashes::bytes_of(chunk.iter().copied());
                let record = Record::Remove {
                    id: entry.id,
                    hashes: Hashes(&bytes),
                };
                st.last_lsn = self.inner.log.write(&record)?;
                out.extend(apply_removes(&mut st.filter, Hashes(&bytes))?);
            }
            st.last_lsn
        };
        self.wait(Pending(lsn))?;
        Ok(out)
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
            .filter(|e| !e.expired())
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
        // Expired filters go now, their deletes logged before the
        // checkpoint's roll, as a DEL would be.
        for e in self.entries() {
            if e.expire_at_ms.load(Ordering::Relaxed) != 0 {
                self.delete_entry(&e.name, Some(e.id), true)?;
            }
        }
        crate::checkpoint::run(&self.inner, crate::checkpoint::Source::Log)
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
    /// [`max_memory`](crate::StoreOptions::max_memory) (0 when past it).
    pub fn memory_available(&self) -> u64 {
        self.inner.budget.available()
    }

    /// The limit of all filters' memory together ([`max_memory`] at open).
    ///
    /// [`max_memory`]: crate::StoreOptions::max_memory
    pub fn max_memory(&self) -> u64 {
        self.inner.budget.limit()
    }

    /// Changes the limit of all filters' memory together: filters already
    /// past a lower limit are kept, and creates and growth fail until
    /// enough memory is given back.
    pub fn set_max_memory(&self, bytes: u64) {
        self.inner.budget.set_limit(bytes);
    }

    /// Directory of the log.
    pub fn log_dir(&self) -> &Path {
        self.inner.log.dir()
    }
}
