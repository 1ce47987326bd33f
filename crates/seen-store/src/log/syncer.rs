//! The log's syncer thread, and the callers that wait for a sync without
//! blocking a thread ([`Log::when_synced`]): every second it syncs under
//! `everysec` and checks that the data directory is still there; a
//! waiting callback starts a sync at once.

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::{lock, FsyncPolicy, Log, State, SYNC_EVERY};
use crate::error::Result;

/// What [`Log::when_synced`] calls once the sync it waits for has ended.
pub(crate) type Callback = Box<dyn FnOnce(Result<()>) + Send>;

impl Log {
    /// Calls `callback` once every record up to `lsn` (at most the last
    /// written) is synced, or with the error of a sync that failed: at once
    /// if it is already, else from the thread whose sync ends the wait (the
    /// log's syncer starts one at once). For a caller that must not block
    /// while it waits (a server on an async runtime).
    pub(crate) fn when_synced(&self, lsn: u64, callback: Callback) {
        let mut st = self.lock();
        if st.synced >= lsn {
            drop(st);
            return callback(Ok(()));
        }
        if let Err(e) = st.usable() {
            drop(st);
            return callback(Err(e));
        }
        st.callbacks.push((lsn, callback));
        drop(st);
        self.syncer_work.notify_all();
    }

    /// Every second: a sync under `everysec`, and under every policy a check
    /// that the log's segment still has a name (a data directory deleted
    /// under the store turns writes into errors, not acknowledgements).
    pub(super) fn run_syncer(&self) {
        let mut st = self.lock();
        loop {
            let wait = SYNC_EVERY.saturating_sub(st.sync_began.elapsed());
            let wait = wait.max(Duration::from_millis(10));
            let idle = |st: &mut State| !st.closing && st.callbacks.is_empty();
            st = (self.syncer_work.wait_timeout_while(st, wait, idle))
                .unwrap_or_else(|e| e.into_inner())
                .0;
            if st.closing {
                return;
            }
            let (seg, written) = (st.current.clone(), st.written);
            if let Some(&(lsn, _)) = st.callbacks.iter().max_by_key(|(lsn, _)| *lsn) {
                drop(st);
                if let Err(e) = self.sync_through(lsn) {
                    tracing::debug!("sync for waiting callers: {e}");
                }
                st = self.lock();
            } else if self.policy == FsyncPolicy::EverySec && st.sync_began.elapsed() >= SYNC_EVERY
            {
                // With nothing new to sync, nothing is exposed either.
                if st.synced >= written {
                    st.sync_began = Instant::now();
                } else {
                    drop(st);
                    if let Err(e) = self.sync_through(written) {
                        tracing::debug!("background sync: {e}");
                    }
                    st = self.lock();
                }
            }
            let removed = seg.file.is_removed().unwrap_or(false);
            if removed && Arc::ptr_eq(&st.current, &seg) && st.poisoned.is_none() {
                let path = seg.name.path.display();
                st.poison(format!("{path} was removed (the data directory is gone?)"));
            }
        }
    }

    /// Stops the syncer and makes everything written durable (but under
    /// `no`).
    pub(crate) fn close(&self) {
        if let Err(e) = self.flush() {
            tracing::warn!("closing the log: {e}");
        }
        self.lock().closing = true;
        self.syncer_work.notify_all();
        if let Some(t) = lock(&self.syncer).take() {
            let _ = t.join();
        }
    }
}
