//! seen against the real Guava: filters Guava writes are read and answer
//! `mightContain` exactly as Guava does, filters seen writes Guava reads
//! and answers the same, sizes and element counts agree. Guava runs in its
//! own JVM (`tests/java/GuavaPeer.java`).

#[path = "../java/peer.rs"]
mod peer;

use std::path::Path;

use peer::{answers, first_difference, item, GuavaPeer};
use seen_core::{guava, Layout};

/// Probes of never-added strings per filter.
const PROBES: u64 = 1_000_000;

fn peer() -> &'static GuavaPeer {
    GuavaPeer::get(Path::new(env!("CARGO_TARGET_TMPDIR")))
}

#[test]
fn seen_answers_as_guava_on_guavas_files_and_guava_on_seens() {
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        (1, 0.01, "MURMUR128_MITZ_64", Layout::Guava),
        (1_000, 0.03, "MURMUR128_MITZ_64", Layout::Guava),
        (100_000, 0.001, "MURMUR128_MITZ_64", Layout::Guava),
        (1_000_000, 0.01, "MURMUR128_MITZ_64", Layout::Guava),
        (10_000, 0.01, "MURMUR128_MITZ_32", Layout::Guava32),
        (300_000, 0.0001, "MURMUR128_MITZ_32", Layout::Guava32),
    ];
    for (n, fpp, strategy, layout) in cases {
        let what = format!("{n} items at {fpp}, {strategy}");
        let java_file = dir.path().join(format!("java-{n}-{strategy}.bin"));
        peer().build(&java_file, n, fpp, strategy);

        // Guava's file, read by seen: the same answer to every probe.
        let bytes = std::fs::read(&java_file).unwrap();
        let f = guava::read_file(&bytes[..], guava::DEFAULT_MAX_BYTES).unwrap();
        assert_eq!(f.layout(), layout, "{what}");
        if layout == Layout::Guava {
            assert_eq!(
                (f.bits(), f.hashes()),
                guava::size(n, fpp).unwrap(),
                "{what}"
            );
        }
        let (theirs, their_count) = peer().probe(&java_file, n, PROBES);
        let ours = answers(&f, n, PROBES);
        assert!(ours[..n as usize].iter().all(|&a| a == 1), "{what}");
        if let Some(d) = first_difference(&ours, &theirs, n) {
            panic!("{what}: {d}");
        }
        assert_eq!(guava::approximate_element_count(&f), their_count, "{what}");
        let false_positives = ours[n as usize..].iter().filter(|&&a| a == 1).count();
        assert!(
            (false_positives as f64) < PROBES as f64 * fpp * 1.5 + 10.0,
            "{what}: {false_positives} false positives"
        );

        // seen adds as many again and writes the file back; Guava reads it.
        for i in n..2 * n {
            f.add(item(i));
        }
        let seen_file = dir.path().join(format!("seen-{n}-{strategy}.bin"));
        let mut out = Vec::new();
        guava::write(&f, &mut out).unwrap();
        std::fs::write(&seen_file, &out).unwrap();
        let (theirs, their_count) = peer().probe(&seen_file, 2 * n, PROBES);
        let ours = answers(&f, 2 * n, PROBES);
        assert!(ours[..2 * n as usize].iter().all(|&a| a == 1), "{what}");
        if let Some(d) = first_difference(&ours, &theirs, 2 * n) {
            panic!("{what}, written back by seen: {d}");
        }
        assert_eq!(guava::approximate_element_count(&f), their_count, "{what}");
    }
}

#[test]
fn a_filter_seen_creates_is_the_one_guava_creates() {
    let dir = tempfile::tempdir().unwrap();
    let n = 50_000;
    let f = guava::create(n, 0.02).unwrap();
    for i in 0..n {
        f.add(item(i));
    }
    let file = dir.path().join("seen-made.bin");
    let mut out = Vec::new();
    guava::write(&f, &mut out).unwrap();
    std::fs::write(&file, &out).unwrap();
    let (theirs, count) = peer().probe(&file, n, PROBES);
    if let Some(d) = first_difference(&answers(&f, n, PROBES), &theirs, n) {
        panic!("{d}");
    }
    assert_eq!(guava::approximate_element_count(&f), count);

    // Guava's own filter of the same items is the same file.
    let java_file = dir.path().join("java-made.bin");
    peer().build(&java_file, n, 0.02, "MURMUR128_MITZ_64");
    assert_eq!(std::fs::read(&java_file).unwrap(), out);
}

#[test]
fn sizes_are_guavas_for_every_capacity_and_rate() {
    let capacities = [1u64, 7, 1_000, 12_345, 1_000_000, 10_000_000];
    let rates = [0.5, 0.1, 0.03, 0.01, 1e-3, 1e-4, 1e-5, 1e-7];
    let mut args = vec!["sizes".to_string()];
    let mut expected = Vec::new();
    for &n in &capacities {
        for &p in &rates {
            args.push(n.to_string());
            args.push(p.to_string());
            let (bits, hashes) = guava::size(n, p).unwrap();
            expected.push(format!("{} {hashes}", bits / 64));
        }
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let theirs: Vec<String> = peer().run(&args).lines().map(String::from).collect();
    assert_eq!(theirs, expected);
}
