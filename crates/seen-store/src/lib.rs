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
//! <dir>/snapshots/<id>.snap       one per filter: name, expiry, lsn, filter
//! <dir>/wal/<lsn>.<lane>.<seq>.log  preallocated log segments, in lanes
//! <dir>/rings/<n>.ring            staging rings: adds waiting for their batch
//! ```
//!
//! Every mutation is appended to the write-ahead log as a checksummed record
//! holding item hashes (never item bytes) before it is applied, and is
//! acknowledged once the record is as durable as the [`FsyncPolicy`]
//! promises. Checkpoints write changed filters as snapshots (temp file,
//! fsync, rename, directory fsync) and drop log segments they cover. Opening
//! loads the snapshots and replays the log after them (its lanes merged in
//! lsn order); a torn last record of a lane is truncated with a warning,
//! corruption elsewhere stops the open with an error naming the file and
//! offset unless [`StoreOptions::salvage`] is set. Before the store takes
//! a write, the open syncs everything it replayed (under `Always` and
//! `EverySec`): what a killed run left unsynced is what the new run's
//! answers build on.
//!
//! The log has four lanes under `EverySec` and `No` (one under `Always`),
//! each with its own mutex: a writer preempted while it appends (many
//! writers sharing few cores) holds up only its lane, and the others go
//! on in the rest. Adds that only set bits may go to any lane; every other
//! record goes to lane 0, and a record appended after a lane-0 record (or
//! after a snapshot's log position was read) has returned has the higher
//! lsn. Two adds of the first kind may have theirs in either order, which
//! cannot matter: both only set bits.
//!
//! Under `EverySec` and `No`, adds to fixed-size Bloom filters (and to
//! chains with room reserved) do not go to a lane one by one: each writer
//! thread stages them in a ring of its own, a small file mapped into
//! memory (three stores and a release store per add, no lock), and appends
//! them to the log 256 at a time; the log's syncer copies every ring out
//! too before each sync, and its page helper, each time it wakes (at
//! least every 100 ms), every ring that no one is copying and a free lane
//! takes. A process kill loses nothing staged: the next open replays the
//! rings of the same boot after the log (docs/FORMAT.md, section 6.5).
//!
//! Concurrency: adds to fixed-size Bloom filters, and to scalable chains
//! whose batch has room reserved in the newest sub-filter, hold the filter
//! shared, so writers on several cores fill one filter at once; each logs
//! its items before it sets their bits, and whoever then finds an item
//! present waits for a log position that covers that record. Everything
//! else (counting filters, chains near a sub-filter's capacity, removes,
//! expiry) holds the filter exclusively, in log order. Many writers waiting
//! for `Always` share each fsync (group commit). A checkpoint copies a
//! fixed-size Bloom filter or a scalable chain while its writers go on
//! (two brief exclusive moments, to read the log position before the copy
//! and the count after it; replay over the copy restores the rest), and a
//! counting filter in pieces of 1 MiB, each under its lock (replay applies
//! to each piece only the records after it).
//!
//! What each policy can lose (see docs/FORMAT.md for the formats):
//!
//! | policy | process killed | power lost |
//! |---|---|---|
//! | `Always` | nothing | nothing acknowledged |
//! | `EverySec` | nothing | about the last second (at most about 1.5 s: see below) |
//! | `No` | nothing | what the kernel had not written back (Linux: up to ~30 s) |
//!
//! Under `EverySec` syncs start a second apart, and a power loss takes
//! what was acknowledged since the last sync that ended had started: about
//! a second while the machine has CPU to spare, more when it has none, as
//! the sync's work (its own, and the kernel's writeback) gets its share
//! of the CPU like any thread's. So once that sync began more than 1.5 s
//! ago, every mutation first waits until a sync that began after it came
//! has succeeded (leading one if none is running): a power loss then
//! takes at most the mutations acknowledged in about 1.5 s, and writers
//! slow to the pace of the syncs when the disk or the CPU cannot keep
//! up. On the project's 2-core VM one writer left records waiting up to
//! 1.1 s; 50 writers that kept both cores busy, 2.4-3.5 s before this
//! bound and 1.6-1.7 s with it, for about 4% of their adds/s
//! (BENCHMARKS.md, session 21). [`Store::take_sync_window`] reports the
//! longest wait, [`Store::unsynced_for`] the present one.
//!
//! Under `EverySec` and `Always`, what a power loss takes from each of the
//! log's lanes is an end, never a part with later records kept: the sync
//! mark and the record that ends each segment a roll left tell the two
//! apart (docs/FORMAT.md, section 6.4). The mutations whose order matters
//! (a counting filter's adds and removes, creates and deletes) all go to
//! lane 0, so they come back as a prefix of those made, and a remove never
//! survives without the adds before it. (A counting filter over 1 MiB is
//! snapshotted in pieces, each at its own point of the log; an item's
//! counters are all in one piece. Under `No`, which writes no mark and
//! promises nothing across a power loss, a gap a power loss left may need
//! salvage, or be replayed past.)
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

mod cpu_lock;
mod error;
pub mod fs;
mod record;
mod ring;
mod snapshot;
mod store;
mod wal;

pub use error::{Error, ErrorKind, Result};
pub use record::FilterSpec;
pub use store::{AddOutcome, Pending, Recovery, Store, StoreOptions};
pub use wal::{BlockingHook, FsyncPolicy};

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
    /// For a snapshot copied while adds went on: `(count lsn, count)`, the
    /// filter's count once the log is replayed up to the count lsn (the
    /// count in `filter` is the one read during the copy).
    pub count_after_replay: Option<(u64, u64)>,
    /// For a counting filter copied in pieces while adds and removes went
    /// on: how many pieces (0 for a filter copied whole).
    pub pieces: usize,
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
        count_after_replay: l.count_fix,
        pieces: l.pieces.map_or(0, |p| p.lsns.len()),
    })
}
