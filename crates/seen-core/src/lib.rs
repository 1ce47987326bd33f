//! # seen-core
//!
//! The Bloom filters at the heart of seen, the system that answers "have we
//! seen this before?" for crawlers, caches and blacklists. This crate does no
//! I/O beyond `Read`/`Write` and has no async: the durable store, the RESP
//! server, the Redis backend and the CLI are built on it.
//!
//! * [`BloomFilter`]: fixed size, shared through `&self` by many threads,
//!   exact "was it new?" answers under concurrency.
//! * [`ScalableBloomFilter`]: grows by adding sub-filters; with
//!   [`Layout::Classic`] it is bit-for-bit RedisBloom's chain.
//! * [`CountingBloomFilter`]: 4-bit counters, so items can be removed.
//! * [`guava`]: Guava's `BloomFilter` sizing and `writeTo` files, read and
//!   written bit for bit.
//! * [`sizing`]: pure functions from (capacity, error rate) to (bits,
//!   hashes) and back.
//! * [`format`](mod@format): the versioned, checksummed byte format of every kind,
//!   specified in `docs/FORMAT.md`.
//!
//! Layouts: [`Layout::Blocked`] (default) puts all of an item's bits in
//! one 64-byte cache line, so an operation costs one cache miss; its sizing
//! accounts for blocking so the error rate asked for is delivered.
//! [`Layout::Classic`] spreads them over the whole array exactly as
//! RedisBloom does, so `BF.SCANDUMP` dumps move between the two.
//! [`Layout::Guava`] and [`Layout::Guava32`] place them as Guava's
//! `BloomFilter` does, so its files move between the two.
//!
//! No caller input panics: bad parameters, absurd sizes and corrupt bytes
//! are [`Error`]s whose [`ErrorKind`] says what was wrong.
//!
//! ```
//! use seen_core::{BloomFilter, ScalableBloomFilter};
//!
//! let urls = BloomFilter::new(10_000_000, 0.0001)?;
//! if urls.add("https://example.com/") {
//!     // first time: fetch it
//! }
//! assert!(urls.contains("https://example.com/"));
//!
//! // Unknown final size: let it grow.
//! let titles = ScalableBloomFilter::new(1_000, 0.001)?;
//! assert!(titles.add("Breaking: Bloom filters still work")?);
//! # Ok::<(), seen_core::Error>(())
//! ```

#![warn(missing_docs)]

mod bitmap;
mod bloom;
mod budget;
mod counting;
mod error;
pub mod format;
pub mod guava;
mod hash;
mod prefetch;
mod raw;
mod redisbloom;
mod scalable;
pub mod sizing;
mod stats;

pub use bloom::{BloomFilter, FilterBuilder, DEFAULT_MAX_BYTES};
pub use budget::{Charge, MemoryBudget};
pub use counting::{CountingBloomFilter, Removal, COUNTER_MAX};
pub use error::{ChunkMisfit, Error, ErrorKind, Result};
pub use format::{decode, AnyFilter, DecodeOptions, FilterKind};
pub use hash::{
    murmur3_x64_128, murmur64a, HashAlgorithm, ItemHash, DEFAULT_SEED, REDISBLOOM_SEED,
};
pub use prefetch::{for_each_prefetched, PREFETCH_AHEAD};
pub use raw::Layout;
pub use redisbloom::MAX_CHUNK;
pub use scalable::{
    LinkInfo, ScalableBloomFilter, ScalableBuilder, DEFAULT_EXPANSION, ERROR_TIGHTENING_RATIO,
    MAX_LINKS,
};
pub use stats::FilterStats;

/// Positions of an item inside its block, for the blocked layout (bit 1 to
/// 509 of the 512-bit block), as specified in `docs/FORMAT.md`. Exposed for
/// golden-vector tests and for other implementations to check against.
pub fn blocked_positions(hash: ItemHash, hashes: u32) -> Vec<u64> {
    raw::block_positions(hash.hi, hashes)
}

/// The block an item falls in for a blocked or counting filter of `blocks`
/// blocks (every add and remove of the item reads and changes that block
/// only).
pub fn blocked_block_index(hash: ItemHash, blocks: u64) -> u64 {
    raw::fastrange(hash.lo, blocks)
}

/// The README's examples, compiled and run as doctests.
#[doc = include_str!("../../../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;
