//! Server settings (`seen serve` flags).

use std::net::IpAddr;
use std::path::PathBuf;
use std::time::Duration;

use seen_store::FsyncPolicy;

use crate::bf_config::BfDefaults;

/// How `seen serve` runs. [`Config::default`] is what `seen serve` does
/// with no flags: 127.0.0.1:6379, data in `./seen-data`, `everysec`.
#[derive(Clone, Debug)]
pub struct Config {
    /// Addresses to listen on.
    pub bind: Vec<IpAddr>,
    /// TCP port; 0 picks a free one (see [`crate::Server::local_addr`]).
    pub port: u16,
    /// Data directory (created if missing).
    pub dir: PathBuf,
    /// When the write-ahead log is synced.
    pub fsync: FsyncPolicy,
    /// Password every client must give with `AUTH` (or `HELLO ... AUTH`).
    pub requirepass: Option<String>,
    /// Most simultaneous clients; more are refused with Redis's error.
    pub maxclients: usize,
    /// Largest bulk argument in a request (Redis's `proto-max-bulk-len`).
    pub proto_max_bulk_len: usize,
    /// Most unparsed bytes buffered for one client (Redis's
    /// `client-query-buffer-limit`); a client past it is disconnected.
    pub client_query_buffer_limit: usize,
    /// Most bytes all filters together may use; a `BF.RESERVE`,
    /// `BF.INSERT`, `BF.ADD` or `BF.LOADCHUNK` that would create a filter,
    /// or an add that would grow a scalable one, past it gets an error
    /// (`ERR the filter needs N bytes, more than the M bytes left under
    /// maxmemory and max-filter-bytes`). Filters found at start are kept
    /// even past it.
    pub maxmemory: u64,
    /// Largest single filter in bytes (also the limit a growing scalable
    /// filter stops at).
    pub max_filter_bytes: u64,
    /// Close a client idle this long (`None`: never, Redis's `timeout 0`).
    pub timeout: Option<Duration>,
    /// Checkpoint this often when something changed (`None`: only on
    /// `SAVE`, `BGSAVE` and shutdown).
    pub save_interval: Option<Duration>,
    /// Checkpoint when the log written since the last checkpoint passes
    /// this many bytes (`None`: never for that reason), so that the log's
    /// disk use and a restart's replay stay bounded between timed
    /// checkpoints.
    pub save_log_size: Option<u64>,
    /// Open a data directory whose log or snapshots are damaged, keeping
    /// what can be read (each loss logged as a warning), instead of
    /// refusing to start.
    pub salvage: bool,
    /// Worker threads (0: one per core).
    pub threads: usize,
    /// RedisBloom's `bf-*` settings at start (`CONFIG SET` changes them
    /// while the server runs).
    pub bf: BfDefaults,
    /// Commands that take at least this many microseconds go in the slow
    /// log (negative: none, 0: all; Redis's `slowlog-log-slower-than`).
    pub slowlog_log_slower_than: i64,
    /// Entries the slow log keeps (Redis's `slowlog-max-len`).
    pub slowlog_max_len: usize,
    /// Where to serve Prometheus metrics (`GET /metrics`); `None`: nowhere.
    pub metrics: Option<std::net::SocketAddr>,
    /// Filters the metrics label one by one (by name order); the rest are
    /// summed in `seen_unlisted_*` metrics.
    pub metrics_max_filters: usize,
    /// The settings file it started with, if any: `CONFIG REWRITE` writes
    /// to it, `INFO server` shows it.
    pub config_file: Option<PathBuf>,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            bind: vec![IpAddr::from([127, 0, 0, 1])],
            port: 6379,
            dir: PathBuf::from("seen-data"),
            fsync: FsyncPolicy::EverySec,
            requirepass: None,
            maxclients: 10_000,
            proto_max_bulk_len: 512 << 20,
            client_query_buffer_limit: 1 << 30,
            maxmemory: default_maxmemory(),
            max_filter_bytes: seen_core::DEFAULT_MAX_BYTES,
            timeout: None,
            save_interval: Some(Duration::from_secs(300)),
            save_log_size: Some(DEFAULT_SAVE_LOG_SIZE),
            salvage: false,
            threads: 0,
            slowlog_log_slower_than: 10_000,
            slowlog_max_len: 128,
            metrics: None,
            metrics_max_filters: 100,
            config_file: None,
            bf: BfDefaults::default(),
        }
    }
}

/// The default of [`Config::save_log_size`]: 1 GiB, which bounds what a
/// restart replays to a few seconds (records are 16 to 32 bytes; the
/// replay rate is in the store's benchmark).
pub const DEFAULT_SAVE_LOG_SIZE: u64 = 1 << 30;

/// Three quarters of the machine's memory (from `/proc/meminfo`), or
/// 4 GiB where that cannot be read: a default that keeps filters from
/// pushing the machine into swap.
pub fn default_maxmemory() -> u64 {
    let total = std::fs::read_to_string("/proc/meminfo").ok().and_then(|s| {
        s.lines()
            .find_map(|l| l.strip_prefix("MemTotal:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
            .map(|kb| kb * 1024)
    });
    match total {
        Some(t) if t > 0 => t / 4 * 3,
        _ => 4 << 30,
    }
}
