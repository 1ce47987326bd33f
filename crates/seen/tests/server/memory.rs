//! Memory goes back to the system when filters go: after `DEL`,
//! `FLUSHALL` and a refused load, measured by the process's RSS.

use crate::support::{text, Raw, Server};

fn rss_bytes(pid: i32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let kb: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap();
    kb * 1024
}

/// `BF.SCANDUMP`s `from` and `BF.LOADCHUNK`s every chunk into `to`.
fn copy(c: &mut Raw, from: &str, to: &str) {
    let mut chunks = Vec::new();
    let mut iter = 0i64;
    loop {
        c.send(&["BF.SCANDUMP", from, &iter.to_string()]);
        let seen_resp::Reply::Array(parts) = c.read_reply() else {
            panic!("BF.SCANDUMP answers an array")
        };
        let (seen_resp::Reply::Integer(next), seen_resp::Reply::Bulk(data)) =
            (&parts[0], &parts[1])
        else {
            panic!("{parts:?}")
        };
        if *next == 0 {
            break;
        }
        iter = *next;
        chunks.push((iter, data.to_vec()));
    }
    for (iter, data) in chunks {
        let iter = iter.to_string();
        let r = c.cmd(&[b"BF.LOADCHUNK", to.as_bytes(), iter.as_bytes(), &data[..]]);
        assert_eq!(r, b"+OK\r\n");
    }
}

#[test]
fn deleted_filters_give_their_memory_back() {
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::start(tmp.path(), &[]);
    let pid = server.pid();
    let mut c = server.raw();
    let idle = rss_bytes(pid);
    // 64 M items at 1%: 77 MiB of bits each.
    assert_eq!(
        c.cmd(&["BF.RESERVE", "big", "0.01", "64000000"]),
        b"+OK\r\n"
    );
    copy(&mut c, "big", "copy");
    let full = rss_bytes(pid);
    assert!(
        full > idle + (140 << 20),
        "{full} resident with two filters"
    );
    assert_eq!(c.cmd(&["DEL", "big", "copy"]), b":2\r\n");
    let after_del = rss_bytes(pid);
    assert!(
        after_del < idle + (16 << 20),
        "{after_del} resident after DEL (idle: {idle})"
    );
    // FLUSHALL, the same.
    assert_eq!(c.cmd(&["BF.RESERVE", "a", "0.01", "64000000"]), b"+OK\r\n");
    copy(&mut c, "a", "b");
    assert_eq!(c.cmd(&["FLUSHALL"]), b"+OK\r\n");
    let after_flush = rss_bytes(pid);
    assert!(
        after_flush < idle + (16 << 20),
        "{after_flush} resident after FLUSHALL (idle: {idle})"
    );
    // A load refused at its last chunk: the filter its header made stays
    // (as in RedisBloom), and goes with its DEL.
    assert_eq!(
        c.cmd(&["BF.RESERVE", "src", "0.01", "64000000"]),
        b"+OK\r\n"
    );
    c.send(&["BF.SCANDUMP", "src", "0"]);
    let seen_resp::Reply::Array(parts) = c.read_reply() else {
        panic!("array")
    };
    let seen_resp::Reply::Bulk(header) = &parts[1] else {
        panic!("{parts:?}")
    };
    assert_eq!(
        c.cmd(&[&b"BF.LOADCHUNK"[..], b"half", b"1", &header[..]]),
        b"+OK\r\n"
    );
    let r = text(&c.cmd(&["BF.LOADCHUNK", "half", "999999999999", "xx"]));
    assert!(r.starts_with("-ERR"), "{r}");
    assert_eq!(c.cmd(&["DEL", "src", "half"]), b":2\r\n");
    let after_refused = rss_bytes(pid);
    assert!(
        after_refused < idle + (16 << 20),
        "{after_refused} resident after a refused load and DEL (idle: {idle})"
    );
    eprintln!("resident: idle {idle}, two filters {full}, after DEL {after_del}, after FLUSHALL {after_flush}, after a refused load {after_refused}");
}
