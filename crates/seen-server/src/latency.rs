//! A latency histogram cheap enough to update on every command, for `INFO
//! latencystats` and the metrics endpoint.
//!
//! Durations in nanoseconds fall into log-linear buckets: one group per
//! power of two, split in [`SUB_BUCKETS`] equal parts, so a bucket's width is
//! at most 1/8 of its value (the HdrHistogram idea at a fixed, coarse
//! precision). Updates are one relaxed atomic add; readers add the buckets
//! up without stopping writers, so a reading may miss updates made while it
//! runs, never count one twice.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Buckets per power of two.
const SUB_BUCKETS: usize = 8;
/// `log2(SUB_BUCKETS)`.
const SUB_BITS: u32 = SUB_BUCKETS.trailing_zeros();
/// Powers of two covered: 1 ns to about 584 years.
const GROUPS: usize = 64 - SUB_BITS as usize + 1;
const BUCKETS: usize = GROUPS * SUB_BUCKETS;

/// Counts of durations by bucket.
pub(crate) struct LatencyHistogram {
    buckets: Box<[AtomicU64]>,
}

impl Default for LatencyHistogram {
    fn default() -> Self {
        LatencyHistogram {
            buckets: (0..BUCKETS).map(|_| AtomicU64::new(0)).collect(),
        }
    }
}

/// The bucket of `ns`: values below [`SUB_BUCKETS`] have one each; above,
/// the group is the position of the highest bit and the sub-bucket the
/// next [`SUB_BITS`] bits.
fn bucket_of(ns: u64) -> usize {
    if ns < SUB_BUCKETS as u64 {
        return ns as usize;
    }
    let high = 63 - ns.leading_zeros(); // >= SUB_BITS
    let group = (high - SUB_BITS + 1) as usize;
    let sub = ((ns >> (high - SUB_BITS)) as usize) & (SUB_BUCKETS - 1);
    group * SUB_BUCKETS + sub
}

/// The largest value that falls in bucket `b`.
fn bucket_top(b: usize) -> u64 {
    let (group, sub) = (b / SUB_BUCKETS, (b % SUB_BUCKETS) as u64);
    if group == 0 {
        return sub;
    }
    let shift = group as u32 - 1;
    let low = (SUB_BUCKETS as u64 + sub) << shift;
    low.saturating_add((1u64 << shift) - 1)
}

impl LatencyHistogram {
    /// Counts `n` commands that took `each` apiece.
    pub(crate) fn record(&self, each: Duration, n: u64) {
        let ns = u64::try_from(each.as_nanos()).unwrap_or(u64::MAX);
        self.buckets[bucket_of(ns)].fetch_add(n, Ordering::Relaxed);
    }

    /// The durations at the given quantiles (each in `[0, 1]`), as the top
    /// of the bucket the quantile falls in: within 1/8 above the true
    /// value. `None` when nothing was recorded.
    pub(crate) fn quantiles<const N: usize>(&self, qs: [f64; N]) -> Option<[Duration; N]> {
        let counts: Vec<u64> = self
            .buckets
            .iter()
            .map(|b| b.load(Ordering::Relaxed))
            .collect();
        let total: u64 = counts.iter().sum();
        if total == 0 {
            return None;
        }
        Some(qs.map(|q| {
            // The rank of the quantile, 1-based: at least the first.
            let rank = ((q * total as f64).ceil() as u64).clamp(1, total);
            let mut seen = 0;
            let b = counts
                .iter()
                .position(|&c| {
                    seen += c;
                    seen >= rank
                })
                .unwrap_or(BUCKETS - 1);
            Duration::from_nanos(bucket_top(b))
        }))
    }

    /// For each bound (nanoseconds, ascending), how many durations fell in
    /// buckets whose top is at most the bound: a Prometheus histogram's
    /// cumulative counts (a bucket straddling a bound counts above it).
    pub(crate) fn counts_at_most(&self, bounds_ns: &[u64]) -> Vec<u64> {
        let mut out = Vec::with_capacity(bounds_ns.len());
        let (mut b, mut sum) = (0, 0u64);
        for &bound in bounds_ns {
            while b < BUCKETS && bucket_top(b) <= bound {
                sum += self.buckets[b].load(Ordering::Relaxed);
                b += 1;
            }
            out.push(sum);
        }
        out
    }

    /// Forgets every count (`CONFIG RESETSTAT`).
    pub(crate) fn reset(&self) {
        self.buckets
            .iter()
            .for_each(|b| b.store(0, Ordering::Relaxed));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_value_falls_in_a_bucket_whose_range_holds_it() {
        let mut values: Vec<u64> = (0..4096).collect();
        values.extend((0..64).flat_map(|s| [1u64 << s, (1u64 << s) - 1, (1u64 << s) + 1]));
        values.push(u64::MAX);
        for v in values {
            let b = bucket_of(v);
            assert!(b < BUCKETS, "{v}");
            assert!(bucket_top(b) >= v, "{v}: top {}", bucket_top(b));
            if b > 0 {
                assert!(
                    bucket_top(b - 1) < v,
                    "{v}: previous top {}",
                    bucket_top(b - 1)
                );
            }
            // A bucket is at most an eighth of its values wide.
            assert!(bucket_top(b) - v <= v / 8, "{v}: top {}", bucket_top(b));
        }
    }

    #[test]
    fn quantiles_of_a_known_spread() {
        let h = LatencyHistogram::default();
        assert!(h.quantiles([0.5]).is_none());
        // 90 fast commands of 1 us and 10 slow ones of 1 ms.
        h.record(Duration::from_micros(1), 90);
        h.record(Duration::from_millis(1), 10);
        let [p50, p90, p99] = h.quantiles([0.5, 0.9, 0.99]).unwrap();
        let near = |d: Duration, want: Duration| d >= want && d <= want + want / 8;
        assert!(near(p50, Duration::from_micros(1)), "{p50:?}");
        assert!(near(p90, Duration::from_micros(1)), "{p90:?}");
        assert!(near(p99, Duration::from_millis(1)), "{p99:?}");
        assert_eq!(h.counts_at_most(&[500, 2_000, 2_000_000]), vec![0, 90, 100]);
        h.reset();
        assert!(h.quantiles([0.5]).is_none());
    }
}
