//! Where a filter lives in Redis: key names, shard sizes, bit offsets.
//!
//! A filter of `B` 512-bit blocks is the blocked layout of `seen-core`
//! (`docs/FORMAT.md` section 2.1), cut into `S` shards of `P` consecutive
//! blocks each (`B = S * P`). An item's global block is
//! `g = (lo * B) >> 64`; it lives in shard `g / P`, block `g % P`, and its
//! `k` positions inside that block are the blocked layout's. Every bit of an
//! item therefore sits in one 64-byte block of one key.

use seen_core::sizing::{self, BLOCK_BITS};
use seen_core::ItemHash;

use crate::error::{lossy, ErrorKind, Result};

/// Bytes of one block (one cache line of Redis's memory).
pub const BLOCK_BYTES: u64 = BLOCK_BITS / 8;

/// The default upper bound of a shard's size: `8 MiB - 16` bytes, which
/// becomes shards of `8 MiB - 64` bytes (131,071 blocks).
///
/// Redis allocates a string of `n` bytes as `n` plus a header of at most 10
/// bytes, rounded up by jemalloc to a size class; staying 16 bytes under a
/// class avoids paying for the next one. 8 MiB is small enough that creating
/// a shard (a zero-filled allocation) or migrating it to another Cluster
/// node blocks Redis for milliseconds, not seconds, and large enough that a
/// filter of a terabit is about 16,000 keys.
pub const DEFAULT_MAX_SHARD_BYTES: u64 = (8 << 20) - 16;

/// How much larger than the smallest filter meeting the rate a filter may
/// be sized to need fewer hashes per item (see [`Plan::new`]).
pub const SIZE_SLACK_PERCENT: u64 = 10;

/// Refuses a shard size limit out of range.
fn check_shard_bytes(max_shard_bytes: u64) -> Result<()> {
    if !(BLOCK_BYTES..=MAX_SHARD_BYTES).contains(&max_shard_bytes) {
        return Err(ErrorKind::InvalidParameter(format!(
            "shard size {max_shard_bytes} bytes is out of range: it must be between \
                 {BLOCK_BYTES} and {MAX_SHARD_BYTES}"
        ))
        .into());
    }
    Ok(())
}

/// `(blocks, hashes)` of the filter with the fewest hashes that is at most
/// [`SIZE_SLACK_PERCENT`] larger than the smallest one meeting the rate,
/// and of that smallest one.
fn fewest_hashes(capacity: u64, error_rate: f64) -> Result<[(u64, u32); 2]> {
    let smallest = sizing::blocked_size(capacity, error_rate)?;
    let (best, best_k) = smallest;
    let limit = best.saturating_add(best.saturating_mul(SIZE_SLACK_PERCENT) / 100);
    for k in 1..best_k {
        if let Some(blocks) = sizing::blocked_size_with_hashes(capacity, error_rate, k)? {
            if blocks <= limit {
                return Ok([(blocks, k), smallest]);
            }
        }
    }
    Ok([smallest, smallest])
}

/// The largest shard size accepted: 256 MiB, half of Redis's 512 MB string
/// limit, so that a shard's bit offsets always fit BITFIELD's range.
pub const MAX_SHARD_BYTES: u64 = 256 << 20;

/// The most shards a filter may have: 2^20, 8 TiB in shards of the
/// default size (every handle keeps every shard's key name in memory).
pub const MAX_SHARDS: u64 = 1 << 20;

/// The longest filter name accepted, in bytes.
pub const MAX_NAME_LEN: usize = 256;

/// Bytes Redis adds to a string's length in its allocation (sds header and
/// terminating NUL), rounded up: the "16" of "2^n - 16".
const STRING_OVERHEAD: u64 = 16;

/// The shape of a filter in Redis.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Plan {
    /// Shards (keys holding bits).
    pub shards: u64,
    /// Blocks per shard.
    pub shard_blocks: u64,
    /// Hash functions (bits set per item).
    pub hashes: u32,
}

impl Plan {
    /// Sizes a filter for `capacity` items at `error_rate`, with shards of at
    /// most `max_shard_bytes`.
    ///
    /// `seen_core::sizing::blocked_size` gives the fewest blocks `B0` (and
    /// its hash count `k0`) that meet the rate. In Redis each hash is a
    /// `SET u1 <offset> 1` of four arguments that Redis parses and runs, the
    /// bulk of an add's cost, while memory is cheap; so the filter takes
    /// the fewest hashes `k <= k0` whose smallest size `B` meeting the rate
    /// is at most [`SIZE_SLACK_PERCENT`] above `B0` (at 1%: 4 hashes for 8.7%
    /// more bits than the best 6). The filter gets
    /// `S = ceil(B / Pmax)` shards of `P = ceil(B / S)` blocks, and `P` is
    /// then rounded up to fill the allocator size class the shard lands in
    /// anyway (up to `Pmax`). Rounding only adds blocks, so the rate can only
    /// get better.
    pub fn new(capacity: u64, error_rate: f64, max_shard_bytes: u64) -> Result<Plan> {
        check_shard_bytes(max_shard_bytes)?;
        let [(blocks, hashes), (min_blocks, min_hashes)] = fewest_hashes(capacity, error_rate)?;
        Plan::shape(capacity, error_rate, max_shard_bytes, blocks, hashes).or_else(|e| {
            // Up to 10% larger can be too many shards where the smallest
            // filter is not: then the smallest filter it is.
            if (min_blocks, min_hashes) == (blocks, hashes) {
                return Err(e);
            }
            Plan::shape(
                capacity,
                error_rate,
                max_shard_bytes,
                min_blocks,
                min_hashes,
            )
        })
    }

    /// As [`Plan::new`], with exactly `hashes` hashes: the fewest blocks
    /// that meet the rate with that many.
    pub fn with_hashes(
        capacity: u64,
        error_rate: f64,
        max_shard_bytes: u64,
        hashes: u32,
    ) -> Result<Plan> {
        check_shard_bytes(max_shard_bytes)?;
        let blocks =
            sizing::blocked_size_with_hashes(capacity, error_rate, hashes)?.ok_or_else(|| {
                ErrorKind::InvalidParameter(format!(
                    "{hashes} hashes cannot reach error rate {error_rate} for capacity \
                     {capacity}; use more"
                ))
            })?;
        Plan::shape(capacity, error_rate, max_shard_bytes, blocks, hashes)
    }

    /// Cuts `blocks` into shards (see [`Plan::new`]).
    fn shape(
        capacity: u64,
        error_rate: f64,
        max_shard_bytes: u64,
        blocks: u64,
        hashes: u32,
    ) -> Result<Plan> {
        let max_blocks = max_shard_bytes / BLOCK_BYTES;
        let shards = blocks.div_ceil(max_blocks);
        if shards > MAX_SHARDS {
            return Err(ErrorKind::InvalidParameter(format!(
                "{capacity} items at error rate {error_rate} need {shards} shards of at most \
                 {max_shard_bytes} bytes, more than the limit of {MAX_SHARDS}"
            ))
            .into());
        }
        let per_shard = blocks.div_ceil(shards);
        let shard_blocks = fill_size_class(per_shard).min(max_blocks);
        Ok(Plan {
            shards,
            shard_blocks,
            hashes,
        })
    }

    /// Total blocks `B = S * P`.
    pub fn blocks(&self) -> u64 {
        self.shards * self.shard_blocks
    }

    /// Bytes of one shard.
    pub fn shard_bytes(&self) -> u64 {
        self.shard_blocks * BLOCK_BYTES
    }

    /// Where an item's bits are: its shard and its block inside the shard.
    #[inline]
    pub fn locate(&self, h: ItemHash) -> (u64, u64) {
        let g = seen_core::blocked_block_index(h, self.blocks());
        (g / self.shard_blocks, g % self.shard_blocks)
    }

    /// Appends to `out` the Redis bit offsets (for `BITFIELD ... u1
    /// <offset>`) of an item's bits inside its shard, without repeats, in
    /// the order the blocked layout derives them.
    pub fn offsets(&self, h: ItemHash, block: u64, out: &mut Vec<u64>) {
        let start = out.len();
        for p in seen_core::blocked_positions(h, self.hashes) {
            let off = redis_offset(block * BLOCK_BITS + p);
            if !out[start..].contains(&off) {
                out.push(off);
            }
        }
    }

    /// The Redis bit offset that preallocates a shard: bit 511 of its last
    /// block, which no item ever uses (`docs/FORMAT.md` 2.1), so writing 0
    /// there sizes the string without touching any item's bit.
    pub fn last_unused_offset(&self) -> u64 {
        redis_offset(self.shard_blocks * BLOCK_BITS - 1)
    }
}

/// Redis's bit offset of seen's bit `x`.
///
/// seen numbers bits least significant first inside each byte (bit `x` is
/// byte `x / 8`, mask `1 << (x % 8)`, `docs/FORMAT.md` 2.3); Redis's
/// `SETBIT`/`BITFIELD` number them most significant first. Converting here
/// makes a shard's bytes exactly the corresponding slice of the body of
/// seen's filter byte format.
#[inline]
pub fn redis_offset(x: u64) -> u64 {
    (x & !7) | (7 - (x & 7))
}

/// The largest block count whose string, with Redis's header, fits the
/// jemalloc size class that `blocks` blocks fall in.
///
/// jemalloc's classes above 128 bytes are four per doubling:
/// `2^n + i * 2^(n-2)` for `i` in 1..=4.
fn fill_size_class(blocks: u64) -> u64 {
    let need = blocks
        .saturating_mul(BLOCK_BYTES)
        .saturating_add(STRING_OVERHEAD);
    if need <= 128 || need >= 1 << 62 {
        return blocks;
    }
    let n = 63 - (need - 1).leading_zeros() as u64; // 2^n < need <= 2^(n+1)
    let step = 1u64 << (n - 2);
    let class = need.div_ceil(step) * step;
    ((class - STRING_OVERHEAD) / BLOCK_BYTES).max(blocks)
}

/// The keys of one filter.
///
/// * metadata: `seen:{NAME}:meta`
/// * shard `i`: `seen:{NAME:i}:bits` (`i` in decimal, from 0)
///
/// The braces are Redis Cluster hash tags: each shard has its own tag, so
/// the shards of one filter spread over all the Cluster's nodes, while every
/// command touches one key.
#[derive(Clone, Debug)]
pub struct Keys {
    /// The metadata key.
    pub meta: Vec<u8>,
    /// The shard keys, shard 0 first.
    pub shards: Vec<Vec<u8>>,
}

impl Keys {
    /// The keys of filter `name` with `shards` shards.
    pub fn new(name: &[u8], shards: u64) -> Keys {
        Keys {
            meta: meta_key(name),
            shards: (0..shards).map(|i| shard_key(name, i)).collect(),
        }
    }
}

/// The metadata key of filter `name`.
pub fn meta_key(name: &[u8]) -> Vec<u8> {
    let mut k = Vec::with_capacity(name.len() + 12);
    k.extend_from_slice(b"seen:{");
    k.extend_from_slice(name);
    k.extend_from_slice(b"}:meta");
    k
}

/// The key of shard `i` of filter `name`.
pub fn shard_key(name: &[u8], i: u64) -> Vec<u8> {
    in_shard_slot(name, i, b"bits")
}

/// `seen:{NAME:i}:<tail>`: a key in the hash slot of shard `i`.
pub(crate) fn in_shard_slot(name: &[u8], i: u64, tail: &[u8]) -> Vec<u8> {
    let mut k = Vec::with_capacity(name.len() + 32 + tail.len());
    k.extend_from_slice(b"seen:{");
    k.extend_from_slice(name);
    k.push(b':');
    k.extend_from_slice(i.to_string().as_bytes());
    k.extend_from_slice(b"}:");
    k.extend_from_slice(tail);
    k
}

/// Checks a filter name: 1 to [`MAX_NAME_LEN`] bytes, no `{` or `}` (they
/// would change the keys' Cluster hash tags). Any other bytes are allowed.
pub fn check_name(name: &[u8]) -> Result<()> {
    let reason = if name.is_empty() {
        "it is empty"
    } else if name.len() > MAX_NAME_LEN {
        "it is longer than 256 bytes"
    } else if name.iter().any(|&b| b == b'{' || b == b'}') {
        "it contains '{' or '}', which would change the keys' Cluster hash tags"
    } else {
        return Ok(());
    };
    Err(ErrorKind::InvalidName {
        name: lossy(name),
        reason,
    }
    .into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offsets_follow_seen_bit_order() {
        // seen bit 0 is the least significant bit of byte 0, Redis bit 7.
        assert_eq!(redis_offset(0), 7);
        assert_eq!(redis_offset(7), 0);
        assert_eq!(redis_offset(8), 15);
        assert_eq!(redis_offset(511), 504);
        for x in 0..4096 {
            assert_eq!(redis_offset(redis_offset(x)), x);
            assert_eq!(redis_offset(x) / 8, x / 8);
        }
    }

    #[test]
    fn plans_meet_the_rate_and_the_shard_limit() {
        for (n, p, max) in [
            (1_000u64, 0.01, DEFAULT_MAX_SHARD_BYTES),
            (20_000, 0.001, 4096),
            (10_000_000, 0.01, DEFAULT_MAX_SHARD_BYTES),
            (1_000_000_000, 0.0001, DEFAULT_MAX_SHARD_BYTES),
            (5_000, 0.1, 64),
        ] {
            let plan = Plan::new(n, p, max).unwrap();
            let (best, best_k) = sizing::blocked_size(n, p).unwrap();
            let k = plan.hashes;
            let need = sizing::blocked_size_with_hashes(n, p, k).unwrap().unwrap();
            // Fewer hashes for at most 10% more memory, and no fewer could do.
            assert!(k <= best_k && need <= best + best / 10, "{n} {p}: {plan:?}");
            if k > 1 {
                let fewer = sizing::blocked_size_with_hashes(n, p, k - 1).unwrap();
                assert!(
                    fewer.is_none_or(|b| b > best + best / 10),
                    "{n} {p}: {plan:?}"
                );
            }
            assert!(plan.blocks() >= need, "{n} {p}: {plan:?}");
            assert!(plan.shard_bytes() <= max, "{n} {p}: {plan:?}");
            assert!(sizing::blocked_fpp(plan.blocks(), k, n) <= p);
            // Never more than one shard beyond what the size needs.
            assert_eq!(plan.shards, need.div_ceil(max / BLOCK_BYTES));
        }
        // Where the 10% larger filter needs too many shards, the smallest
        // filter is taken.
        let (n, p) = (49_500_000u64, 0.01);
        let (best, best_k) = sizing::blocked_size(n, p).unwrap();
        assert!(best <= MAX_SHARDS && best * 11 / 10 > MAX_SHARDS);
        let tight = Plan::new(n, p, 64).unwrap();
        assert_eq!((tight.blocks(), tight.hashes), (best, best_k));
        let big = Plan::new(1_000_000_000, 0.0001, DEFAULT_MAX_SHARD_BYTES).unwrap();
        assert_eq!(big.shard_bytes(), (8 << 20) - 64);
        assert!(big.shards > 250, "{big:?}");
    }

    #[test]
    fn size_classes() {
        // 40 KiB of blocks needs 40 KiB + 16: the 48 KiB class.
        assert_eq!(fill_size_class(640), (48 * 1024 - 16) / 64);
        // Already just under a class: unchanged.
        assert_eq!(fill_size_class(131_071), 131_071);
        assert_eq!(fill_size_class(1), 1);
        for b in 1..20_000u64 {
            let f = fill_size_class(b);
            assert!(f >= b && (f as f64) < b as f64 * 1.26 + 2.0, "{b} -> {f}");
        }
    }

    #[test]
    fn key_names() {
        assert_eq!(meta_key(b"urls"), b"seen:{urls}:meta");
        assert_eq!(shard_key(b"urls", 12), b"seen:{urls:12}:bits");
        assert!(check_name(b"crawler/urls:v2").is_ok());
        assert!(check_name(b"").is_err());
        assert!(check_name(b"a{b").is_err());
        assert!(check_name(&[b'x'; 257]).is_err());
        let e = check_name(b"x}").unwrap_err();
        assert!(e.to_string().contains("\"x}\""), "{e}");
    }

    #[test]
    fn preallocation_bit_is_unused() {
        let plan = Plan::new(20_000, 0.01, 4096).unwrap();
        let last = plan.last_unused_offset();
        assert_eq!(last / 8, plan.shard_bytes() - 1);
        // No item ever sets it.
        let mut offs = Vec::new();
        for i in 0..20_000u64 {
            let h = seen_core::HashAlgorithm::Xxh3_128.hash(&i.to_le_bytes(), 1);
            let (_, block) = plan.locate(h);
            plan.offsets(h, block, &mut offs);
            assert!(!offs.contains(&last));
        }
    }
}
