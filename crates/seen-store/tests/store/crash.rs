//! Crash tests: a child process adds items and reports each acknowledged
//! one; the parent kills it with SIGKILL at a random moment, reopens the
//! directory and checks that every acknowledged item is present.
//!
//! 20 rounds per policy by default; `SEEN_CRASH_ROUNDS=1000` for more.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::Duration;

use rand::{Rng, SeedableRng};
use seen_store::{Store, StoreOptions};

fn rounds() -> u64 {
    std::env::var("SEEN_CRASH_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20)
}

fn crash_rounds(policy: &str, seed: u64) {
    let dir = tempfile::tempdir().unwrap();
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let mut acknowledged: Vec<String> = Vec::new();
    for round in 0..rounds() {
        let mut child = Command::new(env!("CARGO_BIN_EXE_seen-store-crash-child"))
            .args([
                dir.path().to_str().unwrap(),
                policy,
                &round.to_string(),
                "4",
            ])
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn child");
        let stdout = child.stdout.take().unwrap();
        // Only newline-terminated lines count: a line cut by the kill is not
        // a complete acknowledgement.
        let (adding, first) = std::sync::mpsc::channel();
        let reader = std::thread::spawn(move || {
            let mut r = BufReader::new(stdout);
            let mut lines = Vec::new();
            let mut buf = Vec::new();
            while r.read_until(b'\n', &mut buf).unwrap_or(0) > 0 {
                if buf.last() == Some(&b'\n') {
                    lines.push(String::from_utf8_lossy(&buf[..buf.len() - 1]).into_owned());
                    if lines.len() == 1 {
                        let _ = adding.send(());
                    }
                }
                buf.clear();
            }
            lines
        });
        // Every other round the kill comes at a random moment after the
        // start, often in the child's open (its recovery of the last
        // round's kill); the others at a random moment after the child's
        // first acknowledgement, while it adds. (Counted from the start
        // alone, the kills of a test build, whose open replays a long log
        // more slowly than the longest delay, all came in the open until
        // the next checkpoint here, and went without a kill mid-add.)
        if round % 2 == 1 {
            // A child that fails before it adds anything ends its stdout
            // (and the status check below fails the test).
            if let Err(std::sync::mpsc::RecvTimeoutError::Timeout) =
                first.recv_timeout(Duration::from_secs(60))
            {
                let _ = child.kill();
                panic!("{policy} round {round}: no acknowledgement within 60 s");
            }
            std::thread::sleep(Duration::from_millis(rng.gen_range(0..150)));
        } else {
            std::thread::sleep(Duration::from_millis(rng.gen_range(20..250)));
        }
        // SIGKILL: no destructor, no flush, no checkpoint.
        child.kill().expect("kill");
        let status = child.wait().unwrap();
        // Killed by us, not ended by a failed check of its own (it aborts).
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(
            status.signal(),
            Some(9),
            "{policy} round {round}: the child ended with {status}, not by the SIGKILL"
        );
        let lines = reader.join().unwrap();
        assert!(lines.iter().all(|l| l.starts_with(&format!("r{round}-"))));
        let before = acknowledged.len();
        acknowledged.extend(lines);

        // Check this round's items and a sample of the earlier ones every
        // round, and all of them in the last round (checking everything
        // every round would grow quadratically over 1000 rounds).
        // Small segments, as the child's: each open makes one, and one of
        // the default 64 MiB a round took 64 GB of disk over 1000 rounds
        // whenever the child's checkpoints were cut short by the kill.
        let reopen = StoreOptions {
            segment_size: 256 << 10,
            ..Default::default()
        };
        let store = Store::open(dir.path(), reopen).expect("reopen");
        let last = round + 1 == rounds();
        let mut check: Vec<&String> = acknowledged[before..].iter().collect();
        if last {
            check = acknowledged.iter().collect();
        } else if before > 0 {
            check.extend((0..2000).map(|_| &acknowledged[rng.gen_range(0..before)]));
        }
        let refs: Vec<&[u8]> = check.iter().map(|s| s.as_bytes()).collect();
        for filter in [&b"crash"[..], b"crash-bloom", b"crash-big-chain"] {
            if refs.is_empty() {
                break;
            }
            let present = store
                .contains(filter, &refs)
                .unwrap()
                .expect("filter exists");
            let lost: Vec<&&String> = check
                .iter()
                .zip(&present)
                .filter(|(_, p)| !**p)
                .map(|(a, _)| a)
                .collect();
            assert!(
                lost.is_empty(),
                "{policy} round {round}, {}: {} acknowledged items lost, e.g. {:?}",
                String::from_utf8_lossy(filter),
                lost.len(),
                &lost[..lost.len().min(5)]
            );
        }
        // Every tenth round a checkpoint, which the kill cannot cut short,
        // retires the log so far: the log of 1000 rounds stays small.
        if round % 10 == 9 {
            store.checkpoint().expect("checkpoint");
        }
        drop(store);
    }
    assert!(
        acknowledged.len() as u64 > rounds() * 10,
        "the child acknowledged too few items ({}) for the test to mean anything",
        acknowledged.len()
    );
    eprintln!("{policy}: {} acknowledged", acknowledged.len());
}

#[test]
fn kill_9_loses_nothing_acknowledged_fsync_always() {
    crash_rounds("always", 1);
}

#[test]
fn kill_9_loses_nothing_acknowledged_fsync_everysec() {
    crash_rounds("everysec", 2);
}

/// Copies directory `from` into `to`, file by file (no subdirectories
/// but those named). The log's sync mark (`log/SYNCED`) first: copied
/// after a segment, it could say more of that segment was written than
/// the copy holds, which the open rightly calls corruption (a copy is not
/// taken at one moment, as a kill's page cache is).
pub(crate) fn copy_dir(from: &std::path::Path, to: &std::path::Path, subdirs: &[&str]) {
    for sub in subdirs {
        let (f, t) = (from.join(sub), to.join(sub));
        std::fs::create_dir_all(&t).unwrap();
        let mut paths: Vec<std::path::PathBuf> = std::fs::read_dir(&f)
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        paths.sort_by_key(|p| p.file_name().is_none_or(|n| n != "SYNCED"));
        for p in paths {
            if p.is_file() {
                // A checkpoint may remove a segment meanwhile.
                match std::fs::copy(&p, t.join(p.file_name().unwrap())) {
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                    other => {
                        other.unwrap();
                    }
                }
            }
        }
    }
}

/// `everysec`, and a fixed-size Bloom filter.
fn everysec_bloom() -> (StoreOptions, seen_store::FilterSpec) {
    let opts = StoreOptions {
        fsync: seen_store::FsyncPolicy::EverySec,
        ..Default::default()
    };
    let spec = seen_store::FilterSpec::Bloom {
        capacity: 100_000,
        error_rate: 0.001,
        layout: seen_core::Layout::Blocked,
    };
    (opts, spec)
}

/// What a `kill -9` of the store open in `dir` would leave now (the page
/// cache is the files' contents), copied into `copy` and reopened there.
fn reopen_killed_copy(dir: &std::path::Path, copy: &std::path::Path, opts: StoreOptions) -> Store {
    copy_dir(dir, copy, &["snapshots", "log"]);
    std::fs::copy(dir.join("FORMAT"), copy.join("FORMAT")).unwrap();
    Store::open(copy, opts).unwrap()
}

/// A copy of the data directory taken while the store is open (see
/// [`reopen_killed_copy`]) must reopen with every add acknowledged before
/// the copy, and the same filter, bits and count, as the one the adds
/// made.
#[test]
fn a_copy_taken_while_open_reopens_with_every_add() {
    let dir = tempfile::tempdir().unwrap();
    let copy = tempfile::tempdir().unwrap();
    let (opts, spec) = everysec_bloom();
    let items: Vec<Vec<u8>> = (0..1000)
        .map(|i| format!("item-{i}").into_bytes())
        .collect();
    let store = Store::open(dir.path(), opts.clone()).unwrap();
    store.create(b"f", &spec).unwrap();
    // One item a call, as a server adds.
    for it in &items {
        assert!(store.add(b"f", &[it], None).unwrap().new[0]);
    }
    let bytes_of = |s: &Store| {
        s.with_filter(b"f", |f| {
            let mut out = Vec::new();
            f.encode(&mut out).unwrap();
            out
        })
        .unwrap()
        .unwrap()
    };
    let before = bytes_of(&store);
    let reopened = reopen_killed_copy(dir.path(), copy.path(), opts);
    let r = reopened.recovery().clone();
    assert_eq!(r.adds, 1000, "{r:?}");
    let refs: Vec<&[u8]> = items.iter().map(|v| v.as_slice()).collect();
    let present = reopened.contains(b"f", &refs).unwrap().unwrap();
    assert!(present.iter().all(|&p| p), "an acknowledged add was lost");
    assert_eq!(bytes_of(&reopened), before, "bits or count differ");
    drop(store);
}

/// A filter deleted (and its name taken by a new one): a process killed
/// then reopens without its adds, the new filter holding only its own
/// items.
#[test]
fn adds_to_a_deleted_filter_stay_deleted() {
    let dir = tempfile::tempdir().unwrap();
    let copy = tempfile::tempdir().unwrap();
    let (opts, spec) = everysec_bloom();
    let old: Vec<Vec<u8>> = (0..200).map(|i| format!("old-{i}").into_bytes()).collect();
    let store = Store::open(dir.path(), opts.clone()).unwrap();
    store.create(b"f", &spec).unwrap();
    for it in &old {
        store.add(b"f", &[it], None).unwrap();
    }
    assert!(store.delete(b"f").unwrap());
    store.create(b"f", &spec).unwrap();
    store.add(b"f", &[b"new"], None).unwrap();
    let reopened = reopen_killed_copy(dir.path(), copy.path(), opts);
    assert_eq!(
        reopened.contains(b"f", &[b"new"]).unwrap(),
        Some(vec![true])
    );
    let refs: Vec<&[u8]> = old.iter().map(|v| v.as_slice()).collect();
    let back = reopened
        .contains(b"f", &refs)
        .unwrap()
        .unwrap()
        .iter()
        .filter(|&&p| p)
        .count();
    assert!(back <= 2, "{back} of the deleted filter's items came back");
    drop(store);
}

/// A kill after a scalable chain grew, with adds since, reopens it with
/// every add, bit for bit and count for count.
#[test]
fn a_grown_chain_reopens_bit_for_bit_from_a_copy_taken_while_open() {
    let dir = tempfile::tempdir().unwrap();
    let copy = tempfile::tempdir().unwrap();
    let (opts, _) = everysec_bloom();
    let chain = seen_store::FilterSpec::Scalable {
        capacity: 2_100_000,
        error_rate: 0.01,
        layout: seen_core::Layout::Blocked,
        expansion: 2,
        nonscaling: false,
    };
    let item = |i: u64| format!("chain-{i}").into_bytes();
    let n = 2_150_000u64;
    let store = Store::open(dir.path(), opts.clone()).unwrap();
    store.create(b"c", &chain).unwrap();
    // Single items and batches of 7, across the first sub-filter's
    // capacity.
    let mut i = 0;
    while i < n {
        let k = if (i / 1000) % 2 == 0 { 1 } else { 7 };
        let batch: Vec<Vec<u8>> = (i..(i + k).min(n)).map(item).collect();
        let refs: Vec<&[u8]> = batch.iter().map(|v| v.as_slice()).collect();
        store.add(b"c", &refs, None).unwrap();
        i += k;
    }
    let bytes_of = |s: &Store| {
        s.with_filter(b"c", |f| {
            let mut out = Vec::new();
            f.encode(&mut out).unwrap();
            out
        })
        .unwrap()
        .unwrap()
    };
    let links = |s: &Store| {
        s.with_filter(b"c", |f| match f {
            seen_core::AnyFilter::Scalable(c) => c.links(),
            _ => 0,
        })
        .unwrap()
        .unwrap()
    };
    assert_eq!(links(&store), 2, "the chain grew once");
    let before = bytes_of(&store);
    let reopened = reopen_killed_copy(dir.path(), copy.path(), opts);
    eprintln!("{:?}", reopened.recovery());
    let all: Vec<Vec<u8>> = (0..n).map(item).collect();
    let refs: Vec<&[u8]> = all.iter().map(|v| v.as_slice()).collect();
    let present = reopened.contains(b"c", &refs).unwrap().unwrap();
    assert!(present.iter().all(|&p| p), "an acknowledged add was lost");
    // Not `assert_eq!`, which would print megabytes.
    assert!(bytes_of(&reopened) == before, "bits or counts differ");
    drop(store);
}

/// `no` promises the same across a process kill: what it acknowledged is
/// in the page cache, only not synced.
#[test]
fn kill_9_loses_nothing_acknowledged_fsync_no() {
    crash_rounds("no", 3);
}

/// Bytes of the files in `dir` and its subdirectories.
fn file_bytes(dir: &std::path::Path) -> u64 {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            match e.metadata().unwrap() {
                m if m.is_dir() => file_bytes(&e.path()),
                m => m.len(),
            }
        })
        .sum()
}

/// A crash loop: 20 processes that each open the directory, add one item
/// and die. Each goes on in the log the last one left, so the directory
/// grows by the records they wrote (48 bytes an add of one item), not by
/// a file per start.
#[test]
fn crash_restarts_grow_the_directory_by_no_more_than_the_log_they_wrote() {
    for policy in ["always", "everysec", "no"] {
        let dir = tempfile::tempdir().unwrap();
        let crash = |i: usize| {
            let status = Command::new(env!("CARGO_BIN_EXE_seen-store-crash-child"))
                .args([
                    dir.path().to_str().unwrap(),
                    policy,
                    "once",
                    &format!("item-{i}"),
                ])
                .stderr(Stdio::null())
                .status()
                .unwrap();
            assert!(!status.success(), "{policy}: the child did not die");
        };
        crash(0);
        let before = file_bytes(dir.path());
        for i in 1..=20 {
            crash(i);
        }
        let grown = file_bytes(dir.path()) - before;
        assert!(grown <= 20 * 48, "{policy}: {grown} bytes for 20 adds");
        let s = Store::open(dir.path(), StoreOptions::default()).unwrap();
        let items: Vec<String> = (0..=20).map(|i| format!("item-{i}")).collect();
        let refs: Vec<&[u8]> = items.iter().map(|i| i.as_bytes()).collect();
        let found = s.contains(b"once", &refs).unwrap().unwrap();
        assert!(found.iter().all(|&f| f), "{policy}: {found:?}");
    }
}
