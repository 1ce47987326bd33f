//! `seen dedup --redis` and `seen inspect --redis` against a real Redis.

use std::collections::HashSet;
use std::process::Stdio;

use serde_json::Value;

use crate::redis_server::RedisServer;
use crate::support::*;

#[test]
fn two_concurrent_processes_share_one_filter() {
    let redis = RedisServer::start();
    let url = redis.url();
    let (input, distinct) = urls(120_000, 0.3, 77);
    // Both processes read all of it, in different orders; together they
    // must print every distinct line exactly once (up to false positives).
    let mut reversed = input.clone();
    reversed.reverse();
    let dir = tempfile::tempdir().unwrap();
    let fa = dir.path().join("a.txt");
    let fb = dir.path().join("b.txt");
    write_file(&fa, &joined(&input));
    write_file(&fb, &joined(&reversed));
    let spawn = |f: &std::path::Path| {
        seen()
            .args([
                "dedup",
                "--redis",
                &url,
                "--name",
                "crawl",
                "--capacity",
                "200k",
            ])
            .args(["--fpp", "1e-3", "--batch", "500"])
            .arg(f)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };
    let a = spawn(&fa);
    let b = spawn(&fb);
    let a = a.wait_with_output().unwrap();
    let b = b.wait_with_output().unwrap();
    assert!(a.status.success(), "{}", stderr(&a));
    assert!(b.status.success(), "{}", stderr(&b));
    let (la, lb) = (out_lines(&a), out_lines(&b));
    assert!(
        !la.is_empty() && !lb.is_empty(),
        "both took part: {} {}",
        la.len(),
        lb.len()
    );
    let mut all = HashSet::new();
    for l in la.iter().chain(&lb) {
        assert!(all.insert(l.clone()), "printed by both: {l}");
    }
    let input_set: HashSet<&String> = input.iter().collect();
    assert!(all.iter().all(|l| input_set.contains(l)));
    let lost = distinct - all.len();
    assert!(lost <= 2 * distinct / 1000 + 5, "{lost} of {distinct} lost");

    // A third run finds everything already there.
    let o = run(
        &["dedup", "--redis", &url, "--name", "crawl", "--count"],
        &joined(&input),
    );
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(String::from_utf8_lossy(&o.stdout).trim(), "0");

    // Read-only lookups and inspect.
    let o = run(
        &[
            "dedup",
            "--redis",
            &url,
            "--name",
            "crawl",
            "--read-only",
            "--count",
        ],
        b"https://never.example/\n",
    );
    assert_eq!(String::from_utf8_lossy(&o.stdout).trim(), "1");
    let o = run(
        &["inspect", "--json", "--redis", &url, "--name", "crawl"],
        b"",
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["capacity"], 200_000);
    assert_eq!(v["damaged_shards"], 0);
    let est = v["estimated_items"].as_f64().unwrap();
    assert!(
        (est - distinct as f64).abs() < distinct as f64 * 0.03,
        "{est} vs {distinct}"
    );

    // Asking for other parameters is a warning: the filter keeps its own.
    let o = run(
        &[
            "dedup",
            "--redis",
            &url,
            "--name",
            "crawl",
            "--capacity",
            "5M",
        ],
        b"x\n",
    );
    assert!(o.status.success());
    assert!(stderr(&o).contains("seen: warning:"), "{}", stderr(&o));
    assert_error(
        &run(&["inspect", "--redis", &url, "--name", "nope"], b""),
        "nope",
    );
}

#[test]
fn ttl_applies_to_a_new_filter() {
    let redis = RedisServer::start();
    let url = redis.url();
    let o = run(
        &[
            "dedup",
            "--redis",
            &url,
            "--name",
            "weekly",
            "--ttl",
            "7d",
            "--capacity",
            "1000",
        ],
        b"a\nb\na\n",
    );
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(o.stdout, b"a\nb\n");
    let o = run(
        &["inspect", "--json", "--redis", &url, "--name", "weekly"],
        b"",
    );
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    let ttl = v["ttl_seconds"].as_u64().unwrap();
    assert!(ttl > 7 * 86_400 - 60 && ttl <= 7 * 86_400, "{ttl}");
}
