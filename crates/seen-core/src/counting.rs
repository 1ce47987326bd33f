//! [`CountingBloomFilter`]: a Bloom filter whose items can be removed.

use crate::bloom::DEFAULT_MAX_BYTES;
use crate::error::{ErrorKind, Result};
use crate::hash::{HashAlgorithm, ItemHash, DEFAULT_SEED};
use crate::raw::fastrange;
use crate::sizing::{self, COUNTING_BLOCK_COUNTERS};
use crate::stats::FilterStats;

/// The largest value a counter holds; a counter that reaches it stays there.
pub const COUNTER_MAX: u8 = 15;

const LCG_MUL: u64 = 0x5851_f42d_4c95_7f2d;
const LCG_ADD: u64 = 0x1405_7b7e_f767_814f;

/// The outcome of [`CountingBloomFilter::remove`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Removal {
    /// The item was (probably) present and its counters were decremented.
    Removed,
    /// At least one of the item's counters is zero: it was certainly never
    /// added (or already removed), and nothing was changed.
    NotPresent,
}

/// A counting Bloom filter: 4-bit saturating counters instead of bits, so
/// that [`CountingBloomFilter::remove`] can take an item out again.
///
/// Counters are blocked like the fast layout: an item's `k` counters lie in
/// one 64-byte block of 128 counters, so each operation touches one cache
/// line. A counter that reaches [`COUNTER_MAX`] sticks there and is never
/// decremented, because after an overflow its true count is unknown.
///
/// What removal can and cannot detect:
///
/// * Removing an item that has a zero counter is detected and refused
///   ([`Removal::NotPresent`]); nothing changes.
/// * Removing an item that was never added but is a false positive (all its
///   counters are non-zero because of other items) cannot be detected: it
///   decrements other items' counters and may make one of them look absent,
///   a false negative. The same holds for removing an item more times than it
///   was added. Only remove items you know you added.
///
/// Mutations take `&mut self`; share it behind a lock.
///
/// ```
/// use seen_core::{CountingBloomFilter, Removal};
/// let mut f = CountingBloomFilter::new(1000, 0.01).unwrap();
/// f.add("session-17");
/// assert!(f.contains("session-17"));
/// assert_eq!(f.remove("session-17"), Removal::Removed);
/// assert!(!f.contains("session-17"));
/// assert_eq!(f.remove("session-17"), Removal::NotPresent);
/// ```
#[derive(Clone)]
pub struct CountingBloomFilter {
    blocks: Vec<[u64; 8]>,
    hashes: u32,
    seed: u64,
    capacity: u64,
    error_rate: f64,
    items: u64,
}

impl std::fmt::Debug for CountingBloomFilter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CountingBloomFilter")
            .field("blocks", &self.blocks.len())
            .field("hashes", &self.hashes)
            .field("capacity", &self.capacity)
            .field("error_rate", &self.error_rate)
            .field("items", &self.items)
            .finish()
    }
}

impl CountingBloomFilter {
    /// A counting filter for `capacity` items at `error_rate`.
    pub fn new(capacity: u64, error_rate: f64) -> Result<Self> {
        Self::with_options(capacity, error_rate, DEFAULT_SEED, DEFAULT_MAX_BYTES)
    }

    /// A counting filter with an explicit seed and memory limit.
    pub fn with_options(capacity: u64, error_rate: f64, seed: u64, max_bytes: u64) -> Result<Self> {
        let (blocks, hashes) = sizing::counting_size(capacity, error_rate)?;
        Self::with_size(blocks, hashes, seed, capacity, error_rate, max_bytes)
    }

    /// A counting filter of `blocks` 64-byte blocks.
    pub fn with_size(
        blocks: u64,
        hashes: u32,
        seed: u64,
        capacity: u64,
        error_rate: f64,
        max_bytes: u64,
    ) -> Result<Self> {
        sizing::check_hashes(hashes)?;
        if blocks == 0 {
            return Err(crate::error::corrupt(
                "a counting filter needs at least one block",
            ));
        }
        let bytes = blocks.saturating_mul(64);
        if bytes > max_bytes {
            return Err(ErrorKind::TooLarge {
                needed: bytes,
                limit: max_bytes,
            }
            .into());
        }
        let n = usize::try_from(blocks).map_err(|_| ErrorKind::OutOfMemory(bytes))?;
        let mut v = Vec::new();
        v.try_reserve_exact(n)
            .map_err(|_| ErrorKind::OutOfMemory(bytes))?;
        v.resize(n, [0u64; 8]);
        Ok(CountingBloomFilter {
            blocks: v,
            hashes,
            seed,
            capacity,
            error_rate,
            items: 0,
        })
    }

    /// The item's hash (xxh3-128 with this filter's seed).
    pub fn hash(&self, item: impl AsRef<[u8]>) -> ItemHash {
        HashAlgorithm::Xxh3_128.hash(item.as_ref(), self.seed)
    }

    #[inline]
    fn positions(&self, h: ItemHash) -> (usize, impl Iterator<Item = usize>) {
        let block = fastrange(h.lo, self.blocks.len() as u64) as usize;
        let mut x = h.hi;
        let pos = (0..self.hashes).map(move |_| {
            let p = ((x >> 32) * COUNTING_BLOCK_COUNTERS) >> 32;
            x = x.wrapping_mul(LCG_MUL).wrapping_add(LCG_ADD);
            p as usize
        });
        (block, pos)
    }

    fn counter(block: &[u64; 8], p: usize) -> u8 {
        ((block[p / 16] >> ((p % 16) * 4)) & 0xf) as u8
    }

    /// Adds an item (increments its counters); returns `true` if it was not
    /// present before.
    pub fn add(&mut self, item: impl AsRef<[u8]>) -> bool {
        self.add_hash(self.hash(item))
    }

    /// [`CountingBloomFilter::add`] for an already hashed item.
    pub fn add_hash(&mut self, h: ItemHash) -> bool {
        let was = self.contains_hash(h);
        let (b, pos) = self.positions(h);
        let pos: Vec<usize> = pos.collect();
        let block = &mut self.blocks[b];
        for p in pos {
            if Self::counter(block, p) < COUNTER_MAX {
                block[p / 16] += 1u64 << ((p % 16) * 4);
            }
        }
        self.items += 1;
        !was
    }

    /// Is the item (probably) present?
    pub fn contains(&self, item: impl AsRef<[u8]>) -> bool {
        self.contains_hash(self.hash(item))
    }

    /// [`CountingBloomFilter::contains`] for an already hashed item.
    pub fn contains_hash(&self, h: ItemHash) -> bool {
        let (b, mut pos) = self.positions(h);
        let block = &self.blocks[b];
        pos.all(|p| Self::counter(block, p) > 0)
    }

    /// Removes one occurrence of an item; see the type's docs for what can
    /// and cannot be detected.
    pub fn remove(&mut self, item: impl AsRef<[u8]>) -> Removal {
        self.remove_hash(self.hash(item))
    }

    /// [`CountingBloomFilter::remove`] for an already hashed item.
    pub fn remove_hash(&mut self, h: ItemHash) -> Removal {
        if !self.contains_hash(h) {
            return Removal::NotPresent;
        }
        let (b, pos) = self.positions(h);
        let pos: Vec<usize> = pos.collect();
        let block = &mut self.blocks[b];
        for p in pos {
            let c = Self::counter(block, p);
            // A saturated counter's true value is unknown: never lower it.
            if c > 0 && c < COUNTER_MAX {
                block[p / 16] -= 1u64 << ((p % 16) * 4);
            }
        }
        self.items = self.items.saturating_sub(1);
        Removal::Removed
    }

    /// Adds minus successful removes.
    pub fn len(&self) -> u64 {
        self.items
    }

    /// True when the count is zero.
    pub fn is_empty(&self) -> bool {
        self.items == 0
    }

    /// Capacity sized for.
    pub fn capacity(&self) -> u64 {
        self.capacity
    }

    /// Error rate sized for.
    pub fn error_rate(&self) -> f64 {
        self.error_rate
    }

    /// Hash functions (counters per item).
    pub fn hashes(&self) -> u32 {
        self.hashes
    }

    /// Number of 64-byte blocks.
    pub fn blocks(&self) -> u64 {
        self.blocks.len() as u64
    }

    /// Hash seed.
    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// Bytes of memory held by the counters.
    pub fn memory_bytes(&self) -> u64 {
        self.blocks.len() as u64 * 64
    }

    /// Counters that are not zero, over all counters.
    pub fn fill_ratio(&self) -> f64 {
        self.nonzero_counters() as f64 / self.counters() as f64
    }

    fn counters(&self) -> u64 {
        self.blocks.len() as u64 * COUNTING_BLOCK_COUNTERS
    }

    fn nonzero_counters(&self) -> u64 {
        self.blocks
            .iter()
            .flat_map(|b| b.iter())
            .map(|&w| {
                // A nibble is non-zero if any of its 4 bits is set.
                let any = w | (w >> 1) | (w >> 2) | (w >> 3);
                (any & 0x1111_1111_1111_1111).count_ones() as u64
            })
            .sum()
    }

    /// Its fill and error rate now, counters standing for bits: `bits` is
    /// the number of counters, `bits_set` of those not zero, and the rate
    /// now is the model's at the items estimated from them.
    pub fn stats(&self) -> FilterStats {
        let counters = self.counters();
        let nonzero = self.nonzero_counters();
        let estimated = sizing::estimate_items(counters, self.hashes, nonzero);
        FilterStats {
            capacity: self.capacity,
            error_rate: self.error_rate,
            items: self.items,
            bits: counters,
            bits_set: nonzero,
            fill_ratio: nonzero as f64 / counters as f64,
            estimated_items: estimated,
            current_fpp: self.expected_fpp_at(estimated.round().max(0.0) as u64),
            memory_bytes: self.memory_bytes(),
        }
    }

    /// Expected false-positive rate with `items` items, from the model.
    pub fn expected_fpp_at(&self, items: u64) -> f64 {
        sizing::counting_fpp(self.blocks.len() as u64, self.hashes, items)
    }

    /// Sums the counters of `other` into this filter (saturating): the
    /// multiset union.
    pub fn union_with(&mut self, other: &CountingBloomFilter) -> Result<()> {
        self.combine(other, |a, b| a.saturating_add(b).min(COUNTER_MAX))?;
        self.items = self.items.saturating_add(other.items);
        Ok(())
    }

    /// Keeps the smaller of each pair of counters: the multiset intersection.
    pub fn intersect_with(&mut self, other: &CountingBloomFilter) -> Result<()> {
        self.combine(other, |a, b| a.min(b))?;
        self.items = self.items.min(other.items);
        Ok(())
    }

    fn combine(&mut self, other: &CountingBloomFilter, f: impl Fn(u8, u8) -> u8) -> Result<()> {
        if self.blocks.len() != other.blocks.len()
            || self.hashes != other.hashes
            || self.seed != other.seed
        {
            return Err(ErrorKind::Incompatible(format!(
                "counting filter of {} blocks, {} hashes, seed {:#x} vs {} blocks, {} hashes, seed {:#x}",
                self.blocks.len(),
                self.hashes,
                self.seed,
                other.blocks.len(),
                other.hashes,
                other.seed
            ))
            .into());
        }
        for (mine, theirs) in self.blocks.iter_mut().zip(&other.blocks) {
            for (w, &t) in mine.iter_mut().zip(theirs) {
                let mut out = 0u64;
                for n in 0..16 {
                    let a = ((*w >> (n * 4)) & 0xf) as u8;
                    let b = ((t >> (n * 4)) & 0xf) as u8;
                    out |= (f(a, b) as u64) << (n * 4);
                }
                *w = out;
            }
        }
        Ok(())
    }

    pub(crate) fn words(&self) -> impl Iterator<Item = u64> + '_ {
        self.block_words(0..self.blocks.len())
    }

    /// The words of blocks `range`, in order.
    pub(crate) fn block_words(
        &self,
        range: std::ops::Range<usize>,
    ) -> impl Iterator<Item = u64> + '_ {
        self.blocks[range].iter().flat_map(|b| b.iter().copied())
    }

    pub(crate) fn set_word(&mut self, index: usize, value: u64) {
        self.blocks[index / 8][index % 8] = value;
    }

    /// Sets the count ([`len`](Self::len)), as a decoder read it.
    pub(crate) fn set_len(&mut self, items: u64) {
        self.items = items;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remove_keeps_others() {
        let mut f = CountingBloomFilter::new(1000, 0.01).unwrap();
        for i in 0..1000 {
            f.add(format!("k{i}"));
        }
        for i in (0..1000).step_by(2) {
            assert_eq!(f.remove(format!("k{i}")), Removal::Removed);
        }
        for i in (1..1000).step_by(2) {
            assert!(f.contains(format!("k{i}")), "k{i} lost");
        }
        let gone = (0..1000)
            .step_by(2)
            .filter(|i| f.contains(format!("k{i}")))
            .count();
        assert!(gone < 30, "{gone} removed items still present");
        assert_eq!(f.len(), 500);
    }

    #[test]
    fn saturated_counters_stick() {
        let mut f = CountingBloomFilter::with_size(1, 4, 0, 10, 0.5, 1 << 20).unwrap();
        for _ in 0..40 {
            f.add("x");
        }
        for _ in 0..40 {
            f.remove("x");
        }
        assert!(f.contains("x"), "a saturated counter must never reach zero");
    }

    #[test]
    fn never_added_is_detected_when_a_counter_is_zero() {
        let mut f = CountingBloomFilter::new(1000, 0.001).unwrap();
        f.add("a");
        assert_eq!(f.remove("b"), Removal::NotPresent);
        assert!(f.contains("a"));
        assert_eq!(f.len(), 1);
    }
}
