//! RedisBloom dumps from outside: `BF.LOADCHUNK key 1 <header>` then
//! `BF.LOADCHUNK key <iter> <data>` (docs/FORMAT.md, section 5).
//!
//! The first byte's low bit picks the header: the input's own bytes
//! (raw), or the header of a small real chain with the input's edits
//! (`offset: u8, xor: u8` pairs up to a zero offset-and-xor pair). The
//! rest of the input is chunks, `iter: u32, len: u8` and `len` bytes
//! each. A RedisBloom dump carries no checksum, so the checks are: no
//! panic, a header and chunks either load or are refused with an error,
//! and whatever loaded dumps (`BF.SCANDUMP`) into chunks that load into
//! an identical chain.

#![no_main]

use libfuzzer_sys::fuzz_target;
use seen_core::{Layout, ScalableBloomFilter};

const MAX_BYTES: u64 = 1 << 20;

/// The chunks `BF.SCANDUMP` gives after the header (iterator 0 gives the
/// header and iterator 1).
fn dump(f: &ScalableBloomFilter) -> Vec<(u64, Vec<u8>)> {
    let mut out = Vec::new();
    let mut iter = 1;
    loop {
        let (next, data) = f.redis_scandump(iter).expect("a classic chain dumps");
        if next == 0 {
            return out;
        }
        out.push((next, data));
        iter = next;
    }
}

fn encode(f: &ScalableBloomFilter) -> Vec<u8> {
    let mut out = Vec::new();
    f.encode(&mut out).expect("encode into a Vec");
    out
}

fn take<'a>(data: &mut &'a [u8], n: usize) -> Option<&'a [u8]> {
    if data.len() < n {
        return None;
    }
    let (a, b) = data.split_at(n);
    *data = b;
    Some(a)
}

fuzz_target!(|input: &[u8]| {
    let mut data = input;
    let Some(&[mode]) = take(&mut data, 1) else {
        return;
    };
    let header = if mode & 1 == 0 {
        let Some(len) = take(&mut data, 1) else {
            return;
        };
        let Some(h) = take(&mut data, len[0] as usize) else {
            return;
        };
        h.to_vec()
    } else {
        let real = ScalableBloomFilter::builder(8, 0.01)
            .layout(Layout::Classic)
            .expansion(2)
            .build()
            .expect("small chain");
        for i in 0..(mode >> 1) as usize % 40 {
            real.add(format!("item-{i}")).expect("growable chain");
        }
        let mut h = real.redis_dump_header().expect("classic chain");
        while let Some(e) = take(&mut data, 2) {
            if e == [0, 0] {
                break;
            }
            let off = e[0] as usize % h.len();
            h[off] ^= e[1];
        }
        h
    };
    let Ok(mut f) = ScalableBloomFilter::from_redis_header(&header, MAX_BYTES) else {
        return;
    };
    while let Some(c) = take(&mut data, 5) {
        let iter = u32::from_le_bytes(c[..4].try_into().unwrap()) as u64;
        let Some(chunk) = take(&mut data, c[4] as usize) else {
            break;
        };
        let place = f.redis_chunk_place(iter, chunk.len() as u64);
        let loaded = f.redis_load_chunk(iter, chunk);
        assert_eq!(place.is_ok(), loaded.is_ok(), "place and load disagree");
    }
    f.contains(b"item-0");
    // What loaded dumps and reloads to the same chain.
    let chunks = dump(&f);
    let header = f.redis_dump_header().expect("classic chain");
    let mut g =
        ScalableBloomFilter::from_redis_header(&header, MAX_BYTES).expect("own dump header loads");
    for (iter, chunk) in chunks {
        g.redis_load_chunk(iter, &chunk).expect("own chunk loads");
    }
    assert_eq!(encode(&g), encode(&f), "dump and reload changed the chain");
});
