//! Filter benchmarks: seen-core against fastbloom, bloomfilter and sbbf-rs
//! in the same run, on URL-like strings of about 60 bytes.
//!
//! ```text
//! cargo bench -p seen-core --bench filters            # 10M items, then 100M
//! SEEN_BENCH_ITEMS=1000000 SEEN_BENCH_LARGE=0 cargo bench -p seen-core --bench filters
//! ```
//!
//! Timings come from criterion (one sample = one pass over all items; a
//! fresh filter for every add pass). After criterion has run, the bench
//! reads criterion's estimates back and prints one table per error rate:
//! ns per add, per present lookup and per absent lookup, bits per item, the
//! measured false-positive rate, and each peer's time as a multiple of
//! seen's. Paste that table into BENCHMARKS.md.

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{Criterion, SamplingMode, Throughput};
use seen_core::{BloomFilter, Layout};

// ----------------------------------------------------------------- items --

/// `n` distinct URL-like strings (58 to 66 bytes), in one buffer.
struct Items {
    buf: Vec<u8>,
    ends: Vec<usize>,
}

impl Items {
    fn urls(n: usize, salt: u64) -> Items {
        use std::io::Write;
        let mut buf = Vec::with_capacity(n * 64);
        let mut ends = Vec::with_capacity(n);
        for i in 0..n as u64 {
            let x = splitmix(i ^ (salt << 48));
            write!(
                buf,
                "https://www.site{}.example.com/articles/{:016x}/{}.html",
                x % 9973,
                x,
                i % 1000
            )
            .unwrap();
            ends.push(buf.len());
        }
        Items { buf, ends }
    }
    fn len(&self) -> usize {
        self.ends.len()
    }
    #[inline(always)]
    fn get(&self, i: usize) -> &[u8] {
        let start = if i == 0 { 0 } else { self.ends[i - 1] };
        &self.buf[start..self.ends[i]]
    }
    fn avg_len(&self) -> f64 {
        self.buf.len() as f64 / self.len() as f64
    }
}

fn splitmix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9e3779b97f4a7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58476d1ce4e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d049bb133111eb);
    x ^ (x >> 31)
}

// ----------------------------------------------------------------- peers --

/// What the bench needs of a filter.
trait Filter {
    const NAME: &'static str;
    fn new(n: usize, p: f64) -> Self;
    fn insert(&mut self, x: &[u8]);
    fn contains(&self, x: &[u8]) -> bool;
    fn bits(&self) -> u64;
}

/// seen, blocked layout, `add` through `&self` (atomic, exact under
/// concurrency): the path the server and the store use.
struct SeenShared(BloomFilter);
impl Filter for SeenShared {
    const NAME: &'static str = "seen blocked (add, &self)";
    fn new(n: usize, p: f64) -> Self {
        SeenShared(BloomFilter::new(n as u64, p).unwrap())
    }
    #[inline(always)]
    fn insert(&mut self, x: &[u8]) {
        black_box(self.0.add(x));
    }
    #[inline(always)]
    fn contains(&self, x: &[u8]) -> bool {
        self.0.contains(x)
    }
    fn bits(&self) -> u64 {
        self.0.memory_bytes() * 8
    }
}

/// seen, blocked layout, `add_mut` (exclusive access, no atomic RMW).
struct SeenOwned(BloomFilter);
impl Filter for SeenOwned {
    const NAME: &'static str = "seen blocked (add_mut)";
    fn new(n: usize, p: f64) -> Self {
        SeenOwned(BloomFilter::new(n as u64, p).unwrap())
    }
    #[inline(always)]
    fn insert(&mut self, x: &[u8]) {
        black_box(self.0.add_mut(x));
    }
    #[inline(always)]
    fn contains(&self, x: &[u8]) -> bool {
        self.0.contains(x)
    }
    fn bits(&self) -> u64 {
        self.0.memory_bytes() * 8
    }
}

/// seen, classic (RedisBloom-compatible) layout.
struct SeenClassic(BloomFilter);
impl Filter for SeenClassic {
    const NAME: &'static str = "seen classic (RedisBloom layout)";
    fn new(n: usize, p: f64) -> Self {
        SeenClassic(
            BloomFilter::builder(n as u64, p)
                .layout(Layout::Classic)
                .build()
                .unwrap(),
        )
    }
    #[inline(always)]
    fn insert(&mut self, x: &[u8]) {
        black_box(self.0.add_mut(x));
    }
    #[inline(always)]
    fn contains(&self, x: &[u8]) -> bool {
        self.0.contains(x)
    }
    fn bits(&self) -> u64 {
        self.0.memory_bytes() * 8
    }
}

/// fastbloom 0.17 with its default hasher (SipHash-1-3).
struct FastBloom(fastbloom::BloomFilter);
impl Filter for FastBloom {
    const NAME: &'static str = "fastbloom (default SipHash)";
    fn new(n: usize, p: f64) -> Self {
        FastBloom(fastbloom::BloomFilter::with_false_pos(p).expected_items(n))
    }
    #[inline(always)]
    fn insert(&mut self, x: &[u8]) {
        black_box(self.0.insert(x));
    }
    #[inline(always)]
    fn contains(&self, x: &[u8]) -> bool {
        self.0.contains(x)
    }
    fn bits(&self) -> u64 {
        self.0.num_bits() as u64
    }
}

/// fastbloom 0.17 with foldhash, its fastest configuration (foldhash is
/// not stable across versions, so not usable for saved filters).
struct FastBloomFold(fastbloom::BloomFilter<foldhash::fast::FixedState>);
impl Filter for FastBloomFold {
    const NAME: &'static str = "fastbloom (foldhash)";
    fn new(n: usize, p: f64) -> Self {
        FastBloomFold(
            fastbloom::BloomFilter::with_false_pos(p)
                .hasher(foldhash::fast::FixedState::with_seed(42))
                .expected_items(n),
        )
    }
    #[inline(always)]
    fn insert(&mut self, x: &[u8]) {
        black_box(self.0.insert(x));
    }
    #[inline(always)]
    fn contains(&self, x: &[u8]) -> bool {
        self.0.contains(x)
    }
    fn bits(&self) -> u64 {
        self.0.num_bits() as u64
    }
}

/// fastbloom's concurrent `AtomicBloomFilter` (foldhash): the peer of
/// seen's `add(&self)`. It sets bits with one atomic OR per word, so it does
/// not promise that exactly one of several racing adders is told "new".
struct FastBloomAtomic(fastbloom::AtomicBloomFilter<foldhash::fast::FixedState>);
impl Filter for FastBloomAtomic {
    const NAME: &'static str = "fastbloom Atomic (foldhash)";
    fn new(n: usize, p: f64) -> Self {
        FastBloomAtomic(
            fastbloom::AtomicBloomFilter::with_false_pos(p)
                .hasher(foldhash::fast::FixedState::with_seed(42))
                .expected_items(n),
        )
    }
    #[inline(always)]
    fn insert(&mut self, x: &[u8]) {
        black_box(self.0.insert(x));
    }
    #[inline(always)]
    fn contains(&self, x: &[u8]) -> bool {
        self.0.contains(x)
    }
    fn bits(&self) -> u64 {
        self.0.num_bits() as u64
    }
}

/// bloomfilter 3 (SipHash, classic layout).
struct BloomCrate(bloomfilter::Bloom<[u8]>);
impl Filter for BloomCrate {
    const NAME: &'static str = "bloomfilter";
    fn new(n: usize, p: f64) -> Self {
        BloomCrate(bloomfilter::Bloom::new_for_fp_rate_with_seed(n, p, &[7; 32]).unwrap())
    }
    #[inline(always)]
    fn insert(&mut self, x: &[u8]) {
        self.0.set(x);
    }
    #[inline(always)]
    fn contains(&self, x: &[u8]) -> bool {
        self.0.check(x)
    }
    fn bits(&self) -> u64 {
        self.0.len()
    }
}

/// sbbf-rs (Parquet split-block filter, AVX2) fed xxh3-64 hashes, sized with
/// the split-block model for the requested rate.
struct Sbbf {
    buf: Vec<Line>,
    buckets: usize,
    f: sbbf_rs::FilterFn,
}
#[repr(C, align(64))]
#[derive(Clone, Copy)]
struct Line([u8; 64]);

impl Sbbf {
    /// False-positive rate of a split-block filter: 256-bit buckets of
    /// eight 32-bit words, one bit per word.
    fn fpp(buckets: f64, n: f64) -> f64 {
        let lambda = n / buckets;
        let mut total = 0.0;
        let mut w = (-lambda).exp();
        let mut j = 0.0;
        while j < lambda * 4.0 + 100.0 {
            let fill = 1.0 - (1.0f64 - 1.0 / 32.0).powf(j);
            total += w * fill.powi(8);
            j += 1.0;
            w *= lambda / j;
        }
        total
    }
}
impl Filter for Sbbf {
    const NAME: &'static str = "sbbf-rs (xxh3-64)";
    fn new(n: usize, p: f64) -> Self {
        let (mut lo, mut hi) = (1usize, n.max(64));
        while Self::fpp(hi as f64, n as f64) > p {
            hi *= 2;
        }
        while hi - lo > 1 {
            let mid = (lo + hi) / 2;
            if Self::fpp(mid as f64, n as f64) <= p {
                hi = mid;
            } else {
                lo = mid;
            }
        }
        let buckets = hi.div_ceil(2) * 2;
        Sbbf {
            buf: vec![Line([0; 64]); buckets / 2],
            buckets,
            f: sbbf_rs::FilterFn::new(),
        }
    }
    #[inline(always)]
    fn insert(&mut self, x: &[u8]) {
        let h = xxhash_rust::xxh3::xxh3_64(x);
        // SAFETY: `buf` is 64-byte aligned and holds `buckets` 32-byte buckets.
        black_box(unsafe {
            self.f
                .insert(self.buf.as_mut_ptr() as *mut u8, self.buckets, h)
        });
    }
    #[inline(always)]
    fn contains(&self, x: &[u8]) -> bool {
        let h = xxhash_rust::xxh3::xxh3_64(x);
        // SAFETY: as above.
        unsafe {
            self.f
                .contains(self.buf.as_ptr() as *const u8, self.buckets, h)
        }
    }
    fn bits(&self) -> u64 {
        self.buckets as u64 * 256
    }
}

// ----------------------------------------------------------------- bench --

struct Row {
    name: &'static str,
    bits_per_item: f64,
    fpp: f64,
}

fn pct(p: f64) -> String {
    format!("{}%", p * 100.0)
}

fn bench_peer<F: Filter>(
    c: &mut Criterion,
    p: f64,
    present: &Items,
    absent: &Items,
    rows: &mut Vec<Row>,
) {
    let n = present.len();
    let mut group = c.benchmark_group(format!("filters/{}", pct(p)));
    group
        .sampling_mode(SamplingMode::Flat)
        .sample_size(10)
        .warm_up_time(Duration::from_millis(200))
        .measurement_time(Duration::from_secs(2))
        .nresamples(2_000)
        .throughput(Throughput::Elements(n as u64));
    group.bench_function(format!("add/{}", F::NAME), |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                let mut f = F::new(n, p);
                let t = Instant::now();
                for i in 0..n {
                    f.insert(present.get(i));
                }
                total += t.elapsed();
                drop(black_box(f));
            }
            total
        })
    });
    let mut f = F::new(n, p);
    for i in 0..n {
        f.insert(present.get(i));
    }
    // Lookups: each iteration probes a window of `lookups` items, moving
    // through all of them from one iteration to the next; the filter holds
    // all `n` items either way. Reported per item.
    let lookups = lookup_window(n);
    group.throughput(Throughput::Elements(lookups as u64));
    group.bench_function(format!("present/{}", F::NAME), |b| {
        let mut start = 0;
        b.iter_custom(|iters| {
            let t = Instant::now();
            for _ in 0..iters {
                let mut hits = 0usize;
                for i in start..start + lookups {
                    hits += f.contains(present.get(i % n)) as usize;
                }
                assert_eq!(hits, lookups, "{} lost items", F::NAME);
                start = (start + lookups) % n;
            }
            t.elapsed()
        })
    });
    group.bench_function(format!("absent/{}", F::NAME), |b| {
        let mut start = 0;
        b.iter_custom(|iters| {
            let t = Instant::now();
            for _ in 0..iters {
                let mut hits = 0usize;
                for i in start..start + lookups {
                    hits += f.contains(absent.get(i % n)) as usize;
                }
                black_box(hits);
                start = (start + lookups) % n;
            }
            t.elapsed()
        })
    });
    group.finish();
    let fps = (0..absent.len())
        .filter(|&i| f.contains(absent.get(i)))
        .count();
    rows.push(Row {
        name: F::NAME,
        bits_per_item: f.bits() as f64 / n as f64,
        fpp: fps as f64 / absent.len() as f64,
    });
}

/// Items probed per lookup iteration.
fn lookup_window(n: usize) -> usize {
    n.min(2_000_000)
}

/// Mean ns per item of one criterion benchmark, read back from its output.
fn ns_per_item(dir: &std::path::Path, group: &str, bench: &str, n: usize) -> Option<f64> {
    let path = dir
        .join(group.replace('/', "_"))
        .join(bench.replace('/', "_"))
        .join("new/estimates.json");
    let text = std::fs::read_to_string(&path).ok()?;
    let v: serde_json::Value = serde_json::from_str(&text).ok()?;
    Some(v["mean"]["point_estimate"].as_f64()? / n as f64)
}

fn table(dir: &std::path::Path, p: f64, n: usize, rows: &[Row]) {
    let group = format!("filters/{}", pct(p));
    let get = |op: &str, name: &str| {
        let per = if op == "add" { n } else { lookup_window(n) };
        ns_per_item(dir, &group, &format!("{op}/{name}"), per)
    };
    let base = |op: &str| get(op, SeenShared::NAME);
    println!("\n### {} items, target false-positive rate {}\n", n, pct(p));
    println!("| filter | add ns | present ns | absent ns | bits/item | measured fpp | add x | present x | absent x |");
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|");
    for r in rows {
        let cell = |op: &str| get(op, r.name).map_or("?".into(), |v| format!("{v:.1}"));
        let ratio = |op: &str| match (get(op, r.name), base(op)) {
            (Some(v), Some(b)) => format!("{:.2}", v / b),
            _ => "?".into(),
        };
        println!(
            "| {} | {} | {} | {} | {:.2} | {:.3e} | {} | {} | {} |",
            r.name,
            cell("add"),
            cell("present"),
            cell("absent"),
            r.bits_per_item,
            r.fpp,
            ratio("add"),
            ratio("present"),
            ratio("absent"),
        );
    }
    println!(
        "\n(x columns: time relative to `{}`; above 1 means slower than seen.)",
        SeenShared::NAME
    );
}

/// 100M items at 0.01%: a filter larger than the last-level cache; single
/// lookups against the prefetching batch API.
fn large(c: &mut Criterion, n: usize) {
    let p = 1e-4;
    let f = BloomFilter::new(n as u64, p).unwrap();
    let t = Instant::now();
    let mut key = Vec::with_capacity(64);
    for i in 0..n as u64 {
        key.clear();
        key.extend_from_slice(b"https://large.example.com/item/");
        key.extend_from_slice(&splitmix(i).to_le_bytes());
        key.extend_from_slice(&i.to_le_bytes());
        f.add(&key);
    }
    eprintln!(
        "large: {n} adds in {:.1} s, filter {} MiB",
        t.elapsed().as_secs_f64(),
        f.memory_bytes() >> 20
    );
    let probes: Vec<Vec<u8>> = (0..2_000_000u64)
        .map(|j| {
            let i = splitmix(j) % n as u64;
            let mut k = b"https://large.example.com/item/".to_vec();
            k.extend_from_slice(&splitmix(i).to_le_bytes());
            k.extend_from_slice(&i.to_le_bytes());
            k
        })
        .collect();
    let mut group = c.benchmark_group("large");
    group
        .sampling_mode(SamplingMode::Flat)
        .sample_size(10)
        .nresamples(2_000)
        .measurement_time(Duration::from_secs(5))
        .throughput(Throughput::Elements(probes.len() as u64));
    group.bench_function("single", |b| {
        b.iter(|| {
            let hits = probes.iter().filter(|k| f.contains(k)).count();
            assert_eq!(hits, probes.len());
        })
    });
    group.bench_function("batched", |b| {
        b.iter(|| {
            let hits: usize = probes.chunks(1024).map(|c| f.count_present(c)).sum();
            assert_eq!(hits, probes.len());
        })
    });
    group.finish();
}

fn main() {
    let n: usize = std::env::var("SEEN_BENCH_ITEMS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10_000_000);
    let large_n: usize = std::env::var("SEEN_BENCH_LARGE")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100_000_000);
    let dir = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("criterion");
    let mut c = Criterion::default()
        .output_directory(&dir)
        .without_plots()
        .configure_from_args();

    let t = Instant::now();
    let present = Items::urls(n, 1);
    let absent = Items::urls(n, 2);
    eprintln!(
        "{} + {} items of {:.1} bytes on average, made in {:.1} s",
        n,
        n,
        present.avg_len(),
        t.elapsed().as_secs_f64()
    );
    let mut tables = Vec::new();
    for p in [0.01, 0.0001] {
        let mut rows = Vec::new();
        bench_peer::<SeenShared>(&mut c, p, &present, &absent, &mut rows);
        bench_peer::<SeenOwned>(&mut c, p, &present, &absent, &mut rows);
        bench_peer::<SeenClassic>(&mut c, p, &present, &absent, &mut rows);
        bench_peer::<FastBloom>(&mut c, p, &present, &absent, &mut rows);
        bench_peer::<FastBloomFold>(&mut c, p, &present, &absent, &mut rows);
        bench_peer::<FastBloomAtomic>(&mut c, p, &present, &absent, &mut rows);
        bench_peer::<BloomCrate>(&mut c, p, &present, &absent, &mut rows);
        bench_peer::<Sbbf>(&mut c, p, &present, &absent, &mut rows);
        tables.push((p, rows));
    }
    drop((present, absent));
    if large_n > 0 {
        large(&mut c, large_n);
    }
    c.final_summary();
    for (p, rows) in &tables {
        table(&dir, *p, n, rows);
    }
    if large_n > 0 {
        let single = ns_per_item(&dir, "large", "single", 2_000_000);
        let batched = ns_per_item(&dir, "large", "batched", 2_000_000);
        if let (Some(s), Some(b)) = (single, batched) {
            println!(
                "\n### {large_n} items at 0.01%: lookups of present items\n\n| lookup | ns/item |\n|---|---:|\n| single `contains` | {s:.1} |\n| batched `count_present` (1024 per call) | {b:.1} |\n\nbatched is {:.2}x faster",
                s / b
            );
        }
    }
}
