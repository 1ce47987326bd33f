//! What every clone of a store shares: the directory, the log, the
//! filters, the memory budget and the locks that order checkpoints.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex, OnceLock, RwLock};
use std::time::Instant;

use seen_core::MemoryBudget;

use crate::entry::Entry;
use crate::fs::Fs;
use crate::log::Log;
use crate::options::StoreOptions;
use crate::recover::Recovery;

/// Runs a closure that may block for long; see [`Store::set_blocking_hook`](crate::Store::set_blocking_hook).
pub type BlockingHook = Box<dyn Fn(&mut dyn FnMut()) + Send + Sync>;

pub(crate) struct Inner {
    pub(crate) fs: Arc<dyn Fs>,
    pub(crate) snap_dir: PathBuf,
    pub(crate) opts: StoreOptions,
    pub(crate) log: Arc<Log>,
    pub(crate) filters: RwLock<HashMap<Vec<u8>, Arc<Entry>>>,
    pub(crate) next_id: AtomicU64,
    /// Filters deleted since the last checkpoint, with their delete's lsn:
    /// their snapshots go then.
    pub(crate) deleted: Mutex<Vec<(u64, u64)>>,
    pub(crate) budget: Arc<MemoryBudget>,
    pub(crate) checkpointing: Mutex<()>,
    /// When the last recovery of a poisoned log failed.
    pub(crate) recovering: Mutex<Option<Instant>>,
    pub(crate) hook: OnceLock<BlockingHook>,
    pub(crate) recovery: Recovery,
    pub(crate) _lock: Box<dyn Send + Sync>,
}

impl Drop for Inner {
    fn drop(&mut self) {
        self.log.close();
    }
}

impl Inner {
    /// The filters now, for a checkpoint.
    pub(crate) fn entries(&self) -> Vec<Arc<Entry>> {
        let filters = self.filters.read().unwrap_or_else(|e| e.into_inner());
        filters.values().cloned().collect()
    }
}
