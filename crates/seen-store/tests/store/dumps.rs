//! Property test: RedisBloom dump headers and chunks (`BF.LOADCHUNK`),
//! sound and damaged, are either refused, changing nothing, or taken and
//! then survive a checkpoint and a reopen unchanged. A store never takes
//! what it would refuse to open.

use proptest::prelude::*;
use seen_core::{Layout, ScalableBloomFilter};
use seen_store::{FsyncPolicy, Store, StoreOptions};

/// A dump of a RedisBloom-layout chain: its header, then its chunks as
/// `(iter, bytes)`.
fn dump(capacity: u64, items: u32, nonscaling: bool) -> (Vec<u8>, Vec<(u64, Vec<u8>)>) {
    let src = ScalableBloomFilter::builder(capacity, 0.01)
        .layout(Layout::Classic)
        .nonscaling(nonscaling)
        .build()
        .unwrap();
    for i in 0..items {
        let _ = src.add(format!("item-{i}"));
    }
    let (mut iter, header) = src.redis_scandump(0).unwrap();
    let mut chunks = Vec::new();
    loop {
        let (next, data) = src.redis_scandump(iter).unwrap();
        if next == 0 {
            return (header, chunks);
        }
        chunks.push((next, data));
        iter = next;
    }
}

/// A change to one of a dump's pieces.
#[derive(Clone, Debug)]
enum Damage {
    None,
    /// Byte `at` (modulo the header's length) of the header set to `to`.
    HeaderByte {
        at: usize,
        to: u8,
    },
    /// A header's u64 field at `at` (modulo) set to all ones.
    HeaderMax {
        at: usize,
    },
    /// A chunk's iterator moved by `by`.
    Iter {
        chunk: usize,
        by: i64,
    },
    /// A chunk cut to `len` bytes.
    Cut {
        chunk: usize,
        len: usize,
    },
}

fn damage() -> impl Strategy<Value = Damage> {
    prop_oneof![
        2 => Just(Damage::None),
        3 => (any::<usize>(), any::<u8>()).prop_map(|(at, to)| Damage::HeaderByte { at, to }),
        3 => any::<usize>().prop_map(|at| Damage::HeaderMax { at }),
        1 => (any::<usize>(), -100i64..100).prop_map(|(chunk, by)| Damage::Iter { chunk, by }),
        1 => (any::<usize>(), 0usize..64).prop_map(|(chunk, len)| Damage::Cut { chunk, len }),
    ]
}

/// The filter of `name` in seen's byte format, if there is one.
fn encoded(s: &Store, name: &[u8]) -> Option<Vec<u8>> {
    s.with_filter(name, |f| {
        let mut b = Vec::new();
        f.encode(&mut b).unwrap();
        b
    })
    .unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn a_loaded_dump_is_refused_or_survives_a_reopen(
        capacity in 1u64..200,
        items in 0u32..400,
        nonscaling in any::<bool>(),
        damages in prop::collection::vec(damage(), 1..4),
    ) {
        let (mut header, mut chunks) = dump(capacity, items, nonscaling);
        for d in &damages {
            match *d {
                Damage::None => {}
                Damage::HeaderByte { at, to } => {
                    let n = header.len();
                    header[at % n] = to;
                }
                Damage::HeaderMax { at } => {
                    let at = at % (header.len() - 7);
                    header[at..at + 8].fill(0xff);
                }
                Damage::Iter { chunk, by } if !chunks.is_empty() => {
                    let n = chunks.len();
                    let c = &mut chunks[chunk % n];
                    c.0 = c.0.saturating_add_signed(by);
                }
                Damage::Cut { chunk, len } if !chunks.is_empty() => {
                    let n = chunks.len();
                    chunks[chunk % n].1.truncate(len);
                }
                _ => {}
            }
        }
        let dir = tempfile::tempdir().unwrap();
        let opts = StoreOptions { fsync: FsyncPolicy::No, ..Default::default() };
        let store = Store::open(dir.path(), opts.clone()).unwrap();
        if store.load_redis_header(b"d", &header, 64 << 20).is_err() {
            prop_assert!(store.is_empty(), "a refused header left a filter");
            return Ok(());
        }
        for (iter, data) in &chunks {
            let before = encoded(&store, b"d");
            if store.load_redis_chunk(b"d", *iter, data).is_err() {
                prop_assert_eq!(encoded(&store, b"d"), before, "a refused chunk changed the filter");
            }
        }
        // Used as a filter is, whatever it holds (a full one refuses).
        let more: Vec<Vec<u8>> = (0..50).map(|i| format!("more-{i}").into_bytes()).collect();
        let refs: Vec<&[u8]> = more.iter().map(|v| v.as_slice()).collect();
        let _ = store.add(b"d", &refs, None);
        let taken = encoded(&store, b"d").unwrap();
        // From the log alone, then from a snapshot.
        drop(store);
        let store = Store::open(dir.path(), opts.clone()).unwrap();
        prop_assert_eq!(encoded(&store, b"d"), Some(taken.clone()));
        store.checkpoint().unwrap();
        drop(store);
        let store = Store::open(dir.path(), opts).unwrap();
        prop_assert_eq!(encoded(&store, b"d"), Some(taken));
    }
}
