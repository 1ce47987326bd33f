//! # seen-server
//!
//! `seen serve`: a RESP server that answers RedisBloom's `BF.*` commands
//! byte for byte, so that every Redis client in every language can use
//! seen's filters unchanged, with the filters kept durable by
//! [`seen_store`] (a write-ahead log plus snapshots in a data directory).
//!
//! * Wire protocol: [`seen_resp`] (RESP2, RESP3 after `HELLO 3`,
//!   pipelining, inline commands).
//! * Commands: one module per command family under `cmd/`; each parses its
//!   arguments, applies them and returns a reply value.
//! * Concurrency: a multi-threaded tokio runtime; each connection runs its
//!   pipeline in batches. Filters are shared through the store (a lock per
//!   filter, none global); adding the same new item from two clients at
//!   once tells exactly one of them "new".
//! * Durability: a reply that depends on a mutation is sent only once the
//!   mutation is as durable as `--fsync` promises (`always`: synced, with
//!   one sync shared by the whole batch and by concurrent clients;
//!   `everysec`/`no`: in the log, which survives a process kill).
//! * Limits: `maxclients`, `proto-max-bulk-len`, a query buffer limit per
//!   client, a per-filter size limit and `maxmemory` for all filters
//!   (checked before anything is allocated).
//!
//! ```no_run
//! let config = seen_server::Config { port: 6380, ..Default::default() };
//! seen_server::run_blocking(config)?;
//! # Ok::<(), seen_server::ServerError>(())
//! ```

#![warn(missing_docs)]

mod args;
pub mod bf_config;
mod blocking;
mod clients;
mod cmd;
mod config;
mod config_file;
mod connection;
mod glob;
mod health;
mod latency;
mod metrics;
mod monitor;
mod runtime;
mod server;
mod slowlog;
mod state;
mod stats;

pub use bf_config::{BfDefaults, BfSetting};
pub use config::{default_maxmemory, Config};
pub use config_file::{read_config_file, rewrite_config_file, ConfigFileError, FileSetting};
pub use server::{run_blocking, Server, ServerError, ShutdownHandle};
