//! Feeds arbitrary bytes to the RedisBloom dump loader (`BF.LOADCHUNK`):
//! the first 8 bytes are an iterator, the rest a header then a chunk.
#![no_main]

use libfuzzer_sys::fuzz_target;
use seen_core::ScalableBloomFilter;

fuzz_target!(|data: &[u8]| {
    if data.len() < 10 {
        return;
    }
    let split = (data[0] as usize).min(data.len() - 9) + 1;
    let (header, rest) = data[1..].split_at(split);
    if let Ok(mut f) = ScalableBloomFilter::from_redis_header(header, 1 << 24) {
        let iter = u64::from_le_bytes(rest[..8].try_into().unwrap());
        let _ = f.redis_load_chunk(iter, &rest[8..]);
        let _ = f.contains(b"x");
        let _ = f.redis_scandump(iter);
    }
});
