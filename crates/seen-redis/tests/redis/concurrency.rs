//! Several workers, each with its own connection, add the same URLs at the
//! same moment: every URL is reported new exactly once in total.

use std::sync::{Arc, Barrier};
use std::thread;

use rand::seq::SliceRandom;
use rand::SeedableRng;
use rand_xoshiro::Xoshiro256PlusPlus;
use seen_redis::{FilterParams, RedisFilter, Target};

use crate::server::RedisServer;
use crate::{reference, target, urls};

/// Runs `workers` threads adding the same `n` URLs (each in its own
/// shuffled order, in batches of 200) and returns how many times each URL
/// was reported new.
pub fn race(t: &Target, name: &str, params: &FilterParams, workers: usize, n: usize) -> Vec<u32> {
    let items = Arc::new(urls(name, n));
    // The precondition for "exactly once": none of these URLs is a false
    // positive of the ones before it (same shape, same bits, in memory).
    let f = RedisFilter::open_or_create(t, name, params).unwrap();
    let mem = reference(f.metadata());
    assert!(
        mem.add_many(&items).iter().all(|&n| n),
        "the test URLs must not collide; size the filter larger"
    );
    let barrier = Arc::new(Barrier::new(workers));
    let handles: Vec<_> = (0..workers)
        .map(|w| {
            let (t, name, params) = (t.clone(), name.to_string(), params.clone());
            let (items, barrier) = (items.clone(), barrier.clone());
            thread::spawn(move || {
                let mut f = RedisFilter::open_or_create(&t, &name, &params).unwrap();
                let mut order: Vec<usize> = (0..items.len()).collect();
                order.shuffle(&mut Xoshiro256PlusPlus::seed_from_u64(w as u64));
                let mut counts = vec![0u32; items.len()];
                barrier.wait();
                for batch in order.chunks(200) {
                    let b: Vec<&str> = batch.iter().map(|&i| items[i].as_str()).collect();
                    for (&i, new) in batch.iter().zip(f.add_many(&b).unwrap()) {
                        counts[i] += new as u32;
                    }
                }
                counts
            })
        })
        .collect();
    let mut total = vec![0u32; n];
    for h in handles {
        for (t, c) in total.iter_mut().zip(h.join().unwrap()) {
            *t += c;
        }
    }
    total
}

#[test]
fn every_url_is_new_exactly_once_across_workers() {
    let server = RedisServer::start();
    let t = target(&server.url());
    let params = FilterParams::new(1_000_000, 1e-6).max_shard_bytes(256 * 1024);
    let counts = race(&t, "race", &params, 4, 20_000);
    let wrong: Vec<(usize, u32)> = counts
        .iter()
        .enumerate()
        .filter(|(_, &c)| c != 1)
        .map(|(i, &c)| (i, c))
        .take(10)
        .collect();
    assert!(
        wrong.is_empty(),
        "URLs not reported new exactly once: {wrong:?}"
    );
    assert_eq!(counts.iter().sum::<u32>(), 20_000);
}
