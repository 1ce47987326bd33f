//! [`BloomFilter`]: a fixed-size filter, shareable between threads.

use std::sync::atomic::{AtomicU64, Ordering};

use crate::bitmap::StripeGuard;
use crate::error::{ErrorKind, Result};
use crate::hash::{HashAlgorithm, ItemHash, DEFAULT_SEED, REDISBLOOM_SEED};
use crate::prefetch::for_each_prefetched;
use crate::raw::{Layout, RawFilter};
use crate::sizing::{self, check_error_rate};
use crate::stats::FilterStats;

/// The default memory limit of one filter: 64 GiB.
///
/// A guard against absurd parameters (a typo that asks for an exabyte), not
/// a tuning knob; raise it with [`FilterBuilder::max_bytes`].
pub const DEFAULT_MAX_BYTES: u64 = 64 << 30;

/// Builds a [`BloomFilter`] (and the parameters of the other kinds).
///
/// ```
/// use seen_core::{BloomFilter, Layout};
/// let f = BloomFilter::builder(10_000, 0.001)
///     .layout(Layout::Classic)
///     .max_bytes(1 << 20)
///     .build()
///     .unwrap();
/// assert!(f.add("https://example.com/"));
/// ```
#[derive(Clone, Debug)]
pub struct FilterBuilder {
    capacity: u64,
    error_rate: f64,
    layout: Layout,
    seed: u64,
    max_bytes: u64,
    /// Size classic filters with RedisBloom's formulas (chains' links).
    redis_sizing: bool,
}

impl FilterBuilder {
    /// A builder for `capacity` items at `error_rate`, blocked layout.
    pub fn new(capacity: u64, error_rate: f64) -> Self {
        FilterBuilder {
            capacity,
            error_rate,
            layout: Layout::Blocked,
            seed: DEFAULT_SEED,
            max_bytes: DEFAULT_MAX_BYTES,
            redis_sizing: false,
        }
    }

    /// Sizes a classic filter exactly as RedisBloom sizes a link, rather
    /// than with [`sizing::classic_size`] (which meets the rate at capacity
    /// where RedisBloom's rounding can miss it by a few percent).
    pub(crate) fn redis_sizing(mut self, on: bool) -> Self {
        self.redis_sizing = on;
        self
    }

    /// Selects the layout.
    pub fn layout(mut self, layout: Layout) -> Self {
        self.layout = layout;
        self
    }

    /// Sets the hash seed of the blocked layout (ignored by the other
    /// layouts, whose seeds are RedisBloom's and Guava's). Filters are only
    /// compatible with filters of the same seed.
    pub fn seed(mut self, seed: u64) -> Self {
        self.seed = seed;
        self
    }

    /// Refuses to build a filter larger than `bytes`.
    pub fn max_bytes(mut self, bytes: u64) -> Self {
        self.max_bytes = bytes;
        self
    }

    /// The size (blocks for the blocked layout, bits for the others) and
    /// hash count these parameters give. Guava layouts are sized as Guava's
    /// `BloomFilter.create` sizes them.
    pub fn size(&self) -> Result<(u64, u32)> {
        check_error_rate(self.error_rate)?;
        if self.capacity == 0 {
            return Err(ErrorKind::ZeroCapacity.into());
        }
        match self.layout {
            Layout::Blocked => sizing::blocked_size(self.capacity, self.error_rate),
            Layout::Classic if self.redis_sizing => Ok((
                sizing::redis_bits(self.capacity, self.error_rate)?,
                sizing::redis_hashes(self.error_rate).min(sizing::MAX_HASHES),
            )),
            Layout::Classic => sizing::classic_size(self.capacity, self.error_rate),
            Layout::Guava | Layout::Guava32 => sizing::guava_size(self.capacity, self.error_rate),
        }
    }

    /// Bytes the filter's memory would take (see
    /// [`BloomFilter::memory_bytes`]), computed without allocating it, or
    /// the error [`build`](Self::build) would return for its size (past
    /// [`max_bytes`](Self::max_bytes), say).
    pub(crate) fn memory_bytes(&self) -> Result<u64> {
        let (size, _) = self.size()?;
        let bytes = crate::raw::checked_bytes(self.layout, size, self.max_bytes)?;
        // Whole blocks, as `Bitmap::zeroed` allocates them.
        Ok(bytes.div_ceil(64).saturating_mul(64))
    }

    /// Builds the filter.
    pub fn build(&self) -> Result<BloomFilter> {
        let (size, hashes) = self.size()?;
        let raw = RawFilter::new(self.layout, size, hashes, self.max_bytes)?;
        Ok(BloomFilter::from_raw(
            raw,
            self.seed,
            self.capacity,
            self.error_rate,
            0,
        ))
    }

    pub(crate) fn capacity(&self) -> u64 {
        self.capacity
    }
    pub(crate) fn error_rate(&self) -> f64 {
        self.error_rate
    }
    pub(crate) fn layout_value(&self) -> Layout {
        self.layout
    }
    pub(crate) fn seed_value(&self) -> u64 {
        self.seed
    }
    pub(crate) fn max_bytes_value(&self) -> u64 {
        self.max_bytes
    }
}

/// A Bloom filter of fixed size.
///
/// Answers "have we seen this before?" with no false negatives and a
/// false-positive rate that stays at or below the requested rate until
/// `capacity` distinct items have been added (and climbs after that:
/// [`BloomFilter::stats`] says by how much).
///
/// All operations take `&self`, so one filter can be shared by many threads
/// (in an `Arc`). [`BloomFilter::add`] is exact under concurrency: when
/// several threads add the same new item at the same moment, exactly one of
/// them is told it was new. Lookups never lock; see [`BloomFilter::add`] for
/// what adds do.
///
/// ```
/// use seen_core::BloomFilter;
///
/// let seen = BloomFilter::new(1_000_000, 0.001)?;
/// assert!(seen.add("https://example.com/a"));      // new
/// assert!(!seen.add("https://example.com/a"));     // seen before
/// assert!(seen.contains("https://example.com/a"));
/// assert!(!seen.contains("https://example.com/b")); // certainly never added
/// # Ok::<(), seen_core::Error>(())
/// ```
pub struct BloomFilter {
    raw: RawFilter,
    seed: u64,
    capacity: u64,
    error_rate: f64,
    /// Adds that reported "new".
    items: OwnLine,
}

/// A counter on cache lines of its own. Every add on every core writes
/// the item count; next to the fields that every call only reads (the bit
/// array's address and size), it would cost each call a miss whenever
/// another core had added since.
#[repr(align(128))]
#[derive(Default)]
pub(crate) struct OwnLine(pub(crate) AtomicU64);

impl std::ops::Deref for OwnLine {
    type Target = AtomicU64;
    fn deref(&self) -> &AtomicU64 {
        &self.0
    }
}

impl std::ops::DerefMut for OwnLine {
    fn deref_mut(&mut self) -> &mut AtomicU64 {
        &mut self.0
    }
}

impl std::fmt::Debug for BloomFilter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BloomFilter")
            .field("layout", &self.raw.layout())
            .field("size", &self.raw.size())
            .field("hashes", &self.raw.hashes())
            .field("capacity", &self.capacity)
            .field("error_rate", &self.error_rate)
            .field("items", &self.len())
            .finish()
    }
}

impl BloomFilter {
    /// A blocked filter for `capacity` items at false-positive rate
    /// `error_rate`.
    pub fn new(capacity: u64, error_rate: f64) -> Result<Self> {
        FilterBuilder::new(capacity, error_rate).build()
    }

    /// A builder, to choose the layout, seed or memory limit.
    pub fn builder(capacity: u64, error_rate: f64) -> FilterBuilder {
        FilterBuilder::new(capacity, error_rate)
    }

    /// A filter with an explicit size: `size` is blocks (blocked layout) or
    /// bits (the other layouts, a multiple of 64).
    pub fn with_size(
        layout: Layout,
        size: u64,
        hashes: u32,
        seed: u64,
        capacity: u64,
        error_rate: f64,
        max_bytes: u64,
    ) -> Result<Self> {
        let raw = RawFilter::new(layout, size, hashes, max_bytes)?;
        Ok(BloomFilter::from_raw(raw, seed, capacity, error_rate, 0))
    }

    pub(crate) fn from_raw(
        raw: RawFilter,
        seed: u64,
        capacity: u64,
        error_rate: f64,
        items: u64,
    ) -> Self {
        let seed = match raw.layout() {
            Layout::Blocked => seed,
            Layout::Classic => REDISBLOOM_SEED,
            Layout::Guava | Layout::Guava32 => 0,
        };
        BloomFilter {
            raw,
            seed,
            capacity,
            error_rate,
            items: OwnLine(AtomicU64::new(items)),
        }
    }

    pub(crate) fn raw(&self) -> &RawFilter {
        &self.raw
    }

    pub(crate) fn raw_mut(&mut self) -> &mut RawFilter {
        &mut self.raw
    }

    /// The item's hash under this filter's algorithm and seed.
    #[inline]
    pub fn hash(&self, item: impl AsRef<[u8]>) -> ItemHash {
        self.hash_algorithm().hash(item.as_ref(), self.seed)
    }

    /// Adds an item; returns `true` if it was new (not already present).
    ///
    /// An item already present costs one cache line read and no write. A new
    /// item in the blocked layout takes its block's lock bit, a bit inside
    /// the very cache line the add writes, with one compare-and-swap, sets its
    /// bits and releases the lock; that is what makes the answer exact when
    /// threads race on the same item. In the spread layouts (classic,
    /// Guava), concurrent adds of the same item are serialised by a striped
    /// spin lock, and the bits are set with atomic ORs.
    #[inline]
    pub fn add(&self, item: impl AsRef<[u8]>) -> bool {
        self.add_hash(self.hash(item))
    }

    /// [`BloomFilter::add`] for an item already hashed with
    /// [`BloomFilter::hash`].
    #[inline]
    pub fn add_hash(&self, h: ItemHash) -> bool {
        let new = match self.raw.layout() {
            Layout::Blocked => self.raw.add(h),
            _ => {
                let _guard = StripeGuard::lock(h.lo);
                self.raw.add(h)
            }
        };
        if new {
            self.items.fetch_add(1, Ordering::Relaxed);
        }
        new
    }

    /// [`add_hash`](Self::add_hash) for each of `hashes`, in order,
    /// pushing the answers to `new`, with one update of the item count for
    /// the whole batch (a counter other cores share is touched once, not
    /// once per item). It does not prefetch: callers with filters larger
    /// than the cache [`prefetch`](Self::prefetch) ahead themselves.
    pub fn add_hashes(&self, hashes: &[ItemHash], new: &mut Vec<bool>) {
        let mut added = 0;
        for &h in hashes {
            let n = match self.raw.layout() {
                Layout::Blocked => self.raw.add(h),
                _ => {
                    let _guard = StripeGuard::lock(h.lo);
                    self.raw.add(h)
                }
            };
            added += n as u64;
            new.push(n);
        }
        if added > 0 {
            self.items.fetch_add(added, Ordering::Relaxed);
        }
    }

    /// Adds an item through exclusive access: the fastest single-threaded
    /// path (no atomic read-modify-write). Same answers as
    /// [`BloomFilter::add`].
    #[inline]
    pub fn add_mut(&mut self, item: impl AsRef<[u8]>) -> bool {
        let h = self.hash(item);
        let new = self.raw.add_mut(h);
        if new {
            *self.items.get_mut() += 1;
        }
        new
    }

    /// Is the item (probably) present? `false` means certainly never added.
    #[inline]
    pub fn contains(&self, item: impl AsRef<[u8]>) -> bool {
        self.raw.contains(self.hash(item))
    }

    /// Starts loading the cache line an item lives in (blocked layout), so
    /// that a following operation on it does not wait for memory. Call it
    /// for a batch of hashes before operating on them.
    #[inline]
    pub fn prefetch(&self, h: ItemHash) {
        self.raw.prefetch(h);
    }

    /// [`BloomFilter::contains`] for an already hashed item.
    #[inline]
    pub fn contains_hash(&self, h: ItemHash) -> bool {
        self.raw.contains(h)
    }

    /// Adds many items; `result[i]` says whether `items[i]` was new.
    ///
    /// Hashes a batch ahead and prefetches each item's cache line before
    /// touching it, so on filters much larger than the CPU cache the memory
    /// latencies overlap instead of adding up.
    pub fn add_many<T: AsRef<[u8]>>(&self, items: &[T]) -> Vec<bool> {
        let mut out = Vec::with_capacity(items.len());
        self.each_prefetched(items, |h| out.push(self.add_hash(h)));
        out
    }

    /// Looks up many items with prefetching; `result[i]` is
    /// `contains(items[i])`.
    pub fn contains_many<T: AsRef<[u8]>>(&self, items: &[T]) -> Vec<bool> {
        let mut out = Vec::with_capacity(items.len());
        self.each_prefetched(items, |h| out.push(self.raw.contains(h)));
        out
    }

    /// Counts how many of `items` are (probably) present, with prefetching.
    pub fn count_present<T: AsRef<[u8]>>(&self, items: &[T]) -> usize {
        let mut n = 0;
        self.each_prefetched(items, |h| n += self.raw.contains(h) as usize);
        n
    }

    /// Runs `f` on the hash of every item in order, through the core's
    /// prefetch-ahead loop.
    fn each_prefetched<T: AsRef<[u8]>>(&self, items: &[T], mut f: impl FnMut(ItemHash)) {
        for_each_prefetched(
            &mut &*self,
            items.iter().map(|item| self.hash(item)),
            |this, h| this.raw.prefetch(h),
            |_, h| f(h),
        );
    }

    /// Number of adds that reported a new item (RedisBloom's "items
    /// inserted"). An item that was a false positive when added is not
    /// counted; see [`FilterStats::estimated_items`] for an estimate from
    /// the bits.
    pub fn len(&self) -> u64 {
        self.items.load(Ordering::Relaxed)
    }

    /// True if no add has reported a new item.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The capacity the filter was sized for.
    pub fn capacity(&self) -> u64 {
        self.capacity
    }

    /// The false-positive rate the filter was sized for.
    pub fn error_rate(&self) -> f64 {
        self.error_rate
    }

    /// The layout.
    pub fn layout(&self) -> Layout {
        self.raw.layout()
    }

    /// The hash algorithm.
    pub fn hash_algorithm(&self) -> HashAlgorithm {
        self.raw.layout().hash_algorithm()
    }

    /// The hash seed.
    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// Number of hash functions (bits per item).
    pub fn hashes(&self) -> u32 {
        self.raw.hashes()
    }

    /// Size of the bit array in bits.
    pub fn bits(&self) -> u64 {
        self.raw.bits()
    }

    /// Blocks (blocked layout) or bits (the other layouts).
    pub fn size(&self) -> u64 {
        self.raw.size()
    }

    /// Bytes of memory held by the bit array.
    pub fn memory_bytes(&self) -> u64 {
        self.raw.memory_bytes()
    }

    /// The expected false-positive rate after `items` distinct adds, from
    /// the sizing model.
    pub fn expected_fpp_at(&self, items: u64) -> f64 {
        self.raw.model_fpp(items)
    }

    /// Fill ratio, estimated distinct items and current false-positive rate,
    /// from one pass over the bit array.
    pub fn stats(&self) -> FilterStats {
        FilterStats::from_raw(&self.raw, self.capacity, self.error_rate, self.len())
    }

    /// Checks that `other` has the same layout, size, hash count and seed.
    fn check_compatible(&self, other: &BloomFilter) -> Result<()> {
        if !self.raw.same_shape(&other.raw) {
            return Err(ErrorKind::Incompatible(format!(
                "{:?} filter of size {} with {} hashes vs {:?} filter of size {} with {} hashes",
                self.layout(),
                self.size(),
                self.hashes(),
                other.layout(),
                other.size(),
                other.hashes()
            ))
            .into());
        }
        if self.seed != other.seed {
            return Err(ErrorKind::Incompatible(format!(
                "hash seed {:#x} vs {:#x}",
                self.seed, other.seed
            ))
            .into());
        }
        Ok(())
    }

    /// Adds every item of `other` to this filter (bitwise OR). Afterwards
    /// everything present in either filter is present in this one.
    ///
    /// The item count becomes the estimate from the merged bits, since the
    /// two filters may share items.
    pub fn union_with(&mut self, other: &BloomFilter) -> Result<()> {
        self.check_compatible(other)?;
        self.raw.combine(&other.raw, true);
        self.recount();
        Ok(())
    }

    /// Keeps only bits set in both filters (bitwise AND). Every item added
    /// to both filters stays present; the false-positive rate of the result
    /// is at most that of the fuller input, though it can be higher than that
    /// of a filter built from the common items alone.
    pub fn intersect_with(&mut self, other: &BloomFilter) -> Result<()> {
        self.check_compatible(other)?;
        self.raw.combine(&other.raw, false);
        self.recount();
        Ok(())
    }

    fn recount(&mut self) {
        let est = self.estimated_items();
        *self.items.get_mut() = if est.is_finite() {
            est.round() as u64
        } else {
            self.capacity.max(*self.items.get_mut())
        };
    }

    /// Distinct items estimated from the bits set (one pass over them;
    /// [`FilterStats::estimated_items`] without the rest of the stats).
    pub(crate) fn estimated_items(&self) -> f64 {
        sizing::estimate_items(
            self.raw.addressable_bits(),
            self.raw.hashes(),
            self.raw.count_ones(),
        )
    }

    /// Sets the count of adds that answered "new" ([`len`](Self::len)), as
    /// a decoder read it.
    pub(crate) fn set_len(&mut self, items: u64) {
        *self.items.get_mut() = items;
    }

    /// [`add_hash`](Self::add_hash) with exclusive access: plain stores,
    /// no atomic read-modify-writes (a single-threaded batch, after
    /// [`prefetch`](Self::prefetch)ing the hashes ahead).
    pub fn add_hash_mut(&mut self, h: ItemHash) -> bool {
        let new = self.raw.add_mut(h);
        if new {
            *self.items.get_mut() += 1;
        }
        new
    }

    pub(crate) fn items_counter(&self) -> &AtomicU64 {
        &self.items
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn basic_both_layouts() {
        for layout in [Layout::Blocked, Layout::Classic] {
            let f = BloomFilter::builder(1000, 0.01)
                .layout(layout)
                .build()
                .unwrap();
            assert!(f.is_empty());
            for i in 0..1000 {
                assert!(f.add(format!("item-{i}")) || i > 0, "first add must be new");
            }
            for i in 0..1000 {
                assert!(f.contains(format!("item-{i}")));
            }
            assert!(f.len() > 980 && f.len() <= 1000, "{}", f.len());
        }
    }

    #[test]
    fn absurd_sizes_are_errors() {
        let e = BloomFilter::builder(u64::MAX / 2, 0.01)
            .build()
            .unwrap_err();
        assert!(matches!(e.kind(), ErrorKind::TooLarge { .. }), "{e}");
        let e = BloomFilter::builder(1_000_000, 0.01)
            .max_bytes(1000)
            .build()
            .unwrap_err();
        assert!(e.to_string().contains("limit of 1000 bytes"), "{e}");
        let e = BloomFilter::new(10, 1.0).unwrap_err();
        assert!(e.to_string().contains("error rate 1"), "{e}");
    }

    #[test]
    fn union_and_intersection() {
        let mut a = BloomFilter::new(1000, 0.01).unwrap();
        let b = BloomFilter::new(1000, 0.01).unwrap();
        a.add("a");
        a.add("both");
        b.add("b");
        b.add("both");
        let mut i = BloomFilter::new(1000, 0.01).unwrap();
        i.union_with(&a).unwrap();
        i.intersect_with(&b).unwrap();
        assert!(i.contains("both"));
        assert!(!i.contains("a") || !i.contains("b"));
        a.union_with(&b).unwrap();
        for x in ["a", "b", "both"] {
            assert!(a.contains(x));
        }
        assert_eq!(a.len(), 3);
        let other = BloomFilter::new(2000, 0.01).unwrap();
        assert!(matches!(
            a.union_with(&other).unwrap_err().kind(),
            ErrorKind::Incompatible(_)
        ));
        let seeded = BloomFilter::builder(1000, 0.01).seed(7).build().unwrap();
        assert!(a
            .union_with(&seeded)
            .unwrap_err()
            .to_string()
            .contains("seed"));
    }
}
