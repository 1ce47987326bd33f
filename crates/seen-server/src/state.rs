//! What all connections share: the store, settings, counters.

use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use seen_store::Store;
use tokio::sync::watch;

use crate::bf_config::BfDefaults;
use crate::clients::Clients;
use crate::config::Config;
use crate::monitor::Monitor;
use crate::runtime::Runtime;
use crate::slowlog::SlowLog;
use crate::stats::Stats;

pub(crate) struct Shared {
    pub(crate) store: Store,
    pub(crate) config: Config,
    /// The settings `CONFIG SET` changes.
    pub(crate) runtime: Runtime,
    /// `SLOWLOG`.
    pub(crate) slowlog: SlowLog,
    /// `MONITOR`.
    pub(crate) monitor: Monitor,
    pub(crate) stats: Stats,
    pub(crate) started: Instant,
    pub(crate) port: u16,
    pub(crate) next_client_id: AtomicU64,
    /// The open connections.
    pub(crate) clients: Clients,
    pub(crate) connected: AtomicUsize,
    /// Unix seconds of the last successful checkpoint.
    pub(crate) lastsave: AtomicI64,
    pub(crate) bgsave_in_progress: AtomicBool,
    pub(crate) last_bgsave_ok: AtomicBool,
    /// Mutations since the last checkpoint (`rdb_changes_since_last_save`).
    pub(crate) dirty: AtomicU64,
    /// `SHUTDOWN NOSAVE`: skip the final checkpoint (the log has
    /// everything; the next start replays it).
    pub(crate) skip_final_checkpoint: AtomicBool,
    /// Set to true to stop the server (SHUTDOWN, signals).
    pub(crate) shutdown: watch::Sender<bool>,
    /// RedisBloom's `bf-*` settings now (`CONFIG SET` changes them).
    pub(crate) bf: Mutex<BfDefaults>,
    pub(crate) auth_failures: AuthFailures,
}

/// How often failed `AUTH`s are logged at most: a client guessing
/// passwords as fast as it can (over 100,000 a second) writes one line
/// per interval, with the count, not one per attempt.
const AUTH_LOG_EVERY: Duration = Duration::from_secs(10);

/// Failed `AUTH` attempts not logged yet, and when the last line was.
#[derive(Default)]
pub(crate) struct AuthFailures {
    unlogged: AtomicU64,
    last_logged: Mutex<Option<Instant>>,
}

impl AuthFailures {
    /// Counts a failed attempt from `addr`; logs the count once the last
    /// line is [`AUTH_LOG_EVERY`] old (at once for the first).
    pub(crate) fn record(&self, addr: &str) {
        self.unlogged.fetch_add(1, Ordering::Relaxed);
        let mut last = self.last_logged.lock().unwrap_or_else(|e| e.into_inner());
        if last.is_some_and(|t| t.elapsed() < AUTH_LOG_EVERY) {
            return;
        }
        let n = self.unlogged.swap(0, Ordering::Relaxed);
        let since = last.map_or(String::new(), |t| {
            format!(" in the last {} s", t.elapsed().as_secs())
        });
        tracing::warn!(client = %addr, "{n} failed AUTH attempt(s){since}, the last from this client");
        *last = Some(Instant::now());
    }
}

impl Shared {
    /// The `bf-*` settings now.
    pub(crate) fn bf_defaults(&self) -> BfDefaults {
        self.bf.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

pub(crate) fn unix_now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}

impl Shared {
    /// The shared state of a server whose command table has the commands
    /// `commands`, in order.
    pub(crate) fn new(
        store: Store,
        config: Config,
        port: u16,
        commands: Vec<&'static str>,
    ) -> Arc<Shared> {
        let (tx, _) = watch::channel(false);
        Arc::new(Shared {
            store,
            bf: Mutex::new(config.bf.clone()),
            auth_failures: AuthFailures::default(),
            runtime: Runtime::new(&config),
            slowlog: SlowLog::new(config.slowlog_log_slower_than, config.slowlog_max_len),
            monitor: Monitor::default(),
            config,
            stats: Stats::new(commands),
            started: Instant::now(),
            port,
            next_client_id: AtomicU64::new(1),
            clients: Clients::default(),
            connected: AtomicUsize::new(0),
            lastsave: AtomicI64::new(unix_now()),
            bgsave_in_progress: AtomicBool::new(false),
            last_bgsave_ok: AtomicBool::new(true),
            dirty: AtomicU64::new(0),
            skip_final_checkpoint: AtomicBool::new(false),
            shutdown: tx,
        })
    }

    /// A synchronous checkpoint (`SAVE`, the timer, shutdown).
    pub(crate) fn checkpoint(&self) -> seen_store::Result<()> {
        let before = self.dirty.load(Ordering::Relaxed);
        let t = Instant::now();
        let r = self.store.checkpoint();
        match &r {
            Ok(()) => {
                self.dirty.fetch_sub(before, Ordering::Relaxed);
                self.lastsave.store(unix_now(), Ordering::Relaxed);
                tracing::info!(
                    elapsed_ms = t.elapsed().as_millis() as u64,
                    "checkpoint done"
                );
            }
            Err(e) => tracing::error!("checkpoint failed: {e}"),
        }
        release_free_heap();
        r
    }

    pub(crate) fn request_shutdown(&self) {
        self.shutdown.send_replace(true);
    }
}

/// Has glibc's allocator map every block of 1 MiB or more on its own, and
/// unmap it when it is freed. By default the threshold rises to the size
/// of the largest block freed (up to 32 MiB), and then blocks below it
/// come from the threads' arenas, whose free tops are kept up to twice
/// that: after `BF.LOADCHUNK`s of 16 MiB chunks and a `DEL`, 50 MiB stayed
/// resident with no filter left.
pub(crate) fn tune_allocator() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only changes a setting of glibc's allocator; it is
    // called before the server's threads allocate.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 1 << 20);
    }
}

/// Gives memory the allocator holds but no longer uses back to the system
/// (glibc keeps freed buffers of closed connections in per-thread arenas:
/// about 3 MiB after a redis-benchmark run). Called after checkpoints,
/// which are rare and already slow.
fn release_free_heap() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only returns free pages of glibc's own heaps to
    // the kernel; it takes the allocator's locks and touches no memory the
    // program holds.
    unsafe {
        libc::malloc_trim(0);
    }
}
