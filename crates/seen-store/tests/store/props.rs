//! Property test: any sequence of operations, checkpoints and reopenings
//! gives the same answers as in-memory filters fed the same operations.

use proptest::prelude::*;
use seen_core::{BloomFilter, CountingBloomFilter, Layout, ScalableBloomFilter};
use seen_store::{FilterSpec, FsyncPolicy, Store, StoreOptions};

#[derive(Clone, Debug)]
enum Op {
    Add(u8, Vec<u16>),
    Remove(Vec<u16>),
    Checkpoint,
    Reopen,
}

fn ops() -> impl Strategy<Value = Vec<Op>> {
    let op = prop_oneof![
        6 => (0u8..5, prop::collection::vec(0u16..2000, 1..20)).prop_map(|(f, v)| Op::Add(f, v)),
        // Single items: the fast path of a server's adds.
        4 => (0u8..5, 0u16..2000).prop_map(|(f, k)| Op::Add(f, vec![k])),
        1 => prop::collection::vec(0u16..2000, 1..5).prop_map(Op::Remove),
        1 => Just(Op::Checkpoint),
        1 => Just(Op::Reopen),
    ];
    prop::collection::vec(op, 1..40)
}

const NAMES: [&[u8]; 5] = [b"bloom", b"chain", b"count", b"full", b"blocked"];

fn specs() -> [FilterSpec; 5] {
    [
        FilterSpec::Bloom {
            capacity: 500,
            error_rate: 0.01,
            layout: Layout::Classic,
        },
        FilterSpec::Scalable {
            capacity: 20,
            error_rate: 0.01,
            layout: Layout::Blocked,
            expansion: 2,
            nonscaling: false,
        },
        FilterSpec::Counting {
            capacity: 500,
            error_rate: 0.01,
        },
        // Fills up: adds past its capacity fail, mid-call too.
        FilterSpec::Scalable {
            capacity: 20,
            error_rate: 0.01,
            layout: Layout::Blocked,
            expansion: 2,
            nonscaling: true,
        },
        FilterSpec::Bloom {
            capacity: 500,
            error_rate: 0.01,
            layout: Layout::Blocked,
        },
    ]
}

fn key(i: u16) -> Vec<u8> {
    format!("key-{i}").into_bytes()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    #[test]
    fn store_matches_memory(ops in ops()) {
        let dir = tempfile::tempdir().unwrap();
        let opts = StoreOptions { fsync: FsyncPolicy::No, segment_size: 8 << 10, ..Default::default() };
        let mut store = Store::open(dir.path(), opts.clone()).unwrap();
        for (n, s) in NAMES.iter().zip(specs()) {
            store.create(n, &s).unwrap();
        }
        let bloom = BloomFilter::builder(500, 0.01).layout(Layout::Classic).build().unwrap();
        let chain = ScalableBloomFilter::builder(20, 0.01).build().unwrap();
        let mut count = CountingBloomFilter::new(500, 0.01).unwrap();
        let full = ScalableBloomFilter::builder(20, 0.01).nonscaling(true).build().unwrap();
        let blocked = BloomFilter::new(500, 0.01).unwrap();
        for op in ops {
            match op {
                Op::Add(f, keys) => {
                    let items: Vec<Vec<u8>> = keys.iter().map(|&k| key(k)).collect();
                    let refs: Vec<&[u8]> = items.iter().map(|v| v.as_slice()).collect();
                    let out = store.add(NAMES[f as usize], &refs, None).unwrap();
                    if f == 3 {
                        // Answers up to the first refusal, then the refusal.
                        let answers = full.add_many(&items);
                        let refused = answers.last().is_some_and(|a| a.is_err());
                        let expect: Vec<bool> = answers.into_iter().map_while(|a| a.ok()).collect();
                        prop_assert_eq!(out.new, expect);
                        prop_assert_eq!(out.stopped.is_some(), refused);
                        continue;
                    }
                    let expect: Vec<bool> = items.iter().map(|i| match f {
                        0 => bloom.add(i),
                        1 => chain.add(i).unwrap(),
                        2 => count.add(i),
                        _ => blocked.add(i),
                    }).collect();
                    prop_assert_eq!(out.new, expect);
                }
                Op::Remove(keys) => {
                    // Only remove what is certainly in (no false negatives
                    // either side).
                    let items: Vec<Vec<u8>> = keys.iter().map(|&k| key(k)).filter(|i| count.contains(i)).collect();
                    let refs: Vec<&[u8]> = items.iter().map(|v| v.as_slice()).collect();
                    let out = store.remove(b"count", &refs).unwrap();
                    let expect: Vec<_> = items.iter().map(|i| count.remove(i)).collect();
                    prop_assert_eq!(out, expect);
                }
                Op::Checkpoint => store.checkpoint().unwrap(),
                Op::Reopen => {
                    drop(store);
                    store = Store::open(dir.path(), opts.clone()).unwrap();
                }
            }
        }
        let probes: Vec<Vec<u8>> = (0..2000).map(key).collect();
        let refs: Vec<&[u8]> = probes.iter().map(|v| v.as_slice()).collect();
        for (f, n) in NAMES.iter().enumerate() {
            let got = store.contains(n, &refs).unwrap().unwrap();
            let want: Vec<bool> = probes.iter().map(|p| match f {
                0 => bloom.contains(p),
                1 => chain.contains(p),
                2 => count.contains(p),
                3 => full.contains(p),
                _ => blocked.contains(p),
            }).collect();
            prop_assert_eq!(got, want);
        }
    }
}
