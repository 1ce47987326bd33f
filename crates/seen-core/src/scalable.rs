//! [`ScalableBloomFilter`]: a chain of filters that grows when full.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock, RwLockReadGuard};

use crate::bitmap::StripeGuard;
use crate::bloom::{BloomFilter, FilterBuilder};
use crate::budget::Charge;
use crate::error::{ErrorKind, Result};
use crate::hash::{HashAlgorithm, ItemHash};
use crate::raw::Layout;
use crate::sizing::check_error_rate;
use crate::stats::FilterStats;

/// Each new link's error rate is the previous one's times this (RedisBloom's
/// `ERROR_TIGHTENING_RATIO`), so the chain's total stays below the rate asked.
pub const ERROR_TIGHTENING_RATIO: f64 = 0.5;

/// The default growth factor of each new link's capacity.
pub const DEFAULT_EXPANSION: u32 = 2;

/// The most links a chain may have.
pub const MAX_LINKS: usize = 256;

/// Parameters of a [`ScalableBloomFilter`].
///
/// ```
/// use seen_core::{Layout, ScalableBloomFilter};
/// // What `BF.RESERVE urls 0.001 1000 EXPANSION 4` creates in RedisBloom:
/// let f = ScalableBloomFilter::builder(1000, 0.001)
///     .layout(Layout::Classic)
///     .expansion(4)
///     .build()
///     .unwrap();
/// for i in 0..5000 {
///     f.add(format!("url-{i}")).unwrap();
/// }
/// assert!(f.links() > 1);
/// assert!(f.contains("url-42"));
/// ```
#[derive(Clone, Debug)]
pub struct ScalableBuilder {
    base: FilterBuilder,
    expansion: u32,
    nonscaling: bool,
}

impl ScalableBuilder {
    /// Initial capacity and overall error rate; blocked layout, expansion 2.
    pub fn new(capacity: u64, error_rate: f64) -> Self {
        ScalableBuilder {
            base: FilterBuilder::new(capacity, error_rate),
            expansion: DEFAULT_EXPANSION,
            nonscaling: false,
        }
    }

    /// Selects the layout ([`Layout::Classic`] for RedisBloom compatibility).
    pub fn layout(mut self, layout: Layout) -> Self {
        self.base = self.base.layout(layout);
        self
    }

    /// Sets the blocked layout's hash seed.
    pub fn seed(mut self, seed: u64) -> Self {
        self.base = self.base.seed(seed);
        self
    }

    /// Each new link holds `expansion` times the previous one's capacity.
    pub fn expansion(mut self, expansion: u32) -> Self {
        self.expansion = expansion;
        self
    }

    /// Never grow: once the first link is full, adds of new items fail with
    /// [`ErrorKind::Full`]. The single link gets the whole error rate.
    pub fn nonscaling(mut self, nonscaling: bool) -> Self {
        self.nonscaling = nonscaling;
        self
    }

    /// Refuses to grow the chain past `bytes` in total.
    pub fn max_bytes(mut self, bytes: u64) -> Self {
        self.base = self.base.max_bytes(bytes);
        self
    }

    /// Builds the chain with its first link.
    pub fn build(&self) -> Result<ScalableBloomFilter> {
        check_error_rate(self.base.error_rate())?;
        if self.base.capacity() == 0 {
            return Err(ErrorKind::ZeroCapacity.into());
        }
        if self.expansion == 0 {
            return Err(ErrorKind::InvalidExpansion(0).into());
        }
        let first_error = if self.nonscaling {
            self.base.error_rate()
        } else {
            self.base.error_rate() * ERROR_TIGHTENING_RATIO
        };
        let first = FilterBuilder::new(self.base.capacity(), first_error)
            .layout(self.base.layout_value())
            .redis_sizing(true)
            .seed(self.base.seed_value())
            .max_bytes(self.base.max_bytes_value())
            .build()?;
        Ok(ScalableBloomFilter::from_links(
            ChainParams {
                layout: self.base.layout_value(),
                seed: first.seed(),
                capacity: self.base.capacity(),
                error_rate: self.base.error_rate(),
                expansion: self.expansion,
                nonscaling: self.nonscaling,
                max_bytes: self.base.max_bytes_value(),
            },
            vec![first],
        ))
    }
}

/// The fixed parameters of a chain.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct ChainParams {
    pub(crate) layout: Layout,
    pub(crate) seed: u64,
    pub(crate) capacity: u64,
    pub(crate) error_rate: f64,
    pub(crate) expansion: u32,
    pub(crate) nonscaling: bool,
    pub(crate) max_bytes: u64,
}

/// A scalable Bloom filter (Almeida et al.): when the newest sub-filter
/// ("link") has taken its capacity of new items, a new link with
/// `expansion` times the capacity and half the error rate is added, so the
/// chain's false-positive rate stays below the rate asked for however many
/// items arrive. With [`Layout::Classic`] it follows RedisBloom's chain rules
/// exactly (see `docs/FORMAT.md`).
///
/// Classic links are sized with RedisBloom's formulas (for compatibility):
/// a scaling chain's first link gets half the rate, which covers their
/// rounding, but a non-scaling classic chain can measure up to about 3% above
/// its rate at capacity (at rate 0.1; less at lower rates), exactly as
/// RedisBloom does. Blocked chains are sized to meet the rate.
///
/// Shared through `&self` like [`BloomFilter`]; adds are exact under
/// concurrency (two threads adding the same new item: exactly one is told
/// new), serialised per item by a striped spin lock.
pub struct ScalableBloomFilter {
    params: ChainParams,
    links: RwLock<Vec<Arc<BloomFilter>>>,
    items: crate::bloom::OwnLine,
    /// The budget its growth is charged to, if any (see
    /// [`set_charge`](Self::set_charge)).
    charge: Option<Charge>,
}

impl std::fmt::Debug for ScalableBloomFilter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ScalableBloomFilter")
            .field("params", &self.params)
            .field("links", &self.links())
            .field("items", &self.len())
            .finish()
    }
}

/// One link's parameters and state, as reported by
/// [`ScalableBloomFilter::link_info`].
#[derive(Clone, Debug, PartialEq)]
pub struct LinkInfo {
    /// Items this link was sized for.
    pub capacity: u64,
    /// Its error rate.
    pub error_rate: f64,
    /// Items added to it.
    pub items: u64,
    /// Blocks (blocked) or bits (classic).
    pub size: u64,
    /// Bits of its array.
    pub bits: u64,
    /// Hash functions.
    pub hashes: u32,
    /// Bytes of its array.
    pub bytes: u64,
}

impl ScalableBloomFilter {
    /// A blocked, scaling chain with expansion 2.
    pub fn new(capacity: u64, error_rate: f64) -> Result<Self> {
        ScalableBuilder::new(capacity, error_rate).build()
    }

    /// A builder for the other options.
    pub fn builder(capacity: u64, error_rate: f64) -> ScalableBuilder {
        ScalableBuilder::new(capacity, error_rate)
    }

    pub(crate) fn from_links(params: ChainParams, links: Vec<BloomFilter>) -> Self {
        let items = links.iter().map(BloomFilter::len).sum();
        ScalableBloomFilter {
            params,
            links: RwLock::new(links.into_iter().map(Arc::new).collect()),
            items: crate::bloom::OwnLine(AtomicU64::new(items)),
            charge: None,
        }
    }

    /// Sets the most bytes the chain may hold once grown (its own limit:
    /// see [`ScalableBuilder::max_bytes`]).
    pub fn set_max_bytes(&mut self, bytes: u64) {
        self.params.max_bytes = bytes;
    }

    /// Charges the chain's growth to a shared [`MemoryBudget`](crate::MemoryBudget)
    /// from now on: each new sub-filter takes its bytes from `charge`, and
    /// an add that would grow the chain past what the budget has left fails
    /// with [`ErrorKind::TooLarge`], as past the chain's own limit. The
    /// charge should already hold the chain's present bytes.
    pub fn set_charge(&mut self, charge: Charge) {
        self.charge = Some(charge);
    }

    pub(crate) fn params(&self) -> &ChainParams {
        &self.params
    }

    fn read_links(&self) -> RwLockReadGuard<'_, Vec<Arc<BloomFilter>>> {
        // Nothing panics while holding the lock; recover the data if it did.
        self.links.read().unwrap_or_else(|e| e.into_inner())
    }

    /// A snapshot of the links (cheap: reference-counted).
    pub(crate) fn link_snapshot(&self) -> Vec<Arc<BloomFilter>> {
        self.read_links().clone()
    }

    /// Exclusive access to the links (for decoding and RedisBloom chunks).
    pub(crate) fn links_mut(&mut self) -> &mut Vec<Arc<BloomFilter>> {
        self.links.get_mut().unwrap_or_else(|e| e.into_inner())
    }

    /// The item's hash under this chain's algorithm and seed.
    #[inline]
    pub fn hash(&self, item: impl AsRef<[u8]>) -> ItemHash {
        self.hash_algorithm().hash(item.as_ref(), self.params.seed)
    }

    /// Adds an item; `Ok(true)` if it was new. Fails with
    /// [`ErrorKind::Full`] when a non-scaling chain is full, or with a size
    /// error when growing would pass the memory limit or [`MAX_LINKS`]. An
    /// item already present is answered `Ok(false)` even when full.
    pub fn add(&self, item: impl AsRef<[u8]>) -> Result<bool> {
        self.add_hash(self.hash(item))
    }

    /// [`ScalableBloomFilter::add`] for an already hashed item.
    pub fn add_hash(&self, h: ItemHash) -> Result<bool> {
        loop {
            // The stripe lock makes concurrent adds of the same item exact.
            // Lock order: the chain (shared), then the stripe; growing takes
            // the chain exclusively with no stripe held, and the item is
            // looked up again after. (A `ChainWriter` holds the chain
            // shared for a batch and takes stripes inside it.)
            let links = self.read_links();
            let guard = StripeGuard::lock(h.lo);
            if links.iter().rev().any(|l| l.contains_hash(h)) {
                return Ok(false);
            }
            let cur = links.last().expect("a chain has at least one link");
            // Reserve a slot in the newest link so that concurrent adds of
            // different items never overfill it.
            let prev = cur.link_items().fetch_add(1, Ordering::Relaxed);
            if prev < cur.capacity() {
                let new = cur.raw().add(h);
                if new {
                    self.items.fetch_add(1, Ordering::Relaxed);
                } else {
                    cur.link_items().fetch_sub(1, Ordering::Relaxed);
                }
                return Ok(new);
            }
            cur.link_items().fetch_sub(1, Ordering::Relaxed);
            if self.params.nonscaling {
                return Err(ErrorKind::Full.into());
            }
            let len = links.len();
            drop(guard);
            drop(links);
            self.grow(len)?;
        }
    }

    /// [`add_hash`](Self::add_hash) with exclusive access: the same result,
    /// without locks or atomic read-modify-writes (for a caller that
    /// serialises a filter's writers anyway, such as seen's store).
    pub fn add_hash_mut(&mut self, h: ItemHash) -> Result<bool> {
        if self.contains_hash_mut(h) {
            return Ok(false);
        }
        self.room_mut()?;
        Ok(self.add_to_newest(h))
    }

    /// [`contains_hash`](Self::contains_hash) with exclusive access (no
    /// lock).
    fn contains_hash_mut(&mut self, h: ItemHash) -> bool {
        self.links_mut().iter().rev().any(|l| l.contains_hash(h))
    }

    /// Sets an item's bits in the newest sub-filter, whatever its count,
    /// and counts it if it was new.
    fn add_to_newest(&mut self, h: ItemHash) -> bool {
        let links = self.links_mut();
        let cur = link_mut(links.last_mut().expect("a chain has at least one link"));
        let new = cur.add_hash_mut(h);
        if new {
            *self.items.get_mut() += 1;
        }
        new
    }

    /// Room for new items in the newest sub-filter, with exclusive access,
    /// growing the chain first if that one is full: after `Ok(n)` (never
    /// 0), the next `n` adds through [`add_hash_mut`](Self::add_hash_mut)
    /// cannot fail. The error is the one such an add of a new item would
    /// return: `Full` (a non-scaling chain), or the growth refused.
    ///
    /// A caller that logs adds before making them (seen's store) logs
    /// only those it has room for, so that a logged add never failed.
    ///
    /// ```
    /// use seen_core::ScalableBloomFilter;
    /// let mut f = ScalableBloomFilter::builder(2, 0.01).nonscaling(true).build().unwrap();
    /// assert_eq!(f.room_mut().unwrap(), 2);
    /// f.add_hash_mut(f.hash("a")).unwrap();
    /// f.add_hash_mut(f.hash("b")).unwrap();
    /// assert!(f.room_mut().is_err());
    /// ```
    pub fn room_mut(&mut self) -> Result<u64> {
        loop {
            let nonscaling = self.params.nonscaling;
            let links = self.links_mut();
            let len = links.len();
            let cur = links.last().expect("a chain has at least one link");
            if cur.len() < cur.capacity() {
                return Ok(cur.capacity() - cur.len());
            }
            if nonscaling {
                return Err(ErrorKind::Full.into());
            }
            self.grow(len)?;
        }
    }

    /// Adds a new link if the chain still has `expected_len` links.
    fn grow(&self, expected_len: usize) -> Result<()> {
        let mut links = self.links.write().unwrap_or_else(|e| e.into_inner());
        if links.len() != expected_len {
            return Ok(()); // another thread grew it
        }
        if links.len() >= MAX_LINKS {
            return Err(ErrorKind::TooManyLinks(MAX_LINKS).into());
        }
        let last = links.last().expect("a chain has at least one link");
        let capacity = last
            .capacity()
            .checked_mul(self.params.expansion as u64)
            .ok_or(ErrorKind::TooLarge {
                needed: u64::MAX,
                limit: self.params.max_bytes,
            })?;
        let used: u64 = links.iter().map(|l| l.memory_bytes()).sum();
        let builder = FilterBuilder::new(capacity, last.error_rate() * ERROR_TIGHTENING_RATIO)
            .layout(self.params.layout)
            .redis_sizing(true)
            .seed(self.params.seed)
            .max_bytes(self.params.max_bytes.saturating_sub(used));
        // Errors in terms of the whole chain: the bytes it would hold, and
        // the most it may (its own limit, or what the budget leaves it).
        let whole = |e: crate::Error| -> crate::Error {
            match e.into_kind() {
                ErrorKind::TooLarge { needed, .. } => ErrorKind::TooLarge {
                    needed: needed.saturating_add(used),
                    limit: self.params.max_bytes,
                }
                .into(),
                ErrorKind::Unreachable(_) => ErrorKind::Unreachable(format!(
                    "the filter cannot grow: its next sub-filter would need error rate {:e}, \
                         which the {:?} layout cannot reach; create it with a larger capacity or \
                         expansion",
                    last.error_rate() * ERROR_TIGHTENING_RATIO,
                    self.params.layout
                ))
                .into(),
                other => other.into(),
            }
        };
        // Its own limit first: a chain at it takes nothing from the budget.
        let bytes = builder.memory_bytes().map_err(whole)?;
        // The shared budget's part, taken before the sub-filter's memory is
        // allocated and zeroed (and given back if that fails): chains
        // growing at once never hold more than the budget, even briefly.
        if let Some(charge) = &self.charge {
            charge.grow(bytes).map_err(|e| -> crate::Error {
                match e.into_kind() {
                    ErrorKind::TooLarge { needed, limit } => ErrorKind::TooLarge {
                        needed: needed.saturating_add(used),
                        limit: limit.saturating_add(used),
                    }
                    .into(),
                    other => other.into(),
                }
            })?;
        }
        let link = match builder.build() {
            Ok(link) => link,
            Err(e) => {
                if let Some(charge) = &self.charge {
                    charge.shrink(bytes);
                }
                return Err(whole(e));
            }
        };
        debug_assert_eq!(link.memory_bytes(), bytes);
        links.push(Arc::new(link));
        Ok(())
    }

    /// Is the item (probably) present in any link?
    pub fn contains(&self, item: impl AsRef<[u8]>) -> bool {
        self.contains_hash(self.hash(item))
    }

    /// Starts loading the memory an operation on `h` will touch, in every
    /// sub-filter; see [`BloomFilter::prefetch`].
    pub fn prefetch(&self, h: ItemHash) {
        for l in self.read_links().iter() {
            l.prefetch(h);
        }
    }

    /// [`contains`](Self::contains) for an already hashed item.
    pub fn contains_hash(&self, h: ItemHash) -> bool {
        self.read_links().iter().rev().any(|l| l.contains_hash(h))
    }

    /// Adds items in order, stopping at the first error, which is then the
    /// last element (RedisBloom's `BF.MADD` reply shape).
    pub fn add_many<T: AsRef<[u8]>>(&self, items: &[T]) -> Vec<Result<bool>> {
        let mut out = Vec::with_capacity(items.len());
        for item in items {
            let r = self.add(item);
            let stop = r.is_err();
            out.push(r);
            if stop {
                break;
            }
        }
        out
    }

    /// Looks up many items.
    pub fn contains_many<T: AsRef<[u8]>>(&self, items: &[T]) -> Vec<bool> {
        let links = self.read_links();
        items
            .iter()
            .map(|i| {
                let h = self.hash(i);
                links.iter().rev().any(|l| l.contains_hash(h))
            })
            .collect()
    }

    /// Adds that reported a new item, over all links.
    pub fn len(&self) -> u64 {
        self.items.load(Ordering::Relaxed)
    }

    /// True if nothing was added.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Number of links.
    pub fn links(&self) -> usize {
        self.read_links().len()
    }

    /// Sum of the links' capacities (RedisBloom's `Capacity`).
    pub fn capacity(&self) -> u64 {
        self.read_links().iter().map(|l| l.capacity()).sum()
    }

    /// The initial capacity asked for.
    pub fn initial_capacity(&self) -> u64 {
        self.params.capacity
    }

    /// The overall error rate asked for.
    pub fn error_rate(&self) -> f64 {
        self.params.error_rate
    }

    /// The expansion factor.
    pub fn expansion(&self) -> u32 {
        self.params.expansion
    }

    /// Whether the chain refuses to grow.
    pub fn is_nonscaling(&self) -> bool {
        self.params.nonscaling
    }

    /// The layout.
    pub fn layout(&self) -> Layout {
        self.params.layout
    }

    /// The hash algorithm.
    pub fn hash_algorithm(&self) -> HashAlgorithm {
        self.params.layout.hash_algorithm()
    }

    /// The hash seed.
    pub fn seed(&self) -> u64 {
        self.params.seed
    }

    /// Bytes of all links' arrays.
    pub fn memory_bytes(&self) -> u64 {
        self.read_links().iter().map(|l| l.memory_bytes()).sum()
    }

    /// Each link's parameters and item count, oldest first.
    pub fn link_info(&self) -> Vec<LinkInfo> {
        self.read_links()
            .iter()
            .map(|l| LinkInfo {
                capacity: l.capacity(),
                error_rate: l.error_rate(),
                items: l.len(),
                size: l.size(),
                bits: l.bits(),
                hashes: l.hashes(),
                bytes: l.memory_bytes(),
            })
            .collect()
    }

    /// True when a non-scaling chain's only link has taken its capacity.
    pub fn is_full(&self) -> bool {
        self.params.nonscaling && self.read_links().iter().all(|l| l.len() >= l.capacity())
    }

    /// Stats over all links; the current rate is the chain's,
    /// `1 - Π(1 - p_i)`.
    pub fn stats(&self) -> FilterStats {
        let parts: Vec<FilterStats> = self.read_links().iter().map(|l| l.stats()).collect();
        FilterStats::combine(&parts, self.capacity(), self.params.error_rate)
    }

    /// Merges `other` into this chain link by link (bitwise OR). Both chains
    /// must have the same parameters and the same link shapes.
    pub fn union_with(&mut self, other: &ScalableBloomFilter) -> Result<()> {
        self.check_compatible(other)?;
        let theirs = other.link_snapshot();
        let links = self.links_mut();
        for (mine, theirs) in links.iter_mut().zip(theirs.iter()) {
            link_mut(mine).union_with(theirs)?;
        }
        let items = links.iter().map(|l| l.len()).sum();
        *self.items.get_mut() = items;
        Ok(())
    }

    fn check_compatible(&self, other: &ScalableBloomFilter) -> Result<()> {
        if self.params.layout != other.params.layout
            || self.params.seed != other.params.seed
            || self.links() != other.links()
        {
            return Err(ErrorKind::Incompatible(format!(
                "{:?} chain of {} links vs {:?} chain of {} links",
                self.params.layout,
                self.links(),
                other.params.layout,
                other.links()
            ))
            .into());
        }
        Ok(())
    }

    pub(crate) fn set_len(&mut self, items: u64) {
        *self.items.get_mut() = items;
    }
}

/// Exclusive access to a link of a chain we hold `&mut`.
pub(crate) fn link_mut(link: &mut Arc<BloomFilter>) -> &mut BloomFilter {
    // Links are shared only with snapshots that live within one `&self`
    // method call; with `&mut` on the chain, none is alive.
    Arc::get_mut(link).expect("no link snapshot outlives a &self call")
}

impl BloomFilter {
    /// The item counter of a link (scalable chains reserve slots in it).
    pub(crate) fn link_items(&self) -> &AtomicU64 {
        self.items_counter()
    }
}

impl Default for ScalableBuilder {
    fn default() -> Self {
        ScalableBuilder::new(100, 0.01)
    }
}
