//! [`FilterParams`]: what to create when no filter of a name exists yet.

use std::time::Duration;

use seen_core::DEFAULT_SEED;

use crate::error::Result;
use crate::layout::{Plan, DEFAULT_MAX_SHARD_BYTES};

/// What to create when no filter of the name exists yet.
///
/// ```
/// use seen_redis::FilterParams;
/// use std::time::Duration;
///
/// let p = FilterParams::new(100_000_000, 0.001)
///     .ttl(Duration::from_secs(30 * 86_400)); // forget everything after 30 days
/// assert_eq!(p.capacity, 100_000_000);
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct FilterParams {
    /// Items the filter is sized for.
    pub capacity: u64,
    /// False-positive rate at capacity.
    pub error_rate: f64,
    /// Largest size of one shard in bytes; `None` for
    /// [`DEFAULT_MAX_SHARD_BYTES`](crate::DEFAULT_MAX_SHARD_BYTES). When set,
    /// opening an existing filter also checks that its shards match.
    pub max_shard_bytes: Option<u64>,
    /// Expiry of the whole filter, applied when this call creates it (an
    /// existing filter keeps its own; see [`RedisFilter::set_ttl`](crate::RedisFilter::set_ttl)).
    pub ttl: Option<Duration>,
    /// Seed of the xxh3-128 item hash ([`seen_core::DEFAULT_SEED`] unless
    /// set). Part of the filter's identity: checked when opening.
    pub seed: u64,
    /// Bits set per item; `None` for the fewest that cost at most
    /// [`SIZE_SLACK_PERCENT`](crate::SIZE_SLACK_PERCENT) more memory than
    /// the smallest filter (see [`Plan::new`]). When set, the filter is the
    /// smallest with exactly this many, and opening an existing filter
    /// also checks it.
    pub hashes: Option<u32>,
}

impl FilterParams {
    /// A filter for `capacity` items at false-positive rate `error_rate`.
    pub fn new(capacity: u64, error_rate: f64) -> Self {
        FilterParams {
            capacity,
            error_rate,
            max_shard_bytes: None,
            ttl: None,
            seed: DEFAULT_SEED,
            hashes: None,
        }
    }

    /// Sets the largest shard size in bytes (at least 64, at most 256 MiB).
    pub fn max_shard_bytes(mut self, bytes: u64) -> Self {
        self.max_shard_bytes = Some(bytes);
        self
    }

    /// Sets the expiry applied when the filter is created.
    pub fn ttl(mut self, ttl: Duration) -> Self {
        self.ttl = Some(ttl);
        self
    }

    /// Sets the hash seed.
    pub fn seed(mut self, seed: u64) -> Self {
        self.seed = seed;
        self
    }

    /// Sets the bits per item: for example the hash count of the smallest
    /// filter (`seen_core::sizing::blocked_size`), for the least memory at
    /// the cost of more work per add.
    pub fn hashes(mut self, hashes: u32) -> Self {
        self.hashes = Some(hashes);
        self
    }

    pub(crate) fn plan(&self) -> Result<Plan> {
        let max = self.max_shard_bytes.unwrap_or(DEFAULT_MAX_SHARD_BYTES);
        match self.hashes {
            None => Plan::new(self.capacity, self.error_rate, max),
            Some(k) => Plan::with_hashes(self.capacity, self.error_rate, max, k),
        }
    }
}
