//! # seen-redis
//!
//! One Bloom filter shared by a fleet of workers, kept in plain Redis
//! strings: every worker on every machine sees the same filter, and Redis's
//! own persistence and replication keep it. It needs no Redis module, so it
//! runs on any Redis 6.2+ or Valkey, standalone or Cluster, managed
//! services included. It is seen-core's blocked filter
//! ([`seen_core::BloomFilter`]) with its bits in Redis, and the backend of
//! the CLI's `seen dedup --redis URL --name NAME`.
//!
//! ```no_run
//! use seen_redis::{FilterParams, RedisFilter, Target};
//!
//! let target: Target = "redis+cluster://10.0.0.1:7000,10.0.0.2:7000".parse()?;
//! let mut urls = RedisFilter::open_or_create(&target, "crawler:urls",
//!     &FilterParams::new(1_000_000_000, 0.001))?;
//! let batch = ["https://example.com/", "https://example.com/about"];
//! for (url, new) in batch.iter().zip(urls.add_many(&batch)?) {
//!     if new {
//!         // first time any worker sees it: fetch it
//!     }
//! }
//! assert!(urls.contains_many(&batch)?.iter().all(|&present| present));
//! # Ok::<(), seen_redis::Error>(())
//! ```
//!
//! # Layout
//!
//! A filter is seen-core's blocked layout (`docs/FORMAT.md` 2.1) of
//! `B = S * P` blocks of 512 bits, cut into `S` **shards** of `P`
//! consecutive blocks. An item's 128-bit hash (xxh3-128 with the filter's
//! seed, [`seen_core::DEFAULT_SEED`] unless chosen) picks the global block
//! `g = (lo * B) >> 64`, which is block `g % P` of shard `g / P`; its `k`
//! bits are the blocked layout's positions inside that block. So every
//! operation on an item touches one 64-byte stretch of one key, and the
//! bits are exactly those of an in-memory [`seen_core::BloomFilter`] of `B`
//! blocks: the tests check both the answers and the bytes.
//!
//! Keys (`NAME` is the filter name: any 1 to 256 bytes without `{` or `}`):
//!
//! | key | holds |
//! |---|---|
//! | `seen:{NAME}:meta` | the metadata, 68 bytes (layout in [`Metadata`]) |
//! | `seen:{NAME:i}:bits` | shard `i` (decimal, from 0): `P * 64` bytes |
//!
//! Each shard has its own Cluster hash tag, so a Cluster spreads the shards
//! over its nodes. Shard bytes use seen's bit order (bit `x` is byte `x / 8`,
//! mask `1 << (x % 8)`), so shard `i` is byte for byte the slice
//! `[i * P * 64, (i + 1) * P * 64)` of the array in seen's filter format;
//! a Redis bit offset is therefore `(x & !7) | (7 - (x & 7))`.
//!
//! # Shard sizing
//!
//! Sizing is seen-core's for the blocked layout, so the rate asked for is
//! the rate delivered at capacity, with one difference: each hash of an
//! item is a `SET u1 <offset> 1` that Redis parses and runs (four
//! arguments), which is most of what an add costs, while memory is cheap.
//! So a filter takes the fewest hashes whose size meeting the rate
//! ([`seen_core::sizing::blocked_size_with_hashes`]) is at most
//! [`SIZE_SLACK_PERCENT`] (10%) above the smallest filter's
//! ([`seen_core::sizing::blocked_size`]): at 1%, 4 hashes and 10.9 bits per
//! item instead of 6 and 10.0; at 0.1%, 6 instead of 9 (+7.9%); at 0.01%,
//! 8 instead of 12 (+7.0%). Shards hold at most
//! [`DEFAULT_MAX_SHARD_BYTES`] (`8 MiB - 16`) unless
//! [`FilterParams::max_shard_bytes`] says otherwise: `S = ceil(B / Pmax)`,
//! `P = ceil(B / S)`, then `P` is rounded up to fill the jemalloc size class
//! the shard's allocation falls in anyway (the shard plus Redis's string
//! header stays at least 16 bytes under a class: the "2^n - 16" rule), which
//! only lowers the rate. Every shard is created at full length when the
//! filter is opened (a 0 written to bit 511 of its last block, a bit no item
//! uses), so Redis allocates each shard once and never grows one (a
//! reallocation and copy) under a worker's write; an 8 MiB allocation or a
//! Cluster migration of one shard takes Redis milliseconds. The total has no
//! 512 MB limit: a terabit filter is 16,000 shards.
//!
//! # Exactly one "new"
//!
//! [`RedisFilter::add_many`] sends, per shard, one
//! `BITFIELD key SET u1 off 1 SET u1 off 1 ...` holding all the bits of
//! several items (each item's bits in one command, in input order, at most
//! 512 bit operations per command; each run inside the add script, see
//! Faults), and the commands for all shards in one pipeline. On a standalone server the commands are encoded straight into
//! RESP and streamed: up to 128 KiB of them are in flight while replies are
//! read, so Redis runs one command while the client parses the reply to the
//! one before. (The Cluster client sends each node its part before reading
//! any reply.) `BITFIELD` returns each bit's old
//! value, and an item is new if any of its bits was 0. Redis runs one command
//! at a time, so when two workers add the same new item, one command runs
//! first and finds a 0, and the other finds all of the item's bits set:
//! exactly one worker is told "new". Lookups use `BITFIELD_RO ... GET u1`.
//!
//! # Faults
//!
//! Lost connections, refused connections, restarts (`LOADING`) and Cluster
//! changes (`MOVED`, `ASK`, `TRYAGAIN`, `CLUSTERDOWN`, `MASTERDOWN`,
//! `READONLY`) are retried with doubling backoff within a [`RetryPolicy`]
//! (default: 30 s of one outage; on a standalone server without
//! [`RedisFilter::wait_for_replicas`], any reply starts the budget again,
//! elsewhere a batch that succeeds does), on a fresh connection (for a
//! Cluster, a fresh slot map). An add round stops retrying, its unanswered
//! items unknown, once half of [`ANSWERS_TTL`] has passed since it began or
//! the filter's TTL runs out, so that every retry still finds the answers
//! recorded before it. Retries are decided
//! by error kind, and made here rather than by the `redis` crate's Cluster
//! client.
//!
//! **Adds are idempotent.** Each `BITFIELD` of an add runs inside a script
//! that also records its answers (the old bits) in a hash
//! `seen:{NAME:i}:done:<worker>` in the shard's hash slot, under the round
//! and command it belongs to, for [`ANSWERS_TTL`] (10 minutes). Redis runs,
//! persists and replicates a script as one step, so a retry of a command
//! whose reply was lost gets the recorded answers instead of running again
//! (which would find its own bits set and call a new item present). Each
//! handle keeps one round in flight and its hash holds only that round, so
//! the cost is a few hash writes per 512 bits set.
//!
//! What each fault does to the answers of [`RedisFilter::add_many`]:
//!
//! | fault | answers |
//! |---|---|
//! | a reply lost (connection dropped, timeout) | exact: the retry gets the recorded answers |
//! | Redis restarted, with `appendonly yes` and `appendfsync always` | exact: bits and answers come back together from the AOF |
//! | Redis restarted with weaker persistence (`everysec`, RDB only) | what Redis lost is lost: the items of the lost writes are reported new again later, and bits lost under items other clients were told about are false negatives |
//! | Cluster failover, [`RedisFilter::wait_for_replicas`] 1 or more | exact: an answered write is on a replica before it is answered (`WAIT` asks every master, so every master needs that many replicas, or every add waits out the retry budget) |
//! | Cluster failover without waiting | writes the master answered but had not yet sent to its replica are lost with it: their items are reported new again later (a duplicate, never a loss) |
//! | Redis down longer than the retry budget (or a round retried for 5 minutes) | [`ErrorKind::Incomplete`]: per item new, present, unknown or not sent; unknown items may be in the filter already, so report them new (`seen dedup` prints them and exits 2) |
//!
//! Lookups are read-only and always safe to retry.
//!
//! # Metadata and versions
//!
//! The metadata key is written once, with `SET ... NX`, by whichever client
//! creates the filter, and read by every client that opens it: magic,
//! version, layout and hash ids, `k`, seed, capacity, error rate, `P`, `S`,
//! creation time and a CRC. A client asking for other parameters gets
//! [`ErrorKind::Mismatch`]; a newer version, [`ErrorKind::UnsupportedVersion`];
//! a damaged value, [`ErrorKind::CorruptMetadata`]. Never silently other bit
//! positions, which would make every lookup a false negative. Each handle
//! re-reads the metadata at most once a second before an operation, so it
//! notices a deletion ([`ErrorKind::NotFound`]), an expiry
//! ([`ErrorKind::Expired`]) or a re-creation with another layout
//! ([`ErrorKind::Changed`]).
//!
//! # Expiry
//!
//! An optional TTL ([`FilterParams::ttl`] at creation,
//! [`RedisFilter::set_ttl`] later) covers the whole filter: it is set on
//! every shard and then on the metadata key in one pipeline. A handle
//! computes from the metadata's `PTTL` a local deadline at or before the
//! metadata's expiry, refuses every operation after it
//! ([`ErrorKind::Expired`]), and sends each write to a shard of such a
//! filter with `PEXPIRE` of the time left (rounded down). So a shard that a
//! late write re-creates still expires with the rest; TTLs being relative,
//! a shard can outlive the metadata by the time its `PEXPIRE` took to reach
//! Redis (milliseconds), never longer. After expiry,
//! [`RedisFilter::open_or_create`] starts a new, empty filter, re-applying
//! its TTL to (or, without one, removing any TTL from) every shard: a
//! crawler that forgets everything every N days.
//!
//! Run Redis with a `maxmemory-policy` that never evicts a filter's keys
//! (`noeviction`, or a `volatile-*` policy for filters without a TTL): an
//! evicted shard is lost bits. [`RedisFilter::info`] counts such damaged
//! shards.

#![warn(missing_docs)]

mod answers;
mod error;
mod filter;
mod layout;
mod link;
mod located;
mod meta;
mod params;
mod reply;
mod target;

pub use answers::{done_key, ADD_SCRIPT, ANSWERS_TTL};
pub use error::{Answer, Error, ErrorKind, Result};
pub use filter::{RedisFilter, RedisFilterInfo};
pub use layout::{
    meta_key, redis_offset, shard_key, Plan, BLOCK_BYTES, DEFAULT_MAX_SHARD_BYTES, MAX_NAME_LEN,
    MAX_SHARDS, MAX_SHARD_BYTES, SIZE_SLACK_PERCENT,
};
pub use link::RetryPolicy;
pub use meta::{Metadata, META_LEN, META_MAGIC, META_VERSION};
pub use params::FilterParams;
pub use target::Target;

/// The README's example, compiled as a doctest.
#[doc = include_str!("../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;
