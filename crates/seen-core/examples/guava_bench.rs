//! seen's Guava-layout filter on the workload of `GuavaPeer.java bench`:
//! N URL-like strings put one at a time, then looked up (present, then N
//! absent ones), on a filter sized as Guava's `BloomFilter.create(funnel,
//! N, FPP)`. Two rounds, each on a new filter; the second is printed, as
//! the Java side prints its second (JIT-warmed) round.
//!
//!   cargo run --release -p seen-core --example guava_bench -- 10000000 0.01
//!
//! `scripts/bench_guava.sh` runs it beside Guava and prints the ratios.

use std::hint::black_box;
use std::time::Instant;

use seen_core::guava;

/// The URL-like items of `GuavaPeer.url`.
fn url(i: u64) -> String {
    format!("https://example.com/articles/{i}/comments?page={}", i % 97)
}

fn per_item(start: Instant, n: usize) -> f64 {
    start.elapsed().as_nanos() as f64 / n as f64
}

fn main() {
    let mut args = std::env::args().skip(1);
    let n: u64 = args.next().map_or(10_000_000, |a| a.parse().expect("N"));
    let fpp: f64 = args.next().map_or(0.01, |a| a.parse().expect("FPP"));
    let items: Vec<String> = (0..n).map(url).collect();
    let absent: Vec<String> = (n..2 * n).map(url).collect();
    for round in 0..2 {
        let f = guava::create(n, fpp).expect("a filter Guava would make");
        let t = Instant::now();
        for s in &items {
            black_box(f.add(s));
        }
        let put = per_item(t, items.len());
        let t = Instant::now();
        let present = items.iter().filter(|s| f.contains(s)).count();
        let present_ns = per_item(t, items.len());
        let t = Instant::now();
        let false_positives = absent.iter().filter(|s| f.contains(s)).count();
        let absent_ns = per_item(t, absent.len());
        let t = Instant::now();
        let batch = f.count_present(&absent);
        let batch_ns = per_item(t, absent.len());
        assert_eq!(present, items.len());
        assert_eq!(batch, false_positives);
        if round == 1 {
            println!(
                "put {put:.1} ns, present {present_ns:.1} ns, absent {absent_ns:.1} ns, \
                 absent batched {batch_ns:.1} ns; {:.2} bits per item, false positives {:.4}%",
                f.bits() as f64 / n as f64,
                false_positives as f64 * 100.0 / n as f64
            );
        }
    }
}
