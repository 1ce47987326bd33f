//! Every filter's health, for `INFO seen` and `/metrics`: from one pass
//! over each filter's bits, in name order.

use seen_core::{FilterKind, FilterStats};
use seen_store::Store;

/// One filter's state, as an operator alerts on it.
pub(crate) struct FilterHealth {
    pub(crate) name: Vec<u8>,
    pub(crate) kind: FilterKind,
    /// It holds more than it was sized for ([`seen_core::AnyFilter::is_over_capacity`]).
    pub(crate) over_capacity: bool,
    pub(crate) stats: FilterStats,
}

/// The health of every filter now, by name. Each filter is read under its
/// own lock, one after another.
pub(crate) fn filter_health(store: &Store) -> Vec<FilterHealth> {
    let mut names = store.names();
    names.sort();
    names
        .into_iter()
        .filter_map(|name| {
            let (kind, over_capacity, stats) = store
                .with_filter(&name, |f| {
                    let stats = f.stats();
                    (f.kind(), f.is_over_capacity(&stats), stats)
                })
                .ok()??;
            Some(FilterHealth {
                name,
                kind,
                over_capacity,
                stats,
            })
        })
        .collect()
}
