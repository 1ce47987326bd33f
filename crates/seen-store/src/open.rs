//! Opening a data directory: the options, its lock, the upgrade of an
//! earlier format, recovery, and the store that comes out of it.

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, RwLock};
use std::time::{Duration, Instant};

use seen_core::MemoryBudget;

use crate::error::{ErrorKind, Result, Salvage};
use crate::filter::{self};
use crate::fs::{Fs, RealFs};
use crate::log::{lock, Log};
use crate::record::Record;
use crate::replay::Rebuilt;
use crate::store::{Entry, Inner, Store};

/// How long [`Store::open`] waits for the directory's lock.
const LOCK_WAIT: Duration = Duration::from_millis(500);

/// When the log is synced to disk; see the crate docs for what each can
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
    /// new filter). If anything was skipped ([`crate::Recovery::salvaged`]), the
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
        let salvage = Salvage {
            on: opts.salvage,
            ..Default::default()
        };
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
        if salvage.skipped.get() > 0 {
            crate::checkpoint::run(&store, crate::checkpoint::Source::Memory)?;
        }
        Ok(store)
    }

    /// Puts a filter the open rebuilt into the map; returns the id of the
    /// one of the same name it displaced, if any (the lower id).
    fn insert_rebuilt(&self, f: Rebuilt) -> Option<u64> {
        let charge = (self.inner.budget).charge_anyway(filter::memory_bytes(&f.filter));
        let entry = Entry::new(f.id, f.name.clone(), f.filter, charge, &self.inner.opts);
        entry.write().last_lsn = f.last_lsn;
        entry.expire_at_ms.store(f.expire_at_ms, Ordering::Relaxed);
        entry.snap_lsn.store(f.snap_lsn, Ordering::Relaxed);
        let earlier = self.filters_mut().insert(f.name, Arc::new(entry))?;
        earlier.charge.release();
        Some(earlier.id)
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
