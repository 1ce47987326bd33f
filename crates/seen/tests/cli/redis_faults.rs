//! `seen dedup --redis` through faults, with the real binary and a real
//! Redis: replies lost on a link that keeps dropping, Redis killed and
//! restarted under two processes, and Redis gone for longer than the retry
//! budget, and a Redis Cluster master killed under two processes. No line
//! is ever lost; lines are printed twice only where a fault can make it so
//! (Redis gone past the budget; a failover without --redis-wait).

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::process::{Child, Output, Stdio};
use std::sync::atomic::Ordering;
use std::thread;
use std::time::{Duration, Instant};

use crate::proxy::{Cut, Proxy};
use crate::redis_server::{Cluster, RedisServer};
use crate::support::*;

/// `seen dedup` of `file` against filter `name` in Redis at `url`.
fn dedup(url: &str, name: &str, file: &Path, extra: &[&str]) -> Child {
    seen()
        .args(["dedup", "--redis", url, "--name", name])
        .args(["--capacity", "10M", "--fpp", "1e-7", "--batch", "1000"])
        .args(extra)
        .arg(file)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// Each line printed by the runs: how many times, over all of them.
fn printed(runs: &[&Output]) -> HashMap<String, usize> {
    let mut times = HashMap::new();
    for o in runs {
        for l in out_lines(o) {
            *times.entry(l).or_insert(0) += 1;
        }
    }
    times
}

/// The lines in a file, and reversed in another: two workers over the same
/// lines in different orders.
fn both_ways(input: &[String]) -> (tempfile::TempDir, PathBuf, PathBuf) {
    let mut reversed = input.to_vec();
    reversed.reverse();
    let dir = tempfile::tempdir().unwrap();
    let (fa, fb) = (dir.path().join("a.txt"), dir.path().join("b.txt"));
    write_file(&fa, &joined(input));
    write_file(&fb, &joined(&reversed));
    (dir, fa, fb)
}

fn distinct_of(input: &[String]) -> HashSet<&String> {
    input.iter().collect()
}

#[test]
fn a_link_that_keeps_dropping_replies_changes_no_answer() {
    let redis = RedisServer::start();
    let proxy = Proxy::start(redis.port, Cut::EveryNth(7));
    let (input, distinct) = urls(60_000, 0.3, 5);
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("urls.txt");
    write_file(&file, &joined(&input));
    let o = dedup(&proxy.url(), "crawl", &file, &[])
        .wait_with_output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let drops = proxy.drops.load(Ordering::SeqCst);
    assert!(drops >= 5, "the proxy dropped {drops} replies");
    // Exactly the distinct lines, once each, in the order of their first
    // sighting: as without faults.
    let mut first = HashSet::new();
    let want: Vec<&String> = input.iter().filter(|l| first.insert(*l)).collect();
    let got = out_lines(&o);
    assert_eq!(got.len(), distinct, "{drops} drops");
    assert!(got.iter().zip(&want).all(|(g, w)| g == *w));
}

#[test]
fn redis_killed_and_restarted_under_two_processes_loses_and_repeats_nothing() {
    let mut redis = RedisServer::start_aof_always();
    let url = redis.url();
    let (input, distinct) = urls(400_000, 0.3, 9);
    let (_dir, fa, fb) = both_ways(&input);
    let mut a = dedup(&url, "crawl", &fa, &[]);
    let mut b = dedup(&url, "crawl", &fb, &[]);
    // Kill Redis once the filter holds something, mid-run.
    let mut conn = redis.conn();
    let deadline = Instant::now() + Duration::from_secs(30);
    while redis::cmd("DBSIZE").query::<u64>(&mut conn).unwrap_or(0) < 2 {
        assert!(Instant::now() < deadline, "no filter appeared");
        thread::sleep(Duration::from_millis(5));
    }
    thread::sleep(Duration::from_millis(150));
    redis.kill9();
    assert!(
        a.try_wait().unwrap().is_none() && b.try_wait().unwrap().is_none(),
        "both still running when Redis died"
    );
    thread::sleep(Duration::from_secs(1));
    redis.restart();
    let (a, b) = (a.wait_with_output().unwrap(), b.wait_with_output().unwrap());
    assert!(a.status.success(), "{}", stderr(&a));
    assert!(b.status.success(), "{}", stderr(&b));
    assert!(
        !out_lines(&a).is_empty() && !out_lines(&b).is_empty(),
        "both took part"
    );
    let times = printed(&[&a, &b]);
    let twice: Vec<_> = times.iter().filter(|(_, &n)| n > 1).collect();
    assert!(twice.is_empty(), "{} lines printed twice", twice.len());
    let set = distinct_of(&input);
    let lost = set.iter().filter(|l| !times.contains_key(**l)).count();
    assert_eq!(lost, 0, "{lost} of {distinct} lines never printed");
    assert_eq!(times.len(), distinct);
}

#[test]
fn redis_gone_past_the_retry_budget_then_a_rerun_loses_no_line() {
    let redis = RedisServer::start_aof_always();
    let (input, distinct) = urls(50_000, 0.3, 13);
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("urls.txt");
    write_file(&file, &joined(&input));
    // Redis disappears (as far as the client sees) right after it ran a
    // request in the middle of the run.
    let proxy = Proxy::start(redis.port, Cut::GoneAfter(20));
    let first = dedup(&proxy.url(), "crawl", &file, &["--redis-retry", "2s"])
        .wait_with_output()
        .unwrap();
    assert_eq!(first.status.code(), Some(2), "{}", stderr(&first));
    let err = stderr(&first);
    let unknown: usize = err
        .split("; ")
        .find_map(|part| {
            part.strip_suffix(" line(s) whose add has an unknown outcome were taken as new\n")
        })
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no count of unknown lines in: {err}"));
    assert!(
        unknown > 0,
        "the dropped request's lines are unknown: {err}"
    );
    assert!(!out_lines(&first).is_empty());

    // The same command again, Redis back: together the runs print every
    // distinct line; only the unknown ones may appear in both.
    let rerun = dedup(&redis.url(), "crawl", &file, &[])
        .wait_with_output()
        .unwrap();
    assert!(rerun.status.success(), "{}", stderr(&rerun));
    let times = printed(&[&first, &rerun]);
    let set = distinct_of(&input);
    let lost = set.iter().filter(|l| !times.contains_key(**l)).count();
    assert_eq!(lost, 0, "{lost} of {distinct} lines never printed");
    let twice = times.values().filter(|&&n| n > 1).count();
    assert!(twice <= unknown, "{twice} printed twice, {unknown} unknown");
}

/// The live master that holds shard 0 of filter `name`, if one does.
fn master_of_shard0(cluster: &Cluster, name: &str) -> Option<usize> {
    let key = format!("seen:{{{name}:0}}:bits");
    cluster.nodes.iter().position(|n| {
        if !n.ping() {
            return false;
        }
        let mut c = n.conn();
        let Ok(role) = redis::cmd("ROLE").query::<Vec<redis::Value>>(&mut c) else {
            return false;
        };
        let master = matches!(&role[0], redis::Value::BulkString(r) if r == b"master");
        master
            && redis::cmd("EXISTS")
                .arg(&key)
                .query::<i64>(&mut c)
                .unwrap_or(0)
                == 1
    })
}

/// Two processes over the same lines while the master of one of the
/// filter's shards is killed; its replica takes over, and the killed node
/// comes back as the new master's replica. Returns how many lines were
/// printed twice; fails on a lost line.
fn failover_run(cluster: &mut Cluster, name: &str, extra: &[&str]) -> usize {
    let url = cluster.url();
    let (input, distinct) = urls(400_000, 0.3, 21);
    let (_dir, fa, fb) = both_ways(&input);
    let (mut a, mut b) = (dedup(&url, name, &fa, extra), dedup(&url, name, &fb, extra));
    let deadline = Instant::now() + Duration::from_secs(30);
    let victim = loop {
        if let Some(m) = master_of_shard0(cluster, name) {
            break m;
        }
        assert!(Instant::now() < deadline, "no filter appeared");
        thread::sleep(Duration::from_millis(5));
    };
    thread::sleep(Duration::from_millis(200));
    cluster.nodes[victim].kill9();
    assert!(
        a.try_wait().unwrap().is_none() && b.try_wait().unwrap().is_none(),
        "both still running when the master died"
    );
    // The replica takes over (node timeout 1 s); then the old master
    // rejoins, as the new master's replica.
    let deadline = Instant::now() + Duration::from_secs(30);
    while master_of_shard0(cluster, name).is_none() {
        if Instant::now() > deadline {
            let live = cluster.nodes.iter().find(|n| n.ping()).unwrap();
            let nodes: String = redis::cmd("CLUSTER")
                .arg("NODES")
                .query(&mut live.conn())
                .unwrap();
            panic!("no failover within 30 s: {nodes}");
        }
        thread::sleep(Duration::from_millis(50));
    }
    cluster.nodes[victim].restart();
    let (a, b) = (a.wait_with_output().unwrap(), b.wait_with_output().unwrap());
    assert!(a.status.success(), "{}", stderr(&a));
    assert!(b.status.success(), "{}", stderr(&b));
    cluster.wait_ok();
    let times = printed(&[&a, &b]);
    let set = distinct_of(&input);
    let lost = set.iter().filter(|l| !times.contains_key(**l)).count();
    assert_eq!(lost, 0, "{lost} of {distinct} lines never printed");
    times.values().filter(|&&n| n > 1).count()
}

#[test]
fn a_cluster_failover_loses_no_line_and_with_redis_wait_repeats_none() {
    let mut cluster = Cluster::start_replicated(3, 1, 1000);
    let twice = failover_run(&mut cluster, "waited", &["--redis-wait", "1"]);
    assert_eq!(twice, 0, "{twice} lines printed twice with --redis-wait 1");
    // Without waiting, writes the dead master had not sent to its replica
    // are lost with it: their lines may be printed again, never lost.
    let twice = failover_run(&mut cluster, "unwaited", &[]);
    eprintln!("without --redis-wait: {twice} lines printed twice");
}
