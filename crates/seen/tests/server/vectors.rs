//! RedisBloom 2.8.20's recorded replies, replayed byte for byte against
//! the real server (`shared/vectors`).

use base64::Engine;
use seen_store::{FilterSpec, Store, StoreOptions};
use serde_json::Value;

use crate::support::{text, Server};

fn load(name: &str) -> Value {
    let path = format!(
        "{}/../../../shared/vectors/{name}",
        env!("CARGO_MANIFEST_DIR")
    );
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    serde_json::from_str(&text).unwrap()
}

/// The transcripts were recorded after `FLUSHALL`, `SET str x` and
/// `BF.RESERVE ns 0.01 10 NONSCALING`. seen holds only filters, so the key
/// of another type is a counting filter put in the data directory before
/// the server starts; every `BF.*` command treats it exactly as RedisBloom
/// treats a string.
fn prepared_server(dir: &std::path::Path) -> Server {
    {
        let store = Store::open(dir, StoreOptions::default()).unwrap();
        store
            .create(
                b"str",
                &FilterSpec::Counting {
                    capacity: 10,
                    error_rate: 0.01,
                },
            )
            .unwrap();
        store.close().unwrap();
    }
    Server::start(dir, &[])
}

#[test]
fn replies_match_redisbloom_transcripts_resp2_and_resp3() {
    let v = load("redisbloom-2.8-replies.json");
    for proto in ["resp2", "resp3"] {
        let tmp = tempfile::tempdir().unwrap();
        let server = prepared_server(&tmp.path().join("data"));
        let mut c = server.raw();
        if proto == "resp3" {
            let hello = c.cmd(&["HELLO", "3"]);
            assert!(hello.starts_with(b"%7\r\n"), "{}", text(&hello));
        }
        assert_eq!(
            c.cmd(&["BF.RESERVE", "ns", "0.01", "10", "NONSCALING"]),
            b"+OK\r\n"
        );
        let steps = v[proto].as_array().unwrap();
        assert_eq!(steps.len(), 60);
        for step in steps {
            let cmd: Vec<Vec<u8>> = step["cmd"]
                .as_array()
                .unwrap()
                .iter()
                .map(|a| a.as_str().unwrap().as_bytes().to_vec())
                .collect();
            // latin-1 decoded in the JSON: each char is one byte.
            let want: Vec<u8> = step["reply_raw"]
                .as_str()
                .unwrap()
                .chars()
                .map(|ch| ch as u32 as u8)
                .collect();
            let got = c.cmd(&cmd);
            assert_eq!(text(&got), text(&want), "{proto}: {:?}", step["cmd"]);
        }
    }
}

fn chunks(case: &Value) -> Vec<(i64, Vec<u8>)> {
    case["scandump_chunks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|ch| {
            (
                ch["iterator"].as_i64().unwrap(),
                base64::engine::general_purpose::STANDARD
                    .decode(ch["data_b64"].as_str().unwrap())
                    .unwrap(),
            )
        })
        .collect()
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_str().unwrap().to_string())
        .collect()
}

fn info_of(c: &mut crate::support::Raw, key: &str) -> Value {
    let r = c.cmd(&["BF.INFO", key]);
    let reply = seen_resp::parse_reply(&r).unwrap().unwrap().0;
    let seen_resp::Reply::Array(items) = reply else {
        panic!("BF.INFO: {}", text(&r))
    };
    let mut m = serde_json::Map::new();
    for pair in items.chunks(2) {
        let seen_resp::Reply::Simple(k) = &pair[0] else {
            panic!()
        };
        let v = match &pair[1] {
            seen_resp::Reply::Integer(i) => Value::from(*i),
            seen_resp::Reply::Null => Value::Null,
            other => panic!("{other:?}"),
        };
        m.insert(text(k), v);
    }
    Value::Object(m)
}

/// Every case of `redisbloom-2.8-bf.json`, both ways: built by commands
/// (BF.RESERVE, BF.ADD) the server's BF.SCANDUMP is RedisBloom's, chunk by
/// chunk; loaded from RedisBloom's dump (BF.LOADCHUNK), the filter answers
/// as RedisBloom did. After a restart, the same again.
#[test]
fn redisbloom_dumps_round_trip_through_the_server() {
    let v = load("redisbloom-2.8-bf.json");
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("data");
    let server = Server::start(&dir, &[]);
    let mut c = server.raw();
    let cases = v["cases"].as_array().unwrap();
    for case in cases {
        let name = case["case"].as_str().unwrap();
        let built = format!("built:{name}");
        if let Some(args) = case["reserve_args"].as_array() {
            let mut cmd = vec!["BF.RESERVE".to_string(), built.clone()];
            cmd.extend(args.iter().map(|a| a.as_str().unwrap().to_string()));
            assert_eq!(c.cmd(&cmd), b"+OK\r\n", "{name}");
        }
        let items = strings(&case["items_utf8"]);
        let replies: Vec<i64> = case["bf_add_replies"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r.as_i64().unwrap())
            .collect();
        for (item, want) in items.iter().zip(&replies) {
            let got = c.cmd(&["BF.ADD", built.as_str(), item.as_str()]);
            assert_eq!(text(&got), format!(":{want}\r\n"), "{name}: BF.ADD {item}");
        }
        let mut iter = 0i64;
        for (next, data) in chunks(case) {
            let r = c.cmd(&["BF.SCANDUMP", built.as_str(), &iter.to_string()]);
            let mut want = format!("*2\r\n:{next}\r\n${}\r\n", data.len()).into_bytes();
            want.extend_from_slice(&data);
            want.extend_from_slice(b"\r\n");
            assert_eq!(r, want, "{name}: SCANDUMP {iter}");
            iter = next;
        }
        assert_eq!(
            c.cmd(&["BF.SCANDUMP", built.as_str(), &iter.to_string()]),
            b"*2\r\n:0\r\n$0\r\n\r\n"
        );

        let loaded = format!("loaded:{name}");
        for (it, data) in chunks(case) {
            let it_s = it.to_string();
            let r = c.cmd(&[
                b"BF.LOADCHUNK".as_slice(),
                loaded.as_bytes(),
                it_s.as_bytes(),
                &data,
            ]);
            assert_eq!(r, b"+OK\r\n", "{name}: LOADCHUNK {it}");
        }
    }
    check_loaded(&mut c, cases);
    drop(c);
    // After a restart (the dumps were only logged, not checkpointed: the
    // server is killed), the loaded filters answer the same.
    let pid = server.pid();
    let status = server.signal_and_wait(libc::SIGKILL);
    assert!(!status.success(), "pid {pid}");
    let server = Server::start(&dir, &[]);
    let mut c = server.raw();
    check_loaded(&mut c, cases);
}

fn check_loaded(c: &mut crate::support::Raw, cases: &[Value]) {
    for case in cases {
        let name = case["case"].as_str().unwrap();
        let loaded = format!("loaded:{name}");
        let info = info_of(c, &loaded);
        assert_eq!(info, case["bf_info"], "{name}: BF.INFO");
        assert_eq!(
            text(&c.cmd(&["BF.CARD", loaded.as_str()])),
            format!(":{}\r\n", case["bf_card"]),
            "{name}"
        );
        let probes = strings(&case["absent_probes"]);
        let want: Vec<i64> = case["absent_probe_exists_replies"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r.as_i64().unwrap())
            .collect();
        for (p, w) in probes.iter().zip(want) {
            let got = c.cmd(&["BF.EXISTS", loaded.as_str(), p.as_str()]);
            assert_eq!(text(&got), format!(":{w}\r\n"), "{name}: BF.EXISTS {p}");
        }
        for item in strings(&case["items_utf8"]) {
            let got = c.cmd(&["BF.EXISTS", loaded.as_str(), item.as_str()]);
            assert_eq!(got, b":1\r\n", "{name}: {item} lost");
        }
    }
}
