//! The wire: split frames, pipelining, inline commands, binary items,
//! garbage, and many bad commands on one connection.

use crate::support::{text, Server};

#[test]
fn split_frames_wait_for_more_bytes() {
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::start(&tmp.path().join("d"), &[]);
    let mut c = server.raw();
    let frame = b"*3\r\n$6\r\nBF.ADD\r\n$1\r\nk\r\n$5\r\nhello\r\n";
    // Byte by byte: nothing is answered until the frame is complete.
    for b in frame.iter() {
        c.send_raw(&[*b]);
    }
    assert_eq!(c.read_reply_bytes().unwrap(), b":1\r\n");
    // Pipelined, split at every possible point.
    let mut many = Vec::new();
    for i in 0..20 {
        many.extend_from_slice(
            format!(
                "*3\r\n$6\r\nBF.ADD\r\n$1\r\nk\r\n${}\r\nitem{i}\r\n",
                4 + i.to_string().len()
            )
            .as_bytes(),
        );
    }
    for (n, piece) in many.chunks(7).enumerate() {
        c.send_raw(piece);
        if n % 5 == 0 {
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
    }
    for _ in 0..20 {
        assert_eq!(c.read_reply_bytes().unwrap(), b":1\r\n");
    }
}

#[test]
fn inline_commands_and_binary_items() {
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::start(&tmp.path().join("d"), &[]);
    let mut c = server.raw();
    c.send_raw(b"PING\r\nBF.ADD inl \"a b\"\nBF.EXISTS inl \"a b\"\r\nbf.exists inl a\r\n");
    assert_eq!(c.read_reply_bytes().unwrap(), b"+PONG\r\n");
    assert_eq!(c.read_reply_bytes().unwrap(), b":1\r\n");
    assert_eq!(c.read_reply_bytes().unwrap(), b":1\r\n");
    assert_eq!(c.read_reply_bytes().unwrap(), b":0\r\n");
    let item: &[u8] = b"\x00\r\n\xff*3\r\n";
    assert_eq!(c.cmd(&[&b"BF.ADD"[..], b"bin\x00key", item]), b":1\r\n");
    assert_eq!(c.cmd(&[&b"BF.EXISTS"[..], b"bin\x00key", item]), b":1\r\n");
    assert_eq!(
        c.cmd(&[&b"BF.EXISTS"[..], b"bin\x00key", b"\x00"]),
        b":0\r\n"
    );
}

/// Bad arguments get `-ERR` and the connection lives on; a flood of them
/// leaves the server healthy.
#[test]
fn many_bad_commands_keep_the_connection() {
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::start(&tmp.path().join("d"), &[]);
    let mut c = server.raw();
    let bad: Vec<Vec<&str>> = vec![
        vec!["BF.RESERVE"],
        vec!["BF.RESERVE", "k", "2", "10"],
        vec!["BF.RESERVE", "k", "0.01", "-1"],
        vec!["BF.RESERVE", "k", "0.01", "99999999999999999999999"],
        vec!["BF.RESERVE", "k", "nan", "10"],
        vec!["BF.RESERVE", "k", "0.01", "10", "LAYOUT", "diagonal"],
        vec!["BF.ADD", "k"],
        vec!["BF.INSERT", "k", "CAPACITY"],
        vec!["BF.INSERT", "k", "ERROR", "x", "ITEMS", "a"],
        vec!["BF.INFO", "nope"],
        vec!["BF.SCANDUMP", "nope", "0"],
        vec!["BF.LOADCHUNK", "k", "1", "not a header"],
        vec!["BF.LOADCHUNK", "k", "-5", "x"],
        vec!["EXPIRE", "k", "x"],
        vec!["SELECT", "3"],
        vec!["SCAN", "x"],
        vec!["HELLO", "4"],
        vec!["CLIENT", "SETNAME", "has space"],
        vec!["CONFIG", "SET", "maxmemory", "1tb"],
        vec!["FLUSHALL", "NOW"],
        vec!["nosuchcommand"],
        vec!["GET", "k"],
    ];
    for _ in 0..50 {
        for cmd in &bad {
            let r = c.cmd(cmd);
            assert!(r.starts_with(b"-"), "{cmd:?}: {}", text(&r));
        }
    }
    assert_eq!(c.cmd(&["PING"]), b"+PONG\r\n");
    assert_eq!(c.cmd(&["BF.ADD", "k", "x"]), b":1\r\n");
    assert_eq!(c.cmd(&["DBSIZE"]), b":1\r\n");
    let mut other = server.raw();
    assert_eq!(other.cmd(&["BF.EXISTS", "k", "x"]), b":1\r\n");
}

/// A malformed frame gets Redis's protocol error and the connection is
/// closed; the server and other connections are unaffected.
#[test]
fn malformed_frames_close_only_that_connection() {
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::start(&tmp.path().join("d"), &[]);
    let mut keep = server.raw();
    assert_eq!(keep.cmd(&["BF.ADD", "k", "x"]), b":1\r\n");
    let garbage: Vec<(&[u8], &str)> = vec![
        (
            b"*2\r\n$3\r\nfoo\r\nx3\r\n",
            "Protocol error: expected '$', got 'x'",
        ),
        (
            b"*2\r\n$3\r\nfoo\r\n$x\r\n",
            "Protocol error: invalid bulk length",
        ),
        (b"*abc\r\n", "Protocol error: invalid multibulk length"),
        (b"*1\r\n$-5\r\n", "Protocol error: invalid bulk length"),
        (
            b"*1\r\n$999999999999\r\n",
            "Protocol error: invalid bulk length",
        ),
        (
            b"\"unbalanced\r\n",
            "Protocol error: unbalanced quotes in request",
        ),
    ];
    for (bytes, want) in garbage {
        let mut c = server.raw();
        c.send_raw(bytes);
        let r = c.read_reply_bytes().expect("an error reply");
        assert!(
            text(&r).starts_with(&format!("-ERR {want}")),
            "{}",
            text(&r)
        );
        assert!(c.is_closed(), "connection left open after {}", text(bytes));
    }
    // Random garbage: no crash, whatever the server answers.
    let mut seed = 0x12345678u64;
    for _ in 0..200 {
        let mut c = server.raw();
        let mut junk = vec![0u8; 64];
        for b in junk.iter_mut() {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            *b = seed as u8;
        }
        c.send_raw(&junk);
        drop(c);
    }
    assert_eq!(keep.cmd(&["BF.EXISTS", "k", "x"]), b":1\r\n");
    assert_eq!(server.raw().cmd(&["PING"]), b"+PONG\r\n");
}

#[test]
fn generic_commands_answer_like_redis() {
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::start(&tmp.path().join("d"), &[]);
    let mut c = server.raw();
    assert_eq!(c.cmd(&["ECHO", "hi"]), b"$2\r\nhi\r\n");
    assert_eq!(c.cmd(&["PING", "x"]), b"$1\r\nx\r\n");
    assert_eq!(c.cmd(&["SELECT", "0"]), b"+OK\r\n");
    assert_eq!(c.cmd(&["CLIENT", "SETNAME", "crawler-7"]), b"+OK\r\n");
    assert_eq!(c.cmd(&["CLIENT", "GETNAME"]), b"$9\r\ncrawler-7\r\n");
    assert!(text(&c.cmd(&["CLIENT", "ID"])).starts_with(':'));
    assert_eq!(c.cmd(&["CLIENT", "SETINFO", "lib-name", "x"]), b"+OK\r\n");
    assert!(text(&c.cmd(&["COMMAND", "COUNT"])).starts_with(':'));
    assert!(c.cmd(&["COMMAND", "DOCS"]).starts_with(b"*"));
    assert!(c.cmd(&["COMMAND"]).starts_with(b"*"));
    assert_eq!(
        text(&c.cmd(&["CONFIG", "GET", "appendonly"])),
        "*2\r\n$10\r\nappendonly\r\n$3\r\nyes\r\n"
    );
    let info = text(&c.cmd(&["INFO"]));
    for field in [
        "# Server",
        "redis_version:",
        "# Clients",
        "connected_clients:",
        "# Memory",
        "used_memory:",
        "# Persistence",
        "rdb_bgsave_in_progress:0",
        "# Stats",
        "# Keyspace",
    ] {
        assert!(info.contains(field), "INFO lacks {field}");
    }
    for i in 0..30 {
        assert_eq!(c.cmd(&["BF.ADD", &format!("key:{i}"), "x"]), b":1\r\n");
    }
    assert_eq!(c.cmd(&["DBSIZE"]), b":30\r\n");
    assert_eq!(
        c.cmd(&["EXISTS", "key:1", "key:2", "nope", "key:1"]),
        b":3\r\n"
    );
    // SCAN visits every key exactly once.
    let mut cursor = "0".to_string();
    let mut seen = std::collections::BTreeSet::new();
    loop {
        c.send(&["SCAN", cursor.as_str(), "COUNT", "7", "MATCH", "key:*"]);
        let seen_resp::Reply::Array(parts) = c.read_reply() else {
            panic!()
        };
        let (seen_resp::Reply::Bulk(next), seen_resp::Reply::Array(keys)) = (&parts[0], &parts[1])
        else {
            panic!()
        };
        for k in keys {
            let seen_resp::Reply::Bulk(k) = k else {
                panic!()
            };
            assert!(seen.insert(k.clone()), "SCAN returned {k:?} twice");
        }
        cursor = text(next);
        if cursor == "0" {
            break;
        }
    }
    assert_eq!(seen.len(), 30);
    assert_eq!(
        text(&c.cmd(&["KEYS", "key:2*"])).matches("key:").count(),
        11
    );
    assert_eq!(c.cmd(&["DEL", "key:1", "key:2", "nope"]), b":2\r\n");
    assert_eq!(c.cmd(&["UNLINK", "key:3"]), b":1\r\n");
    assert_eq!(c.cmd(&["TYPE", "key:1"]), b"+none\r\n");
    assert_eq!(c.cmd(&["TTL", "key:4"]), b":-1\r\n");
    assert_eq!(c.cmd(&["TTL", "key:1"]), b":-2\r\n");
    assert_eq!(c.cmd(&["EXPIRE", "key:4", "100"]), b":1\r\n");
    assert_eq!(c.cmd(&["EXPIRE", "key:4", "50", "GT"]), b":0\r\n");
    assert_eq!(c.cmd(&["TTL", "key:4"]), b":100\r\n");
    let pttl = text(&c.cmd(&["PTTL", "key:4"]));
    let ms: i64 = pttl.trim_start_matches(':').trim().parse().unwrap();
    assert!(ms > 90_000 && ms <= 100_000, "{ms}");
    assert_eq!(c.cmd(&["PERSIST", "key:4"]), b":1\r\n");
    assert_eq!(c.cmd(&["TTL", "key:4"]), b":-1\r\n");
    assert_eq!(c.cmd(&["PEXPIRE", "key:5", "1"]), b":1\r\n");
    std::thread::sleep(std::time::Duration::from_millis(20));
    assert_eq!(c.cmd(&["BF.EXISTS", "key:5", "x"]), b":0\r\n");
    assert_eq!(c.cmd(&["EXISTS", "key:5"]), b":0\r\n");
    assert_eq!(c.cmd(&["EXPIRE", "key:6", "-1"]), b":1\r\n");
    assert_eq!(c.cmd(&["EXISTS", "key:6"]), b":0\r\n");
    assert_eq!(c.cmd(&["SAVE"]), b"+OK\r\n");
    assert_eq!(c.cmd(&["BGSAVE"]), b"+Background saving started\r\n");
    assert!(text(&c.cmd(&["LASTSAVE"])).starts_with(':'));
    assert_eq!(c.cmd(&["FLUSHALL"]), b"+OK\r\n");
    assert_eq!(c.cmd(&["DBSIZE"]), b":0\r\n");
    assert_eq!(c.cmd(&["QUIT"]), b"+OK\r\n");
    assert!(c.is_closed());
}

/// `LAYOUT BLOCKED` (seen's option) makes a fast filter that behaves the
/// same for every command but SCANDUMP.
#[test]
fn blocked_layout_option() {
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::start(&tmp.path().join("d"), &[]);
    let mut c = server.raw();
    assert_eq!(
        c.cmd(&["BF.RESERVE", "fast", "0.001", "10000", "LAYOUT", "BLOCKED"]),
        b"+OK\r\n"
    );
    assert_eq!(
        c.cmd(&[
            "BF.INSERT",
            "fast2",
            "CAPACITY",
            "1000",
            "LAYOUT",
            "blocked",
            "ITEMS",
            "a",
            "b"
        ]),
        b"*2\r\n:1\r\n:1\r\n"
    );
    for i in 0..2000 {
        assert_eq!(
            c.cmd(&["BF.ADD", "fast", &format!("u{i}")]),
            b":1\r\n",
            "{i}"
        );
    }
    for i in 0..2000 {
        assert_eq!(c.cmd(&["BF.EXISTS", "fast", &format!("u{i}")]), b":1\r\n");
    }
    assert_eq!(c.cmd(&["BF.CARD", "fast"]), b":2000\r\n");
    let r = text(&c.cmd(&["BF.SCANDUMP", "fast", "0"]));
    assert!(r.starts_with("-ERR BF.SCANDUMP needs"), "{r}");
}
