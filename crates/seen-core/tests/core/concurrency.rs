//! Exactness under concurrency: when many threads add the same new item at
//! the same moment, exactly one of them is told "new".
//!
//! Each thread adds the same items in the same order (so they collide on
//! every item, the worst case) or in a rotated order. Afterwards, for every
//! item, the number of "new" answers across threads must be exactly 1,
//! except for items that were already false positives when first added
//! (0 answers); and the total must equal the filter's count.

use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Barrier};

use seen_core::{BloomFilter, Layout, ScalableBloomFilter};

const THREADS: usize = 4;
const ITEMS: usize = 100_000;

fn item(i: usize) -> [u8; 8] {
    (i as u64).to_le_bytes()
}

type AddFn = Arc<dyn Fn(&[u8]) -> bool + Send + Sync>;

fn run(add: AddFn, rotate: bool) -> Vec<u8> {
    let news: Arc<Vec<AtomicU8>> = Arc::new((0..ITEMS).map(|_| AtomicU8::new(0)).collect());
    let barrier = Arc::new(Barrier::new(THREADS));
    let handles: Vec<_> = (0..THREADS)
        .map(|t| {
            let (add, news, barrier) = (add.clone(), news.clone(), barrier.clone());
            std::thread::spawn(move || {
                barrier.wait();
                for j in 0..ITEMS {
                    let i = if rotate { (j + t * 7919) % ITEMS } else { j };
                    if add(&item(i)) {
                        news[i].fetch_add(1, Ordering::Relaxed);
                    }
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    news.iter().map(|n| n.load(Ordering::Relaxed)).collect()
}

fn check(name: &str, news: &[u8], count: u64, p: f64) {
    let doubles = news.iter().filter(|&&n| n > 1).count();
    assert_eq!(
        doubles, 0,
        "{name}: {doubles} items told new more than once"
    );
    let total: u64 = news.iter().map(|&n| n as u64).sum();
    assert_eq!(total, count, "{name}: filter count differs from answers");
    // Items no thread saw as new were false positives when first added.
    let zeros = news.iter().filter(|&&n| n == 0).count() as f64;
    assert!(
        zeros <= ITEMS as f64 * p * 3.0 + 10.0,
        "{name}: {zeros} items never new"
    );
}

#[test]
fn bloom_add_is_exact_under_contention() {
    for layout in [
        Layout::Blocked,
        Layout::Classic,
        Layout::Guava,
        Layout::Guava32,
    ] {
        for rotate in [false, true] {
            let f = Arc::new(
                BloomFilter::builder(ITEMS as u64, 0.001)
                    .layout(layout)
                    .build()
                    .unwrap(),
            );
            let g = f.clone();
            let news = run(Arc::new(move |x: &[u8]| g.add(x)), rotate);
            check(
                &format!("{layout:?} rotate={rotate}"),
                &news,
                f.len(),
                0.001,
            );
            for i in 0..ITEMS {
                assert!(f.contains(item(i)));
            }
        }
    }
}

#[test]
fn scalable_add_is_exact_under_contention() {
    for layout in [
        Layout::Blocked,
        Layout::Classic,
        Layout::Guava,
        Layout::Guava32,
    ] {
        // Small initial capacity: the chain grows while threads race.
        let f = Arc::new(
            ScalableBloomFilter::builder(1_000, 0.001)
                .layout(layout)
                .build()
                .unwrap(),
        );
        let g = f.clone();
        let news = run(Arc::new(move |x: &[u8]| g.add(x).unwrap()), true);
        check(&format!("scalable {layout:?}"), &news, f.len(), 0.001);
        assert!(f.links() > 5);
        for i in 0..ITEMS {
            assert!(f.contains(item(i)));
        }
        let links = f.link_info();
        for l in &links {
            assert!(l.items <= l.capacity, "a link was overfilled: {l:?}");
        }
    }
}

#[test]
fn nonscaling_capacity_is_never_exceeded_under_contention() {
    let f = Arc::new(
        ScalableBloomFilter::builder(5_000, 0.01)
            .layout(Layout::Blocked)
            .nonscaling(true)
            .build()
            .unwrap(),
    );
    let g = f.clone();
    let news = run(Arc::new(move |x: &[u8]| g.add(x).unwrap_or(false)), true);
    assert!(news.iter().all(|&n| n <= 1));
    assert!(f.len() <= 5_000);
    assert!(f.len() >= 4_900, "{}", f.len());
}

/// Like `run`, with each thread adding batches of 64 through `add_batch`
/// (in a rotated order, so threads collide on different items).
type BatchFn = Arc<dyn Fn(&[[u8; 8]]) -> Vec<bool> + Send + Sync>;

fn run_batches(add_batch: BatchFn) -> Vec<u8> {
    let news: Arc<Vec<AtomicU8>> = Arc::new((0..ITEMS).map(|_| AtomicU8::new(0)).collect());
    let barrier = Arc::new(Barrier::new(THREADS));
    let handles: Vec<_> = (0..THREADS)
        .map(|t| {
            let (add, news, barrier) = (add_batch.clone(), news.clone(), barrier.clone());
            std::thread::spawn(move || {
                barrier.wait();
                let order: Vec<usize> = (0..ITEMS).map(|j| (j + t * 7919) % ITEMS).collect();
                for batch in order.chunks(64) {
                    let items: Vec<[u8; 8]> = batch.iter().map(|&i| item(i)).collect();
                    for (&i, new) in batch.iter().zip(add(&items)) {
                        if new {
                            news[i].fetch_add(1, Ordering::Relaxed);
                        }
                    }
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    news.iter().map(|n| n.load(Ordering::Relaxed)).collect()
}

#[test]
fn batched_adds_are_exact_under_contention() {
    for layout in [
        Layout::Blocked,
        Layout::Classic,
        Layout::Guava,
        Layout::Guava32,
    ] {
        let f = Arc::new(
            BloomFilter::builder(ITEMS as u64, 0.001)
                .layout(layout)
                .build()
                .unwrap(),
        );
        let g = f.clone();
        let news = run_batches(Arc::new(move |items: &[[u8; 8]]| {
            let hashes: Vec<_> = items.iter().map(|i| g.hash(i)).collect();
            let mut out = Vec::new();
            g.add_hashes(&hashes, &mut out);
            out
        }));
        check(&format!("add_hashes {layout:?}"), &news, f.len(), 0.001);
        // Chains: a large one, and a small one that grows all the time.
        for initial in [3_000_000u64, 1_000] {
            let f = Arc::new(
                ScalableBloomFilter::builder(initial, 0.001)
                    .layout(layout)
                    .build()
                    .unwrap(),
            );
            let g = f.clone();
            let news = run_batches(Arc::new(move |items: &[[u8; 8]]| {
                items
                    .iter()
                    .map(|i| g.add_hash(g.hash(i)).unwrap())
                    .collect()
            }));
            let name = format!("chain {layout:?} initial={initial}");
            check(&name, &news, f.len(), 0.001);
            for i in 0..ITEMS {
                assert!(f.contains(item(i)), "{name}");
            }
            for l in f.link_info() {
                assert!(
                    l.items <= l.capacity,
                    "{name}: a link was overfilled: {l:?}"
                );
            }
            if initial == 1_000 {
                assert!(f.links() > 5, "{name}");
            } else {
                assert_eq!(f.links(), 1, "{name}");
            }
        }
    }
}
