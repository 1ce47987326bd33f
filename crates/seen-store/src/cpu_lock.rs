//! A reader-writer lock sharded by CPU, for state that many threads hold
//! shared on every call (a filter's adds and lookups) and one holds
//! exclusively now and then (a checkpoint, a remove, an expiry).
//!
//! A shared hold takes the read lock of one shard: the shard of the CPU
//! the thread runs on. An exclusive hold takes every shard's write lock.
//! So readers on different CPUs never write the same cache line, and a
//! reader's lock word stays in its own core's cache from call to call.
//!
//! Why not `crossbeam_utils::sync::ShardedLock`, which this replaced: it
//! picks the shard by thread index modulo its 8 shards, so with more
//! threads than shards (50 writers, or a server's connections) threads on
//! different cores share a shard, and its lock word moved between the two
//! cores' caches on most calls. On this project's 2-core VM, with 50
//! writers adding one item per call, that cost 6-10% of the store's add
//! throughput (BENCHMARKS.md, session 14: everysec / in-memory 84% with
//! crossbeam's lock, 90-94% with this one, the same log code otherwise).
//! Shards are still 8, as crossbeam's were, so an entry costs the same
//! memory; CPUs 8 apart share a shard on larger machines.

use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex, RwLock, RwLockReadGuard, RwLockWriteGuard};

use crossbeam_utils::CachePadded;

/// Shards per lock (a power of two).
const SHARDS: usize = 8;

/// The shard for a shared hold taken now: the current CPU's (a read of
/// the thread's `rseq` area under glibc 2.35 and later, else the vDSO's
/// `getcpu`). The thread may move to another CPU while it holds the
/// shard; the guard releases the shard it took, so that only costs a
/// cache line's move.
#[inline]
fn current_shard() -> usize {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: sched_getcpu takes no arguments and only reads the
        // thread's CPU number; -1 (an error) falls to shard 7.
        let cpu = unsafe { libc::sched_getcpu() };
        cpu as usize & (SHARDS - 1)
    }
    #[cfg(not(target_os = "linux"))]
    {
        0
    }
}

/// A reader-writer lock whose shared holds scale across CPUs; see the
/// module docs. It does not poison: a holder that panicked leaves the
/// value as the panic found it, and the next holder takes it so (as the
/// store took crossbeam's lock, ignoring its poisoning). Holds do not
/// nest: a thread that holds it must not take it again, even shared (with
/// a writer waiting, a second shared hold waits for the writer, which
/// waits for the first), as with std's and crossbeam's locks.
pub(crate) struct CpuLock<T> {
    shards: [CachePadded<RwLock<()>>; SHARDS],
    /// Long shared holds now ([`read_long`](Self::read_long)), under a
    /// mutex that an exclusive hold keeps while it takes the shards, so
    /// that none begins in between.
    long: Mutex<usize>,
    /// Signalled when the last long shared hold ends.
    long_done: Condvar,
    /// `long`'s count, written under its mutex, for a look without it
    /// ([`long_held`](Self::long_held)).
    long_now: AtomicUsize,
    /// An exclusive holder has said it keeps the lock for long
    /// ([`mark_long_write`](Self::mark_long_write)).
    writing_long: AtomicBool,
    value: UnsafeCell<T>,
}

// SAFETY: as std's RwLock: the value is shared between threads only
// behind a read guard (`&T`, so `T: Sync`) or a write guard, which holds
// every shard's write lock and so excludes every other guard (`&mut T`,
// moved between threads through the lock, so `T: Send`).
unsafe impl<T: Send + Sync> Sync for CpuLock<T> {}
// SAFETY: owning the lock owns the value.
unsafe impl<T: Send> Send for CpuLock<T> {}

/// A shared hold of a [`CpuLock`].
pub(crate) struct CpuLockReadGuard<'a, T> {
    value: &'a T,
    _shard: RwLockReadGuard<'a, ()>,
}

/// A long shared hold of a [`CpuLock`] (see
/// [`read_long`](CpuLock::read_long)).
pub(crate) struct CpuLockLongGuard<'a, T> {
    lock: &'a CpuLock<T>,
    value: &'a T,
    shard: Option<RwLockReadGuard<'a, ()>>,
}

impl<T> std::ops::Deref for CpuLockLongGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        self.value
    }
}

impl<T> Drop for CpuLockLongGuard<'_, T> {
    fn drop(&mut self) {
        // The shard first, so that a writer woken below finds it free.
        self.shard = None;
        let mut long = self.lock.long.lock().unwrap_or_else(|e| e.into_inner());
        *long -= 1;
        self.lock.long_now.store(*long, Ordering::Relaxed);
        if *long == 0 {
            self.lock.long_done.notify_all();
        }
    }
}

/// An exclusive hold of a [`CpuLock`]: every shard, taken in order.
pub(crate) struct CpuLockWriteGuard<'a, T> {
    value: &'a mut T,
    _shards: [RwLockWriteGuard<'a, ()>; SHARDS],
}

impl<T> std::ops::Deref for CpuLockReadGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        self.value
    }
}

impl<T> std::ops::Deref for CpuLockWriteGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        self.value
    }
}

impl<T> std::ops::DerefMut for CpuLockWriteGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        self.value
    }
}

impl<T> CpuLock<T> {
    pub(crate) fn new(value: T) -> CpuLock<T> {
        CpuLock {
            shards: std::array::from_fn(|_| CachePadded::new(RwLock::new(()))),
            long: Mutex::new(0),
            long_done: Condvar::new(),
            long_now: AtomicUsize::new(0),
            writing_long: AtomicBool::new(false),
            value: UnsafeCell::new(value),
        }
    }

    /// A shared hold.
    #[inline]
    pub(crate) fn read(&self) -> CpuLockReadGuard<'_, T> {
        let shard = self.shards[current_shard()]
            .read()
            .unwrap_or_else(|e| e.into_inner());
        // SAFETY: a shard's read lock is held, so no write guard exists
        // (it would hold that shard's write lock) until this one drops.
        CpuLockReadGuard {
            value: unsafe { &*self.value.get() },
            _shard: shard,
        }
    }

    /// A shared hold kept for long (a checkpoint copying a filter of a
    /// GiB to disk, for a second or more). An exclusive hold waits for it
    /// before it takes any shard, rather than take the shards in order and
    /// wait, holding those before, at the long holder's: meanwhile every
    /// shared hold on those shards (and, as std's lock lets no reader past
    /// a waiting writer, on the long holder's) would wait with it, for the
    /// rest of the copy. Writers of a 24 MiB filter copied at 50 ms a MiB
    /// waited up to 1.09 s with one exclusive call 200 ms into the copy,
    /// against 33 ms without it (an independent review's test).
    pub(crate) fn read_long(&self) -> CpuLockLongGuard<'_, T> {
        let mut long = self.long.lock().unwrap_or_else(|e| e.into_inner());
        let shard = self.shards[current_shard()]
            .read()
            .unwrap_or_else(|e| e.into_inner());
        *long += 1;
        self.long_now.store(*long, Ordering::Relaxed);
        drop(long);
        // SAFETY: as in `read`.
        CpuLockLongGuard {
            lock: self,
            value: unsafe { &*self.value.get() },
            shard: Some(shard),
        }
    }

    /// Said by an exclusive holder (`on`) before it keeps the lock for long
    /// (a chain's growth, seconds for a GiB), and (`!on`) after: holds
    /// asked for meanwhile know they would wait long
    /// ([`read_waits_long`](Self::read_waits_long)).
    pub(crate) fn mark_long_write(&self, on: bool) {
        self.writing_long.store(on, Ordering::Relaxed);
    }

    /// Whether a shared hold taken now would wait long: an exclusive
    /// holder said it keeps the lock for long. A hint.
    pub(crate) fn read_waits_long(&self) -> bool {
        self.writing_long.load(Ordering::Relaxed)
    }

    /// Whether an exclusive hold taken now would wait long: a long shared
    /// hold is on ([`read_long`](Self::read_long)), or an exclusive holder
    /// said it keeps the lock for long. A hint, read without the mutex.
    pub(crate) fn write_waits_long(&self) -> bool {
        self.long_now.load(Ordering::Relaxed) > 0 || self.read_waits_long()
    }

    /// An exclusive hold.
    pub(crate) fn write(&self) -> CpuLockWriteGuard<'_, T> {
        // No long shared hold now, and none begins until every shard is
        // taken (see `read_long`).
        let mut long = self.long.lock().unwrap_or_else(|e| e.into_inner());
        while *long > 0 {
            long = self.long_done.wait(long).unwrap_or_else(|e| e.into_inner());
        }
        // Always in shard order, so two exclusive holders cannot deadlock.
        let shards =
            std::array::from_fn(|i| self.shards[i].write().unwrap_or_else(|e| e.into_inner()));
        drop(long);
        // SAFETY: every shard's write lock is held: no other guard exists
        // until this one drops.
        CpuLockWriteGuard {
            value: unsafe { &mut *self.value.get() },
            _shards: shards,
        }
    }

    /// The value, through a unique borrow of the lock (no locking).
    pub(crate) fn get_mut(&mut self) -> &mut T {
        self.value.get_mut()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    /// While a long shared hold lasts, a writer waits without holding any
    /// shard, so that shared holds on every CPU go on; it gets the lock
    /// once the long hold ends. (Taking the shards in order, it held
    /// those before the long holder's and queued on that one: every shared
    /// hold waited with it.)
    #[test]
    fn a_writer_waiting_for_a_long_shared_hold_holds_up_no_reader() {
        let lock = Arc::new(CpuLock::new(0u64));
        let long = lock.read_long();
        let writer = {
            let lock = lock.clone();
            std::thread::spawn(move || *lock.write() += 1)
        };
        // Time for the writer to start waiting (the readers pass either
        // way if it has not).
        std::thread::sleep(std::time::Duration::from_millis(200));
        let (tx, rx) = std::sync::mpsc::channel();
        for _ in 0..8 {
            let (lock, tx) = (lock.clone(), tx.clone());
            std::thread::spawn(move || {
                for _ in 0..100 {
                    let _ = *lock.read();
                }
                tx.send(()).unwrap();
            });
        }
        for _ in 0..8 {
            rx.recv_timeout(std::time::Duration::from_secs(10))
                .expect("a reader held up behind the waiting writer");
        }
        assert_eq!(*long, 0, "the writer went before the long hold ended");
        drop(long);
        writer.join().unwrap();
        assert_eq!(*lock.read(), 1);
    }

    #[test]
    fn readers_share_and_a_writer_excludes_them() {
        let lock = Arc::new(CpuLock::new((0u64, 0u64)));
        let threads: Vec<_> = (0..8)
            .map(|t| {
                let lock = lock.clone();
                std::thread::spawn(move || {
                    for i in 0..20_000u64 {
                        if (i + t) % 50 == 0 {
                            let mut g = lock.write();
                            // Both halves change together, only here.
                            g.0 += 1;
                            std::hint::spin_loop();
                            g.1 += 1;
                        } else {
                            let g = lock.read();
                            assert_eq!(g.0, g.1, "a reader saw a writer's half-made change");
                        }
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        let g = lock.read();
        assert_eq!(*g, (8 * 400, 8 * 400));
    }

    #[test]
    fn a_writer_that_panicked_leaves_the_value_usable() {
        let lock = Arc::new(CpuLock::new(1));
        let l = lock.clone();
        let _ = std::thread::spawn(move || {
            let mut g = l.write();
            *g = 2;
            panic!("a writer panics");
        })
        .join();
        assert_eq!(*lock.read(), 2);
        *lock.write() = 3;
        assert_eq!(*lock.read(), 3);
    }
}
