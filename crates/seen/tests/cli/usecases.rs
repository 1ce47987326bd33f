//! The README's use-case snippets (kept in `examples/`), run as written.

use std::collections::HashSet;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::redis_server::RedisServer;
use crate::support::*;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The example's text, checked to be in the README word for word.
fn example(name: &str) -> String {
    let text = std::fs::read_to_string(repo().join("examples").join(name)).unwrap();
    let readme = std::fs::read_to_string(repo().join("README.md")).unwrap();
    assert!(
        readme.contains(text.trim_end()),
        "README.md must show examples/{name} as it is"
    );
    text
}

/// Runs a shell snippet in `dir` with `seen` on the PATH.
fn sh(dir: &Path, script: &str, env: &[(&str, &str)]) -> std::process::Output {
    let bin = Path::new(env!("CARGO_BIN_EXE_seen"))
        .parent()
        .unwrap()
        .to_owned();
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut c = Command::new("bash");
    c.args(["-euo", "pipefail", "-c", script])
        .current_dir(dir)
        .env("PATH", path);
    for (k, v) in env {
        c.env(k, v);
    }
    c.output().unwrap()
}

fn lines_of(p: &Path) -> Vec<String> {
    std::fs::read_to_string(p)
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect()
}

#[test]
fn crawler_on_one_machine_resumes_across_runs() {
    let script = example("crawl_one_machine.sh");
    let dir = tempfile::tempdir().unwrap();
    let (all, _) = urls(40_000, 0.3, 31);
    let (d1, d2) = all.split_at(25_000);
    write_file(&dir.path().join("day1-urls.txt"), &joined(d1));
    write_file(&dir.path().join("day2-urls.txt"), &joined(d2));
    let o = sh(dir.path(), &script, &[]);
    assert!(o.status.success(), "{}", stderr(&o));
    let f1 = lines_of(&dir.path().join("fetch-day1.txt"));
    let f2 = lines_of(&dir.path().join("fetch-day2.txt"));
    let mut both = f1.clone();
    both.extend(f2.iter().cloned());
    let lost = check_dedup(&all, &both);
    assert!(lost <= 10, "{lost}");
    assert!(String::from_utf8_lossy(&o.stdout).contains("over_capacity:"));
}

#[test]
fn crawler_fleet_through_redis() {
    let script = example("crawl_many_machines.sh");
    let redis = RedisServer::start();
    let dir = tempfile::tempdir().unwrap();
    let (all, distinct) = urls(60_000, 0.3, 41);
    let (a, b) = all.split_at(30_000);
    write_file(&dir.path().join("urls-a.txt"), &joined(a));
    write_file(&dir.path().join("urls-b.txt"), &joined(b));
    let url = redis.url();
    let (pa, pb) = std::thread::scope(|s| {
        let ha = s.spawn(|| sh(dir.path(), &script, &[("REDIS", &url), ("PART", "a")]));
        let hb = s.spawn(|| sh(dir.path(), &script, &[("REDIS", &url), ("PART", "b")]));
        (ha.join().unwrap(), hb.join().unwrap())
    });
    assert!(pa.status.success(), "{}", stderr(&pa));
    assert!(pb.status.success(), "{}", stderr(&pb));
    let mut printed = HashSet::new();
    for l in lines_of(&dir.path().join("fetch-a.txt"))
        .into_iter()
        .chain(lines_of(&dir.path().join("fetch-b.txt")))
    {
        assert!(printed.insert(l.clone()), "fetched twice: {l}");
    }
    assert!(distinct - printed.len() <= 5);
}

#[test]
fn article_titles() {
    let script = example("article_titles.sh");
    let dir = tempfile::tempdir().unwrap();
    write_file(
        &dir.path().join("titles.txt"),
        b"Rust 2.0 Released\nrust 2.0  released \nMarkets Rally\nRUST 2.0 RELEASED\nmarkets rally\nNew Moon Found\n",
    );
    let o = sh(dir.path(), &script, &[]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(
        lines_of(&dir.path().join("new-titles.txt")),
        ["rust 2.0 released", "markets rally", "new moon found"]
    );
    // Resumed: the same titles tomorrow are not new.
    let o = sh(dir.path(), &script, &[]);
    assert!(o.status.success());
    assert!(lines_of(&dir.path().join("new-titles.txt")).is_empty());
}

#[test]
fn blacklist_check() {
    let script = example("blacklist.sh");
    let dir = tempfile::tempdir().unwrap();
    let bad: Vec<String> = (0..50_000).map(|i| format!("spam-{i}.example")).collect();
    write_file(&dir.path().join("blacklist.txt"), &joined(&bad));
    let mut cand: Vec<String> = (0..20_000).map(|i| format!("good-{i}.example")).collect();
    cand.extend((0..100).map(|i| format!("spam-{}.example", i * 97)));
    write_file(&dir.path().join("candidates.txt"), &joined(&cand));
    let o = sh(dir.path(), &script, &[]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(String::from_utf8_lossy(&o.stdout).trim(), "50000");
    let blocked = lines_of(&dir.path().join("blocked.txt"));
    // Every blacklisted candidate is caught; at 1e-6, no good one is.
    let expect: Vec<String> = (0..100)
        .map(|i| format!("spam-{}.example", i * 97))
        .collect();
    assert_eq!(blocked, expect);
}

#[test]
fn cache_guard_with_redis_py_against_seen_serve() {
    example("cache_guard.py");
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let mut server = seen()
        .args(["serve", "--port", &port.to_string(), "--dir"])
        .arg(dir.path().join("data"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Ok(mut c) = TcpStream::connect(("127.0.0.1", port)) {
            let mut b = [0u8; 7];
            if c.write_all(b"PING\r\n").is_ok() && c.read_exact(&mut b).is_ok() {
                break;
            }
        }
        assert!(Instant::now() < deadline, "seen serve did not start");
        std::thread::sleep(Duration::from_millis(20));
    }
    let o = Command::new("python3")
        .arg(repo().join("examples/cache_guard.py"))
        .arg(port.to_string())
        .output()
        .unwrap();
    unsafe {
        libc::kill(server.id() as i32, libc::SIGTERM);
    }
    server.wait().unwrap();
    assert!(
        o.status.success(),
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        stderr(&o)
    );
    assert!(String::from_utf8_lossy(&o.stdout).contains("10000 lookups of absent keys"));
}
