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
