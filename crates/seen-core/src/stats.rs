//! What a filter can say about itself: fill, estimated items, error rate now.

use crate::raw::RawFilter;
use crate::sizing;

/// A snapshot of a filter's state, from one pass over its bits.
#[derive(Clone, Debug, PartialEq)]
pub struct FilterStats {
    /// Items the filter was sized for.
    pub capacity: u64,
    /// False-positive rate the filter was sized for.
    pub error_rate: f64,
    /// Adds that reported a new item.
    pub items: u64,
    /// Bits that item positions can address.
    pub bits: u64,
    /// Of those, bits set.
    pub bits_set: u64,
    /// `bits_set / bits`.
    pub fill_ratio: f64,
    /// Distinct items estimated from the fill ratio (Swamidass & Baldi).
    pub estimated_items: f64,
    /// The false-positive rate a lookup of a never-added item has now,
    /// computed from the bits actually set.
    pub current_fpp: f64,
    /// Bytes of memory held.
    pub memory_bytes: u64,
}

impl FilterStats {
    pub(crate) fn from_raw(raw: &RawFilter, capacity: u64, error_rate: f64, items: u64) -> Self {
        let bits = raw.addressable_bits();
        let bits_set = raw.count_ones();
        FilterStats {
            capacity,
            error_rate,
            items,
            bits,
            bits_set,
            fill_ratio: fill_ratio(bits_set, bits),
            estimated_items: sizing::estimate_items(bits, raw.hashes(), bits_set),
            current_fpp: raw.current_fpp(),
            memory_bytes: raw.memory_bytes(),
        }
    }

    /// Combines the stats of the links of a chain: sums, and the chain's
    /// false-positive rate `1 - Π(1 - p_i)`.
    pub(crate) fn combine(parts: &[FilterStats], capacity: u64, error_rate: f64) -> Self {
        let bits: u64 = parts.iter().map(|p| p.bits).sum();
        let bits_set: u64 = parts.iter().map(|p| p.bits_set).sum();
        FilterStats {
            capacity,
            error_rate,
            items: parts.iter().map(|p| p.items).sum(),
            bits,
            bits_set,
            fill_ratio: fill_ratio(bits_set, bits),
            estimated_items: parts.iter().map(|p| p.estimated_items).sum(),
            current_fpp: 1.0 - parts.iter().map(|p| 1.0 - p.current_fpp).product::<f64>(),
            memory_bytes: parts.iter().map(|p| p.memory_bytes).sum(),
        }
    }

    /// Whether more distinct items were added than the filter was sized for
    /// (by the add count or by the estimate from the bits).
    pub fn over_capacity(&self) -> bool {
        self.items > self.capacity || self.estimated_items > self.capacity as f64 * 1.05
    }
}

/// The share of bits set; 0 for a filter of no bits.
fn fill_ratio(bits_set: u64, bits: u64) -> f64 {
    if bits == 0 {
        0.0
    } else {
        bits_set as f64 / bits as f64
    }
}
