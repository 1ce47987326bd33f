//! Feeds arbitrary bytes to the filter decoder: it must return a filter or
//! an error, never panic, and never allocate past the limit it was given.
#![no_main]

use libfuzzer_sys::fuzz_target;
use seen_core::{decode, AnyFilter, DecodeOptions};

fuzz_target!(|data: &[u8]| {
    let opts = DecodeOptions { max_bytes: 1 << 24 };
    if let Ok(f) = decode(data, &opts) {
        // Whatever decoded must encode again and decode to the same bytes.
        let mut again = Vec::new();
        f.encode(&mut again).expect("encode to memory");
        let g = decode(&again[..], &opts).expect("re-decode");
        let mut third = Vec::new();
        g.encode(&mut third).expect("encode to memory");
        assert_eq!(again, third);
        if let AnyFilter::Bloom(b) = f {
            let _ = b.stats();
        }
    }
});
