//! # seen-store
//!
//! The durable local store under `seen serve`: any number of named filters
//! (every kind of `seen-core`) in one data directory, so that a user who
//! restarts the process, or whose machine loses power, finds every item they
//! were told was added. (`seen dedup --state` keeps one filter in a plain
//! file instead, replaced atomically at the end of each run.)
//!
//! ```text
//! <dir>/LOCK                      held (flock) while a store has it open
//! <dir>/FORMAT                    "seen-store data directory, format 8"
//! <dir>/snapshots/<id>.snap       one per filter: name, expiry, lsn, filter
//! <dir>/log/<first lsn>.log       the log's segments, appended to
//! <dir>/log/SYNCED                how far a sync made the log durable
//! ```
//!
//! Every mutation of a filter is a checksummed log record holding item
//! hashes (never item bytes). A mutation holds its filter exclusively from
//! logging its record to applying it, so the log has each filter's
//! mutations in the order they were made, and replaying it rebuilds
//! exactly the filter they made, bits and counts. The record is written
//! (handed to the kernel, where a process kill cannot lose it) before the
//! filter changes, and the answer is acknowledged once the record is as
//! durable as the [`FsyncPolicy`] promises. Many writers share each
//! `write` and each `fdatasync` (group commit: see the `log` module).
//!
//! Checkpoints write each changed filter as a snapshot (temp file, fsync,
//! rename, directory fsync), rebuilt from its last snapshot and the log
//! rather than copied from the live filter, so that writers never wait for
//! one; then they remove the log segments the snapshots cover. Opening
//! loads the snapshots and replays the log after them; a torn end of the
//! log is cut off with a warning, damage anywhere else stops the open with
//! an error naming the file and offset, unless [`StoreOptions::salvage`]
//! is set.
//!
//! What each policy can lose (docs/FORMAT.md, section 6):
//!
//! | policy | process killed | power lost |
//! |---|---|---|
//! | `Always` | nothing | nothing acknowledged |
//! | `EverySec` | nothing | about the last second (at most about 1.5 s) |
//! | `No` | nothing | what the kernel had not written back (Linux: up to ~30 s) |
//!
//! Under `EverySec` a background thread syncs once a second; once the last
//! sync that succeeded began more than 1.5 s ago (a slow disk, or no CPU
//! to spare), every mutation first waits for a sync. A sync that fails
//! poisons the log: mutations are refused until a checkpoint has written
//! every filter from memory. A write that fails (a full disk) fails only
//! the mutations it carried; the next write tries again.
//!
//! ```
//! use seen_store::{FilterSpec, Store, StoreOptions, FsyncPolicy};
//! use seen_core::Layout;
//!
//! let dir = tempfile::tempdir().unwrap();
//! let opts = StoreOptions { fsync: FsyncPolicy::Always, ..Default::default() };
//! let store = Store::open(dir.path(), opts.clone()).unwrap();
//! let spec = FilterSpec::Bloom { capacity: 1000, error_rate: 0.01, layout: Layout::Blocked };
//! store.create(b"urls", &spec).unwrap();
//! let out = store.add(b"urls", &[b"https://example.com/"], None).unwrap();
//! assert_eq!(out.new, vec![true]);
//! drop(store); // even without close(): the log has it
//! let store = Store::open(dir.path(), opts).unwrap();
//! assert_eq!(store.contains(b"urls", &[b"https://example.com/"]).unwrap(), Some(vec![true]));
//! ```

#![warn(missing_docs)]

mod checkpoint;
mod entry;
mod error;
mod filter;
pub mod fs;
mod inner;
mod legacy;
mod log;
mod names;
mod open;
mod options;
mod record;
mod recover;
mod replay;
mod segment;
mod snapshot;
mod store;

pub use error::{Error, ErrorKind, Result};
pub use inner::BlockingHook;
pub use options::{FsyncPolicy, StoreOptions};
pub use record::{FilterSpec, MAX_NAME_LEN};
pub use recover::Recovery;
pub use store::{AddOutcome, Pending, Store};

/// A snapshot file of a data directory, read on its own (for `seen
/// inspect`).
#[derive(Debug)]
pub struct SnapshotFile {
    /// The filter's name.
    pub name: Vec<u8>,
    /// Every log record of this filter up to this lsn is in the snapshot.
    pub lsn: u64,
    /// When the filter expires (Unix milliseconds), if it does.
    pub expire_at_ms: Option<i64>,
    /// The filter.
    pub filter: seen_core::AnyFilter,
}

/// Reads one snapshot file (`<data dir>/snapshots/<id>.snap`), checking
/// its checksums.
pub fn read_snapshot(
    path: &std::path::Path,
    opts: &seen_core::DecodeOptions,
) -> Result<SnapshotFile> {
    let l = snapshot::read(&fs::RealFs, path, opts)?;
    Ok(SnapshotFile {
        name: l.name,
        lsn: l.lsn,
        expire_at_ms: (l.expire_at_ms != 0).then_some(l.expire_at_ms),
        filter: l.filter,
    })
}
