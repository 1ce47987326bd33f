//! The store's benchmark: adds per second under each fsync policy (1 and
//! 50 writers, 1 and 100 items per call) into a 1 GiB filter, the longest
//! add of a writer during a checkpoint of it, and the time to reopen it.
//!
//! ```text
//! cargo bench -p seen-store --bench store
//! scripts/bench_store.sh <commit>    # this build and <commit>'s, in turns
//! ```
//!
//! It uses only the store's oldest public calls, so that the same file
//! builds against an earlier version of the crate (see
//! `scripts/bench_store.sh`). Each result is printed as a line
//! `cell <name> <value> <unit>`, then as a table. `SEEN_BENCH_DIR` sets
//! where the data directories go (default: `target/bench-store`),
//! `SEEN_BENCH_SECS` how long each timed run lasts (default 2).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use seen_core::Layout;
use seen_store::{FilterSpec, FsyncPolicy, Store, StoreOptions};

/// A blocked filter at 1% of about 1 GiB.
const CAPACITY: u64 = 900_000_000;
/// Timed runs per cell; the median is reported.
const ROUNDS: usize = 3;

fn run_time() -> Duration {
    let secs = std::env::var("SEEN_BENCH_SECS")
        .ok()
        .and_then(|s| s.parse().ok());
    Duration::from_secs_f64(secs.unwrap_or(2.0))
}

fn spec() -> FilterSpec {
    FilterSpec::Bloom {
        capacity: CAPACITY,
        error_rate: 0.01,
        layout: Layout::Blocked,
    }
}

/// Writes a URL-like key into `buf`.
fn key_into(buf: &mut Vec<u8>, run: u64, t: u64, i: u64) {
    use std::io::Write;
    buf.clear();
    write!(
        buf,
        "https://www.example.com/r{run}/t{t}/articles/{i:012}/index.html"
    )
    .unwrap();
}

fn key(run: u64, t: u64, i: u64) -> Vec<u8> {
    let mut buf = Vec::new();
    key_into(&mut buf, run, t, i);
    buf
}

/// Keys no run used before: every timed add is of a new item.
static RUNS: AtomicU64 = AtomicU64::new(0);

/// Adds per second of `writers` threads adding `per_call` new items a call
/// for `time`.
fn adds_per_second(store: &Arc<Store>, writers: u64, per_call: usize, time: Duration) -> f64 {
    let run = RUNS.fetch_add(1, Ordering::Relaxed);
    let done = Arc::new(AtomicU64::new(0));
    let start = Instant::now();
    let threads: Vec<_> = (0..writers)
        .map(|t| {
            let (store, done) = (store.clone(), done.clone());
            std::thread::spawn(move || {
                let mut i = 0;
                while start.elapsed() < time {
                    let items: Vec<Vec<u8>> =
                        (0..per_call as u64).map(|j| key(run, t, i + j)).collect();
                    let refs: Vec<&[u8]> = items.iter().map(|v| v.as_slice()).collect();
                    store.add(b"bench", &refs, None).unwrap();
                    i += per_call as u64;
                }
                done.fetch_add(i, Ordering::Relaxed);
            })
        })
        .collect();
    threads.into_iter().for_each(|t| t.join().unwrap());
    done.load(Ordering::Relaxed) as f64 / start.elapsed().as_secs_f64()
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn opts(fsync: FsyncPolicy) -> StoreOptions {
    StoreOptions {
        fsync,
        ..Default::default()
    }
}

/// Bytes of the files under `dir`.
fn disk_bytes(dir: &std::path::Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .filter_map(|e| e.ok())
        .map(|e| match e.metadata() {
            Ok(m) if m.is_dir() => disk_bytes(&e.path()),
            Ok(m) => std::os::unix::fs::MetadataExt::blocks(&m) * 512,
            Err(_) => 0,
        })
        .sum()
}

fn cell(
    results: &Mutex<Vec<(String, f64, &'static str)>>,
    name: String,
    value: f64,
    unit: &'static str,
) {
    println!("cell {name} {value:.0} {unit}");
    results.lock().unwrap().push((name, value, unit));
}

fn main() {
    let base = std::env::var("SEEN_BENCH_DIR").unwrap_or_else(|_| "target/bench-store".into());
    std::fs::create_dir_all(&base).unwrap();
    let results = Mutex::new(Vec::new());
    let time = run_time();
    for (policy, name) in [
        (FsyncPolicy::No, "no"),
        (FsyncPolicy::EverySec, "everysec"),
        (FsyncPolicy::Always, "always"),
    ] {
        let dir = tempfile::tempdir_in(&base).unwrap();
        let store = Arc::new(Store::open(dir.path(), opts(policy)).unwrap());
        store.create(b"bench", &spec()).unwrap();
        // Every page of the filter touched once, untimed.
        adds_per_second(&store, 2, 100, Duration::from_secs(2));
        for (writers, per_call) in [(1, 1), (1, 100), (50, 1), (50, 100)] {
            let rates: Vec<f64> = (0..ROUNDS)
                .map(|_| adds_per_second(&store, writers, per_call, time))
                .collect();
            let label = format!("{name}/{writers}x{per_call}");
            cell(&results, label, median(rates), "adds/s");
        }
        drop(store);
    }
    checkpoint_and_reopen(&base, &results);
    println!();
    println!("| cell | value | unit |");
    println!("|---|---:|---|");
    for (name, value, unit) in results.lock().unwrap().iter() {
        println!("| {name} | {value:.0} | {unit} |");
    }
}

/// The longest add of a writer while a 1 GiB filter is checkpointed, the
/// checkpoint's time, the directory's size, and the time to reopen it
/// from the snapshot and from the snapshot plus 5 million logged adds.
fn checkpoint_and_reopen(base: &str, results: &Mutex<Vec<(String, f64, &'static str)>>) {
    let dir = tempfile::tempdir_in(base).unwrap();
    let store = Arc::new(Store::open(dir.path(), opts(FsyncPolicy::EverySec)).unwrap());
    store.create(b"bench", &spec()).unwrap();
    adds_per_second(&store, 2, 100, Duration::from_secs(2));
    store.checkpoint().unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let longest = Arc::new(AtomicU64::new(0));
    let writer = {
        let (store, stop, longest) = (store.clone(), stop.clone(), longest.clone());
        std::thread::spawn(move || {
            let mut i = 0;
            while !stop.load(Ordering::Relaxed) {
                let item = key(u64::MAX, 0, i);
                let began = Instant::now();
                store.add(b"bench", &[&item], None).unwrap();
                longest.fetch_max(began.elapsed().as_micros() as u64, Ordering::Relaxed);
                i += 1;
            }
        })
    };
    std::thread::sleep(Duration::from_millis(200));
    longest.store(0, Ordering::Relaxed);
    let began = Instant::now();
    store.checkpoint().unwrap();
    let took = began.elapsed();
    let pause = longest.load(Ordering::Relaxed);
    stop.store(true, Ordering::Relaxed);
    writer.join().unwrap();
    cell(
        results,
        "checkpoint/longest-add".into(),
        pause as f64 / 1000.0,
        "ms",
    );
    cell(
        results,
        "checkpoint/time".into(),
        took.as_secs_f64() * 1000.0,
        "ms",
    );
    store.checkpoint().unwrap();
    drop(store);
    let reopen = |what: &str| {
        let began = Instant::now();
        let s = Store::open(dir.path(), opts(FsyncPolicy::EverySec)).unwrap();
        let r = s.recovery().clone();
        cell(
            results,
            format!("reopen/{what}"),
            began.elapsed().as_secs_f64() * 1000.0,
            "ms",
        );
        cell(
            results,
            format!("reopen/{what}/replay"),
            r.replay_time.as_secs_f64() * 1000.0,
            "ms",
        );
        s
    };
    drop(reopen("snapshot"));
    let store = Arc::new(Store::open(dir.path(), opts(FsyncPolicy::EverySec)).unwrap());
    let per_call = 100;
    for call in 0..5_000_000 / per_call {
        let items: Vec<Vec<u8>> = (0..per_call)
            .map(|j| key(u64::MAX - 1, 0, call * per_call + j))
            .collect();
        let refs: Vec<&[u8]> = items.iter().map(|v| v.as_slice()).collect();
        store.add(b"bench", &refs, None).unwrap();
    }
    drop(store);
    cell(
        results,
        "disk/snapshot+log".into(),
        disk_bytes(dir.path()) as f64 / (1 << 20) as f64,
        "MiB",
    );
    drop(reopen("snapshot+5M-adds"));
}
