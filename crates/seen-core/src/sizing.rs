//! Sizing: from (capacity, error rate) to (bits, hashes), and back.
//!
//! Small pure functions, so that the CLI's `seen calc`, the server and the
//! filters all answer sizing questions the same way.
//!
//! Two models, and Guava's own rules:
//!
//! * **Classic** (bits spread over the whole array): the textbook
//!   `p = (1 - e^(-k n / m))^k`, plus RedisBloom's own rounding rules in the
//!   `redis_*` functions, which the compatible layout must follow to the bit.
//! * **Blocked** (all of an item's bits in one 512-bit block, of which
//!   [`BLOCK_USABLE_BITS`] are addressable): items per block are Poisson
//!   distributed, and a crowded block has a much higher false-positive rate
//!   than the average, so the blocked model averages the per-block rate over
//!   that distribution, and the number of distinct bits an item's `k`
//!   independent positions cover. Sizing searches that model for the fewest
//!   blocks that still meet the requested rate, so the rate asked for is the
//!   rate delivered (the statistical tests check it).
//! * **Guava** ([`guava_size`]): `BloomFilter.create`'s formulas, as Guava
//!   computes them, so that a Guava-layout filter is the one Guava makes.

use crate::error::{ErrorKind, Result};

/// Bits in one block of the blocked layout: one 64-byte cache line.
pub const BLOCK_BITS: u64 = 512;

/// Bits of a block that item positions can address. Bit 0 of each block is
/// the block's add lock (see `BloomFilter::add`), bits 510 and 511 are unused:
/// 509 is prime, which keeps the position arithmetic simple.
pub const BLOCK_USABLE_BITS: u64 = 509;

/// Counters in one block of the counting filter (64 bytes of 4-bit counters).
pub const COUNTING_BLOCK_COUNTERS: u64 = 128;

/// The largest number of hash functions any layout uses.
pub const MAX_HASHES: u32 = 255;

/// The largest `k` the blocked sizing search considers.
const MAX_BLOCKED_HASHES: u32 = 48;

const LN2: f64 = std::f64::consts::LN_2;
const LN2_SQUARED: f64 = LN2 * LN2;

/// Checks that an error rate is strictly between 0 and 1.
pub fn check_error_rate(error_rate: f64) -> Result<()> {
    if error_rate.is_finite() && error_rate > 0.0 && error_rate < 1.0 {
        Ok(())
    } else {
        Err(ErrorKind::InvalidErrorRate(error_rate).into())
    }
}

/// Checks that a hash count is one a filter supports: 1 to [`MAX_HASHES`].
pub(crate) fn check_hashes(hashes: u32) -> Result<()> {
    if hashes == 0 || hashes > MAX_HASHES {
        Err(ErrorKind::InvalidHashCount {
            hashes,
            max: MAX_HASHES,
        }
        .into())
    } else {
        Ok(())
    }
}

fn check_capacity(capacity: u64) -> Result<()> {
    if capacity == 0 {
        Err(ErrorKind::ZeroCapacity.into())
    } else {
        Ok(())
    }
}

// ---------------------------------------------------------------- classic --

/// The classic layout's double-hashing floor: it adds about
/// `CLASSIC_FLOOR * fill / m` to the textbook rate.
///
/// RedisBloom's positions `(a + i*b) mod 2^64 mod m` collapse onto fewer
/// than `k` distinct bits when `b` has a small additive order modulo `m`
/// (for example `b ≡ 0` or `b ≡ m/2`); such an item needs only one or two set
/// bits to be a false positive, which happens with probability about the
/// fill ratio. `examples/classic_floor.rs` measures the excess at between
/// 0.4 and 2.2 times `fill / m` depending on `m`'s factors; the model uses 3
/// to stay on the safe side. It matters only for small filters at small
/// rates, where sizing then picks more bits and fewer hashes than the
/// textbook; the blocked layout has no such floor.
pub const CLASSIC_FLOOR: f64 = 3.0;

/// Expected false-positive rate of a classic filter of `bits` bits and
/// `hashes` hash functions holding `items` items: the textbook
/// `(1 - e^(-k n / m))^k` plus the double-hashing floor
/// ([`CLASSIC_FLOOR`]` * fill / m`).
pub fn classic_fpp(bits: u64, hashes: u32, items: u64) -> f64 {
    if bits == 0 {
        return 1.0;
    }
    if items == 0 {
        return 0.0;
    }
    let k = hashes as f64;
    let fill = 1.0 - (-k * items as f64 / bits as f64).exp();
    (fill.powf(k) + CLASSIC_FLOOR * fill / bits as f64).min(1.0)
}

/// Bits per item of an optimally configured classic filter at `error_rate`:
/// `-ln(p) / ln(2)^2`.
pub fn classic_bits_per_item(error_rate: f64) -> Result<f64> {
    check_error_rate(error_rate)?;
    Ok(-error_rate.ln() / LN2_SQUARED)
}

/// Bits (a multiple of 64) and hashes of the smallest classic filter whose
/// false-positive rate at `capacity` items is at most `error_rate`, by
/// [`classic_fpp`] (which includes the double-hashing floor).
///
/// The textbook `m = -n ln p / ln(2)^2` assumes a fractional `k` and no
/// floor; with a whole number of hashes that size misses the rate slightly
/// (by 3% at p = 0.1), so this searches upwards from it for the first size
/// where the best `k` meets the rate.
pub fn classic_size(capacity: u64, error_rate: f64) -> Result<(u64, u32)> {
    check_capacity(capacity)?;
    let bpe = classic_bits_per_item(error_rate)?;
    let ideal = round_up_64(capacity as f64 * bpe)?;
    // Fewer hashes than the textbook optimum lower the fill and with it the
    // floor, so search every k up to the optimum.
    let best_k = |bits: u64| -> (u32, f64) {
        let opt = (LN2 * bits as f64 / capacity as f64).ceil();
        (1..=(opt.clamp(1.0, MAX_HASHES as f64) as u32))
            .map(|k| (k, classic_fpp(bits, k, capacity)))
            .min_by(|a, b| a.1.total_cmp(&b.1))
            .expect("at least one candidate")
    };
    let fits = |bits: u64| best_k(bits).1 <= error_rate;
    let too_large = || ErrorKind::TooLarge {
        needed: u64::MAX,
        limit: u64::MAX,
    };
    let mut hi = ideal;
    let mut step = ideal.div_ceil(64 * 64).max(1) * 64;
    while !fits(hi) {
        hi = hi.checked_add(step).ok_or(too_large())?;
        step = step.saturating_mul(2);
        // The search stops at 2^40 bits an item (1.1e12 bits for one
        // item, more than any memory): towards 2^53 bits an item
        // `1 - exp(-k n / M)` rounds to 0 in `f64`, and so the rate, and a
        // size found there would be the rounding's (one item at 1e-300
        // would get 2^54 bits, 2 PiB). Only rates near the floor's
        // `3 n / M^2` get this far.
        if hi / (1 << 40) >= capacity {
            return Err(too_large().into());
        }
    }
    // Smallest multiple of 64 in (lo, hi] that fits.
    let mut lo = ideal.saturating_sub(64) / 64;
    let mut hi_w = hi / 64;
    while hi_w - lo > 1 {
        let mid = lo + (hi_w - lo) / 2;
        if fits(mid * 64) {
            hi_w = mid;
        } else {
            lo = mid;
        }
    }
    let bits = hi_w * 64;
    Ok((bits, best_k(bits).0))
}

/// Items a classic filter of `bits` bits holds at `error_rate` with the
/// optimal number of hashes.
pub fn classic_capacity(bits: u64, error_rate: f64) -> Result<u64> {
    let bpe = classic_bits_per_item(error_rate)?;
    Ok((bits as f64 / bpe).floor() as u64)
}

fn round_up_64(bits: f64) -> Result<u64> {
    if !(bits.is_finite()) || bits >= (u64::MAX - 64) as f64 {
        return Err(ErrorKind::TooLarge {
            needed: u64::MAX,
            limit: u64::MAX,
        }
        .into());
    }
    let bits = (bits as u64).max(1);
    Ok(bits.div_ceil(64) * 64)
}

// -------------------------------------------------------------- RedisBloom --

/// RedisBloom's bits per entry: `-ln(e) / 0.480453013918201`.
pub fn redis_bits_per_entry(error_rate: f64) -> f64 {
    -error_rate.ln() / 0.480453013918201
}

/// RedisBloom's `LN2`: its literal, not `LN_2`, whose last digits differ;
/// hash counts must match RedisBloom's to the bit.
#[allow(clippy::approx_constant)]
pub(crate) const REDIS_LN2: f64 = 0.693147180559945;

/// RedisBloom's hash count for an error rate: `ceil(LN2 * bpe)`.
pub fn redis_hashes(error_rate: f64) -> u32 {
    let k = (REDIS_LN2 * redis_bits_per_entry(error_rate)).ceil();
    if k.is_finite() && k >= 1.0 {
        (k as u64).min(u32::MAX as u64) as u32
    } else {
        1
    }
}

/// RedisBloom's bit count for a link: `floor(capacity * bpe)`, at least 1,
/// rounded up to a multiple of 64 (RedisBloom's `BLOOM_OPT_NOROUND |
/// BLOOM_OPT_FORCE64`): at high error rates (0.99 for 3 items) the floor is
/// 0 and the link has 64 bits.
pub fn redis_bits(capacity: u64, error_rate: f64) -> Result<u64> {
    check_capacity(capacity)?;
    check_error_rate(error_rate)?;
    let bits = capacity as f64 * redis_bits_per_entry(error_rate);
    if !bits.is_finite() || bits >= (u64::MAX - 64) as f64 {
        return Err(ErrorKind::TooLarge {
            needed: u64::MAX,
            limit: u64::MAX,
        }
        .into());
    }
    Ok((bits as u64).max(1).div_ceil(64) * 64)
}

// ---------------------------------------------------------------- blocked --

/// Probability distribution of the number of distinct positions among `k`
/// independent uniform draws from `b` slots: `dist[d]` for `d` in `0..=k`.
fn distinct_distribution(k: u32, b: f64) -> Vec<f64> {
    let k = k as usize;
    let mut dist = vec![0.0; k + 1];
    dist[0] = 1.0;
    for _ in 0..k {
        let mut next = vec![0.0; k + 1];
        for (d, &p) in dist.iter().enumerate() {
            if p == 0.0 {
                continue;
            }
            let same = d as f64 / b;
            next[d] += p * same;
            if d < k {
                next[d + 1] += p * (1.0 - same);
            }
        }
        dist = next;
    }
    dist
}

/// ln(j!) by Stirling's series (exact enough for Poisson weights).
fn ln_factorial(j: f64) -> f64 {
    if j < 2.0 {
        return 0.0;
    }
    if j < 20.0 {
        let mut acc = 0.0;
        let mut i = 2.0;
        while i <= j {
            acc += f64::ln(i);
            i += 1.0;
        }
        return acc;
    }
    j * j.ln() - j + 0.5 * (2.0 * std::f64::consts::PI * j).ln() + 1.0 / (12.0 * j)
        - 1.0 / (360.0 * j * j * j)
}

/// Items per block from which a blocked filter's rate is defined to be 1
/// (see `blocked_fpp_with`).
const FULL_BLOCK_ITEMS: f64 = 1e7;

/// Expected false-positive rate of a blocked filter with `blocks` blocks of
/// `usable` addressable bits, `hashes` positions per item and `items` items.
fn blocked_fpp_with(blocks: u64, usable: u64, hashes: u32, items: u64) -> f64 {
    if blocks == 0 {
        return 1.0;
    }
    if items == 0 {
        return 0.0;
    }
    let b = usable as f64;
    let k = hashes as f64;
    let lambda = items as f64 / blocks as f64;
    // From ten million items a block the rate is defined to be 1. The sum
    // below gives nearly that there, not exactly (the Poisson weights'
    // rounding): 1 - 3.6e-9 at k = 1 and 12,345,678 items a block, and
    // the gap grows with the items (1 - 2.8e-6 at 1.74e9). So a rate near
    // 1, the nearer the smaller the capacity, may size otherwise than the
    // sum alone would: an error, or more blocks, where the sum allowed
    // fewer (e.g. (1,297,463,378, 0.9999995) and (50,625,000,
    // 0.999999995), one block by the sum). The definition is part of the
    // format (docs/FORMAT.md section 3). The bound also ends the sum: past
    // 2^53 items a block `j += 1.0` would not move `j`.
    if lambda >= FULL_BLOCK_ITEMS {
        return 1.0;
    }
    let distinct = distinct_distribution(hashes, b);
    let per_block = |j: f64| -> f64 {
        let fill = 1.0 - (1.0 - 1.0 / b).powf(k * j);
        distinct
            .iter()
            .enumerate()
            .map(|(d, &p)| p * fill.powi(d as i32))
            .sum()
    };
    // Sum the Poisson(lambda) mixture outwards from its mode until the
    // weights are negligible.
    let mode = lambda.floor();
    let ln_pmode = -lambda + mode * lambda.ln() - ln_factorial(mode);
    let pmode = ln_pmode.exp();
    let mut total = pmode * per_block(mode);
    let mut weight = pmode;
    let mut j = mode;
    loop {
        j += 1.0;
        weight *= lambda / j;
        let term = weight * per_block(j);
        total += term;
        if weight < 1e-18 && j > lambda {
            break;
        }
    }
    let mut weight = pmode;
    let mut j = mode;
    while j > 0.0 {
        weight *= j / lambda;
        j -= 1.0;
        total += weight * per_block(j);
        if weight < 1e-18 {
            break;
        }
    }
    total.min(1.0)
}

/// Expected false-positive rate of a blocked Bloom filter with `blocks`
/// 512-bit blocks and `hashes` hashes holding `items` items.
pub fn blocked_fpp(blocks: u64, hashes: u32, items: u64) -> f64 {
    blocked_fpp_with(blocks, BLOCK_USABLE_BITS, hashes, items)
}

/// Expected false-positive rate of a counting filter with `blocks` blocks of
/// 128 counters and `hashes` hashes holding `items` items.
pub fn counting_fpp(blocks: u64, hashes: u32, items: u64) -> f64 {
    blocked_fpp_with(blocks, COUNTING_BLOCK_COUNTERS, hashes, items)
}

/// Fewest blocks of `usable`-bit blocks with exactly `k` hashes that hold
/// `capacity` items at `error_rate`, searched up to 256 times the textbook
/// size; `None` if even that is not enough (too few hashes for the rate).
fn fewest_blocks(capacity: u64, error_rate: f64, usable: u64, k: u32) -> Option<u64> {
    let ideal_bits = capacity as f64 * -error_rate.ln() / LN2_SQUARED;
    let fits = |blocks: u64| blocked_fpp_with(blocks, usable, k, capacity) <= error_rate;
    // Find an upper bound by doubling from the ideal size.
    let mut hi = ((ideal_bits / usable as f64).ceil() as u64).max(1);
    let mut doublings = 0;
    while !fits(hi) {
        hi = hi.saturating_mul(2);
        doublings += 1;
        if doublings > 8 || hi > (1u64 << 50) {
            break;
        }
    }
    if !fits(hi) {
        return None;
    }
    let mut lo = 0u64; // does not fit
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        if fits(mid) {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    Some(hi)
}

/// Fewest blocks (and the hash count that achieves it) so that a blocked
/// filter of `usable`-bit blocks holds `capacity` items at `error_rate`.
fn blocked_size_with(capacity: u64, error_rate: f64, usable: u64) -> Result<(u64, u32)> {
    check_capacity(capacity)?;
    check_error_rate(error_rate)?;
    let ideal_bits = capacity as f64 * -error_rate.ln() / LN2_SQUARED;
    let ideal_k = (LN2 * ideal_bits / capacity as f64).round().max(1.0) as u32;
    let mut best: Option<(u64, u32)> = None;
    // At rates below about 2^-51 `ideal_k` passes 51; the range still holds
    // 48 at least, since 48 hashes reach any rate with enough blocks.
    let k_lo = ideal_k.saturating_sub(3).clamp(1, MAX_BLOCKED_HASHES);
    let k_hi = (ideal_k + 6).min(MAX_BLOCKED_HASHES);
    for k in k_lo..=k_hi {
        let Some(blocks) = fewest_blocks(capacity, error_rate, usable, k) else {
            continue;
        };
        if best.is_none_or(|(b, _)| blocks < b) {
            best = Some((blocks, k));
        }
    }
    best.ok_or_else(|| {
        ErrorKind::Unreachable(format!(
            "no blocked filter reaches error rate {error_rate:e} for capacity {capacity}; use the classic layout"
        ))
        .into()
    })
}

/// Blocks of the smallest blocked Bloom filter with exactly `hashes`
/// hashes that holds `capacity` items at `error_rate`; `None` if no size
/// up to 256 times the textbook one reaches the rate with so few hashes.
///
/// Fewer hashes than [`blocked_size`]'s cost a little memory and save work
/// per item: at 1% four hashes need 8.7% more bits than the best six.
///
/// ```
/// use seen_core::sizing::{blocked_fpp, blocked_size, blocked_size_with_hashes};
/// let (best, _) = blocked_size(1_000_000, 0.01).unwrap();
/// let four = blocked_size_with_hashes(1_000_000, 0.01, 4).unwrap().unwrap();
/// assert!(four > best && four < best + best / 10);
/// assert!(blocked_fpp(four, 4, 1_000_000) <= 0.01);
/// assert_eq!(blocked_size_with_hashes(1_000_000, 1e-9, 1).unwrap(), None);
/// ```
pub fn blocked_size_with_hashes(
    capacity: u64,
    error_rate: f64,
    hashes: u32,
) -> Result<Option<u64>> {
    check_capacity(capacity)?;
    check_error_rate(error_rate)?;
    check_hashes(hashes)?;
    if hashes > MAX_BLOCKED_HASHES {
        return Err(ErrorKind::Unreachable(format!(
            "{hashes} hashes: a blocked filter uses at most {MAX_BLOCKED_HASHES}"
        ))
        .into());
    }
    Ok(fewest_blocks(
        capacity,
        error_rate,
        BLOCK_USABLE_BITS,
        hashes,
    ))
}

/// Blocks and hashes of the smallest blocked Bloom filter that holds
/// `capacity` items with a false-positive rate of at most `error_rate`.
///
/// ```
/// let (blocks, hashes) = seen_core::sizing::blocked_size(1_000_000, 0.01).unwrap();
/// let bits_per_item = (blocks * 512) as f64 / 1e6;
/// assert!(bits_per_item < 11.0, "{bits_per_item}");
/// assert!(seen_core::sizing::blocked_fpp(blocks, hashes, 1_000_000) <= 0.01);
/// ```
pub fn blocked_size(capacity: u64, error_rate: f64) -> Result<(u64, u32)> {
    blocked_size_with(capacity, error_rate, BLOCK_USABLE_BITS)
}

/// Blocks and hashes of the smallest counting filter (128 four-bit counters
/// per block) that holds `capacity` items at `error_rate`.
pub fn counting_size(capacity: u64, error_rate: f64) -> Result<(u64, u32)> {
    blocked_size_with(capacity, error_rate, COUNTING_BLOCK_COUNTERS)
}

/// Most items a blocked filter of `blocks` blocks holds at `error_rate` (with
/// the best hash count for that load), and that hash count.
pub fn blocked_capacity(blocks: u64, error_rate: f64) -> Result<(u64, u32)> {
    check_error_rate(error_rate)?;
    if blocks == 0 {
        return Ok((0, 1));
    }
    let mut best = (0u64, 1u32);
    // In floating point: `blocks * 509` passes `u64::MAX` past 2.3 EiB.
    let ideal_items = blocks as f64 * BLOCK_USABLE_BITS as f64 * LN2_SQUARED / -error_rate.ln();
    let ideal_k = ((-error_rate.ln() / LN2).round() as u32).max(1);
    // As in `blocked_size_with`: 48 at least, at the lowest rates.
    let k_lo = ideal_k.saturating_sub(3).clamp(1, MAX_BLOCKED_HASHES);
    for k in k_lo..=(ideal_k + 3).min(MAX_BLOCKED_HASHES) {
        let fits = |n: u64| blocked_fpp(blocks, k, n) <= error_rate;
        let mut lo = 0u64; // fits
        let mut hi = (ideal_items.ceil() as u64).saturating_add(1).max(1); // ideal is an upper bound
        while fits(hi) && hi < u64::MAX / 2 {
            hi *= 2;
        }
        while hi - lo > 1 {
            let mid = lo + (hi - lo) / 2;
            if fits(mid) {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        if lo > best.0 {
            best = (lo, k);
        }
    }
    Ok(best)
}

// ------------------------------------------------------------------ guava --

/// The most words a Guava filter has: Java's arrays are indexed by `int`.
pub const GUAVA_MAX_WORDS: u64 = i32::MAX as u64;

/// Guava's `optimalNumOfBits(n, p)`: `(long) (-n ln p / ln(2)^2)`.
fn optimal_bits(capacity: u64, error_rate: f64) -> u64 {
    let ln2 = std::f64::consts::LN_2;
    (-(capacity as f64) * error_rate.ln() / (ln2 * ln2)) as u64
}

/// Guava's `optimalNumOfHashFunctions(n, m)`: `max(1, round(m / n ln 2))`.
fn optimal_hashes(capacity: u64, bits: u64) -> u64 {
    // Java's Math.round: floor(x + 0.5).
    ((bits as f64 / capacity as f64 * std::f64::consts::LN_2 + 0.5).floor() as u64).max(1)
}

/// The size in bits (a multiple of 64) and hash count Guava's
/// `BloomFilter.create(funnel, capacity, error_rate)` gives, with its
/// refusals: a rate outside (0, 1), a filter of no bits, more than 255
/// hashes or more than [`GUAVA_MAX_WORDS`] words (Java indexes arrays
/// with `int`).
pub fn guava_size(capacity: u64, error_rate: f64) -> Result<(u64, u32)> {
    check_error_rate(error_rate)?;
    // Guava sizes a filter for 0 insertions as one for 1.
    let capacity = capacity.max(1);
    let bits = optimal_bits(capacity, error_rate);
    if bits == 0 {
        return Err(ErrorKind::Unreachable(format!(
            "Guava gives {capacity} items at error rate {error_rate} no bits at all \
             (it refuses such a filter); ask for a larger capacity or a smaller rate"
        ))
        .into());
    }
    let hashes = optimal_hashes(capacity, bits);
    if hashes > MAX_HASHES as u64 {
        return Err(ErrorKind::InvalidHashCount {
            hashes: hashes.min(u32::MAX as u64) as u32,
            max: MAX_HASHES,
        }
        .into());
    }
    let words = bits.div_ceil(64);
    if words > GUAVA_MAX_WORDS {
        return Err(ErrorKind::TooLarge {
            needed: words.saturating_mul(8),
            limit: GUAVA_MAX_WORDS * 8,
        }
        .into());
    }
    Ok((words * 64, hashes as u32))
}

/// Swamidass & Baldi's estimate of the number of distinct items in a filter
/// of `bits` addressable bits with `hashes` hashes, of which `set` are set:
/// `n ≈ -(m / k) ln(1 - X / m)`, computed in the order Guava's
/// `approximateElementCount()` computes it (`-log1p(-X / m) * m / k`), so
/// the two agree (but where Java's `log1p` and the C library's differ in
/// their last bit).
pub fn estimate_items(bits: u64, hashes: u32, set: u64) -> f64 {
    if bits == 0 || hashes == 0 {
        return 0.0;
    }
    let m = bits as f64;
    let x = (set as f64).min(m);
    if x >= m {
        return f64::INFINITY;
    }
    -(-x / m).ln_1p() * m / hashes as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classic_matches_textbook() {
        let (bits, k) = classic_size(1_000_000, 0.01).unwrap();
        assert!((9_585_000..9_700_000).contains(&bits), "{bits}");
        assert_eq!(k, 7);
        let p = classic_fpp(bits, k, 1_000_000);
        assert!(p <= 0.01 && p > 0.0099, "{p}");
        for p in [0.1, 0.01, 1e-3, 1e-4, 1e-5, 1e-6] {
            let (bits, k) = classic_size(10_000, p).unwrap();
            assert!(classic_fpp(bits, k, 10_000) <= p);
            let fewer = bits - 64;
            assert!(
                (1..=MAX_HASHES).all(|k| classic_fpp(fewer, k, 10_000) > p),
                "p={p}"
            );
        }
        let cap = classic_capacity(bits, 0.01).unwrap();
        assert!((1_000_000..1_010_000).contains(&cap), "{cap}");
    }

    #[test]
    fn redis_rules() {
        // bf_debug of the RedisBloom vectors: capacity 1000 at 0.01 is
        // 9600 bits with 7 hashes; capacity 100 at 0.001 is 1472 bits, 10 hashes.
        assert_eq!(redis_bits(1000, 0.01).unwrap(), 9600);
        assert_eq!(redis_hashes(0.01), 7);
        assert_eq!(redis_bits(100, 0.001).unwrap(), 1472);
        assert_eq!(redis_hashes(0.001), 10);
        assert_eq!(redis_bits(10, 0.005).unwrap(), 128);
        assert_eq!(redis_hashes(0.005), 8);
        // BF.DEBUG after `BF.RESERVE k 0.99 3`: "bytes:8 bits:64 hashes:1";
        // after `BF.RESERVE k 0.99 12345`: "bytes:40 bits:320 hashes:1".
        assert_eq!(redis_bits(3, 0.99).unwrap(), 64);
        assert_eq!(redis_bits(12_345, 0.99).unwrap(), 320);
        assert_eq!(redis_hashes(0.99), 1);
    }

    #[test]
    fn bad_inputs_are_errors() {
        for p in [0.0, 1.0, -0.5, 1.5, f64::NAN, f64::INFINITY] {
            assert!(matches!(
                blocked_size(100, p).unwrap_err().kind(),
                ErrorKind::InvalidErrorRate(_)
            ));
            assert!(classic_size(100, p).is_err());
        }
        assert!(matches!(
            blocked_size(0, 0.01).unwrap_err().kind(),
            ErrorKind::ZeroCapacity
        ));
        assert!(matches!(
            classic_size(u64::MAX, 1e-300).unwrap_err().kind(),
            ErrorKind::TooLarge { .. }
        ));
    }

    #[test]
    fn blocked_sizes_meet_issue_budgets() {
        for (p, budget) in [(0.01, 11.0), (0.0001, 23.0)] {
            for n in [1_000u64, 1_000_000, 10_000_000] {
                let (blocks, k) = blocked_size(n, p).unwrap();
                let bpi = (blocks * BLOCK_BITS) as f64 / n as f64;
                assert!(bpi <= budget, "p={p} n={n}: {bpi} bits/item, k={k}");
                assert!(blocked_fpp(blocks, k, n) <= p);
                assert!(blocked_fpp(blocks - 1, k, n) > p, "not minimal");
            }
        }
    }

    #[test]
    fn blocked_capacity_inverts_size() {
        let (blocks, _) = blocked_size(1_000_000, 0.001).unwrap();
        let (cap, k) = blocked_capacity(blocks, 0.001).unwrap();
        assert!(cap >= 1_000_000, "{cap}");
        assert!(cap < 1_010_000, "{cap}");
        assert!(blocked_fpp(blocks, k, cap) <= 0.001);
    }

    #[test]
    fn distinct_distribution_sums_to_one() {
        let d = distinct_distribution(12, 509.0);
        assert!((d.iter().sum::<f64>() - 1.0).abs() < 1e-12);
        assert!(d[12] > 0.8);
    }

    #[test]
    fn estimate_inverts_fill() {
        let m = 1_000_000u64;
        let k = 7;
        let n = 100_000f64;
        let set = (m as f64 * (1.0 - (-(k as f64) * n / m as f64).exp())) as u64;
        let est = estimate_items(m, k, set);
        assert!((est - n).abs() / n < 0.001, "{est}");
    }
}

#[cfg(test)]
mod pinned {
    use super::*;

    /// The table of docs/FORMAT.md, section 3. Sizing is part of the
    /// format (a create record holds capacity and rate, and replay sizes
    /// the filter again): a change here is a change of the format.
    /// Absurd parameters end, here with an error (the rate's sum used to
    /// run for ever once its first probe put 2^53 items or more in a
    /// block).
    #[test]
    fn absurd_parameters_end() {
        let n = 100_000_000_000_000_000;
        // Even at 256 times the textbook size blocks hold more than the
        // rate allows: an error.
        assert!(blocked_size(n, 0.99999999999999).is_err());
        assert!(counting_size(n, 0.99999999999999).is_err());
        assert_eq!(blocked_fpp(1, 6, u64::MAX), 1.0);
        assert_eq!(counting_fpp(1, 6, u64::MAX), 1.0);
        assert!(blocked_capacity(1, 0.99999999999999).is_ok());
        assert!(blocked_size(u64::MAX, 1e-300).is_err());
        // Where the definition, not the sum, decides: the sum gives one
        // block 0.99999999637 here, within the rate, but the rate of 1e7
        // items a block or more is 1 (docs/FORMAT.md section 3).
        assert_eq!(blocked_fpp(1, 1, 12_345_678), 1.0);
        assert!(blocked_size(12_345_678, 0.999999999).is_err());
        assert!(blocked_size(1_297_463_378, 0.9999995).is_err());
        assert_eq!(blocked_size(50_625_000, 0.999999995).unwrap(), (16, 1));
        // Rates below about 2^-51 (more than 51 ideal hashes) reach 48
        // hashes, where their range of hash counts was empty (an error,
        // and a capacity of 0 for any memory).
        let (blocks, k) = blocked_size(1000, 1e-17).unwrap();
        assert_eq!(k, 48);
        assert!(blocked_fpp(blocks, k, 1000) <= 1e-17);
        assert!(blocked_fpp(blocks - 1, k, 1000) > 1e-17);
        let (n, k) = blocked_capacity(1 << 24, 1e-17).unwrap();
        assert_eq!(k, 48);
        assert!(n > 100_000 && blocked_fpp(1 << 24, 48, n) <= 1e-17, "{n}");
        // Past 2.3 EiB `blocks * 509` no longer fits a u64.
        let (n, _) = blocked_capacity(u64::MAX / 64, 0.01).unwrap();
        assert!(n > u64::MAX / 16, "{n}");
        // One item at 1e-300: the double-hashing floor needs about 10^150
        // bits; the size search met `f64`'s rounding at 2^54 bits first.
        assert!(matches!(
            classic_size(1, 1e-300).unwrap_err().kind(),
            ErrorKind::TooLarge { .. }
        ));
        assert!(classic_size(1000, 1e-30).is_err());
    }

    #[test]
    fn sizes_are_those_the_format_gives() {
        type Size = (u64, u32);
        let table: [(u64, f64, Size, Size, Size, Size); 7] = [
            (1, 0.5, (1, 1), (1, 1), (64, 3), (64, 2)),
            (100, 0.005, (3, 5), (11, 5), (1216, 8), (1152, 8)),
            (1000, 0.01, (20, 6), (87, 6), (9664, 7), (9600, 7)),
            (1000, 1e-6, (78, 17), (684, 17), (126_912, 5), (28_800, 20)),
            (
                100_000,
                0.001,
                (3083, 9),
                (15_401, 8),
                (1_438_016, 10),
                (1_437_760, 10),
            ),
            (
                1_000_000,
                0.01,
                (19_599, 6),
                (86_630, 6),
                (9_593_024, 7),
                (9_585_088, 7),
            ),
            (
                10_000_000,
                1e-4,
                (438_418, 12),
                (2_546_036, 10),
                (191_731_200, 13),
                (191_701_184, 14),
            ),
        ];
        for (n, e, blocked, counting, classic, redis) in table {
            assert_eq!(blocked_size(n, e).unwrap(), blocked, "blocked {n} {e}");
            assert_eq!(counting_size(n, e).unwrap(), counting, "counting {n} {e}");
            assert_eq!(classic_size(n, e).unwrap(), classic, "classic {n} {e}");
            assert_eq!(
                (redis_bits(n, e).unwrap(), redis_hashes(e)),
                redis,
                "redis {n} {e}"
            );
        }
    }
}
