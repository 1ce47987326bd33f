//! Integration tests of seen-redis against real `redis-server` processes
//! (standalone and a 3-master Cluster), each started by the test on a free
//! loopback port in a temporary directory and killed by pid when done.

mod cluster;
mod concurrency;
mod faults;
mod metadata;
mod props;
mod proxy;
mod server;
mod standalone;
mod stats;

use seen_core::{BloomFilter, Layout};
use seen_redis::{Metadata, RedisFilter, Target};

/// The in-memory filter with exactly the Redis filter's shape, seed and
/// hashing: it must give the same answers and hold the same bits.
pub fn reference(meta: &Metadata) -> BloomFilter {
    BloomFilter::with_size(
        Layout::Blocked,
        meta.plan.blocks(),
        meta.plan.hashes,
        meta.seed,
        meta.capacity,
        meta.error_rate,
        u64::MAX,
    )
    .expect("reference filter")
}

pub fn target(url: &str) -> Target {
    url.parse().expect("test URL")
}

/// `n` distinct URL-like items, different for each `tag`.
pub fn urls(tag: &str, n: usize) -> Vec<String> {
    (0..n)
        .map(|i| format!("https://{tag}.example.com/page/{i}?q={}", i * 7919 % 1009))
        .collect()
}

/// Every shard's bytes, concatenated in shard order.
pub fn shard_bytes(conn: &mut dyn redis::ConnectionLike, f: &RedisFilter) -> Vec<u8> {
    let mut all = Vec::new();
    for i in 0..f.metadata().plan.shards {
        let key = seen_redis::shard_key(f.name(), i);
        let bytes: Vec<u8> = redis::cmd("GET").arg(&key).query(conn).expect("GET shard");
        all.extend_from_slice(&bytes);
    }
    all
}

/// The bit array of an in-memory filter, from its encoded form
/// (docs/FORMAT.md section 4: header of 56 + 40 bytes and a CRC, the body,
/// a CRC).
pub fn body_of(f: &BloomFilter) -> Vec<u8> {
    let mut enc = Vec::new();
    f.encode(&mut enc).expect("encode");
    enc[100..enc.len() - 4].to_vec()
}

/// Asserts two answer vectors are equal, naming the first differences
/// (not printing thousands of booleans).
#[track_caller]
pub fn assert_answers(got: &[bool], want: &[bool]) {
    assert_eq!(got.len(), want.len(), "answer count");
    let diff: Vec<(usize, bool, bool)> = got
        .iter()
        .zip(want)
        .enumerate()
        .filter(|(_, (g, w))| g != w)
        .map(|(i, (&g, &w))| (i, g, w))
        .collect();
    assert!(
        diff.is_empty(),
        "{} answers differ; first (index, got, want): {:?}",
        diff.len(),
        &diff[..diff.len().min(8)]
    );
}
