//! Child process of the crash test: adds items through a store in a loop
//! and prints the number of every item once its add was acknowledged, until
//! the parent kills it. Each item goes to a scalable chain in a batch (of 1
//! to 7 items), and on its own to a fixed-size Bloom filter (the path of
//! most of a server's adds), where an earlier item of the thread is added
//! again too (present: it logs nothing), and to a chain far from its
//! capacity.
//!
//! Usage: seen-store-crash-child DIR always|everysec|no ROUND THREADS
//!
//! With `once ITEM` for `ROUND THREADS`, it adds ITEM alone and then dies
//! at once (an abort: no destructor, no flush), as a crash loop would.

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
    // A failed check or add in any thread ends the process at once (the
    // parent then sees no SIGKILL, and fails): a panic would end only its
    // thread, and the kill would hide it. No backtrace: symbolising one
    // took long enough for the parent's kill to come first.
    std::panic::set_hook(Box::new(|info| {
        eprintln!("seen-store-crash-child: {info}");
        std::process::abort();
    }));
    if args[3] == "once" {
        let store = Store::open(&args[1], opts).expect("open store");
        let bloom = FilterSpec::Bloom {
            capacity: 1000,
            error_rate: 0.01,
            layout: Layout::Blocked,
        };
        store
            .add(b"once", &[args[4].as_bytes()], Some(&bloom))
            .expect("add");
        std::process::abort();
    }
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
    // A chain far from its capacity.
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
                let mut last_checkpoint = std::time::Instant::now();
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
                    // A checkpoint by the first thread every 50 ms, with
                    // stdout unlocked: the other threads go on adding
                    // meanwhile, as a server's connections do, and kills
                    // come in checkpoints under every policy.
                    i += batch as u64;
                    if t == 0 && last_checkpoint.elapsed().as_millis() >= 50 {
                        let _ = store.checkpoint();
                        last_checkpoint = std::time::Instant::now();
                    }
                }
            })
        })
        .collect();
    for h in handles {
        h.join().expect("thread");
    }
}
