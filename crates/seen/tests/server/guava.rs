//! Guava's filters in `seen serve`: a file Java's `BloomFilter.writeTo`
//! wrote goes in with `redis-cli -x BF.IMPORT`, is served and added to by
//! any client, survives a crash, and comes out with `BF.EXPORT` as the very
//! file Guava would write; `BF.RESERVE ... LAYOUT GUAVA` makes the filter
//! Guava's `BloomFilter.create` makes. Java reads what seen exports and
//! agrees on every probe.

use std::path::Path;
use std::process::{Command, Stdio};

use seen_core::guava;

use crate::guava_peer::{item, GuavaPeer};
use crate::support::{python_ok, text, Raw, Server};

fn peer() -> &'static GuavaPeer {
    GuavaPeer::get(Path::new(env!("CARGO_TARGET_TMPDIR")))
}

/// Java's filter of items `0..n` at `fpp`, written to `path`.
fn java_filter(path: &Path, n: u64, fpp: f64) {
    peer().build(path, n, fpp, "MURMUR128_MITZ_64");
}

/// `redis-cli -p PORT -x ARGS... < file`: its output.
fn redis_cli_with_file(port: u16, args: &[&str], file: &Path) -> String {
    let out = Command::new("redis-cli")
        .args(["-p", &port.to_string(), "-x"])
        .args(args)
        .stdin(Stdio::from(std::fs::File::open(file).unwrap()))
        .output()
        .expect("redis-cli is required (Debian package redis-tools)");
    assert!(out.status.success(), "{out:?}");
    text(&out.stdout)
}

/// `BF.MADD key item(range)` in batches; how many were new.
fn madd(c: &mut Raw, key: &str, range: std::ops::Range<u64>) -> usize {
    let mut new = 0;
    let items: Vec<String> = range.map(item).collect();
    for batch in items.chunks(1000) {
        let mut args = vec!["BF.MADD", key];
        args.extend(batch.iter().map(String::as_str));
        new += text(&c.cmd(&args)).matches(":1\r\n").count();
    }
    new
}

/// `BF.MEXISTS key item(range)`: whether every one is present.
fn all_present(c: &mut Raw, key: &str, range: std::ops::Range<u64>) -> bool {
    let items: Vec<String> = range.map(item).collect();
    items.chunks(1000).all(|batch| {
        let mut args = vec!["BF.MEXISTS", key];
        args.extend(batch.iter().map(String::as_str));
        !text(&c.cmd(&args)).contains(":0\r\n")
    })
}

/// `BF.EXPORT key GUAVA` through redis-py, written to `path`.
fn export_with_redis_py(port: u16, key: &str, path: &Path) {
    python_ok(&format!(
        "import redis\n\
         r = redis.Redis(port={port})\n\
         data = r.execute_command('BF.EXPORT', '{key}', 'GUAVA')\n\
         open({path:?}, 'wb').write(data)\n\
         print('ok')",
        path = path.to_str().unwrap()
    ));
}

/// Asserts Guava answers every probe of the file at `path` as seen does:
/// items `0..items` and 100,000 probes.
fn guava_agrees(path: &Path, items: u64) {
    peer().assert_agrees(path, items, 100_000);
}

#[test]
fn a_guava_file_goes_in_survives_a_crash_and_comes_out_as_guava_would_write_it() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let java = tmp.path().join("crawl.guava");
    let (n, more) = (200_000, 20_000);
    java_filter(&java, n, 0.01);

    let server = Server::start(&data, &["--fsync", "always"]);
    let reply = redis_cli_with_file(server.port, &["BF.IMPORT", "crawl", "GUAVA"], &java);
    assert_eq!(reply.trim(), "OK");
    let mut c = server.raw();
    assert!(all_present(&mut c, "crawl", 0..n));
    let new = madd(&mut c, "crawl", n..n + more);
    assert!(new > more as usize * 98 / 100, "{new}");
    let info = text(&c.cmd(&["BF.DEBUG", "crawl"]));
    assert!(info.contains("layout:guava"), "{info}");
    // A second import to the same key is refused.
    let again = redis_cli_with_file(server.port, &["BF.IMPORT", "crawl", "GUAVA"], &java);
    assert!(again.contains("item exists"), "{again}");
    drop(c);
    server.signal_and_wait(libc::SIGKILL);

    let server = Server::start(&data, &[]);
    let mut c = server.raw();
    assert!(all_present(&mut c, "crawl", 0..n + more));
    let exported = tmp.path().join("exported.guava");
    export_with_redis_py(server.port, "crawl", &exported);
    // Bit for bit the file Java's filter would be after the same puts.
    let expected = guava::read_file(&std::fs::read(&java).unwrap()[..], u64::MAX).unwrap();
    for i in n..n + more {
        expected.add(item(i));
    }
    let mut want = Vec::new();
    guava::write(&expected, &mut want).unwrap();
    assert!(
        std::fs::read(&exported).unwrap() == want,
        "exported file differs"
    );
    guava_agrees(&exported, n + more);

    // Out of the data directory too: the snapshot a SAVE writes, converted.
    assert_eq!(c.cmd(&["SAVE"]), b"+OK\r\n");
    let snapshot = std::fs::read_dir(data.join("snapshots"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|e| e == "snap"))
        .expect("a snapshot");
    let converted = tmp.path().join("converted.guava");
    let out = Command::new(env!("CARGO_BIN_EXE_seen"))
        .args(["convert", "--to", "guava"])
        .args([&snapshot, &converted])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        std::fs::read(&converted).unwrap() == want,
        "converted snapshot differs"
    );
}

#[test]
fn layout_guava_makes_the_filter_guava_makes() {
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::start(&tmp.path().join("data"), &[]);
    let mut c = server.raw();
    let n = 100_000;
    assert_eq!(
        c.cmd(&["BF.RESERVE", "g", "0.01", &n.to_string(), "LAYOUT", "GUAVA"]),
        b"+OK\r\n"
    );
    assert_eq!(
        madd(&mut c, "g", 0..n) as u64,
        n - count_false_positives_at_add(n)
    );
    let exported = tmp.path().join("g.guava");
    export_with_redis_py(server.port, "g", &exported);
    let java = tmp.path().join("java.guava");
    java_filter(&java, n, 0.01);
    assert!(std::fs::read(&exported).unwrap() == std::fs::read(&java).unwrap());
    guava_agrees(&exported, n);

    // BF.INSERT makes one too; Guava's filters have one size.
    let reply = c.cmd(&[
        "BF.INSERT",
        "h",
        "CAPACITY",
        "1000",
        "LAYOUT",
        "GUAVA",
        "ITEMS",
        "a",
    ]);
    assert_eq!(reply, b"*1\r\n:1\r\n");
    let reply = text(&c.cmd(&[
        "BF.RESERVE",
        "x",
        "0.01",
        "10",
        "EXPANSION",
        "2",
        "LAYOUT",
        "GUAVA",
    ]));
    assert!(reply.contains("does not scale"), "{reply}");
    let reply = text(&c.cmd(&["BF.SCANDUMP", "g", "0"]));
    assert!(reply.contains("BF.EXPORT"), "{reply}");
    let reply = text(&c.cmd(&["BF.RESERVE", "y", "0.01", "10", "LAYOUT", "GUAVA32"]));
    assert!(
        reply.contains("expected CLASSIC, BLOCKED or GUAVA"),
        "{reply}"
    );
}

/// How many of items `0..n` a Guava filter for `n` at 1% takes for present
/// when they are put in order (Guava's `put` returns false for them too).
fn count_false_positives_at_add(n: u64) -> u64 {
    let f = guava::create(n, 0.01).unwrap();
    (0..n).filter(|&i| !f.add(item(i))).count() as u64
}

#[test]
fn seen_files_move_in_and_out_too_and_bad_files_change_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let server = Server::start(&data, &[]);
    let mut c = server.raw();

    // A `seen dedup --state` file (blocked layout), in and out unchanged.
    let state = seen_core::BloomFilter::new(10_000, 0.001).unwrap();
    for i in 0..5_000 {
        state.add(item(i));
    }
    let mut bytes = Vec::new();
    state.encode(&mut bytes).unwrap();
    c.send(&[&b"BF.IMPORT"[..], b"state", b"SEEN", &bytes]);
    assert_eq!(c.read_reply_bytes().unwrap(), b"+OK\r\n");
    assert!(all_present(&mut c, "state", 0..5_000));
    let out = c.cmd(&["BF.EXPORT", "state", "SEEN"]);
    let header = format!("${}\r\n", bytes.len());
    assert!(out.starts_with(header.as_bytes()) && out[header.len()..].starts_with(&bytes));
    c.send(&[
        &b"BF.IMPORT"[..],
        b"half",
        b"SEEN",
        &bytes[..bytes.len() / 2],
    ]);
    let reply = text(&c.read_reply_bytes().unwrap());
    assert!(
        reply.contains("ERR not a seen filter") && reply.contains("truncated"),
        "{reply}"
    );
    let reply = text(&c.cmd(&["BF.EXPORT", "state", "GUAVA"]));
    assert!(reply.contains("only a filter of Guava's layout"), "{reply}");

    // Bad files: refused, the key never made.
    let java = tmp.path().join("ok.guava");
    java_filter(&java, 1_000, 0.01);
    let good = std::fs::read(&java).unwrap();
    let mut zero_hashes = good.clone();
    zero_hashes[1] = 0;
    let mut bad_strategy = good.clone();
    bad_strategy[0] = 7;
    let mut longer = good.clone();
    longer.push(0);
    let mut huge = good[..6].to_vec();
    huge[2..6].copy_from_slice(&i32::MAX.to_be_bytes());
    let mut negative = good.clone();
    negative[2] = 0x80;
    let cases: [(&str, &[u8], &str); 7] = [
        ("short", &good[..good.len() - 1], "truncated"),
        ("zero", &zero_hashes, "0 hash functions"),
        ("strategy", &bad_strategy, "strategy ordinal 7"),
        ("longer", &longer, "bytes follow"),
        ("huge", &huge, "truncated"),
        ("negative", &negative, "words"),
        ("empty", b"", "truncated"),
    ];
    for (key, file, needle) in cases {
        c.send(&[&b"BF.IMPORT"[..], key.as_bytes(), b"GUAVA", file]);
        let reply = text(&c.read_reply_bytes().unwrap());
        assert!(
            reply.starts_with("-ERR not a Guava filter") && reply.contains(needle),
            "{key}: {reply}"
        );
        assert_eq!(c.cmd(&["EXISTS", key]), b":0\r\n", "{key}");
    }
    c.send(&[&b"BF.IMPORT"[..], b"k", b"JAVA", &good]);
    assert!(text(&c.read_reply_bytes().unwrap()).contains("expected GUAVA or SEEN"));
    c.send(&[&b"BF.IMPORT"[..], b"state", b"GUAVA", &good]);
    assert!(text(&c.read_reply_bytes().unwrap()).contains("item exists"));
    let reply = text(&c.cmd(&["BF.EXPORT", "nothing", "GUAVA"]));
    assert!(reply.contains("not found"), "{reply}");
    let reply = text(&c.cmd(&["BF.IMPORT", "k", "GUAVA"]));
    assert!(reply.contains("wrong number of arguments"), "{reply}");

    // Everything accepted survives a restart, and nothing refused stops it.
    c.send(&["SHUTDOWN"]);
    assert!(c.read_reply_bytes().is_none());
    drop(c);
    server.wait();
    let server = Server::start(&data, &[]);
    let mut c = server.raw();
    assert!(all_present(&mut c, "state", 0..5_000));
    assert_eq!(c.cmd(&["DBSIZE"]), b":1\r\n");
}
