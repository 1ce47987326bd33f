//! Replays every case recorded from RedisBloom 2.8.20
//! (`shared/vectors/redisbloom-2.8-bf.json`): the classic layout must give the
//! same add/exists replies, the same `BF.INFO`/`BF.CARD` numbers and a
//! byte-identical `BF.SCANDUMP`; loading RedisBloom's own chunks must give the
//! same answers.

use base64::Engine;
use seen_core::{Layout, ScalableBloomFilter};
use serde_json::Value;

fn vectors() -> Value {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../../shared/vectors/redisbloom-2.8-bf.json"
    );
    let text = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("read {path}: {e} (shared/ must sit beside the checkout)"));
    serde_json::from_str(&text).expect("valid JSON")
}

/// Builds the filter `BF.RESERVE key <args>` (or a default `BF.ADD`) makes.
fn reserve(args: &Value) -> ScalableBloomFilter {
    let mut b = ScalableBloomFilter::builder(100, 0.01).layout(Layout::Classic);
    if let Some(args) = args.as_array() {
        let s: Vec<&str> = args.iter().map(|a| a.as_str().unwrap()).collect();
        b = ScalableBloomFilter::builder(s[1].parse().unwrap(), s[0].parse().unwrap())
            .layout(Layout::Classic);
        let mut i = 2;
        while i < s.len() {
            match s[i] {
                "NONSCALING" => b = b.nonscaling(true),
                "EXPANSION" => {
                    b = b.expansion(s[i + 1].parse().unwrap());
                    i += 1;
                }
                other => panic!("unexpected reserve arg {other}"),
            }
            i += 1;
        }
    }
    b.build().unwrap()
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_str().unwrap().to_string())
        .collect()
}

fn ints(v: &Value) -> Vec<i64> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_i64().unwrap())
        .collect()
}

fn check_answers(case: &str, f: &ScalableBloomFilter, c: &Value) {
    let items = strings(&c["items_utf8"]);
    for item in &items {
        assert!(f.contains(item), "{case}: {item} missing");
    }
    let probes = strings(&c["absent_probes"]);
    let expected = ints(&c["absent_probe_exists_replies"]);
    for (p, e) in probes.iter().zip(expected) {
        assert_eq!(f.contains(p) as i64, e, "{case}: BF.EXISTS {p}");
    }
    assert_eq!(
        f.len() as i64,
        c["bf_card"].as_i64().unwrap(),
        "{case}: BF.CARD"
    );
    let info = &c["bf_info"];
    assert_eq!(
        f.capacity() as i64,
        info["Capacity"].as_i64().unwrap(),
        "{case}"
    );
    assert_eq!(
        f.redis_info_size() as i64,
        info["Size"].as_i64().unwrap(),
        "{case}"
    );
    assert_eq!(
        f.links() as i64,
        info["Number of filters"].as_i64().unwrap(),
        "{case}"
    );
    assert_eq!(
        f.len() as i64,
        info["Number of items inserted"].as_i64().unwrap()
    );
    match info["Expansion rate"].as_i64() {
        Some(x) => assert_eq!(f.expansion() as i64, x, "{case}"),
        None => assert!(f.is_nonscaling(), "{case}: nil expansion means NONSCALING"),
    }
}

#[test]
fn classic_layout_reproduces_redisbloom_exactly() {
    let v = vectors();
    let cases = v["cases"].as_array().unwrap();
    assert_eq!(cases.len(), 5);
    for c in cases {
        let case = c["case"].as_str().unwrap();
        let f = reserve(&c["reserve_args"]);
        let items = strings(&c["items_utf8"]);
        let replies = ints(&c["bf_add_replies"]);
        for (item, want) in items.iter().zip(replies) {
            assert_eq!(f.add(item).unwrap() as i64, want, "{case}: BF.ADD {item}");
        }
        check_answers(case, &f, c);

        // BF.SCANDUMP: byte-identical, chunk by chunk.
        let chunks = c["scandump_chunks"].as_array().unwrap();
        let mut iter = 0;
        for chunk in chunks {
            let data = base64::engine::general_purpose::STANDARD
                .decode(chunk["data_b64"].as_str().unwrap())
                .unwrap();
            let (next, ours) = f.redis_scandump(iter).unwrap();
            assert_eq!(next as i64, chunk["iterator"].as_i64().unwrap(), "{case}");
            assert_eq!(ours, data, "{case}: SCANDUMP {iter} differs");
            iter = next;
        }
        assert_eq!(f.redis_scandump(iter).unwrap(), (0, vec![]), "{case}: end");
    }
}

#[test]
fn redisbloom_dumps_load_into_seen() {
    let v = vectors();
    for c in v["cases"].as_array().unwrap() {
        let case = c["case"].as_str().unwrap();
        let mut chunks = c["scandump_chunks"].as_array().unwrap().iter().map(|ch| {
            (
                ch["iterator"].as_u64().unwrap(),
                base64::engine::general_purpose::STANDARD
                    .decode(ch["data_b64"].as_str().unwrap())
                    .unwrap(),
            )
        });
        let (first_iter, header) = chunks.next().unwrap();
        assert_eq!(first_iter, 1);
        let mut f = ScalableBloomFilter::from_redis_header(&header, 1 << 30).unwrap();
        for (iter, data) in chunks {
            f.redis_load_chunk(iter, &data).unwrap();
        }
        check_answers(case, &f, c);
        // Adding the same items again: all already present.
        for item in strings(&c["items_utf8"]) {
            assert!(!f.add(&item).unwrap(), "{case}: {item} new after load");
        }
    }
}

#[test]
fn nonscaling_full_matches_redisbloom() {
    // Transcript: BF.RESERVE ns 0.01 10 NONSCALING; BF.MADD of 40 items
    // answers ten 1s then "non scaling filter is full".
    let f = ScalableBloomFilter::builder(10, 0.01)
        .layout(Layout::Classic)
        .nonscaling(true)
        .build()
        .unwrap();
    let items: Vec<String> = (0..40).map(|i| format!("i{i}")).collect();
    let out = f.add_many(&items);
    assert_eq!(out.len(), 11);
    assert!(out[..10].iter().all(|r| matches!(r, Ok(true))));
    assert_eq!(
        out[10].as_ref().unwrap_err().to_string(),
        "non scaling filter is full"
    );
    assert_eq!(f.redis_info_size(), 112);
}
