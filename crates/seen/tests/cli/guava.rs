//! The command line with the real Guava's files: `seen inspect` reads
//! them, `seen convert` moves them to seen's format and back, `seen dedup
//! --format guava` adds to one and writes it back, and Guava reads what
//! seen wrote with `BloomFilter.readFrom`, agreeing on every probe.

use std::path::Path;

use seen_core::{guava, BloomFilter};
use serde_json::Value;

use crate::guava_peer::{item, GuavaPeer};
use crate::support::{assert_error, run, stderr, write_file};

fn peer() -> &'static GuavaPeer {
    GuavaPeer::get(Path::new(env!("CARGO_TARGET_TMPDIR")))
}

/// Java's filter of items `0..n` at `fpp`, written to `path`.
fn java_filter(path: &Path, n: u64, fpp: f64) {
    peer().build(path, n, fpp, "MURMUR128_MITZ_64");
}

/// Asserts Guava answers every probe of the file at `path` as seen does:
/// items `0..items` and 100,000 probes.
fn guava_agrees(path: &Path, items: u64) {
    peer().assert_agrees(path, items, 100_000);
}

fn lines(range: std::ops::Range<u64>) -> Vec<u8> {
    range
        .flat_map(|i| format!("{}\n", item(i)).into_bytes())
        .collect()
}

fn read_guava(path: &Path) -> BloomFilter {
    guava::read_file(&std::fs::read(path).unwrap()[..], u64::MAX).unwrap()
}

#[test]
fn inspect_reads_a_guava_file() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("crawl.guava");
    java_filter(&file, 20_000, 0.01);
    let o = run(&["inspect", "--json", file.to_str().unwrap()], b"");
    assert!(o.status.success(), "{}", stderr(&o));
    let r: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(r["source"], "guava file");
    assert_eq!(r["guava_strategy"], "MURMUR128_MITZ_64");
    assert_eq!(r["layout"], "guava");
    let (bits, hashes) = guava::size(20_000, 0.01).unwrap();
    assert_eq!(r["bits"], bits);
    assert_eq!(r["hashes"], hashes);
    assert_eq!(r["over_capacity"], false);
    let f = read_guava(&file);
    let count = guava::approximate_element_count(&f);
    assert_eq!(r["approximate_element_count"], count);
    // Guava's own count of the same file.
    guava_agrees(&file, 20_000);

    // `seen calc` gives the size Guava chose.
    let o = run(
        &["calc", "--capacity", "20000", "--fpp", "0.01", "--json"],
        b"",
    );
    let c: Value = serde_json::from_slice(&o.stdout).unwrap();
    let row = c["layouts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["layout"] == "guava")
        .unwrap();
    assert_eq!((&row["bits"], &row["hashes"]), (&r["bits"], &r["hashes"]));
}

#[test]
fn convert_moves_a_guava_filter_to_seen_and_back_bit_for_bit() {
    let dir = tempfile::tempdir().unwrap();
    let java = dir.path().join("crawl.guava");
    let state = dir.path().join("crawl.seen");
    let back = dir.path().join("back.guava");
    let n = 50_000;
    java_filter(&java, n, 0.01);
    let (j, s, b) = (
        java.to_str().unwrap(),
        state.to_str().unwrap(),
        back.to_str().unwrap(),
    );

    let o = run(&["convert", "--from", "guava", j, s], b"");
    assert!(o.status.success(), "{}", stderr(&o));
    // Unchanged bits: back to Guava gives Guava's own file.
    let o = run(&["convert", "--to", "guava", s, b], b"");
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(std::fs::read(&back).unwrap(), std::fs::read(&java).unwrap());

    // The seen file serves `seen dedup`: the Java items are all known, the
    // new ones (but for false positives) printed.
    let o = run(&["dedup", "--state", s], &lines(0..n + 10_000));
    assert!(o.status.success(), "{}", stderr(&o));
    let printed = String::from_utf8(o.stdout).unwrap();
    let printed: Vec<&str> = printed.lines().collect();
    let old: Vec<String> = (0..n).map(item).collect();
    assert!(printed.iter().all(|l| !old.iter().any(|o| o == l)));
    assert!(
        printed.len() > 9_700 && printed.len() <= 10_000,
        "{}",
        printed.len()
    );

    // And back to Guava, with what dedup added: Java reads it and agrees.
    let o = run(&["convert", "--to", "guava", "--force", s, b], b"");
    assert!(o.status.success(), "{}", stderr(&o));
    guava_agrees(&back, n + 10_000);
}

#[test]
fn dedup_adds_to_a_guava_file_and_writes_it_back_for_java() {
    let dir = tempfile::tempdir().unwrap();
    let java = dir.path().join("urls.guava");
    let n = 30_000;
    java_filter(&java, n, 0.001);
    let j = java.to_str().unwrap();

    let o = run(
        &["dedup", "--state", j, "--format", "guava", "--count"],
        &lines(0..n + 5_000),
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let new: u64 = String::from_utf8(o.stdout).unwrap().trim().parse().unwrap();
    assert!((4_980..=5_000).contains(&new), "{new}");
    guava_agrees(&java, n + 5_000);

    // A new Guava state file is sized as Guava sizes one.
    let fresh = dir.path().join("fresh.guava");
    let fr = fresh.to_str().unwrap();
    let args = [
        "dedup",
        "--state",
        fr,
        "--format",
        "guava",
        "--capacity",
        "10000",
        "--fpp",
        "0.02",
    ];
    let o = run(&args, &lines(0..10_000));
    assert!(o.status.success(), "{}", stderr(&o));
    let f = read_guava(&fresh);
    assert_eq!((f.bits(), f.hashes()), guava::size(10_000, 0.02).unwrap());
    guava_agrees(&fresh, 10_000);
}

#[test]
fn wrong_formats_and_damaged_files_are_refused_and_left_alone() {
    let dir = tempfile::tempdir().unwrap();
    let java = dir.path().join("urls.guava");
    java_filter(&java, 1_000, 0.01);
    let good = std::fs::read(&java).unwrap();
    let j = java.to_str().unwrap();
    let blocked = dir.path().join("blocked.seen");
    let bl = blocked.to_str().unwrap();
    assert!(run(&["dedup", "--state", bl], b"a\nb\n").status.success());
    let out = dir.path().join("out");
    let o_ = out.to_str().unwrap();

    // A Guava state file without --format guava, and the other way.
    let o = run(&["dedup", "--state", j], b"x\n");
    assert_error(&o, "--format guava");
    let o = run(&["dedup", "--state", bl, "--format", "guava"], b"x\n");
    assert_error(&o, "not Guava's");
    assert_eq!(std::fs::read(&java).unwrap(), good);

    // A blocked filter has no Guava counterpart.
    let o = run(&["convert", "--to", "guava", bl, o_], b"");
    assert_error(&o, "cannot become a Guava filter");
    assert!(!out.exists());
    let o = run(&["convert", "--from", "guava", bl, o_], b"");
    assert_error(&o, "not a Guava filter file");
    let o = run(&["convert", "--from", "guava", j, bl], b"");
    assert_error(&o, "--force");

    // Truncated, a word count that is not the file's, hash count 0.
    for (name, bytes) in [
        ("short", good[..good.len() - 3].to_vec()),
        ("count", {
            let mut b = good.clone();
            b[5] ^= 1;
            b
        }),
        ("zero-hashes", {
            let mut b = good.clone();
            b[1] = 0;
            b
        }),
    ] {
        let bad = dir.path().join(name);
        write_file(&bad, &bytes);
        let o = run(
            &[
                "dedup",
                "--state",
                bad.to_str().unwrap(),
                "--format",
                "guava",
            ],
            b"x\n",
        );
        assert_error(&o, name);
        assert_eq!(std::fs::read(&bad).unwrap(), bytes);
        let o = run(&["inspect", bad.to_str().unwrap()], b"");
        assert_error(&o, "not a seen filter, a snapshot or a Guava filter file");
    }
}
