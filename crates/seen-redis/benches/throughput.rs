//! Add throughput of seen-redis against the common hand-rolled Redis Bloom
//! filter and against exact dedup with `SADD`, on local `redis-server`s
//! started here; then Redis's memory for 10 million items either way.
//!
//! The hand-rolled design: `k` seeded hashes of the item over one key of
//! `m` bits, and for each hash one `GETBIT` round trip, then a `SETBIT`
//! round trip if the bit was 0; the item is new if any bit was 0. (Real
//! ones often use MD5; this one uses xxh3, which is cheaper, so the
//! comparison flatters the baseline.) seen-redis sends one `BITFIELD` per
//! shard per batch, all shards in one pipeline.
//!
//! Exact dedup with `SADD`: one `SADD set item` per item (its reply says
//! whether the item was new), pipelined in batches like seen-redis's.
//!
//! Run: `cargo bench -p seen-redis --bench throughput`
//! (`SEEN_BENCH_ITEMS=N` changes the seen-redis item count, default
//! 400,000; the baseline adds 1/50 of that; the memory part adds 10
//! million items to a filter and to a set, each on its own server).

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

/// Exact dedup: one pipelined `SADD` per item; returns how many were new.
fn sadd_batch(conn: &mut redis::Connection, items: &[String]) -> usize {
    let mut pipe = redis::pipe();
    for item in items {
        pipe.cmd("SADD").arg("exact").arg(item);
    }
    let replies: Vec<u8> = pipe.query(conn).expect("SADD pipeline");
    replies.iter().filter(|&&r| r == 1).count()
}

/// `used_memory` from `INFO memory`.
fn used_memory(conn: &mut redis::Connection) -> u64 {
    let info: String = redis::cmd("INFO").arg("memory").query(conn).expect("INFO");
    info.lines()
        .find_map(|l| l.strip_prefix("used_memory:"))
        .and_then(|v| v.trim().parse().ok())
        .expect("used_memory in INFO memory")
}

/// What `wait_for_replicas(1, ..)` costs: add_many in batches of 1,000 on
/// a server with one replica, without and with `WAIT 1` after each batch.
fn wait_cost(server: &RedisServer, n: usize) {
    let port = server.port.to_string();
    let replica = RedisServer::start_with(&["--replicaof", "127.0.0.1", &port], false);
    let mut rconn = replica.conn();
    let deadline = Instant::now() + std::time::Duration::from_secs(20);
    loop {
        let info: String = redis::cmd("INFO")
            .arg("replication")
            .query(&mut rconn)
            .expect("INFO");
        if info.contains("master_link_status:up") {
            break;
        }
        assert!(Instant::now() < deadline, "the replica never synced");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let target: Target = server.url().parse().expect("url");
    let mut f =
        RedisFilter::open_or_create(&target, "bench-wait", &FilterParams::new(CAPACITY, RATE))
            .expect("create filter");
    let mut rates = Vec::new();
    for replicas in [0, 1] {
        f.wait_for_replicas(replicas, std::time::Duration::from_secs(1));
        let urls = items(&format!("wait{replicas}"), n);
        let start = Instant::now();
        for chunk in urls.chunks(1_000) {
            f.add_many(chunk).expect("add_many");
        }
        let rate = n as f64 / start.elapsed().as_secs_f64();
        println!("seen-redis add_many with one replica, wait for {replicas}, batches of 1000: {rate:>10.0} items/s");
        rates.push(rate);
    }
    println!("ratio (wait for 1) / (no wait): {:.2}", rates[1] / rates[0]);
    f.delete().expect("delete");
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

    // The same with the hash count of the smallest filter (more work per
    // item for Redis, less memory): what the default's fewer hashes buy.
    let (_, min_k) = seen_core::sizing::blocked_size(CAPACITY, RATE).expect("sizing");
    let mut g = RedisFilter::open_or_create(
        &target,
        "bench-min",
        &FilterParams::new(CAPACITY, RATE).hashes(min_k),
    )
    .expect("create filter");
    let min_plan = g.metadata().plan;
    let urls = items("min", n);
    let start = Instant::now();
    for chunk in urls.chunks(1_000) {
        g.add_many(chunk).expect("add_many");
    }
    let secs = start.elapsed().as_secs_f64();
    println!(
        "seen-redis with k = {min_k} ({} shards of {} bytes, {:.1} MiB against {:.1} MiB), batches of 1000: {:>10.0} items/s",
        min_plan.shards,
        min_plan.shard_bytes(),
        (min_plan.shards * min_plan.shard_bytes()) as f64 / (1 << 20) as f64,
        (plan.shards * plan.shard_bytes()) as f64 / (1 << 20) as f64,
        n as f64 / secs
    );
    g.delete().expect("delete");

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

    let urls = items("sadd", n);
    let start = Instant::now();
    let mut new = 0;
    for chunk in urls.chunks(1_000) {
        new += sadd_batch(&mut conn, chunk);
    }
    let secs = start.elapsed().as_secs_f64();
    assert_eq!(new, n);
    let sadd_rate = n as f64 / secs;
    println!("exact SADD, pipelines of 1,000: {sadd_rate:>10.0} items/s ({n} items, {secs:.2} s)");
    println!(
        "ratio (seen-redis, batches of 1,000) / SADD: {:.2}x",
        seen_rate / sadd_rate
    );
    f.delete().expect("delete");

    wait_cost(&server, n);

    // Memory: the same items into a fresh filter and a fresh set, each on
    // its own server, measured as the growth of `used_memory`.
    let mem_n = if quick { 20_000 } else { CAPACITY as usize };
    let mem_items = items("mem", mem_n);
    let bloom_server = RedisServer::start();
    let mut bconn = bloom_server.conn();
    let before = used_memory(&mut bconn);
    let btarget: Target = bloom_server.url().parse().expect("url");
    let mut f = RedisFilter::open_or_create(&btarget, "mem", &FilterParams::new(CAPACITY, RATE))
        .expect("create filter");
    for chunk in mem_items.chunks(10_000) {
        f.add_many(chunk).expect("add_many");
    }
    let bloom_bytes = used_memory(&mut bconn) - before;
    let nominal = plan.shards * plan.shard_bytes();
    let set_server = RedisServer::start();
    let mut sconn = set_server.conn();
    let before = used_memory(&mut sconn);
    for chunk in mem_items.chunks(1_000) {
        sadd_batch(&mut sconn, chunk);
    }
    let set_bytes = used_memory(&mut sconn) - before;
    let mib = |b: u64| b as f64 / (1 << 20) as f64;
    println!(
        "Redis memory for {mem_n} items: seen-redis filter {:.1} MiB (nominal {:.1} MiB, {:+.1}%), SADD set {:.1} MiB ({:.1}x the filter)",
        mib(bloom_bytes),
        mib(nominal),
        100.0 * (bloom_bytes as f64 / nominal as f64 - 1.0),
        mib(set_bytes),
        set_bytes as f64 / bloom_bytes as f64
    );
}
