//! One filter of the store: its filter under its lock, its name, id,
//! expiry and how far its snapshot reaches.

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::time::{SystemTime, UNIX_EPOCH};

use seen_core::{AnyFilter, Charge};

use crate::filter::Hasher;
use crate::options::StoreOptions;

pub(crate) struct EntryState {
    pub(crate) filter: AnyFilter,
    /// The lsn of its last record.
    pub(crate) last_lsn: u64,
    /// Deleted (gone from the store's map) while a caller waited for it.
    pub(crate) deleted: bool,
}

/// One filter. Its mutations hold `state` exclusively from logging their
/// record to applying it, so that the log holds them in the order they
/// were applied and replay rebuilds the same filter; lookups hold it
/// shared.
pub(crate) struct Entry {
    pub(crate) id: u64,
    pub(crate) name: Vec<u8>,
    pub(crate) hasher: Hasher,
    pub(crate) state: RwLock<EntryState>,
    /// When it expires (unix ms, 0: never): set holding `state`
    /// exclusively, read without it.
    pub(crate) expire_at_ms: AtomicI64,
    /// Every record of the filter up to this lsn is in its snapshot (set
    /// by checkpoints, which hold `state` shared at most).
    pub(crate) snap_lsn: AtomicU64,
    /// Its bytes in the store's memory budget, given back when it goes.
    pub(crate) charge: Charge,
}

impl Entry {
    /// A filter's entry (a chain charged to the store's budget for its
    /// growth, and limited to its filter size).
    pub(crate) fn new(
        id: u64,
        name: Vec<u8>,
        mut filter: AnyFilter,
        charge: Charge,
        opts: &StoreOptions,
    ) -> Entry {
        if let AnyFilter::Scalable(c) = &mut filter {
            c.set_max_bytes(opts.max_filter_bytes);
            c.set_charge(charge.clone());
        }
        Entry {
            id,
            name,
            hasher: Hasher::of(&filter),
            state: RwLock::new(EntryState {
                filter,
                last_lsn: 0,
                deleted: false,
            }),
            expire_at_ms: AtomicI64::new(0),
            snap_lsn: AtomicU64::new(0),
            charge,
        }
    }

    pub(crate) fn expired(&self) -> bool {
        let at = self.expire_at_ms.load(Ordering::Relaxed);
        at != 0 && at <= now_ms()
    }

    pub(crate) fn read(&self) -> RwLockReadGuard<'_, EntryState> {
        self.state.read().unwrap_or_else(|e| e.into_inner())
    }
    pub(crate) fn write(&self) -> RwLockWriteGuard<'_, EntryState> {
        self.state.write().unwrap_or_else(|e| e.into_inner())
    }
}

pub(crate) fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}
