//! One standalone redis-server: answers, bytes, info, clear, delete, TTL,
//! bad input.

use std::thread;
use std::time::Duration;

use seen_redis::{ErrorKind, FilterParams, RedisFilter, RetryPolicy};

use crate::server::RedisServer;
use crate::{assert_answers, body_of, reference, shard_bytes, target, urls};

fn pttl(conn: &mut redis::Connection, key: &[u8]) -> i64 {
    redis::cmd("PTTL").arg(key).query(conn).expect("PTTL")
}

#[test]
fn answers_and_bytes_match_the_in_memory_filter() {
    let server = RedisServer::start();
    let t = target(&server.url());
    let params = FilterParams::new(20_000, 0.01).max_shard_bytes(4096);
    let mut f = RedisFilter::open_or_create(&t, "urls", &params).unwrap();
    let meta = *f.metadata();
    assert!(meta.plan.shards >= 4, "{meta:?}");
    let mem = reference(&meta);

    // Every shard exists at full length before any add.
    let mut conn = server.conn();
    for i in 0..meta.plan.shards {
        let len: u64 = redis::cmd("STRLEN")
            .arg(seen_redis::shard_key(b"urls", i))
            .query(&mut conn)
            .unwrap();
        assert_eq!(len, meta.plan.shard_bytes());
    }
    let keys: u64 = redis::cmd("DBSIZE").query(&mut conn).unwrap();
    assert_eq!(keys, meta.plan.shards + 1);

    // Batches with repeats inside a batch and across batches.
    let items = urls("a", 20_000);
    let mut total_new = 0;
    for batch in items.chunks(1_000) {
        let mut b: Vec<&str> = batch.iter().map(String::as_str).collect();
        b.extend_from_within(..10);
        let got = f.add_many(&b).unwrap();
        let want: Vec<bool> = b.iter().map(|i| mem.add(i)).collect();
        assert_answers(&got, &want);
        total_new += got.iter().filter(|&&n| n).count();
    }
    assert!(total_new > 19_800 && total_new <= 20_000, "{total_new}");
    assert!(f.add_many(&items[..500]).unwrap().iter().all(|&n| !n));

    let present = f.contains_many(&items).unwrap();
    assert!(present.iter().all(|&p| p), "a false negative");
    let others = urls("b", 20_000);
    let got = f.contains_many(&others).unwrap();
    let want: Vec<bool> = others.iter().map(|i| mem.contains(i)).collect();
    assert_answers(&got, &want);
    let fps = got.iter().filter(|&&p| p).count();
    assert!(fps > 0 && fps < 400, "{fps} false positives of 20,000");
    assert!(f.contains(&items[7]).unwrap());
    assert!(!f.add(&items[7]).unwrap());

    // The shards are, byte for byte, the in-memory filter's bit array.
    assert_eq!(shard_bytes(&mut conn, &f), body_of(&mem));
    assert!(f.add_many(&Vec::<String>::new()).unwrap().is_empty());
}

#[test]
fn info_reports_fill_estimate_and_damage() {
    let server = RedisServer::start();
    let t = target(&server.url());
    let mut f = RedisFilter::open_or_create(&t, "info", &FilterParams::new(50_000, 0.001)).unwrap();
    let empty = f.info().unwrap();
    assert_eq!(empty.bits_set, 0);
    assert_eq!(empty.estimated_items, 0.0);
    assert_eq!(empty.current_fpp, 0.0);
    assert_eq!(empty.damaged_shards, 0);
    assert_eq!(empty.ttl, None);

    let mem = reference(f.metadata());
    let items = urls("info", 25_000);
    f.add_many(&items).unwrap();
    mem.add_many(&items);
    let info = f.info().unwrap();
    let stats = mem.stats();
    assert_eq!(info.bits, stats.bits);
    assert_eq!(info.bits_set, stats.bits_set);
    assert_eq!(info.fill_ratio, stats.fill_ratio);
    assert!(
        (info.estimated_items - 25_000.0).abs() < 25_000.0 * 0.03,
        "{}",
        info.estimated_items
    );
    let model = mem.expected_fpp_at(25_000);
    assert!(
        info.current_fpp > model * 0.8 && info.current_fpp < model * 1.25,
        "{} vs {model}",
        info.current_fpp
    );
    assert_eq!(
        info.bytes,
        f.metadata().plan.shards * f.metadata().plan.shard_bytes()
    );
    assert_eq!(info.name, "info");

    // A shard lost outside seen (eviction, FLUSHDB) is reported.
    let mut conn = server.conn();
    let _: () = redis::cmd("DEL")
        .arg(seen_redis::shard_key(b"info", 0))
        .query(&mut conn)
        .unwrap();
    assert_eq!(f.info().unwrap().damaged_shards, 1);
}

#[test]
fn clear_and_delete() {
    let server = RedisServer::start();
    let t = target(&server.url());
    let params = FilterParams::new(10_000, 0.01).max_shard_bytes(2048);
    let mut f = RedisFilter::open_or_create(&t, "c", &params).unwrap();
    let mut other = RedisFilter::open(&t, "c").unwrap();
    let items = urls("c", 5_000);
    assert!(f.add_many(&items).unwrap().iter().filter(|&&n| n).count() > 4_900);
    assert!(other.contains_many(&items).unwrap().iter().all(|&p| p));

    f.clear().unwrap();
    let info = f.info().unwrap();
    assert_eq!(info.bits_set, 0);
    assert_eq!(
        info.damaged_shards, 0,
        "shards are recreated at full length"
    );
    assert!(other.contains_many(&items).unwrap().iter().all(|&p| !p));
    assert!(f.add_many(&items[..100]).unwrap().iter().all(|&n| n));

    f.delete().unwrap();
    let mut conn = server.conn();
    let keys: u64 = redis::cmd("DBSIZE").query(&mut conn).unwrap();
    assert_eq!(keys, 0);
    let e = RedisFilter::open(&t, "c").unwrap_err();
    assert!(matches!(e.kind(), ErrorKind::NotFound { .. }), "{e}");
    assert!(e.to_string().contains("seen:{c}:meta"), "{e}");
    // The other handle notices at its next metadata check.
    thread::sleep(Duration::from_millis(1_100));
    let e = other.add("x").unwrap_err();
    assert!(matches!(e.kind(), ErrorKind::NotFound { .. }), "{e}");
}

#[test]
fn ttl_covers_every_key_and_late_writes() {
    let server = RedisServer::start();
    let t = target(&server.url());
    let mut conn = server.conn();
    let params = FilterParams::new(10_000, 0.01)
        .max_shard_bytes(2048)
        .ttl(Duration::from_secs(60));
    let mut f = RedisFilter::open_or_create(&t, "ttl", &params).unwrap();
    let shards = f.metadata().plan.shards;
    assert!(shards > 1);
    let meta_ttl = pttl(&mut conn, b"seen:{ttl}:meta");
    assert!(meta_ttl > 55_000 && meta_ttl <= 60_000, "{meta_ttl}");
    // A shard may outlive the metadata by the time its PEXPIRE took to
    // reach Redis; on a loaded test machine allow 250 ms.
    let within = |shard: i64, meta: i64| shard > 0 && shard <= meta + 250;
    let shard_ttl = |conn: &mut redis::Connection| -> Vec<i64> {
        (0..shards)
            .map(|i| pttl(conn, &seen_redis::shard_key(b"ttl", i)))
            .collect()
    };
    for s in shard_ttl(&mut conn) {
        assert!(within(s, meta_ttl), "shard {s} ms, metadata {meta_ttl} ms");
    }
    let left = f.ttl().unwrap().expect("a TTL");
    assert!(left > Duration::from_secs(55), "{left:?}");

    // A shard lost and re-created by a late write gets the TTL left.
    let items = urls("ttl", 2_000);
    let _: () = redis::cmd("DEL")
        .arg(seen_redis::shard_key(b"ttl", 0))
        .query(&mut conn)
        .unwrap();
    f.add_many(&items).unwrap();
    let meta_ttl = pttl(&mut conn, b"seen:{ttl}:meta");
    for s in shard_ttl(&mut conn) {
        assert!(within(s, meta_ttl), "shard {s} ms, metadata {meta_ttl} ms");
    }

    f.set_ttl(None).unwrap();
    assert_eq!(pttl(&mut conn, b"seen:{ttl}:meta"), -1);
    assert!(shard_ttl(&mut conn).iter().all(|&s| s == -1));
    assert_eq!(f.ttl().unwrap(), None);

    // Expiry: everything goes, the handle refuses to write after it, and
    // open_or_create starts a new, empty filter.
    f.set_ttl(Some(Duration::from_millis(700))).unwrap();
    let meta_ttl = pttl(&mut conn, b"seen:{ttl}:meta");
    for s in shard_ttl(&mut conn) {
        assert!(within(s, meta_ttl), "shard {s} ms, metadata {meta_ttl} ms");
    }
    thread::sleep(Duration::from_millis(900));
    let keys: u64 = redis::cmd("DBSIZE").query(&mut conn).unwrap();
    assert_eq!(keys, 0);
    let e = f.add("late").unwrap_err();
    assert!(matches!(e.kind(), ErrorKind::Expired { .. }), "{e}");
    let keys: u64 = redis::cmd("DBSIZE").query(&mut conn).unwrap();
    assert_eq!(keys, 0, "a refused write re-created no key");
    let mut again = RedisFilter::open_or_create(&t, "ttl", &params).unwrap();
    assert!(again.contains_many(&items).unwrap().iter().all(|&p| !p));
    let e = f.set_ttl(Some(Duration::ZERO)).unwrap_err();
    assert!(matches!(e.kind(), ErrorKind::InvalidParameter(_)), "{e}");
}

#[test]
fn bad_names_params_and_missing_filters() {
    let server = RedisServer::start();
    let t = target(&server.url());
    let p = FilterParams::new(1_000, 0.01);
    for name in [&b""[..], b"a{b}", &[b'n'; 300]] {
        let e = RedisFilter::open_or_create(&t, name, &p).unwrap_err();
        assert!(matches!(e.kind(), ErrorKind::InvalidName { .. }), "{e}");
    }
    // Binary names are fine.
    let mut bin = RedisFilter::open_or_create(&t, b"\x00\xff:name", &p).unwrap();
    assert!(bin.add(b"\x00").unwrap());

    let e = RedisFilter::open_or_create(&t, "p", &FilterParams::new(0, 0.01)).unwrap_err();
    assert!(matches!(e.kind(), ErrorKind::Params(_)), "{e}");
    let e = RedisFilter::open_or_create(&t, "p", &FilterParams::new(10, 1.5)).unwrap_err();
    assert!(e.to_string().contains("1.5"), "{e}");
    let e = RedisFilter::open_or_create(&t, "p", &p.clone().max_shard_bytes(10)).unwrap_err();
    assert!(matches!(e.kind(), ErrorKind::InvalidParameter(_)), "{e}");
    assert!(e.to_string().contains("10 bytes"), "{e}");
    let e = RedisFilter::open(&t, "missing").unwrap_err();
    assert!(matches!(e.kind(), ErrorKind::NotFound { .. }), "{e}");
    let mut conn = server.conn();
    // (Its adds' answers, kept for retries, are the third key.)
    let keys: u64 = redis::cmd("DBSIZE").query(&mut conn).unwrap();
    assert_eq!(keys, 3, "only the binary-named filter exists");
}

#[test]
fn wrong_types_are_typed_errors() {
    let server = RedisServer::start();
    let t = target(&server.url());
    let mut conn = server.conn();
    let _: () = redis::cmd("RPUSH")
        .arg("seen:{listmeta}:meta")
        .arg("x")
        .query(&mut conn)
        .unwrap();
    let e = RedisFilter::open(&t, "listmeta").unwrap_err();
    assert!(matches!(e.kind(), ErrorKind::WrongType { .. }), "{e}");
    assert!(e.to_string().contains("seen:{listmeta}:meta"), "{e}");

    let mut f = RedisFilter::open_or_create(&t, "w", &FilterParams::new(1_000, 0.01)).unwrap();
    assert_eq!(f.metadata().plan.shards, 1);
    let shard = seen_redis::shard_key(b"w", 0);
    let _: () = redis::cmd("DEL").arg(&shard).query(&mut conn).unwrap();
    let _: () = redis::cmd("HSET")
        .arg(&shard)
        .arg("f")
        .arg("v")
        .query(&mut conn)
        .unwrap();
    let e = f.add("x").unwrap_err();
    assert!(matches!(e.root_kind(), ErrorKind::WrongType { .. }), "{e}");
    assert!(e.to_string().contains("seen:{w:0}:bits"), "{e}");
    let e = f.contains("x").unwrap_err();
    assert!(matches!(e.kind(), ErrorKind::WrongType { .. }), "{e}");
}

#[test]
fn large_calls_stream_in_step_and_error_replies_leave_the_connection_usable() {
    let server = RedisServer::start();
    let t = target(&server.url());
    // Many shards and one call of 100,000 items: several rounds, each many
    // commands and megabytes, sent while replies are read.
    let params = FilterParams::new(200_000, 0.001).max_shard_bytes(64 << 10);
    let mut f = RedisFilter::open_or_create(&t, "big", &params).unwrap();
    let meta = *f.metadata();
    assert!(meta.plan.shards >= 4, "{meta:?}");
    let mem = reference(&meta);
    let mut items = urls("big", 100_000);
    items.extend_from_within(..5_000);
    let got = f.add_many(&items).unwrap();
    let want: Vec<bool> = items.iter().map(|i| mem.add(i)).collect();
    assert_answers(&got, &want);
    assert!(f.contains_many(&items).unwrap().iter().all(|&p| p));
    let mut conn = server.conn();
    assert_eq!(shard_bytes(&mut conn, &f), body_of(&mem));

    // An error reply in the middle of a stream (one shard is not a string):
    // the call fails with it, and the next call on the same handle gets its
    // own replies, not the rest of the failed call's.
    let shard = seen_redis::shard_key(b"big", 1);
    let saved: Vec<u8> = redis::cmd("GET").arg(&shard).query(&mut conn).unwrap();
    let _: () = redis::cmd("DEL").arg(&shard).query(&mut conn).unwrap();
    let _: () = redis::cmd("RPUSH")
        .arg(&shard)
        .arg("x")
        .query(&mut conn)
        .unwrap();
    // (Fewer items than one round of commands, so that every command of
    // the call was sent.)
    let more = urls("more", 10_000);
    let e = f.add_many(&more).unwrap_err();
    assert!(matches!(e.root_kind(), ErrorKind::WrongType { .. }), "{e}");
    assert!(e.to_string().contains("seen:{big:1}:bits"), "{e}");
    let _: () = redis::cmd("DEL").arg(&shard).query(&mut conn).unwrap();
    let _: () = redis::cmd("SET")
        .arg(&shard)
        .arg(&saved)
        .query(&mut conn)
        .unwrap();
    assert!(f.contains_many(&items).unwrap().iter().all(|&p| p));
    let got = f.add_many(&more).unwrap();
    // The failed call ran every command but shard 1's: those items are
    // present now, the others new.
    for (item, new) in more.iter().zip(&got) {
        let (s, _) = meta.plan.locate(f.hash(item));
        if s == 1 {
            assert!(*new || mem.contains(item), "{item}");
        } else {
            assert!(!*new, "{item}: its command ran in the failed call");
        }
        mem.add(item);
    }
    assert!(f.contains_many(&more).unwrap().iter().all(|&p| p));
    assert_eq!(shard_bytes(&mut conn, &f), body_of(&mem));
}

#[test]
fn a_unix_socket_target_streams_the_same_answers() {
    let sock_dir = tempfile::tempdir().unwrap();
    let sock = sock_dir.path().join("redis.sock");
    let sock_arg = sock.to_str().unwrap();
    let server = RedisServer::start_with(
        &[
            "--save",
            "",
            "--appendonly",
            "no",
            "--unixsocket",
            sock_arg,
            "--unixsocketperm",
            "700",
        ],
        false,
    );
    let unix = target(&format!("redis+unix://{sock_arg}"));
    let params = FilterParams::new(50_000, 0.01).max_shard_bytes(8192);
    let mut f = RedisFilter::open_or_create(&unix, "sock", &params).unwrap();
    let mem = reference(f.metadata());
    let items = urls("sock", 30_000);
    let got = f.add_many(&items).unwrap();
    let want: Vec<bool> = items.iter().map(|i| mem.add(i)).collect();
    assert_answers(&got, &want);
    // The same filter over TCP sees every item.
    let mut tcp = RedisFilter::open(&target(&server.url()), "sock").unwrap();
    assert!(tcp.contains_many(&items).unwrap().iter().all(|&p| p));
    assert!(f.contains_many(&items).unwrap().iter().all(|&p| p));
    let mut conn = server.conn();
    assert_eq!(shard_bytes(&mut conn, &f), body_of(&mem));
}

#[test]
fn unreachable_redis_fails_within_the_retry_budget() {
    let port = crate::server::free_port(false);
    let t = target(&format!("redis://127.0.0.1:{port}"));
    let policy = RetryPolicy {
        max_elapsed: Duration::from_millis(300),
        ..RetryPolicy::default()
    };
    let start = std::time::Instant::now();
    let e =
        RedisFilter::open_or_create_with(&t, "x", &FilterParams::new(10, 0.1), policy).unwrap_err();
    let ErrorKind::Unavailable { attempts, .. } = e.kind() else {
        panic!("{e}")
    };
    assert!(*attempts > 3, "{e}");
    assert!(start.elapsed() < Duration::from_secs(3));
}
