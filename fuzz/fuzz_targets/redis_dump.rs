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
//!
//! The same header and chunks then go through a store, as `seen serve`
//! takes them: what the store accepts must survive a checkpoint and a
//! reopen unchanged (a store never takes a state it would refuse to
//! open), and it must accept and refuse exactly what the chain did.
//! Each input gets an emptied data directory in `/dev/shm`.

#![no_main]

use libfuzzer_sys::fuzz_target;
use seen_core::{AnyFilter, Layout, ScalableBloomFilter};
use seen_store::{FsyncPolicy, Store, StoreOptions};

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

/// Loads the header and chunks into a store in a fresh directory,
/// checkpoints, reopens: the reopened chain's bytes, or `None` if the
/// store refused the header.
fn through_store(header: &[u8], chunks: &[(u64, &[u8])]) -> Option<Vec<u8>> {
    // One directory per process, emptied for each input (left as it was
    // after a crash, for a look).
    let dir = std::path::PathBuf::from(format!("/dev/shm/seen-fuzz-dump-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let opts = StoreOptions {
        fsync: FsyncPolicy::No,
        max_filter_bytes: MAX_BYTES,
        ..Default::default()
    };
    let chain_bytes = |s: &Store| {
        s.with_filter(b"k", |f| match f {
            AnyFilter::Scalable(c) => encode(c),
            _ => panic!("a dump loads as a chain"),
        })
        .expect("a lookup")
        .expect("the filter is there")
    };
    let before = {
        let s = Store::open(&dir, opts.clone()).expect("a fresh store");
        if s.load_redis_header(b"k", header, MAX_BYTES).is_err() {
            return None;
        }
        for &(iter, chunk) in chunks {
            // Refused or taken: both are fine; taken must survive.
            let _ = s.load_redis_chunk(b"k", iter, chunk);
        }
        let before = chain_bytes(&s);
        s.checkpoint().expect("a checkpoint of what the store took");
        before
    };
    let s = Store::open(&dir, opts).expect("what the store took reopens");
    assert_eq!(chain_bytes(&s), before, "checkpoint and reopen changed the chain");
    Some(before)
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
    let mut chunks = Vec::new();
    while let Some(c) = take(&mut data, 5) {
        let iter = u32::from_le_bytes(c[..4].try_into().unwrap()) as u64;
        let Some(chunk) = take(&mut data, c[4] as usize) else {
            break;
        };
        chunks.push((iter, chunk));
    }
    let in_store = through_store(&header, &chunks);
    let Ok(mut f) = ScalableBloomFilter::from_redis_header(&header, MAX_BYTES) else {
        assert!(in_store.is_none(), "the store took a header the chain refuses");
        return;
    };
    for &(iter, chunk) in &chunks {
        let place = f.redis_chunk_place(iter, chunk.len() as u64);
        let loaded = f.redis_load_chunk(iter, chunk);
        assert_eq!(place.is_ok(), loaded.is_ok(), "place and load disagree");
    }
    let in_store = in_store.expect("the store refused a header the chain takes");
    assert_eq!(in_store, encode(&f), "the store's chain is not the chain");
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
