//! Restarts: every acknowledged add is there after SIGTERM, after SIGKILL
//! with `--fsync always`, and after `SHUTDOWN`; `BF.INFO` and `BF.CARD`
//! are unchanged.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use crate::support::{text, Server};

fn fill(server: &Server, key: &str, n: usize) -> (Vec<u8>, Vec<u8>) {
    let mut c = server.raw();
    assert_eq!(c.cmd(&["BF.RESERVE", key, "0.001", "50000"]), b"+OK\r\n");
    drop(c);
    fill_reserved(server, key, n)
}

/// Adds `n` items to the filter `key` (made already, with room for them).
fn fill_reserved(server: &Server, key: &str, n: usize) -> (Vec<u8>, Vec<u8>) {
    let mut c = server.raw();
    for i in 0..n {
        c.send(&["BF.ADD", key, &format!("https://site/{i}")]);
    }
    for _ in 0..n {
        assert_eq!(c.read_reply_bytes().unwrap(), b":1\r\n");
    }
    (c.cmd(&["BF.INFO", key]), c.cmd(&["BF.CARD", key]))
}

fn check(server: &Server, key: &str, n: usize, info: &[u8], card: &[u8]) {
    let mut c = server.raw();
    for i in 0..n {
        c.send(&["BF.EXISTS", key, &format!("https://site/{i}")]);
    }
    for i in 0..n {
        assert_eq!(c.read_reply_bytes().unwrap(), b":1\r\n", "item {i} lost");
    }
    assert_eq!(text(&c.cmd(&["BF.INFO", key])), text(info));
    assert_eq!(text(&c.cmd(&["BF.CARD", key])), text(card));
}

#[test]
fn sigterm_checkpoints_and_exits_zero() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("d");
    let server = Server::start(&dir, &[]);
    let (info, card) = fill(&server, "k", 20_000);
    let log = server.log_path();
    let status = server.signal_and_wait(libc::SIGTERM);
    assert!(status.success(), "{status}");
    let log = std::fs::read_to_string(log).unwrap();
    assert!(log.contains("SIGTERM received"), "{log}");
    assert!(log.contains("checkpoint done"), "{log}");
    assert!(log.contains("shut down cleanly"), "{log}");
    let server = Server::start(&dir, &[]);
    check(&server, "k", 20_000, &info, &card);
}

#[test]
fn shutdown_command_exits_zero() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("d");
    let server = Server::start(&dir, &[]);
    let (info, card) = fill(&server, "k", 1000);
    let mut c = server.raw();
    c.send(&["SHUTDOWN"]);
    assert!(c.read_reply_bytes().is_none(), "SHUTDOWN has no reply");
    assert!(server.wait().success());
    let server = Server::start(&dir, &[]);
    check(&server, "k", 1000, &info, &card);
}

/// `SHUTDOWN NOSAVE` exits without a checkpoint (the final close of the
/// store must not write one), and the adds are all there after the
/// restart, replayed from the log it synced.
#[test]
fn shutdown_nosave_writes_no_snapshot_and_loses_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("d");
    let server = Server::start(&dir, &[]);
    let (info, card) = fill(&server, "k", 1000);
    let mut c = server.raw();
    c.send(&["SHUTDOWN", "NOSAVE"]);
    assert!(c.read_reply_bytes().is_none(), "SHUTDOWN has no reply");
    assert!(server.wait().success());
    let snapshots: Vec<_> = std::fs::read_dir(dir.join("snapshots"))
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert!(snapshots.is_empty(), "snapshots written: {snapshots:?}");
    let server = Server::start(&dir, &[]);
    check(&server, "k", 1000, &info, &card);
}

/// SIGKILL while clients add with `--fsync always`: every add that was
/// acknowledged is present after the restart.
#[test]
fn sigkill_with_fsync_always_loses_nothing_acknowledged() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("d");
    for round in 0..3 {
        let server = Server::start(&dir, &["--fsync", "always"]);
        let acked = Arc::new(Mutex::new(Vec::<String>::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let writers: Vec<_> = (0..4)
            .map(|w| {
                let acked = acked.clone();
                let stop = stop.clone();
                let port = server.port;
                std::thread::spawn(move || {
                    let mut c = crate::support::Raw::connect(port);
                    let mut i = 0;
                    while !stop.load(Ordering::Relaxed) {
                        let items: Vec<String> =
                            (0..8).map(|j| format!("r{round}w{w}i{i}j{j}")).collect();
                        let mut cmd = vec!["BF.MADD".to_string(), "urls".into()];
                        cmd.extend(items.iter().cloned());
                        c.send(&cmd);
                        match c.read_reply_bytes() {
                            Some(r) if r.starts_with(b"*8") => {
                                acked.lock().unwrap().extend(items);
                            }
                            _ => return,
                        }
                        i += 1;
                    }
                })
            })
            .collect();
        std::thread::sleep(std::time::Duration::from_millis(300 + 200 * round));
        let status = server.signal_and_wait(libc::SIGKILL);
        assert!(!status.success());
        stop.store(true, Ordering::Relaxed);
        for w in writers {
            w.join().unwrap();
        }
        let acked = acked.lock().unwrap().clone();
        assert!(
            acked.len() > 100,
            "round {round}: only {} adds",
            acked.len()
        );
        let server = Server::start(&dir, &["--fsync", "always"]);
        let mut c = server.raw();
        for chunk in acked.chunks(500) {
            let mut cmd = vec!["BF.MEXISTS".to_string(), "urls".into()];
            cmd.extend(chunk.iter().cloned());
            let r = c.cmd(&cmd);
            let want: Vec<u8> = {
                let mut w = format!("*{}\r\n", chunk.len()).into_bytes();
                for _ in chunk {
                    w.extend_from_slice(b":1\r\n");
                }
                w
            };
            assert_eq!(r, want, "round {round}: an acknowledged add was lost");
        }
        drop(server);
    }
}

/// SIGKILL after acknowledged adds (no checkpoint, `--fsync always`): the
/// log alone brings back the same filter, `BF.INFO` and `BF.CARD` included.
#[test]
fn sigkill_after_acknowledged_adds_keeps_info_and_card() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("d");
    let server = Server::start(&dir, &["--fsync", "always", "--save-interval", "0"]);
    let (info, card) = fill(&server, "k", 5_000);
    let status = server.signal_and_wait(libc::SIGKILL);
    assert!(!status.success());
    let server = Server::start(&dir, &["--fsync", "always"]);
    check(&server, "k", 5_000, &info, &card);
}

/// The value of `field` in `INFO persistence`.
fn persistence(server: &Server, field: &str) -> u64 {
    crate::support::info_field(&mut server.raw(), "persistence", field)
}

/// `INFO persistence` says whether the log's writes succeed
/// (`aof_last_write_status`, as Redis) and how far back a power loss could
/// reach (`seen_unsynced_ms`): under `everysec` the time since the last
/// background sync began, which the syncs keep below the time since the
/// start; under `always` 0; under `no` unknown, no field.
#[test]
fn info_persistence_says_how_far_back_a_power_loss_could_reach() {
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::start(&tmp.path().join("e"), &[]);
    fill(&server, "k", 100);
    let info = text(&server.raw().cmd(&["INFO", "persistence"]));
    assert!(info.contains("aof_last_write_status:ok\r\n"), "{info}");
    assert!(info.contains("appendfsync:everysec\r\n"), "{info}");
    // With no sync ending, the figure grows with the time since the first
    // look; a sync that began after the first look sets it back.
    let first = persistence(&server, "seen_unsynced_ms");
    let looked = std::time::Instant::now();
    loop {
        let unsynced = persistence(&server, "seen_unsynced_ms");
        let since = looked.elapsed().as_millis() as u64;
        if unsynced + 500 < first + since {
            break;
        }
        assert!(
            since < 30_000,
            "no sync in {since} ms: seen_unsynced_ms {first}, then {unsynced}"
        );
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    let always = Server::start(&tmp.path().join("a"), &["--fsync", "always"]);
    fill(&always, "k", 100);
    assert_eq!(persistence(&always, "seen_unsynced_ms"), 0);
    let no = Server::start(&tmp.path().join("n"), &["--fsync", "no"]);
    let info = text(&no.raw().cmd(&["INFO", "persistence"]));
    assert!(info.contains("aof_last_write_status:ok\r\n"), "{info}");
    assert!(!info.contains("seen_unsynced_ms"), "{info}");
}

/// `--save-log-size`: with timed checkpoints off, a log past the limit
/// brings a checkpoint within a few seconds (the log shrinks, the last save
/// time moves), and nothing is lost across a restart after it.
#[test]
fn a_log_past_save_log_size_brings_a_checkpoint() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("d");
    let args = ["--save-interval", "0", "--save-log-size", "1MiB"];
    let server = Server::start(&dir, &args);
    let before = persistence(&server, "rdb_last_save_time");
    // 100,000 single adds: about 3 MB of log.
    let mut c = server.raw();
    assert_eq!(c.cmd(&["BF.RESERVE", "k", "0.0001", "1000000"]), b"+OK\r\n");
    drop(c);
    let (info, card) = fill_reserved(&server, "k", 100_000);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let log = persistence(&server, "seen_log_bytes");
        if log < 1 << 20 && persistence(&server, "rdb_bgsave_in_progress") == 0 {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no checkpoint brought the log ({log} bytes) below 1 MiB: {}",
            server.log_text()
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let text = server.log_text();
    assert!(text.contains("log past --save-log-size"), "{text}");
    assert!(text.contains("checkpoint done"), "{text}");
    assert!(persistence(&server, "rdb_last_save_time") >= before);
    assert_eq!(persistence(&server, "rdb_changes_since_last_save"), 0);
    // The checkpointed filter and whatever the log still holds: all there.
    let status = server.signal_and_wait(libc::SIGKILL);
    assert!(!status.success());
    let server = Server::start(&dir, &args);
    check(&server, "k", 100_000, &info, &card);
}

/// A byte flipped in the middle of the log: `seen serve` refuses to start,
/// naming the file and pointing at `--salvage`; with `--salvage` it starts
/// and keeps what precedes the damage.
#[test]
fn a_damaged_log_stops_the_start_unless_salvage() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("d");
    let args = ["--fsync", "always", "--save-interval", "0"];
    let server = Server::start(&dir, &args);
    fill(&server, "k", 2_000);
    assert!(!server.signal_and_wait(libc::SIGKILL).success());
    // The fullest segment, damaged halfway through its records.
    let seg = std::fs::read_dir(dir.join("log"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "log"))
        .max_by_key(|p| {
            let d = std::fs::read(p).unwrap();
            d.iter().rposition(|&b| b != 0).unwrap_or(0)
        })
        .unwrap();
    let mut data = std::fs::read(&seg).unwrap();
    let end = data.iter().rposition(|&b| b != 0).unwrap();
    data[end / 2] ^= 0x10;
    std::fs::write(&seg, &data).unwrap();

    let out = std::process::Command::new(env!("CARGO_BIN_EXE_seen"))
        .args(["serve", "--dir"])
        .arg(&dir)
        .args(["--port", "0"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("corrupt"), "{err}");
    assert!(err.contains(seg.to_str().unwrap()), "{err}");
    assert!(err.contains("--salvage"), "{err}");

    let server = Server::start(&dir, &["--salvage"]);
    let mut c = server.raw();
    assert_eq!(c.cmd(&["BF.EXISTS", "k", "https://site/0"]), b":1\r\n");
    let log = server.log_text();
    assert!(log.contains("salvage"), "{log}");
    // The salvaging start checkpointed what it kept: the next start needs
    // no --salvage, even after a kill.
    drop(c);
    assert!(!server.signal_and_wait(libc::SIGKILL).success());
    let server = Server::start(&dir, &[]);
    let mut c = server.raw();
    assert_eq!(c.cmd(&["BF.EXISTS", "k", "https://site/0"]), b":1\r\n");
}
