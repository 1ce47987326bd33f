//! Opening a data directory: its lock, the upgrade of an earlier format,
//! recovery, and the store that comes out of it.

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, RwLock};
use std::time::{Duration, Instant};

use seen_core::MemoryBudget;

use crate::entry::Entry;
use crate::error::{ErrorKind, Result, Salvage};
use crate::filter::{self};
use crate::fs::{Fs, RealFs};
use crate::inner::Inner;
use crate::log::{lock, Log};
use crate::options::{FsyncPolicy, StoreOptions};
use crate::record::Record;
use crate::replay::Rebuilt;
use crate::store::Store;

/// How long [`Store::open`] waits for the directory's lock.
const LOCK_WAIT: Duration = Duration::from_millis(500);

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
            crate::checkpoint::run(&store.inner, crate::checkpoint::Source::Memory)?;
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
