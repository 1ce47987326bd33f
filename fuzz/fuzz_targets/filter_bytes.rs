//! The seen filter byte format (docs/FORMAT.md, section 4) from outside:
//! a snapshot, a `seen inspect` file, a `BF.LOADCHUNK`-free restore.
//!
//! Two modes, chosen by the first byte's low bit:
//!
//! - raw: the rest of the input is decoded as it is. No panic, and a
//!   filter that decodes re-encodes to bytes that decode to the same
//!   encoding.
//! - edited: a small valid filter (kind, layout and fill from the next
//!   bytes) is encoded, then the rest of the input edits its bytes
//!   (`offset: u16, xor: u8` triples, or a cut). If the edited bytes
//!   still decode, every item added before encoding must still be found:
//!   a damaged file may be refused, never read as a filter that lost an
//!   item.

#![no_main]

use libfuzzer_sys::fuzz_target;
use seen_core::{
    decode, AnyFilter, BloomFilter, CountingBloomFilter, DecodeOptions, Layout, ScalableBloomFilter,
};

const MAX_BYTES: u64 = 1 << 20;

fn items(n: usize) -> Vec<Vec<u8>> {
    (0..n).map(|i| format!("item-{i}").into_bytes()).collect()
}

fn contains(f: &AnyFilter, item: &[u8]) -> bool {
    match f {
        AnyFilter::Bloom(f) => f.contains(item),
        AnyFilter::Scalable(f) => f.contains(item),
        AnyFilter::Counting(f) => f.contains(item),
        _ => unreachable!("a kind this target does not know"),
    }
}

fn encode(f: &AnyFilter) -> Vec<u8> {
    let mut out = Vec::new();
    f.encode(&mut out).expect("encode into a Vec");
    out
}

/// A small valid filter holding `items(n)`, chosen by `sel`.
fn build(sel: u8, n: usize) -> AnyFilter {
    let layout = if sel & 2 == 0 {
        Layout::Blocked
    } else {
        Layout::Classic
    };
    let all = items(n);
    match (sel >> 2) % 3 {
        0 => {
            let f = BloomFilter::builder(64, 0.01)
                .layout(layout)
                .build()
                .expect("small filter");
            for i in &all {
                f.add(i);
            }
            AnyFilter::Bloom(f)
        }
        1 => {
            // Capacity 16: more items than that make a chain of links.
            let f = ScalableBloomFilter::builder(16, 0.01)
                .layout(layout)
                .expansion(2)
                .build()
                .expect("small chain");
            for i in &all {
                f.add(i).expect("growable chain");
            }
            AnyFilter::Scalable(f)
        }
        _ => {
            let mut f = CountingBloomFilter::new(64, 0.01).expect("small counting filter");
            for i in &all {
                f.add(i);
            }
            AnyFilter::Counting(f)
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let opts = DecodeOptions {
        max_bytes: MAX_BYTES,
    };
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    if mode & 1 == 0 {
        if let Ok(f) = decode(rest, &opts) {
            let once = encode(&f);
            let again = decode(&once[..], &opts).expect("own encoding decodes");
            assert_eq!(encode(&again), once, "encoding not stable");
        }
        return;
    }
    let Some((&fill, edits)) = rest.split_first() else {
        return;
    };
    let n = (fill % 64) as usize;
    let f = build(mode, n);
    let mut bytes = encode(&f);
    let len = bytes.len();
    let mut changed = false;
    for e in edits.chunks(3) {
        if e.len() < 3 {
            // A cut: keep this fraction of the file.
            let keep = len * e[0] as usize / 256;
            changed |= keep < bytes.len();
            bytes.truncate(keep);
            break;
        }
        let off = u16::from_le_bytes([e[0], e[1]]) as usize % len;
        if off < bytes.len() {
            bytes[off] ^= e[2];
            changed |= e[2] != 0;
        }
    }
    match decode(&bytes[..], &opts) {
        Ok(g) => {
            for i in items(n) {
                assert!(
                    contains(&g, &i),
                    "an edited file decoded without {:?} (edits changed bytes: {changed})",
                    String::from_utf8_lossy(&i)
                );
            }
            let once = encode(&g);
            let again = decode(&once[..], &opts).expect("own encoding decodes");
            assert_eq!(encode(&again), once, "encoding not stable");
        }
        Err(e) => {
            assert!(changed, "an unedited encoding failed to decode: {e}");
            assert!(!e.to_string().is_empty());
        }
    }
});
