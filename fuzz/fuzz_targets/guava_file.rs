//! Guava's `BloomFilter.writeTo` format from outside: a file `seen
//! convert`, `seen dedup --format guava` or `BF.IMPORT ... GUAVA` is given.
//!
//! Two modes, chosen by the first byte's low bit:
//!
//! - raw: the rest of the input is read as a Guava file. No panic; a file
//!   that is read writes back to exactly its bytes, and the streaming
//!   reader agrees with the in-memory one.
//! - edited: a small valid filter (strategy and fill from the next bytes)
//!   is written, then the rest of the input edits its bytes
//!   (`offset: u16, xor: u8` triples, or a cut). The format has no
//!   checksum, so an edited word may lose items; but a file whose header
//!   and length are untouched is read, and one whose length no longer
//!   fits its header is refused.

#![no_main]

use libfuzzer_sys::fuzz_target;
use seen_core::{guava, BloomFilter, Layout};

const MAX_BYTES: u64 = 1 << 20;

fn items(n: usize) -> Vec<Vec<u8>> {
    (0..n).map(|i| format!("item-{i}").into_bytes()).collect()
}

fn write(f: &BloomFilter) -> Vec<u8> {
    let mut out = Vec::new();
    guava::write(f, &mut out).expect("a Guava-layout filter writes");
    out
}

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    if mode & 1 == 0 {
        let in_memory = guava::from_bytes(rest, MAX_BYTES);
        let streamed = guava::read_file(rest, MAX_BYTES);
        assert_eq!(in_memory.is_ok(), streamed.is_ok(), "the two readers disagree");
        if let Ok(f) = in_memory {
            assert_eq!(write(&f), rest, "a file read does not write back as it was");
        }
        return;
    }
    let Some((&fill, edits)) = rest.split_first() else {
        return;
    };
    let layout = if mode & 2 == 0 {
        Layout::Guava
    } else {
        Layout::Guava32
    };
    let f = BloomFilter::builder(64, 0.01)
        .layout(layout)
        .build()
        .expect("small filter");
    let all = items((fill % 64) as usize);
    for i in &all {
        f.add(i);
    }
    let mut bytes = write(&f);
    let len = bytes.len();
    let mut header_changed = false;
    for e in edits.chunks(3) {
        if e.len() < 3 {
            bytes.truncate(len * e[0] as usize / 256);
            break;
        }
        let off = u16::from_le_bytes([e[0], e[1]]) as usize % len;
        if off < bytes.len() {
            bytes[off] ^= e[2];
            header_changed |= off < guava::HEADER_BYTES && e[2] != 0;
        }
    }
    match guava::from_bytes(&bytes, MAX_BYTES) {
        Ok(g) => {
            assert_eq!(write(&g), bytes, "a file read does not write back as it was");
            if bytes == write(&f) {
                assert!(all.iter().all(|i| g.contains(i)), "an untouched file lost items");
            }
        }
        Err(e) => assert!(
            header_changed || bytes.len() != len,
            "an intact header and length refused: {e}"
        ),
    }
});
