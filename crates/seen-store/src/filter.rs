//! What each record does to a filter: the one place where both a live call
//! and a replay of the log change filters, so that replay rebuilds exactly
//! the filter the calls made, bits and counts.
//!
//! A live add first plans a round ([`plan_round`]): which of its items to
//! log (those not present, with room made for them in a scalable chain),
//! so that no logged add can fail; then logs them; then applies them
//! ([`apply_adds`]), as replay applies the record.

use seen_core::{
    for_each_prefetched, AnyFilter, BloomFilter, CountingBloomFilter, HashAlgorithm, ItemHash,
    Removal, ScalableBloomFilter,
};

use crate::error::{ErrorKind, Result};
use crate::record::{FilterSpec, Hashes, MAX_HASHES_PER_RECORD};

/// Builds a new, empty filter of `spec`, refusing one of more than
/// `max_bytes` before allocating.
pub(crate) fn build(spec: &FilterSpec, max_bytes: u64) -> Result<AnyFilter> {
    Ok(match *spec {
        FilterSpec::Bloom {
            capacity,
            error_rate,
            layout,
        } => AnyFilter::Bloom(
            BloomFilter::builder(capacity, error_rate)
                .layout(layout)
                .max_bytes(max_bytes)
                .build()?,
        ),
        FilterSpec::Scalable {
            capacity,
            error_rate,
            layout,
            expansion,
            nonscaling,
        } => AnyFilter::Scalable(
            ScalableBloomFilter::builder(capacity, error_rate)
                .layout(layout)
                .expansion(expansion)
                .nonscaling(nonscaling)
                .max_bytes(max_bytes)
                .build()?,
        ),
        FilterSpec::Counting {
            capacity,
            error_rate,
        } => AnyFilter::Counting(CountingBloomFilter::with_options(
            capacity,
            error_rate,
            seen_core::DEFAULT_SEED,
            max_bytes,
        )?),
    })
}

/// Whether building a filter of `spec` may zero 4 MiB or more, which takes
/// a millisecond or two (the store then builds it in its blocking hook).
/// Estimated from the optimal Bloom filter's bits per item, a counting
/// filter's four to a bit.
pub(crate) fn builds_large(spec: &FilterSpec) -> bool {
    let (capacity, error_rate, bits_each) = match *spec {
        FilterSpec::Bloom {
            capacity,
            error_rate,
            ..
        } => (capacity, error_rate, 1.0),
        FilterSpec::Scalable {
            capacity,
            error_rate,
            ..
        } => (capacity, error_rate / 2.0, 1.0),
        FilterSpec::Counting {
            capacity,
            error_rate,
        } => (capacity, error_rate, 4.0),
    };
    let bits_per_item = -error_rate.ln() / (std::f64::consts::LN_2 * std::f64::consts::LN_2);
    capacity as f64 * bits_per_item * bits_each / 8.0 >= (4 << 20) as f64
}

/// Whether `n` adds may grow a scalable chain: allocate and zero its next
/// sub-filter, which for a large chain takes long (the store runs such an
/// add in its blocking hook).
pub(crate) fn may_grow(f: &AnyFilter, n: usize) -> bool {
    let AnyFilter::Scalable(c) = f else {
        return false;
    };
    let links = c.link_info();
    !c.is_nonscaling()
        && links
            .last()
            .is_some_and(|l| l.items.saturating_add(n as u64) >= l.capacity)
}

/// How a filter hashes its items: fixed for its life, so callers hash
/// before they take the filter's lock.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Hasher {
    algorithm: HashAlgorithm,
    seed: u64,
}

impl Hasher {
    pub(crate) fn of(f: &AnyFilter) -> Hasher {
        let (algorithm, seed) = match f {
            AnyFilter::Bloom(b) => (b.hash_algorithm(), b.seed()),
            AnyFilter::Scalable(s) => (s.hash_algorithm(), s.seed()),
            AnyFilter::Counting(c) => (HashAlgorithm::Xxh3_128, c.seed()),
            _ => unreachable!("AnyFilter has three kinds"),
        };
        Hasher { algorithm, seed }
    }

    pub(crate) fn hash_all(&self, items: &[&[u8]]) -> Vec<ItemHash> {
        items
            .iter()
            .map(|i| self.algorithm.hash(i, self.seed))
            .collect()
    }
}

/// Bytes of bits or counters a filter holds.
pub(crate) fn memory_bytes(f: &AnyFilter) -> u64 {
    match f {
        AnyFilter::Bloom(b) => b.memory_bytes(),
        AnyFilter::Scalable(s) => s.memory_bytes(),
        AnyFilter::Counting(c) => c.memory_bytes(),
        _ => 0,
    }
}

fn prefetch(f: &AnyFilter, h: ItemHash) {
    match f {
        AnyFilter::Bloom(b) => b.prefetch(h),
        AnyFilter::Scalable(s) => s.prefetch(h),
        _ => {}
    }
}

/// Looks hashes up.
pub(crate) fn contains(f: &AnyFilter, hashes: &[ItemHash]) -> Vec<bool> {
    let mut out = Vec::with_capacity(hashes.len());
    for_each_prefetched(
        &mut &*f,
        hashes.iter().copied(),
        |f, h| prefetch(f, h),
        |f, h| {
            out.push(match f {
                AnyFilter::Bloom(b) => b.contains_hash(h),
                AnyFilter::Scalable(s) => s.contains_hash(h),
                AnyFilter::Counting(c) => c.contains_hash(h),
                _ => unreachable!("AnyFilter has three kinds"),
            })
        },
    );
    out
}

/// The first part of an add call that one record carries: which of its
/// hashes to log, how many of them it considered, and the error that
/// stopped the call there, if one did.
pub(crate) struct Round {
    /// Places (in the hashes given) of the hashes to log and add.
    pub(crate) logged: Vec<usize>,
    pub(crate) considered: usize,
    pub(crate) stopped: Option<seen_core::Error>,
}

/// Plans the next round of an add. Items present are not logged (an add of
/// one changes nothing, now or on replay), but in a counting filter, which
/// counts every add. A scalable chain's round ends where its newest
/// sub-filter has no room left for it: the round's adds must be applied
/// before the chain can grow (`room_mut` grows it when it is full), which
/// the next round then does; and where growth is refused (full, or over
/// the memory limit) the call stops, its later items not added.
pub(crate) fn plan_round(f: &mut AnyFilter, hashes: &[ItemHash]) -> Round {
    let hashes = &hashes[..hashes.len().min(MAX_HASHES_PER_RECORD)];
    let present = match f {
        AnyFilter::Counting(_) => vec![false; hashes.len()],
        _ => contains(f, hashes),
    };
    let mut round = Round {
        logged: Vec::new(),
        considered: hashes.len(),
        stopped: None,
    };
    let AnyFilter::Scalable(chain) = f else {
        round.logged = (0..hashes.len()).filter(|&i| !present[i]).collect();
        return round;
    };
    let mut room = 0;
    for (i, &p) in present.iter().enumerate() {
        if p {
            continue;
        }
        if room == 0 {
            if !round.logged.is_empty() {
                round.considered = i;
                break;
            }
            match chain.room_mut() {
                Ok(n) => room = n,
                Err(e) => {
                    round.considered = i;
                    round.stopped = Some(e);
                    break;
                }
            }
        }
        room -= 1;
        round.logged.push(i);
    }
    round
}

/// Applies logged adds in order: whether each was new. Fails only where a
/// chain cannot take an add (the live path plans rounds so that it never
/// does; replay reports it as damage).
pub(crate) fn apply_adds(f: &mut AnyFilter, hashes: Hashes<'_>) -> Result<Vec<bool>> {
    let mut new = Vec::new();
    for_each_prefetched(f, hashes.iter(), prefetch, |f, h| {
        new.push(match f {
            AnyFilter::Bloom(b) => Ok(b.add_hash_mut(h)),
            AnyFilter::Scalable(s) => s.add_hash_mut(h),
            AnyFilter::Counting(c) => Ok(c.add_hash(h)),
            _ => unreachable!("AnyFilter has three kinds"),
        })
    });
    Ok(new.into_iter().collect::<std::result::Result<_, _>>()?)
}

/// Applies logged removes of a counting filter in order.
pub(crate) fn apply_removes(f: &mut AnyFilter, hashes: Hashes<'_>) -> Result<Vec<Removal>> {
    match f {
        AnyFilter::Counting(c) => Ok(hashes.iter().map(|h| c.remove_hash(h)).collect()),
        _ => Err(ErrorKind::WrongKind("only counting filters support remove").into()),
    }
}
