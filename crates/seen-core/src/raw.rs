//! One bit array with one layout: the engine shared by every filter kind.
//!
//! [`RawFilter`] knows how to turn an [`ItemHash`] into bit positions for its
//! layout, and how to test and set them. It keeps no item count; the filters
//! built on it do.
//!
//! # Blocked layout
//!
//! The block is `fastrange(lo, blocks)` (`(lo as u128 * blocks) >> 64`).
//! Inside it, `k` positions come from a 64-bit linear congruential walk
//! seeded by `hi`; position `i` is `1 + fastrange32(x_i >> 32, 509)` where
//! `x_0 = hi` and `x_{i+1} = x_i * 0x5851f42d4c957f2d + 0x14057b7ef767814f`.
//! Bit `p` of a block lives in word `p / 64` at mask `1 << (p % 64)`.
//! Bit 0 of each block is never a position: it is the block's add lock.
//!
//! # Classic layout (RedisBloom)
//!
//! Position `i` is `(lo + i * hi) mod 2^64 mod bits`; bit `x` lives in
//! word `x / 64` at mask `1 << (x % 64)`, which on the little-endian byte
//! stream is RedisBloom's byte `x >> 3`, mask `1 << (x & 7)`.
//!
//! # Guava layouts
//!
//! Guava's `BloomFilterStrategies`, over MurmurHash3's `(h1, h2)` in `lo`
//! and `hi`, bits placed as in the classic layout. `MURMUR128_MITZ_64`
//! ([`Layout::Guava`]): position `i` (from 0) is
//! `((h1 + i * h2) mod 2^64 & (2^63 - 1)) mod bits`. `MURMUR128_MITZ_32`
//! ([`Layout::Guava32`]): with the 32-bit halves `a = h1 as i32` and
//! `b = (h1 >> 32) as i32`, position `i` (from 1) is `c mod bits` where
//! `c = a + i * b` in wrapping 32-bit arithmetic, bit-inverted when
//! negative.

use std::sync::atomic::Ordering;

use crate::bitmap::{Bitmap, Block, BLOCK_WORDS};
use crate::error::{ErrorKind, Result};
use crate::hash::ItemHash;
use crate::sizing::{self, BLOCK_USABLE_BITS, MAX_HASHES};

const LCG_MUL: u64 = 0x5851_f42d_4c95_7f2d;
const LCG_ADD: u64 = 0x1405_7b7e_f767_814f;

/// The lock bit of a block (bit 0 of word 0).
pub(crate) const LOCK_BIT: u64 = 1;

/// How an item's bits are placed in the array.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Layout {
    /// All of an item's bits in one 512-bit block (one cache line). The
    /// default: one cache miss per operation.
    Blocked,
    /// Bits spread over the whole array with MurmurHash64A double hashing,
    /// bit-compatible with RedisBloom.
    Classic,
    /// Bits spread over the whole array as Guava's `BloomFilter` places
    /// them with its default strategy, `MURMUR128_MITZ_64`: bit-compatible
    /// with the files Guava's `writeTo` writes (see [`crate::guava`]).
    Guava,
    /// Guava's older strategy, `MURMUR128_MITZ_32`, which filters written
    /// by Guava's early versions use.
    Guava32,
}

impl Layout {
    /// The id written in the byte format.
    pub fn id(self) -> u8 {
        match self {
            Layout::Blocked => 1,
            Layout::Classic => 2,
            Layout::Guava => 4,
            Layout::Guava32 => 5,
        }
    }

    /// The layout with the given byte-format id.
    pub fn from_id(id: u8) -> Option<Self> {
        match id {
            1 => Some(Layout::Blocked),
            2 => Some(Layout::Classic),
            4 => Some(Layout::Guava),
            5 => Some(Layout::Guava32),
            _ => None,
        }
    }

    /// The hash algorithm this layout uses.
    pub fn hash_algorithm(self) -> crate::HashAlgorithm {
        match self {
            Layout::Blocked => crate::HashAlgorithm::Xxh3_128,
            Layout::Classic => crate::HashAlgorithm::Murmur64Double,
            Layout::Guava | Layout::Guava32 => crate::HashAlgorithm::Murmur3_128,
        }
    }

    /// Whether an item's bits spread over the whole array (every layout
    /// but [`Layout::Blocked`]), whose size is then counted in bits.
    pub fn is_spread(self) -> bool {
        self != Layout::Blocked
    }
}

/// `x_i = hi * LCG_JUMP[i].0 + LCG_JUMP[i].1` is the LCG walk's `i`-th state
/// in closed form (`M^i` and `C (M^i - 1) / (M - 1)`), so the positions can
/// be computed independently of each other instead of as a chain of
/// dependent multiplies.
const LCG_JUMP: [(u64, u64); MAX_HASHES as usize] = {
    let mut table = [(0u64, 0u64); MAX_HASHES as usize];
    let (mut a, mut b) = (1u64, 0u64);
    let mut i = 0;
    while i < table.len() {
        table[i] = (a, b);
        a = a.wrapping_mul(LCG_MUL);
        b = b.wrapping_mul(LCG_MUL).wrapping_add(LCG_ADD);
        i += 1;
    }
    table
};

/// The in-block positions of an item, as a mask per word.
#[inline(always)]
pub(crate) fn block_mask(hi: u64, hashes: u32) -> [u64; BLOCK_WORDS] {
    let mut mask = [0u64; BLOCK_WORDS];
    for &(a, b) in &LCG_JUMP[..hashes as usize] {
        let x = hi.wrapping_mul(a).wrapping_add(b);
        let p = 1 + (((x >> 32) * BLOCK_USABLE_BITS) >> 32);
        let (word, bit) = (p >> 6, 1u64 << (p & 63));
        // Every word takes the bit or nothing, selected without indexing:
        // `mask[word] |= bit` keeps the mask in memory and chains each
        // position's store to the next one's load, which took more than
        // half of a lookup's time in a profile.
        for (j, m) in mask.iter_mut().enumerate() {
            *m |= bit & 0u64.wrapping_sub((word == j as u64) as u64);
        }
    }
    mask
}

/// The in-block positions of an item (for documentation and golden vectors).
pub(crate) fn block_positions(hi: u64, hashes: u32) -> Vec<u64> {
    let mut out = Vec::with_capacity(hashes as usize);
    let mut x = hi;
    for _ in 0..hashes {
        out.push(1 + (((x >> 32) * BLOCK_USABLE_BITS) >> 32));
        x = x.wrapping_mul(LCG_MUL).wrapping_add(LCG_ADD);
    }
    out
}

#[inline(always)]
pub(crate) fn fastrange(x: u64, n: u64) -> u64 {
    ((x as u128 * n as u128) >> 64) as u64
}

/// A bit array with its layout, size and hash count.
pub(crate) struct RawFilter {
    layout: Layout,
    hashes: u32,
    /// Blocked: number of blocks. Classic: number of bits.
    size: u64,
    map: Bitmap,
}

/// The bytes of a filter of `size` (blocks, or bits for the classic
/// layout) that its limit is checked against (its words; its memory is
/// whole 64-byte blocks, [`RawFilter::memory_bytes`]), once the size is
/// checked, and that check against `max_bytes`: what [`RawFilter::new`]
/// refuses before it allocates, it refuses.
pub(crate) fn checked_bytes(layout: Layout, size: u64, max_bytes: u64) -> Result<u64> {
    let words = match layout {
        Layout::Blocked => {
            if size == 0 {
                return Err(crate::error::corrupt(
                    "a blocked filter needs at least one block",
                ));
            }
            size.checked_mul(BLOCK_WORDS as u64)
        }
        _ => {
            if size == 0 || !size.is_multiple_of(64) {
                return Err(crate::error::corrupt(format!(
                    "a {layout:?} filter's bit count must be a positive multiple of 64, not {size}"
                )));
            }
            Some(size / 64)
        }
    };
    let bytes = words.and_then(|w| w.checked_mul(8)).unwrap_or(u64::MAX);
    if bytes > max_bytes {
        return Err(ErrorKind::TooLarge {
            needed: bytes,
            limit: max_bytes,
        }
        .into());
    }
    Ok(bytes)
}

impl RawFilter {
    /// A zeroed filter. `size` is blocks (blocked) or bits (the spread
    /// layouts, a multiple of 64).
    pub(crate) fn new(layout: Layout, size: u64, hashes: u32, max_bytes: u64) -> Result<Self> {
        sizing::check_hashes(hashes)?;
        let bytes = checked_bytes(layout, size, max_bytes)?;
        Ok(RawFilter {
            layout,
            hashes,
            size,
            map: Bitmap::zeroed(bytes / 8)?,
        })
    }

    pub(crate) fn layout(&self) -> Layout {
        self.layout
    }

    pub(crate) fn hashes(&self) -> u32 {
        self.hashes
    }

    /// Blocks (blocked) or bits (spread layouts).
    pub(crate) fn size(&self) -> u64 {
        self.size
    }

    /// Bits of the array, including a blocked filter's lock and unused bits.
    pub(crate) fn bits(&self) -> u64 {
        self.map.words() as u64 * 64
    }

    /// Bits that item positions can address.
    pub(crate) fn addressable_bits(&self) -> u64 {
        match self.layout {
            Layout::Blocked => self.size * BLOCK_USABLE_BITS,
            _ => self.size,
        }
    }

    pub(crate) fn memory_bytes(&self) -> u64 {
        self.map.memory_bytes()
    }

    #[inline(always)]
    pub(crate) fn block_index(&self, h: ItemHash) -> usize {
        fastrange(h.lo, self.size) as usize
    }

    /// Position `i` (from 0) of an item in a spread layout.
    #[inline(always)]
    fn spread_position(&self, h: ItemHash, i: u32) -> u64 {
        match self.layout {
            Layout::Guava => {
                (h.lo.wrapping_add((i as u64).wrapping_mul(h.hi)) & i64::MAX as u64) % self.size
            }
            Layout::Guava32 => {
                let (a, b) = (h.lo as i32, (h.lo >> 32) as i32);
                let c = a.wrapping_add((i as i32 + 1).wrapping_mul(b));
                (if c < 0 { !c } else { c }) as u64 % self.size
            }
            _ => h.lo.wrapping_add((i as u64).wrapping_mul(h.hi)) % self.size,
        }
    }

    /// Starts loading the item's block (blocked layout; every position of
    /// a spread layout) into cache.
    #[inline(always)]
    pub(crate) fn prefetch(&self, h: ItemHash) {
        match self.layout {
            Layout::Blocked => self.map.prefetch(self.block_index(h)),
            // Every position is a separate cache line: fetch them all, so
            // that their misses overlap instead of queueing one by one.
            _ => {
                for i in 0..self.hashes {
                    let word = (self.spread_position(h, i) / 64) as usize;
                    self.map.prefetch(word / BLOCK_WORDS);
                }
            }
        }
    }

    /// Are all the item's bits set?
    #[inline]
    pub(crate) fn contains(&self, h: ItemHash) -> bool {
        match self.layout {
            Layout::Blocked => {
                let block = self.map.block(self.block_index(h));
                let mask = block_mask(h.hi, self.hashes);
                block_has(block, &mask)
            }
            _ => (0..self.hashes).all(|i| {
                let x = self.spread_position(h, i);
                self.map.word((x / 64) as usize).load(Ordering::Relaxed) & (1 << (x % 64)) != 0
            }),
        }
    }

    /// Sets the item's bits through `&self`; returns whether any was unset.
    ///
    /// Blocked layout: exact under concurrency on its own. A caller that
    /// finds the item absent takes the block's lock bit (one compare-and-swap
    /// on the line it is about to write anyway), so two adds of the same item
    /// are serialised and exactly one of them sees unset bits. Lookups never
    /// take the lock. Spread layouts: each bit is set with an atomic OR; the
    /// answer is exact only if the caller serialises adds of the same item
    /// (the filters do, with a `StripeGuard`).
    #[inline]
    pub(crate) fn add(&self, h: ItemHash) -> bool {
        match self.layout {
            Layout::Blocked => {
                let block = self.map.block(self.block_index(h));
                let mask = block_mask(h.hi, self.hashes);
                if block_has(block, &mask) {
                    return false;
                }
                block_add_locked(block, &mask)
            }
            _ => {
                // An atomic OR waits for the loads before it: without the
                // prefetch, each position's miss would wait for the OR of
                // the one before, instead of all of them overlapping.
                self.prefetch(h);
                let mut new = false;
                for i in 0..self.hashes {
                    let x = self.spread_position(h, i);
                    let bit = 1u64 << (x % 64);
                    let word = self.map.word((x / 64) as usize);
                    if word.load(Ordering::Relaxed) & bit == 0 {
                        new |= word.fetch_or(bit, Ordering::Relaxed) & bit == 0;
                    }
                }
                new
            }
        }
    }

    /// Sets the item's bits with exclusive access (no atomic
    /// read-modify-write); returns whether any was unset.
    #[inline]
    pub(crate) fn add_mut(&mut self, h: ItemHash) -> bool {
        match self.layout {
            Layout::Blocked => {
                let idx = self.block_index(h);
                let mask = block_mask(h.hi, self.hashes);
                let block = self.map.block_mut(idx);
                let mut new = false;
                for (w, m) in block.0.iter_mut().zip(mask) {
                    let w = w.get_mut();
                    new |= *w & m != m;
                    *w |= m;
                }
                new
            }
            _ => {
                let mut new = false;
                for i in 0..self.hashes {
                    let x = self.spread_position(h, i);
                    let bit = 1u64 << (x % 64);
                    let w = self.map.word_mut((x / 64) as usize);
                    new |= *w & bit == 0;
                    *w |= bit;
                }
                new
            }
        }
    }

    /// Number of set bits among the addressable ones.
    pub(crate) fn count_ones(&self) -> u64 {
        match self.layout {
            Layout::Blocked => {
                self.map
                    .count_ones_masked(|w| if w % BLOCK_WORDS == 0 { !LOCK_BIT } else { !0 })
            }
            _ => self.map.count_ones_masked(|_| !0),
        }
    }

    /// The false-positive rate implied by the bits now set: the average over
    /// blocks of `(fill of the block)^k` (blocked) or `(fill)^k` (spread).
    pub(crate) fn current_fpp(&self) -> f64 {
        let k = self.hashes as i32;
        match self.layout {
            Layout::Blocked => {
                let mut sum = 0.0;
                for b in 0..self.map.blocks() {
                    let block = self.map.block(b);
                    let ones: u32 = block
                        .0
                        .iter()
                        .enumerate()
                        .map(|(i, w)| {
                            let v = w.load(Ordering::Relaxed);
                            (if i == 0 { v & !LOCK_BIT } else { v }).count_ones()
                        })
                        .sum();
                    sum += (ones as f64 / BLOCK_USABLE_BITS as f64).powi(k);
                }
                sum / self.map.blocks() as f64
            }
            _ => (self.count_ones() as f64 / self.size as f64).powi(k),
        }
    }

    /// Expected false-positive rate with `items` distinct items inserted.
    pub(crate) fn model_fpp(&self, items: u64) -> f64 {
        match self.layout {
            Layout::Blocked => sizing::blocked_fpp(self.size, self.hashes, items),
            _ => sizing::classic_fpp(self.size, self.hashes, items),
        }
    }

    /// The word at `index`, as stored (lock bits masked out).
    pub(crate) fn word(&self, index: usize) -> u64 {
        let v = self.map.word(index).load(Ordering::Relaxed);
        if self.layout == Layout::Blocked && index.is_multiple_of(BLOCK_WORDS) {
            v & !LOCK_BIT
        } else {
            v
        }
    }

    /// Overwrites the word at `index` (exclusive access).
    pub(crate) fn set_word(&mut self, index: usize, value: u64) {
        *self.map.word_mut(index) = value;
    }

    /// Words in the array.
    pub(crate) fn words(&self) -> usize {
        self.map.words()
    }

    /// Whether `other` has the same layout, size and hash count.
    pub(crate) fn same_shape(&self, other: &RawFilter) -> bool {
        self.layout == other.layout && self.size == other.size && self.hashes == other.hashes
    }

    /// ORs (`union`) or ANDs the other filter's words into this one.
    pub(crate) fn combine(&mut self, other: &RawFilter, union: bool) {
        debug_assert!(self.same_shape(other));
        for i in 0..self.words() {
            let theirs = other.word(i);
            let mine = self.map.word_mut(i);
            if union {
                *mine |= theirs;
            } else {
                *mine &= theirs;
            }
        }
    }
}

#[inline(always)]
fn block_has(block: &Block, mask: &[u64; BLOCK_WORDS]) -> bool {
    let mut missing = 0u64;
    for (w, m) in block.0.iter().zip(mask) {
        missing |= !w.load(Ordering::Relaxed) & m;
    }
    missing == 0
}

/// Sets the masked bits of a block under its lock bit; returns whether any
/// was unset.
#[inline]
fn block_add_locked(block: &Block, mask: &[u64; BLOCK_WORDS]) -> bool {
    let w0 = &block.0[0];
    let mut spins = 0u32;
    let mut cur = w0.load(Ordering::Relaxed);
    let first = loop {
        if cur & LOCK_BIT == 0 {
            // Take the lock and set word 0's bits in one step.
            match w0.compare_exchange_weak(
                cur,
                cur | LOCK_BIT | mask[0],
                Ordering::Acquire,
                Ordering::Relaxed,
            ) {
                Ok(prev) => break prev,
                Err(actual) => {
                    cur = actual;
                    continue;
                }
            }
        }
        spins += 1;
        if spins > 64 {
            std::thread::yield_now();
        } else {
            std::hint::spin_loop();
        }
        cur = w0.load(Ordering::Relaxed);
    };
    // We hold the block: no other writer touches its words until we release.
    let mut new = first & mask[0] != mask[0];
    for (w, &m) in block.0.iter().zip(mask).skip(1) {
        if m != 0 {
            let v = w.load(Ordering::Relaxed);
            if v & m != m {
                new = true;
                // Release (free on x86): a reader that sees these bits
                // also sees what the writers before us in this block did
                // before their adds (seen-store's log records).
                w.store(v | m, Ordering::Release);
            }
        }
    }
    // Release: word 0 is ours, so a plain store (not a read-modify-write)
    // publishes it without the lock bit.
    w0.store((first | mask[0]) & !LOCK_BIT, Ordering::Release);
    new
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn block_positions_skip_the_lock_bit_and_stay_in_range() {
        let mut seen_max = 0;
        for i in 0..10_000u64 {
            let hi = i.wrapping_mul(0x9e3779b97f4a7c15);
            for p in block_positions(hi, 16) {
                assert!((1..=BLOCK_USABLE_BITS).contains(&p), "{p}");
                seen_max = seen_max.max(p);
            }
            let mask = block_mask(hi, 16);
            assert_eq!(mask[0] & LOCK_BIT, 0);
        }
        assert_eq!(seen_max, BLOCK_USABLE_BITS);
    }

    #[test]
    fn add_then_contains_both_layouts() {
        let spread = [Layout::Classic, Layout::Guava, Layout::Guava32].map(|l| (l, 1024));
        for (layout, size) in [(Layout::Blocked, 8)].into_iter().chain(spread) {
            let mut f = RawFilter::new(layout, size, 7, u64::MAX).unwrap();
            let h = ItemHash {
                lo: 12345,
                hi: 67890,
            };
            assert!(!f.contains(h));
            assert!(f.add(h));
            assert!(!f.add(h));
            assert!(f.contains(h));
            let h2 = ItemHash { lo: 999, hi: 111 };
            assert!(f.add_mut(h2));
            assert!(!f.add_mut(h2));
            assert!(f.contains(h2));
        }
    }
}
