//! RedisBloom 2.8.20's replies to sizing at every error rate, `BF.DEBUG`,
//! and dump headers and chunks it refuses (recorded by
//! `scripts/record_redisbloom.py` into `vectors/redisbloom-2.8-more.json`),
//! replayed byte for byte against the real server; then a `SAVE` and a
//! restart, which whatever the server accepted must survive.

use serde_json::Value;

use crate::support::{text, Raw, Server};

fn cases() -> Vec<Value> {
    let path = format!(
        "{}/tests/server/vectors/redisbloom-2.8-more.json",
        env!("CARGO_MANIFEST_DIR")
    );
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let v: Value = serde_json::from_str(&text).unwrap();
    v["cases"].as_array().unwrap().clone()
}

/// A JSON string of latin-1 decoded bytes, as bytes.
fn latin1(v: &Value) -> Vec<u8> {
    v.as_str()
        .unwrap()
        .chars()
        .map(|c| c as u32 as u8)
        .collect()
}

/// The transcripts' string key: seen holds only filters, so a counting
/// filter (which every `BF.*` command refuses with `WRONGTYPE`, as
/// RedisBloom refuses a string) is made in the data directory first.
fn with_string_key(dir: &std::path::Path) {
    let store = seen_store::Store::open(dir, seen_store::StoreOptions::default()).unwrap();
    let spec = seen_store::FilterSpec::Counting {
        capacity: 10,
        error_rate: 0.01,
    };
    store.create(b"str", &spec).unwrap();
    store.close().unwrap();
}

/// Deletes every key but the string stand-in, as the recording's
/// `FLUSHALL` did before each case.
fn clear(c: &mut Raw) {
    for key in ["k", "k1", "k2", "k3", "bf1", "a", "c", "g", "d", "src", "y"] {
        c.cmd(&["DEL", key]);
    }
}

/// Where seen answers otherwise, on purpose: (case, seen's reply, why).
const DIFFERENCES: &[(&str, &[u8], &str)] = &[(
    "bad header: growth 0",
    b"-ERR received bad data\r\n",
    "a scaling chain with expansion 0 cannot grow (RedisBloom takes it, then \
     fails every add past the first link's capacity); seen refuses the header",
)];

#[test]
fn replies_match_redisbloom_for_sizing_debug_and_dumps() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("data");
    with_string_key(&dir);
    let server = Server::start(&dir, &[]);
    let mut c = server.raw();
    let mut kept = Vec::new();
    for case in cases() {
        clear(&mut c);
        let name = case["name"].as_str().unwrap();
        for step in case["steps"].as_array().unwrap() {
            let cmd: Vec<Vec<u8>> = step["cmd"].as_array().unwrap().iter().map(latin1).collect();
            let mut want = latin1(&step["reply_raw"]);
            if let Some((_, reply, _)) = DIFFERENCES.iter().find(|d| d.0 == name) {
                if cmd[0] == b"BF.LOADCHUNK" {
                    want = reply.to_vec();
                } else if cmd[0] == b"EXISTS" {
                    want = b":0\r\n".to_vec();
                }
            }
            if cmd[0] == b"SET" {
                assert_eq!(want, b"+OK\r\n");
                continue;
            }
            let got = c.cmd(&cmd);
            assert_eq!(text(&got), text(&want), "{name}: {}", text(&cmd[0]));
        }
        // What the last case of each kind left, for the restart.
        if name == "a good dump" || name == "growth expansion 3" {
            let key = if name == "a good dump" { "k3" } else { "g" };
            kept.push((key, c.cmd(&["BF.DEBUG", key])));
        }
    }
    // Every case's keys are kept (no clear after the last): a SAVE and a
    // restart must bring back what was accepted, exactly.
    let mut c = server.raw();
    assert_eq!(c.cmd(&["SAVE"]), b"+OK\r\n");
    drop(c);
    server.signal_and_wait(libc::SIGTERM);
    let server = Server::start(&dir, &[]);
    let mut c = server.raw();
    let (key, debug) = kept.last().unwrap();
    assert_eq!(text(&c.cmd(&["BF.DEBUG", key])), text(debug));
}

/// A filter too large to allocate: RedisBloom's text (its
/// `src/rebloom.c`; RedisBloom 2.8.20 in Redis 7.0 aborts the server
/// instead, so there is no recording), and the server goes on.
#[test]
fn a_filter_too_large_gets_redisblooms_insufficient_memory() {
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::start(tmp.path(), &[]);
    let mut c = server.raw();
    for cmd in [
        vec!["BF.RESERVE", "big", "0.01", "1000000000000000000"],
        vec![
            "BF.INSERT",
            "big2",
            "CAPACITY",
            "1000000000000000000",
            "ITEMS",
            "x",
        ],
        vec!["BF.RESERVE", "big3", "0.000000001", "100000000000000000"],
    ] {
        assert_eq!(
            text(&c.cmd(&cmd)),
            "-ERR Insufficient memory to create filter\r\n",
            "{cmd:?}"
        );
    }
    assert_eq!(c.cmd(&["EXISTS", "big", "big2", "big3"]), b":0\r\n");
    assert_eq!(c.cmd(&["BF.ADD", "small", "x"]), b":1\r\n");
}

/// `COMMAND DOCS` of the `BF.*` commands, byte for byte as RedisBloom
/// documents them (recorded from RedisBloom master in Redis 7.0.15:
/// `vectors/redisbloom-master-command-docs.json`), in RESP2 and RESP3.
#[test]
fn command_docs_are_redisblooms() {
    let path = format!(
        "{}/tests/server/vectors/redisbloom-master-command-docs.json",
        env!("CARGO_MANIFEST_DIR")
    );
    let v: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::start(tmp.path(), &[]);
    let mut resp2 = server.raw();
    let mut resp3 = server.raw();
    assert!(resp3.cmd(&["HELLO", "3"]).starts_with(b"%"));
    let recordings = v["recordings"].as_array().unwrap();
    assert!(recordings.len() >= 24, "{}", recordings.len());
    for r in recordings {
        let cmd: Vec<Vec<u8>> = r["cmd"].as_array().unwrap().iter().map(latin1).collect();
        let c = match r["proto"].as_str().unwrap() {
            "resp2" => &mut resp2,
            _ => &mut resp3,
        };
        assert_eq!(
            text(&c.cmd(&cmd)),
            text(&latin1(&r["reply_raw"])),
            "{} {:?}",
            r["proto"],
            r["cmd"]
        );
    }
}
