//! Golden vectors: item -> hash -> positions, written by an independent
//! Python implementation of docs/FORMAT.md (`scripts/golden_vectors.py`).

use std::collections::BTreeSet;

use seen_core::{
    blocked_block_index, blocked_positions, BloomFilter, HashAlgorithm, ItemHash, Layout,
};

/// Adds one item to an empty filter, encodes it, and returns the numbers of
/// the bits set in the encoded body (header 56 + 40 bytes, CRC 4 bytes; bit
/// `x` is byte `x / 8`, mask `1 << (x % 8)`, as docs/FORMAT.md says).
fn bits_set_in_encoding(f: &BloomFilter, item: &[u8]) -> BTreeSet<u64> {
    assert!(f.add(item));
    let mut bytes = Vec::new();
    f.encode(&mut bytes).unwrap();
    let body = &bytes[100..bytes.len() - 4];
    let mut set = BTreeSet::new();
    for (i, &b) in body.iter().enumerate() {
        for bit in 0..8 {
            if b & (1 << bit) != 0 {
                set.insert(i as u64 * 8 + bit);
            }
        }
    }
    set
}
use serde_json::Value;

fn hex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

fn num(v: &Value) -> u64 {
    v.as_str().unwrap().parse().unwrap()
}

#[test]
fn positions_match_the_spec() {
    let text = include_str!("../vectors/hash_positions.json");
    let v: Value = serde_json::from_str(text).unwrap();
    let cases = v["cases"].as_array().unwrap();
    assert!(cases.len() >= 100);
    for c in cases {
        let item = hex(c["item_hex"].as_str().unwrap());
        let k = c["hashes"].as_u64().unwrap() as u32;
        let want: Vec<u64> = c["positions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p.as_u64().unwrap())
            .collect();
        match c["layout"].as_str().unwrap() {
            "blocked" => {
                let h = HashAlgorithm::Xxh3_128.hash(&item, num(&c["seed"]));
                assert_eq!(
                    h,
                    ItemHash {
                        lo: num(&c["lo"]),
                        hi: num(&c["hi"])
                    },
                    "{c}"
                );
                let blocks = c["blocks"].as_u64().unwrap();
                let block = c["block"].as_u64().unwrap();
                assert_eq!(blocked_block_index(h, blocks), block);
                assert_eq!(blocked_positions(h, k), want, "{c}");
                let f = BloomFilter::with_size(
                    Layout::Blocked,
                    blocks,
                    k,
                    num(&c["seed"]),
                    100,
                    0.01,
                    u64::MAX,
                )
                .unwrap();
                let expected: BTreeSet<u64> = want.iter().map(|p| block * 512 + p).collect();
                assert_eq!(bits_set_in_encoding(&f, &item), expected, "{c}");
            }
            "classic" => {
                let h = HashAlgorithm::Murmur64Double.hash(&item, 0);
                assert_eq!(
                    h,
                    ItemHash {
                        lo: num(&c["lo"]),
                        hi: num(&c["hi"])
                    },
                    "{c}"
                );
                let bits = c["bits"].as_u64().unwrap();
                let f = BloomFilter::with_size(Layout::Classic, bits, k, 0, 100, 0.01, u64::MAX)
                    .unwrap();
                let expected: BTreeSet<u64> = want.into_iter().collect();
                assert_eq!(bits_set_in_encoding(&f, &item), expected, "{c}");
            }
            other => panic!("unknown layout {other}"),
        }
    }
}

/// Guava's vectors (`tests/vectors/guava.json`, printed by the real Guava
/// through `tests/java/GuavaPeer.java vectors`): its MurmurHash3 of a few
/// strings, and whole files it wrote, which seen makes byte for byte from
/// the same puts.
#[test]
fn guava_vectors_replay() {
    let v: Value = serde_json::from_str(include_str!("../vectors/guava.json")).unwrap();
    for h in v["murmur3_128"].as_array().unwrap() {
        let item = h["item"].as_str().unwrap();
        let got = HashAlgorithm::Murmur3_128.hash(item.as_bytes(), 0);
        let hex: String = got
            .to_le_bytes()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        assert_eq!(hex, h["hash"].as_str().unwrap(), "{item:?}");
    }
    let files = v["files"].as_array().unwrap();
    assert_eq!(files.len(), 3);
    for c in files {
        let layout = match c["strategy"].as_str().unwrap() {
            "MURMUR128_MITZ_64" => Layout::Guava,
            _ => Layout::Guava32,
        };
        let (capacity, fpp) = (c["capacity"].as_u64().unwrap(), c["fpp"].as_f64().unwrap());
        let f = BloomFilter::builder(capacity, fpp)
            .layout(layout)
            .build()
            .unwrap();
        let items: Vec<&str> = c["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|i| i.as_str().unwrap())
            .collect();
        for i in &items {
            f.add(i);
        }
        let want = hex(c["file"].as_str().unwrap());
        let mut got = Vec::new();
        seen_core::guava::write(&f, &mut got).unwrap();
        assert_eq!(got, want, "{capacity} at {fpp}, {layout:?}");
        let read = seen_core::guava::from_bytes(&want, u64::MAX).unwrap();
        assert!(items.iter().all(|i| read.contains(i)));
        assert_eq!(
            seen_core::guava::approximate_element_count(&read),
            c["approximate_element_count"].as_u64().unwrap()
        );
    }
}
