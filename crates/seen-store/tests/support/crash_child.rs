//! Child process of the crash test: adds items through a store in a loop
//! and prints the number of every item once its add was acknowledged, until
//! the parent kills it. Each item goes to a scalable chain in a batch (of 1
//! to 7 items), and on its own to a fixed-size Bloom filter (the path of
//! most of a server's adds), where an earlier item of the thread is added
//! again too (present: it logs nothing), and to a chain far
//! from its capacity (staged, as the fixed-size filter's adds).
//!
//! Usage: seen-store-crash-child DIR always|everysec|no ROUND THREADS

use std::io::Write;
use std::sync::Arc;

use seen_core::Layout;
use seen_store::{FilterSpec, Store, StoreOptions};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() != 5 {
        eprintln!("usage: {} DIR always|everysec|no ROUND THREADS", args[0]);
        std::process::exit(2);
    }
    let opts = StoreOptions {
        fsync: args[2].parse().unwrap_or_else(|e| {
            eprintln!("{e}");
            std::process::exit(2)
        }),
        // Small segments, so that rolling happens during the test too.
        segment_size: 256 << 10,
        ..Default::default()
    };
    let round: u64 = args[3].parse().expect("round");
    let threads: u64 = args[4].parse().expect("threads");
    let store = Arc::new(Store::open(&args[1], opts).expect("open store"));
    let spec = FilterSpec::Scalable {
        capacity: 1000,
        error_rate: 0.001,
        layout: Layout::Blocked,
        expansion: 2,
        nonscaling: false,
    };
    let bloom = FilterSpec::Bloom {
        capacity: 2_000_000,
        error_rate: 0.001,
        layout: Layout::Blocked,
    };
    // A chain far from its capacity: its adds reserve room and are staged
    // in rings under `everysec`, as the fixed-size filter's are.
    let big_chain = FilterSpec::Scalable {
        capacity: 3_000_000,
        error_rate: 0.01,
        layout: Layout::Blocked,
        expansion: 2,
        nonscaling: false,
    };
    let handles: Vec<_> = (0..threads)
        .map(|t| {
            let store = store.clone();
            std::thread::spawn(move || {
                let stdout = std::io::stdout();
                let mut i = 0u64;
                loop {
                    let batch = 1 + (i % 7) as usize;
                    let items: Vec<String> = (0..batch)
                        .map(|j| format!("r{round}-t{t}-{}", i + j as u64))
                        .collect();
                    let refs: Vec<&[u8]> = items.iter().map(|s| s.as_bytes()).collect();
                    store.add(b"crash", &refs, Some(&spec)).expect("add");
                    for item in &refs {
                        store
                            .add(b"crash-bloom", &[item], Some(&bloom))
                            .expect("add");
                        store
                            .add(b"crash-big-chain", &[item], Some(&big_chain))
                            .expect("add");
                    }
                    let again = format!("r{round}-t{t}-{}", i / 2);
                    if i > 0 {
                        let out = store.add(b"crash-bloom", &[again.as_bytes()], Some(&bloom));
                        assert_eq!(out.expect("add").new, [false], "{again} was added");
                    }
                    {
                        let mut out = stdout.lock();
                        for it in &items {
                            writeln!(out, "{it}").expect("stdout");
                        }
                        out.flush().expect("flush");
                    }
                    // A checkpoint each time the first thread's count
                    // passes a multiple of 2000, with stdout unlocked: the
                    // other threads go on adding (and staging) meanwhile,
                    // as a server's connections do. (With every thread
                    // checkpointing, holding the lock through it, all of
                    // them stalled there, and most kills found the rings
                    // just copied out.)
                    let before = i;
                    i += batch as u64;
                    if t == 0 && before / 2000 != i / 2000 {
                        let _ = store.checkpoint();
                    }
                }
            })
        })
        .collect();
    for h in handles {
        h.join().expect("thread");
    }
}
