//! The prefetch-ahead loop of every batch call: while one item is worked
//! on, the memory of an item [`PREFETCH_AHEAD`] places further on is
//! already on its way, so on a filter larger than the CPU caches the
//! misses of a batch overlap instead of adding up.

use crate::hash::ItemHash;

/// How many hashes ahead of the one worked on a batch starts the cache
/// miss of: enough to overlap the misses of a filter larger than the
/// caches.
pub const PREFETCH_AHEAD: usize = 16;

/// Calls `each` on every hash in order, having called `prefetch` on it
/// [`PREFETCH_AHEAD`] hashes earlier. Each hash is taken from `hashes`
/// once. The filter is passed to both closures (shared to `prefetch`,
/// exclusive to `each`), so `each` may change it: pass `&mut &filter`
/// where `each` only reads.
///
/// ```
/// use seen_core::{for_each_prefetched, BloomFilter};
/// let mut f = BloomFilter::new(1000, 0.01).unwrap();
/// let items = ["a", "b", "a"];
/// let hashes = items.iter().map(|i| f.hash(i)).collect::<Vec<_>>();
/// let mut new = Vec::new();
/// for_each_prefetched(
///     &mut f,
///     hashes,
///     |f, h| f.prefetch(h),
///     |f, h| new.push(f.add_hash_mut(h)),
/// );
/// assert_eq!(new, [true, true, false]);
/// ```
pub fn for_each_prefetched<F: ?Sized>(
    filter: &mut F,
    hashes: impl IntoIterator<Item = ItemHash>,
    prefetch: impl Fn(&F, ItemHash),
    mut each: impl FnMut(&mut F, ItemHash),
) {
    let mut ring = [ItemHash::default(); PREFETCH_AHEAD];
    let mut hashes = hashes.into_iter();
    let mut filled = 0;
    for (slot, h) in ring.iter_mut().zip(hashes.by_ref()) {
        prefetch(filter, h);
        *slot = h;
        filled += 1;
    }
    // `ring[oldest..]` then `ring[..oldest]` are the hashes in order.
    let mut oldest = 0;
    for next in hashes {
        prefetch(filter, next);
        let h = std::mem::replace(&mut ring[oldest], next);
        each(filter, h);
        oldest = (oldest + 1) % PREFETCH_AHEAD;
    }
    for k in 0..filled {
        each(filter, ring[(oldest + k) % PREFETCH_AHEAD]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every hash reaches `each` once, in order, and was prefetched
    /// before, for every length around the ring's size.
    #[test]
    fn each_hash_once_in_order_after_its_prefetch() {
        for n in 0..3 * PREFETCH_AHEAD as u64 + 2 {
            let hashes: Vec<ItemHash> = (0..n).map(|i| ItemHash { lo: i, hi: !i }).collect();
            let mut log: Vec<(bool, u64)> = Vec::new();
            let prefetched = std::cell::RefCell::new(Vec::new());
            for_each_prefetched(
                &mut log,
                hashes.iter().copied(),
                |_, h| prefetched.borrow_mut().push(h.lo),
                |log, h| log.push((prefetched.borrow().contains(&h.lo), h.lo)),
            );
            let expected: Vec<(bool, u64)> = (0..n).map(|i| (true, i)).collect();
            assert_eq!(log, expected, "{n} hashes");
            assert_eq!(*prefetched.borrow(), (0..n).collect::<Vec<_>>());
        }
    }
}
