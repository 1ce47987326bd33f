//! Opening with other parameters, and damaged metadata: clear errors, never
//! other bit positions.

use std::thread;
use std::time::Duration;

use seen_redis::{ErrorKind, FilterParams, RedisFilter, META_LEN};

use crate::server::RedisServer;
use crate::target;

#[test]
fn other_parameters_are_refused() {
    let server = RedisServer::start();
    let t = target(&server.url());
    let params = FilterParams::new(100_000, 0.01);
    let mut f = RedisFilter::open_or_create(&t, "m", &params).unwrap();
    f.add("kept").unwrap();

    let stored_plan = f.metadata().plan;
    let small = seen_redis::Plan::new(100_000, 0.01, 4096).unwrap();
    let show = |p: seen_redis::Plan| format!("{} shards of {} bytes", p.shards, p.shard_bytes());
    let cases = [
        (
            FilterParams::new(200_000, 0.01),
            "capacity",
            "100000".to_string(),
            "200000".to_string(),
        ),
        (
            FilterParams::new(100_000, 0.001),
            "error rate",
            "0.01".into(),
            "0.001".into(),
        ),
        (
            params.clone().seed(7),
            "seed",
            "0x5ee0b100f11e5eed".into(),
            "0x7".into(),
        ),
        (
            params.clone().max_shard_bytes(4096),
            "layout",
            show(stored_plan),
            show(small),
        ),
        (params.clone().hashes(6), "hashes", "4".into(), "6".into()),
    ];
    for (other, field, stored, requested) in cases {
        let e = RedisFilter::open_or_create(&t, "m", &other).unwrap_err();
        let ErrorKind::Mismatch { field: f, .. } = e.kind() else {
            panic!("{e}")
        };
        assert_eq!(*f, field, "{e}");
        let msg = e.to_string();
        assert!(msg.contains(&stored) && msg.contains(&requested), "{msg}");
    }
    // Same parameters (and the default shard size spelled out), or none.
    let same = params
        .clone()
        .max_shard_bytes(seen_redis::DEFAULT_MAX_SHARD_BYTES);
    let mut g = RedisFilter::open_or_create(&t, "m", &same).unwrap();
    assert!(g.contains("kept").unwrap());
    let mut h = RedisFilter::open(&t, "m").unwrap();
    assert_eq!(h.metadata(), f.metadata());
    assert!(h.contains("kept").unwrap());
    let mut same_k = RedisFilter::open_or_create(&t, "m", &params.clone().hashes(4)).unwrap();
    assert!(same_k.contains("kept").unwrap());

    // A filter sized by another hash-count rule (an older release made the
    // smallest filter, 6 hashes at 1%) opens with the same parameters, the
    // shard size spelled out too.
    let old = FilterParams::new(100_000, 0.01).max_shard_bytes(1 << 20);
    RedisFilter::open_or_create(&t, "old", &old.clone().hashes(6)).unwrap();
    let reopened = RedisFilter::open_or_create(&t, "old", &old).unwrap();
    assert_eq!(reopened.metadata().plan.hashes, 6);
    let e = RedisFilter::open_or_create(&t, "old", &old.clone().max_shard_bytes(4096)).unwrap_err();
    assert!(e.to_string().contains("6 hashes"), "{e}");

    // Hashes chosen by the caller: the smallest filter with that many.
    let six = RedisFilter::open_or_create(&t, "six", &params.clone().hashes(6)).unwrap();
    let (blocks, k) = seen_core::sizing::blocked_size(100_000, 0.01).unwrap();
    assert_eq!(six.metadata().plan.hashes, k);
    assert!(six.metadata().plan.blocks() >= blocks);
    // Out of range, or too few to reach the rate (1 hash at 1e-9).
    for p in [
        params.clone().hashes(0),
        params.clone().hashes(300),
        FilterParams::new(100_000, 1e-9).hashes(1),
    ] {
        let k = p.hashes.unwrap();
        let e = RedisFilter::open_or_create(&t, "bad-k", &p).unwrap_err();
        assert!(
            matches!(
                e.kind(),
                ErrorKind::InvalidParameter(_) | ErrorKind::Params(_)
            ),
            "{k}: {e}"
        );
    }
}

fn set_meta(server: &RedisServer, name: &str, value: &[u8]) {
    let mut conn = server.conn();
    let _: () = redis::cmd("SET")
        .arg(seen_redis::meta_key(name.as_bytes()))
        .arg(value)
        .query(&mut conn)
        .unwrap();
}

fn get_meta(server: &RedisServer, name: &str) -> Vec<u8> {
    let mut conn = server.conn();
    redis::cmd("GET")
        .arg(seen_redis::meta_key(name.as_bytes()))
        .query(&mut conn)
        .unwrap()
}

#[test]
fn corrupt_metadata_is_a_clear_error() {
    let server = RedisServer::start();
    let t = target(&server.url());
    let params = FilterParams::new(1_000, 0.01);
    RedisFilter::open_or_create(&t, "x", &params).unwrap();
    let good = get_meta(&server, "x");
    assert_eq!(good.len(), META_LEN);
    assert_eq!(&good[..8], b"SEENREDS");

    let mut flipped = good.clone();
    flipped[30] ^= 0x40;
    let mut newer = good.clone();
    newer[8] = 9;
    let cases: [(&[u8], &str); 5] = [
        (b"garbage", "not seen metadata: 7 bytes"),
        (b"", "not seen metadata: 0 bytes"),
        (&good[..40], "40 bytes long"),
        (&flipped, "checksum mismatch"),
        (&newer, "format version 9"),
    ];
    for (value, needle) in cases {
        set_meta(&server, "x", value);
        for e in [
            RedisFilter::open(&t, "x").unwrap_err(),
            RedisFilter::open_or_create(&t, "x", &params).unwrap_err(),
        ] {
            let msg = e.to_string();
            assert!(msg.contains(needle), "{needle}: {msg}");
            assert!(msg.contains("seen:{x}:meta"), "{msg}");
            assert!(
                matches!(
                    e.kind(),
                    ErrorKind::CorruptMetadata { .. } | ErrorKind::UnsupportedVersion { .. }
                ),
                "{msg}"
            );
        }
    }
    // open_or_create never overwrites what it cannot read.
    assert_eq!(get_meta(&server, "x"), newer);
}

#[test]
fn a_live_handle_notices_a_recreated_filter() {
    let server = RedisServer::start();
    let t = target(&server.url());
    let mut f = RedisFilter::open_or_create(&t, "r", &FilterParams::new(1_000, 0.01)).unwrap();
    f.add("a").unwrap();
    // Someone deletes it and creates it again with other parameters.
    RedisFilter::open(&t, "r").unwrap().delete().unwrap();
    RedisFilter::open_or_create(&t, "r", &FilterParams::new(1_000_000, 0.01)).unwrap();
    thread::sleep(Duration::from_millis(1_100));
    let e = f.contains("a").unwrap_err();
    assert!(matches!(e.kind(), ErrorKind::Changed { .. }), "{e}");
    assert!(e.to_string().contains("open it again"), "{e}");
    // Garbage in place of the metadata is noticed the same way.
    set_meta(&server, "r", b"\x00\x01\x02");
    let e = f.add("a").unwrap_err();
    assert!(matches!(e.kind(), ErrorKind::CorruptMetadata { .. }), "{e}");
}
