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
        let reader = std::thread::spawn(move || {
            let mut r = BufReader::new(stdout);
            let mut lines = Vec::new();
            let mut buf = Vec::new();
            while r.read_until(b'\n', &mut buf).unwrap_or(0) > 0 {
                if buf.last() == Some(&b'\n') {
                    lines.push(String::from_utf8_lossy(&buf[..buf.len() - 1]).into_owned());
                }
                buf.clear();
            }
            lines
        });
        std::thread::sleep(Duration::from_millis(rng.gen_range(20..250)));
        // SIGKILL: no destructor, no flush, no checkpoint.
        child.kill().expect("kill");
        let status = child.wait().unwrap();
        assert!(!status.success(), "child was killed");
        let lines = reader.join().unwrap();
        assert!(lines.iter().all(|l| l.starts_with(&format!("r{round}-"))));
        let before = acknowledged.len();
        acknowledged.extend(lines);

        // Check this round's items and a sample of the earlier ones every
        // round, and all of them in the last round (checking everything
        // every round would grow quadratically over 1000 rounds).
        let store = Store::open(dir.path(), StoreOptions::default()).expect("reopen");
        let last = round + 1 == rounds();
        let mut check: Vec<&String> = acknowledged[before..].iter().collect();
        if last {
            check = acknowledged.iter().collect();
        } else if before > 0 {
            check.extend((0..2000).map(|_| &acknowledged[rng.gen_range(0..before)]));
        }
        let refs: Vec<&[u8]> = check.iter().map(|s| s.as_bytes()).collect();
        for filter in [&b"crash"[..], b"crash-bloom"] {
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
        drop(store);
    }
    assert!(
        acknowledged.len() as u64 > rounds() * 10,
        "the child acknowledged too few items ({}) for the test to mean anything",
        acknowledged.len()
    );
}

#[test]
fn kill_9_loses_nothing_acknowledged_fsync_always() {
    crash_rounds("always", 1);
}

#[test]
fn kill_9_loses_nothing_acknowledged_fsync_everysec() {
    crash_rounds("everysec", 2);
}
