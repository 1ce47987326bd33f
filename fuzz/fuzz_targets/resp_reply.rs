//! Arbitrary bytes from a server into the reply parser.
//!
//! Beyond "no panic": every reply consumes at least one byte and no more
//! than there is, and whatever parsed encodes to bytes that parse back to
//! the same encoding, in both protocols.

#![no_main]

use libfuzzer_sys::fuzz_target;
use seen_resp::{parse_reply, Protocol};

fuzz_target!(|data: &[u8]| {
    let mut pos = 0;
    while let Ok(Some((reply, used))) = parse_reply(&data[pos..]) {
        assert!(used > 0, "no progress");
        assert!(used <= data.len() - pos, "consumed past the end");
        pos += used;
        for proto in [Protocol::Resp2, Protocol::Resp3] {
            let wire = reply.to_bytes(proto);
            let (again, len) = parse_reply(&wire)
                .expect("own encoding parses")
                .expect("own encoding is complete");
            assert_eq!(len, wire.len());
            assert_eq!(again.to_bytes(proto), wire, "encoding not stable");
        }
    }
});
