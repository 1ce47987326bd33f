//! Add throughput of seen-redis against the common hand-rolled Redis Bloom
//! filter, on one local `redis-server` started here.
//!
//! The hand-rolled design: `k` seeded hashes of the item over one key of
//! `m` bits, and for each hash one `GETBIT` round trip, then a `SETBIT`
//! round trip if the bit was 0; the item is new if any bit was 0. (Real
//! ones often use MD5; this one uses xxh3, which is cheaper, so the
//! comparison flatters the baseline.) seen-redis sends one `BITFIELD` per
//! shard per batch, all shards in one pipeline.
//!
//! Run: `cargo bench -p seen-redis --bench throughput`
//! (`SEEN_BENCH_ITEMS=N` changes the seen-redis item count, default
//! 400,000; the baseline adds 1/50 of that).

#[path = "../tests/redis/server.rs"]
mod server;

use std::time::Instant;

use seen_redis::{FilterParams, RedisFilter, Target};
use server::RedisServer;

const CAPACITY: u64 = 10_000_000;
const RATE: f64 = 0.01;

fn items(tag: &str, n: usize) -> Vec<String> {
    (0..n)
        .map(|i| format!("https://{tag}.example.com/articles/{i}/index.html"))
        .collect()
}

/// The hand-rolled filter: `k` GETBIT/SETBIT round trips per item.
fn hand_rolled_add(conn: &mut redis::Connection, bits: u64, k: u32, item: &str) -> bool {
    let mut new = false;
    for seed in 0..k as u64 {
        let pos = xxhash_rust::xxh3::xxh3_64_with_seed(item.as_bytes(), seed) % bits;
        let was: u8 = redis::cmd("GETBIT")
            .arg("handrolled")
            .arg(pos)
            .query(conn)
            .expect("GETBIT");
        if was == 0 {
            new = true;
            let _: u8 = redis::cmd("SETBIT")
                .arg("handrolled")
                .arg(pos)
                .arg(1)
                .query(conn)
                .expect("SETBIT");
        }
    }
    new
}

fn main() {
    // `cargo bench` passes `--bench`; `cargo test --benches` runs this too,
    // briefly.
    let quick = !std::env::args().any(|a| a == "--bench");
    let n: usize = std::env::var("SEEN_BENCH_ITEMS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(if quick { 20_000 } else { 400_000 });
    let server = RedisServer::start();
    let target: Target = server.url().parse().expect("url");
    println!(
        "redis-server on 127.0.0.1:{}; filter for {CAPACITY} items at {RATE}",
        server.port
    );

    let mut f = RedisFilter::open_or_create(&target, "bench", &FilterParams::new(CAPACITY, RATE))
        .expect("create filter");
    let plan = f.metadata().plan;
    println!(
        "seen-redis: {} shards of {} bytes, k = {}",
        plan.shards,
        plan.shard_bytes(),
        plan.hashes
    );
    let mut seen_rate = 0.0;
    for batch in [100usize, 1_000, 10_000] {
        let urls = items(&format!("b{batch}"), n);
        let start = Instant::now();
        let mut new = 0usize;
        for chunk in urls.chunks(batch) {
            new += f
                .add_many(chunk)
                .expect("add_many")
                .iter()
                .filter(|&&x| x)
                .count();
        }
        let secs = start.elapsed().as_secs_f64();
        let rate = n as f64 / secs;
        assert!(new as f64 > n as f64 * 0.99, "{new} of {n} new");
        println!("seen-redis add_many, batches of {batch:>6}: {rate:>10.0} items/s ({n} items, {secs:.2} s)");
        if batch == 1_000 {
            seen_rate = rate;
        }
        let start = Instant::now();
        for chunk in urls.chunks(batch) {
            let present = f.contains_many(chunk).expect("contains_many");
            assert!(present.iter().all(|&p| p));
        }
        let secs = start.elapsed().as_secs_f64();
        println!(
            "seen-redis contains_many, batches of {batch:>6}: {:>7.0} items/s",
            n as f64 / secs
        );
    }

    let mut conn = server.conn();
    let bits = plan.blocks() * 512;
    let base_n = (n / 50).max(200);
    let urls = items("hand", base_n);
    let start = Instant::now();
    let mut new = 0;
    for u in &urls {
        new += hand_rolled_add(&mut conn, bits, plan.hashes, u) as usize;
    }
    let secs = start.elapsed().as_secs_f64();
    assert!(new as f64 > base_n as f64 * 0.99);
    let base_rate = base_n as f64 / secs;
    println!(
        "hand-rolled GETBIT/SETBIT, k = {}: {base_rate:>10.0} items/s ({base_n} items, {secs:.2} s)",
        plan.hashes
    );
    println!(
        "ratio (seen-redis, batches of 1,000) / hand-rolled: {:.0}x",
        seen_rate / base_rate
    );
    f.delete().expect("delete");
}
