//! Store benchmarks: add throughput under each fsync policy (1 writer and 50
//! writers) against the in-memory filter, reopen time with a 1 GiB filter,
//! log replay rate and the checkpoint pause. Prints markdown tables.
//!
//! ```text
//! cargo bench -p seen-store --bench store
//! SEEN_BENCH_DIR=/path/on/the/disk/to/test cargo bench -p seen-store --bench store
//! ```
//!
//! For a profiler, `SEEN_BENCH_PROFILE=<target>:<writers>x<items>` (target
//! `memory`, `no`, `everysec` or `always`; e.g. `everysec:50x1`) warms that
//! one target, runs that one cell for 10 seconds and prints its adds/s;
//! `SEEN_BENCH_SKIP_ADDS=1` runs only the checkpoint, reopen and replay
//! part,
//! `SEEN_BENCH_PAGES=1` only the cost of a log page.
//! With `SEEN_BENCH_VS_MEMORY=<rounds>` as well, it runs that cell and the
//! in-memory filter in turns, `rounds` times a quarter of a second each,
//! and prints the quartiles of the ratio: short turns pair each run with
//! one of the in-memory filter on the same moment of this shared VM (each
//! side going first in every other round); one build's medians over three
//! such series of 20 turns spread over about 4 points on 2026-11-24, so
//! it tells builds apart that differ by more than that.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use seen_core::{BloomFilter, ItemHash, Layout};
use seen_store::{FilterSpec, FsyncPolicy, Store, StoreOptions};

const RUN: Duration = Duration::from_secs(2);
/// Timed runs per cell; the table shows the median.
const ROUNDS: usize = 4;

/// The order of the targets (0 in-memory, 1 `no`, 2 `everysec`, 3
/// `always`) in each round of a cell: `no` and `everysec` each follow the
/// in-memory filter twice, and each other and `always` once (see
/// [`SETTLE`]).
const ORDERS: [[usize; 4]; ROUNDS] = [[0, 1, 2, 3], [0, 2, 1, 3], [3, 1, 0, 2], [3, 2, 0, 1]];

/// An untimed run of the same target and cell right before each timed
/// one. A run of a store that logs into the page cache ends with its log
/// pages dropped, and the memory they free is what the next run's fresh
/// log pages are made of: memory freed a moment ago, where pages this VM
/// has not used of late cost a fault in the host each. So without it a
/// target's figure depended on which target ran before it: with the
/// targets always in the order of the table, `everysec` followed `no`,
/// and with 2 MiB folios in its log, `everysec` 50 x 100 did 92% of the
/// in-memory filter when `no`'s log had them too and 83% when it had not
/// (BENCHMARKS.md, session 17).
/// After a run of its own, each timed run starts from memory its own log
/// freed, as in a store that has been running for a while.
const SETTLE: Duration = Duration::from_millis(500);

fn median(v: &[f64]) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 0 {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    } else {
        v[n / 2]
    }
}

fn spec(capacity: u64) -> FilterSpec {
    FilterSpec::Bloom {
        capacity,
        error_rate: 0.01,
        layout: Layout::Blocked,
    }
}

fn key(t: u64, i: u64, buf: &mut Vec<u8>) {
    use std::io::Write;
    buf.clear();
    write!(
        buf,
        "https://www.example.com/t{t}/articles/{i:012}/index.html"
    )
    .unwrap();
}

type AddFn = Arc<dyn Fn(&[&[u8]]) + Send + Sync>;

/// Adds/s of `threads` writers calling `add(batch items)` for `RUN`.
fn throughput(threads: u64, batch: usize, add: AddFn) -> f64 {
    throughput_for(threads, batch, add, RUN)
}

/// Timed runs so far: each run adds keys of its own, so that every add of
/// every run is of a new item (which the store must log). A run that
/// re-added an earlier run's keys would time mostly lookups.
static RUNS: AtomicU64 = AtomicU64::new(0);

fn throughput_for(threads: u64, batch: usize, add: AddFn, run: Duration) -> f64 {
    let first_key = (RUNS.fetch_add(1, Ordering::Relaxed) + 1) * 1000;
    let done = Arc::new(AtomicU64::new(0));
    let start = Instant::now();
    let handles: Vec<_> = (0..threads)
        .map(|t| {
            let (add, done) = (add.clone(), done.clone());
            std::thread::spawn(move || {
                let mut i = 0u64;
                let mut bufs: Vec<Vec<u8>> = vec![Vec::new(); batch];
                while start.elapsed() < run {
                    for _ in 0..16 {
                        for b in bufs.iter_mut() {
                            key(first_key + t, i, b);
                            i += 1;
                        }
                        let refs: Vec<&[u8]> = bufs.iter().map(|b| b.as_slice()).collect();
                        add(&refs);
                    }
                }
                done.fetch_add(i, Ordering::Relaxed);
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    let rate = done.load(Ordering::Relaxed) as f64 / start.elapsed().as_secs_f64();
    // Untimed: the run's dirty log pages go to disk now, not during the
    // next run, of another target (`no` leaves hundreds of MiB, which the
    // kernel would write back while `always` waits for its syncs).
    rustix::fs::sync();
    drop_log_pages();
    rate
}

/// The stores' log directories (see [`drop_log_pages`]).
static LOG_DIRS: std::sync::Mutex<Vec<std::path::PathBuf>> = std::sync::Mutex::new(Vec::new());

/// Untimed, after each run: every store's log pages, written back by the
/// sync before, leave the page cache, so that no run starts with
/// gigabytes of another's log cached (the memory they free still makes
/// the next run's fresh pages: see [`SETTLE`]). Without it the `no`
/// store kept every page of log it wrote (its policy drops none), up to
/// gigabytes over the bench, and the next runs' fresh pages of log came
/// from memory not touched for long, which on this VM costs a fault in the
/// host each: `everysec` 50 x 100 ran at 11.4 million adds/s after the
/// others in the table and at 13.4 million in runs of its own (BENCHMARKS.md,
/// session 14).
fn drop_log_pages() {
    for dir in LOG_DIRS.lock().unwrap().iter() {
        for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            if let Ok(f) = std::fs::File::open(e.path()) {
                let _ = rustix::fs::fadvise(&f, 0, None, rustix::fs::Advice::DontNeed);
            }
        }
    }
}

/// Untimed adds of other items, in batches, until nearly every page of the
/// 1 GiB bit array has been written once: the first write to a page costs
/// a page fault that zeroes it (on this VM, more than the adds themselves),
/// and which run paid for how many of them made the figures swing by a
/// factor of two. A server that has run for a while has paid for them all.
/// The pause a writer of filter `big` sees during a checkpoint (the
/// longest single add while one runs), and the checkpoint's time.
fn checkpoint_pause(store: &Arc<Store>) -> (Duration, Duration) {
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let writer = {
        let (store, stop) = (store.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut worst = Duration::ZERO;
            let mut b = Vec::new();
            let mut i = 0;
            while !stop.load(Ordering::Relaxed) {
                key(2, i, &mut b);
                let t = Instant::now();
                store.add(b"big", &[&b], None).unwrap();
                worst = worst.max(t.elapsed());
                i += 1;
            }
            worst
        })
    };
    std::thread::sleep(Duration::from_millis(200));
    let t = Instant::now();
    store.checkpoint().unwrap();
    let checkpoint = t.elapsed();
    stop.store(true, Ordering::Relaxed);
    (writer.join().unwrap(), checkpoint)
}

/// Prints the checkpoint rows for a filter of `spec` (`kind` names it) in
/// a store of its own: 1 million adds, then [`checkpoint_pause`].
fn other_kind_pause(opts: &StoreOptions, spec: &FilterSpec, kind: &str) {
    let dir = base_dir();
    let store = Arc::new(Store::open(dir.path(), opts.clone()).unwrap());
    store.create(b"big", spec).unwrap();
    let mut b = Vec::new();
    for i in 0..1_000_000u64 {
        key(0, i, &mut b);
        store.add(b"big", &[&b], None).unwrap();
    }
    let (pause, checkpoint) = checkpoint_pause(&store);
    let gib = store.memory_bytes() as f64 / (1u64 << 30) as f64;
    println!(
        "| longest add of a concurrent writer during a checkpoint, {gib:.2} GiB {kind} | {:.0} ms |",
        pause.as_secs_f64() * 1e3
    );
    println!(
        "| whole checkpoint, {gib:.2} GiB {kind} | {:.0} ms |",
        checkpoint.as_secs_f64() * 1e3
    );
}

/// The longest an add acknowledged by `everysec` since the last look
/// waited to be durable: from the start of one background sync to the end
/// of the next (the sync and the stores' syncs between the runs included).
fn sync_window(everysec: &Store) -> String {
    match everysec.take_sync_window() {
        Some(w) => format!("{:.2} s", w.as_secs_f64()),
        None => "no sync".into(),
    }
}

fn warm_up(add: &AddFn) {
    let mut bufs: Vec<Vec<u8>> = vec![Vec::new(); 1000];
    for round in 0..4_000u64 {
        for (j, b) in bufs.iter_mut().enumerate() {
            key(999, round * 1000 + j as u64, b);
        }
        let refs: Vec<&[u8]> = bufs.iter().map(|b| b.as_slice()).collect();
        add(&refs);
    }
}

fn base_dir() -> tempfile::TempDir {
    match std::env::var("SEEN_BENCH_DIR") {
        Ok(d) => tempfile::tempdir_in(d).unwrap(),
        Err(_) => tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap(),
    }
}

/// The in-memory side: the filter work of the store's add without the
/// log, through the same calls (hash, prefetch a chunk of 16 ahead, one
/// checked add per chunk, which updates the shared item count once per
/// chunk; one item without arrays), so that the ratio is the cost of
/// durability alone. `BloomFilter::add_many` counts every new item on the
/// shared counter and fills its batch arrays even for one item: against
/// it the store looked better than its log work allows.
fn memory_add(f: &BloomFilter, items: &[&[u8]]) -> Vec<bool> {
    const CHUNK: usize = 16;
    let mut new = Vec::with_capacity(items.len());
    let none = |_: &[ItemHash]| Ok::<(), ()>(());
    if let [item] = items {
        let h = f.hash(item);
        f.prefetch(h);
        f.add_hashes_logged(&[h], none, &mut new).unwrap();
        return new;
    }
    let hashes: Vec<ItemHash> = items.iter().map(|i| f.hash(i)).collect();
    for &h in hashes.iter().take(CHUNK) {
        f.prefetch(h);
    }
    for (c, chunk) in hashes.chunks(CHUNK).enumerate() {
        for &h in hashes.iter().skip((c + 1) * CHUNK).take(CHUNK) {
            f.prefetch(h);
        }
        f.add_hashes_logged(chunk, none, &mut new).unwrap();
    }
    new
}

/// What a page of log costs the writer who first writes into it, fresh
/// (a preallocated file's page: the kernel allocates and zeroes it) and
/// cached (the same file's pages again, already in the page cache, as a
/// recycled segment would be): 32-byte records written through a shared
/// map of a 256 MiB file, as the log writes them.
fn log_page_cost() {
    const SIZE: usize = 256 << 20;
    let dir = base_dir();
    let path = dir.path().join("pages");
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(&path)
        .unwrap();
    rustix::fs::fallocate(&file, rustix::fs::FallocateFlags::empty(), 0, SIZE as u64).unwrap();
    file.sync_all().unwrap();
    let pass = || {
        let map = memmap2::MmapRaw::map_raw(&file).unwrap();
        let record = [7u8; 32];
        let start = Instant::now();
        for off in (0..SIZE).step_by(32) {
            // SAFETY: inside the map, which no one else uses.
            unsafe {
                std::ptr::copy_nonoverlapping(record.as_ptr(), map.as_mut_ptr().add(off), 32)
            };
        }
        start.elapsed().as_secs_f64() * 1e6 / (SIZE / 4096) as f64
    };
    let fresh = pass();
    let cached = pass();
    println!("\n### What a page of log costs its first writer\n");
    println!("| 4 KiB page (128 records of 32 bytes) | time per page | per record |");
    println!("|---|---:|---:|");
    for (what, us) in [
        ("fresh (preallocated file)", fresh),
        ("already in the page cache", cached),
    ] {
        println!("| {what} | {us:.2} us | {:.0} ns |", us * 1000.0 / 128.0);
    }
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return; // `cargo test --benches` asks benches to list their tests
    }
    if std::env::var_os("SEEN_BENCH_PAGES").is_some() {
        return log_page_cost();
    }
    // One in-memory filter and one store per policy, each warmed once and
    // kept for every run, so that the runs can take turns: a slow moment of
    // this shared VM then lands on every column alike.
    let mem = Arc::new(BloomFilter::new(1 << 30, 0.01).unwrap());
    let m = mem.clone();
    // The filter's own batch call (it prefetches, as the store does).
    let mut targets: Vec<AddFn> = vec![Arc::new(move |items: &[&[u8]]| {
        std::hint::black_box(memory_add(&m, items));
    })];
    let mut dirs = Vec::new();
    let mut stores = Vec::new();
    let profile = std::env::var("SEEN_BENCH_PROFILE").ok();
    for policy in [FsyncPolicy::No, FsyncPolicy::EverySec, FsyncPolicy::Always] {
        let dir = base_dir();
        let store = Arc::new(
            Store::open(
                dir.path(),
                StoreOptions {
                    fsync: policy,
                    ..Default::default()
                },
            )
            .unwrap(),
        );
        store.create(b"bench", &spec(1 << 30)).unwrap();
        LOG_DIRS.lock().unwrap().push(store.wal_dir().to_path_buf());
        stores.push(store.clone());
        targets.push(Arc::new(move |items: &[&[u8]]| {
            store.add(b"bench", items, None).unwrap();
        }));
        dirs.push(dir);
    }
    if let Some(p) = profile {
        let parse = || -> Option<(usize, u64, usize)> {
            let (target, cell) = p.split_once(':')?;
            let i = ["memory", "no", "everysec", "always"]
                .iter()
                .position(|t| *t == target)?;
            let (w, b) = cell.split_once('x')?;
            Some((i, w.parse().ok()?, b.parse().ok()?))
        };
        let Some((i, threads, batch)) = parse() else {
            panic!(
                "SEEN_BENCH_PROFILE={p}: expected <memory|no|everysec|always>:<writers>x<items>"
            );
        };
        warm_up(&targets[i]);
        if let Ok(rounds) = std::env::var("SEEN_BENCH_VS_MEMORY") {
            let rounds: usize = rounds
                .parse()
                .ok()
                .filter(|&r| r > 0)
                .expect("SEEN_BENCH_VS_MEMORY=<rounds>, at least 1");
            warm_up(&targets[0]);
            let mut ratios = Vec::new();
            let short = Duration::from_millis(250);
            for round in 0..rounds {
                // Each side goes first in every other round.
                let turn = |t: usize| throughput_for(threads, batch, targets[t].clone(), short);
                let (m, s) = if round % 2 == 0 {
                    let m = turn(0);
                    (m, turn(i))
                } else {
                    let s = turn(i);
                    (turn(0), s)
                };
                ratios.push(s / m);
            }
            ratios.sort_by(f64::total_cmp);
            let q = |f: f64| 100.0 * ratios[((ratios.len() - 1) as f64 * f) as usize];
            println!(
                "{p}: quartiles {:.1}% {:.1}% {:.1}%",
                q(0.25),
                q(0.5),
                q(0.75)
            );
            return;
        }
        eprintln!("warmed up; running {p} (pid {})", std::process::id());
        let everysec = &stores[1];
        everysec.take_sync_window();
        let rate = throughput_for(threads, batch, targets[i].clone(), Duration::from_secs(10));
        println!("{p}: {rate:.0} adds/s");
        if i == 2 {
            println!("{p}: {}", sync_window(everysec));
        }
        return;
    }
    let skip_adds = std::env::var_os("SEEN_BENCH_SKIP_ADDS").is_some();
    for add in targets.iter().filter(|_| !skip_adds) {
        warm_up(add);
    }
    println!(
        "### Add throughput (adds per second; median of {ROUNDS} {}-second runs, taken in turns)\n",
        RUN.as_secs()
    );
    println!("| writers | items per call | in-memory filter | no | everysec | always | everysec / in-memory (range) | everysec: longest wait for a sync |");
    println!("|---:|---:|---:|---:|---:|---:|---:|---:|");
    let cells = [(1u64, 1usize), (1, 100), (50, 1), (50, 100)];
    for (threads, batch) in cells.into_iter().filter(|_| !skip_adds) {
        let mut runs: Vec<Vec<f64>> = vec![Vec::new(); targets.len()];
        stores[1].take_sync_window();
        for order in ORDERS {
            for i in order {
                throughput_for(threads, batch, targets[i].clone(), SETTLE);
                runs[i].push(throughput(threads, batch, targets[i].clone()));
            }
        }
        let ratios: Vec<f64> = runs[2].iter().zip(&runs[0]).map(|(s, m)| s / m).collect();
        let (lo, hi) = ratios
            .iter()
            .fold((f64::MAX, f64::MIN), |(lo, hi), &r| (lo.min(r), hi.max(r)));
        println!(
            "| {threads} | {batch} | {:.0} | {:.0} | {:.0} | {:.0} | {:.0}% ({:.0}%-{:.0}%) | {} |",
            median(&runs[0]),
            median(&runs[1]),
            median(&runs[2]),
            median(&runs[3]),
            100.0 * median(&ratios),
            100.0 * lo,
            100.0 * hi,
            sync_window(&stores[1])
        );
    }
    drop(targets);
    drop(stores);
    drop(dirs);
    if !skip_adds {
        log_page_cost();
    }

    // Reopen with a 1 GiB filter, and log replay.
    let dir = base_dir();
    let capacity = {
        // The capacity whose blocked filter at 1% is about 1 GiB.
        let n = 1u64 << 24;
        let (blocks, _) = seen_core::sizing::blocked_size(n, 0.01).unwrap();
        ((1u64 << 30) as f64 / (blocks * 64) as f64 * n as f64) as u64
    };
    let opts = StoreOptions {
        fsync: FsyncPolicy::No,
        ..Default::default()
    };
    let records = 5_000_000u64;
    {
        let store = Store::open(dir.path(), opts.clone()).unwrap();
        store.create(b"big", &spec(capacity)).unwrap();
        let mut b = Vec::new();
        for i in 0..1_000_000u64 {
            key(0, i, &mut b);
            store.add(b"big", &[&b], None).unwrap();
        }
        let bytes = store
            .with_filter(b"big", |f| match f {
                seen_core::AnyFilter::Bloom(f) => f.memory_bytes(),
                _ => 0,
            })
            .unwrap()
            .unwrap();
        let store = Arc::new(store);
        let (pause, checkpoint) = checkpoint_pause(&store);
        println!(
            "\n### Checkpoint and reopen with a {:.2} GiB filter\n",
            bytes as f64 / (1u64 << 30) as f64
        );
        println!("| what | time |\n|---|---:|");
        println!(
            "| longest add of a concurrent writer during a checkpoint | {:.0} ms |",
            pause.as_secs_f64() * 1e3
        );
        println!(
            "| whole checkpoint (encode, write, fsync, rename) | {:.0} ms |",
            checkpoint.as_secs_f64() * 1e3
        );
        // The same for a scalable chain (RedisBloom's filter kind) whose
        // first sub-filter is sized for the same capacity.
        let chain = FilterSpec::Scalable {
            capacity,
            error_rate: 0.01,
            layout: Layout::Blocked,
            expansion: 2,
            nonscaling: false,
        };
        other_kind_pause(&opts, &chain, "chain");
        // And for a counting filter of about 1 GiB (copied in pieces, each
        // under its lock).
        let n = 1u64 << 24;
        let (blocks, _) = seen_core::sizing::counting_size(n, 0.01).unwrap();
        let counting = FilterSpec::Counting {
            capacity: ((1u64 << 30) as f64 / (blocks * 64) as f64 * n as f64) as u64,
            error_rate: 0.01,
        };
        other_kind_pause(&opts, &counting, "counting filter");
        let store = Arc::try_unwrap(store).unwrap();
        store.close().unwrap();
    }
    let t = Instant::now();
    let store = Store::open(dir.path(), opts.clone()).unwrap();
    let snapshot_only = t.elapsed();
    println!(
        "| reopen, snapshot only (page cache warm) | {:.0} ms |",
        snapshot_only.as_secs_f64() * 1e3
    );
    let mut b = Vec::new();
    for i in 0..records {
        key(1, i, &mut b);
        store.add(b"big", &[&b], None).unwrap();
    }
    drop(store); // no checkpoint: the records stay in the log
    let t = Instant::now();
    let store = Store::open(dir.path(), opts).unwrap();
    let with_log = t.elapsed();
    let r = store.recovery().clone();
    // Staged adds reach the log in records of up to 256 (docs/FORMAT.md,
    // section 6.5); a few may still be in a ring (recovered after the log).
    assert!(r.adds + r.staged >= records, "{r:?}");
    println!(
        "| reopen, snapshot + {records} adds in {} log records | {:.0} ms |",
        r.records,
        with_log.as_secs_f64() * 1e3
    );
    println!(
        "| of which: snapshot read | {:.0} ms |",
        r.snapshot_time.as_secs_f64() * 1e3
    );
    println!(
        "| of which: log read and replayed ({:.0} MiB) | {:.0} ms |",
        r.log_bytes as f64 / (1 << 20) as f64,
        r.replay_time.as_secs_f64() * 1e3
    );
    println!(
        "\nlog replay: {:.1} million adds/s, {:.2} million records/s (timed inside `Store::open`)",
        r.add_replay_rate() / 1e6,
        r.replay_rate() / 1e6
    );
    key(1, records - 1, &mut b);
    assert_eq!(store.contains(b"big", &[&b]).unwrap(), Some(vec![true]));
    drop(store);
    one_add_per_record_replay();
}

/// Replay of a log of one add per record, as `always` writes it (staged
/// logs hold up to 256 adds a record, so the reopen above says little of
/// records/s): 50 writers add single items under `always` for 10 s, then
/// the store is reopened with no checkpoint between.
fn one_add_per_record_replay() {
    let dir = base_dir();
    let opts = StoreOptions {
        fsync: FsyncPolicy::Always,
        ..Default::default()
    };
    let store = Arc::new(Store::open(dir.path(), opts.clone()).unwrap());
    store.create(b"one", &spec(1 << 24)).unwrap();
    LOG_DIRS.lock().unwrap().push(store.wal_dir().to_path_buf());
    let s = store.clone();
    let add: AddFn = Arc::new(move |items: &[&[u8]]| {
        s.add(b"one", items, None).unwrap();
    });
    let rate = throughput_for(50, 1, add, Duration::from_secs(10));
    drop(store);
    let store = Store::open(dir.path(), opts).unwrap();
    let r = store.recovery();
    assert!(r.records as f64 >= rate * 9.0, "{r:?}");
    println!(
        "log replay, one add per record (`always`, 50 writers for 10 s at {rate:.0} adds/s): {} records in {:.0} ms, {:.1} million records/s",
        r.records,
        r.replay_time.as_secs_f64() * 1e3,
        r.replay_rate() / 1e6
    );
}
