//! Decoding outside bytes: truncated, bit-flipped and hostile streams give
//! typed errors, never a panic, never a silently different filter.

use seen_core::{
    decode, AnyFilter, BloomFilter, CountingBloomFilter, DecodeOptions, ErrorKind, Layout,
    ScalableBloomFilter,
};

fn samples() -> Vec<(&'static str, Vec<u8>)> {
    let mut out = Vec::new();
    for layout in [
        Layout::Blocked,
        Layout::Classic,
        Layout::Guava,
        Layout::Guava32,
    ] {
        let f = BloomFilter::builder(300, 0.01)
            .layout(layout)
            .build()
            .unwrap();
        let s = ScalableBloomFilter::builder(20, 0.01)
            .layout(layout)
            .build()
            .unwrap();
        for i in 0..200u32 {
            f.add(i.to_le_bytes());
            s.add(i.to_le_bytes()).unwrap();
        }
        let mut a = Vec::new();
        f.encode(&mut a).unwrap();
        out.push(("bloom", a));
        let mut b = Vec::new();
        s.encode(&mut b).unwrap();
        out.push(("scalable", b));
    }
    let mut c = CountingBloomFilter::new(300, 0.01).unwrap();
    for i in 0..200u32 {
        c.add(i.to_le_bytes());
    }
    let mut cb = Vec::new();
    c.encode(&mut cb).unwrap();
    out.push(("counting", cb));
    out
}

#[test]
fn every_prefix_is_truncated() {
    for (name, bytes) in samples() {
        for len in 0..bytes.len() {
            let e = decode(&bytes[..len], &DecodeOptions::default()).unwrap_err();
            assert!(
                matches!(e.kind(), ErrorKind::Truncated),
                "{name}: prefix {len}: {e}"
            );
        }
        assert!(decode(&bytes[..], &DecodeOptions::default()).is_ok());
    }
}

#[test]
fn every_single_bit_flip_is_detected() {
    // CRC-32 detects every single-bit error, so each flip must fail.
    for (name, bytes) in samples() {
        for byte in 0..bytes.len() {
            for bit in 0..8 {
                let mut b = bytes.clone();
                b[byte] ^= 1 << bit;
                match decode(&b[..], &DecodeOptions::default()) {
                    Err(_) => {}
                    Ok(f) => panic!("{name}: flip at {byte}.{bit} decoded as {:?}", f.kind()),
                }
            }
        }
    }
}

#[test]
fn errors_say_what_is_wrong() {
    let (_, bytes) = samples().remove(0);
    let mut b = bytes.clone();
    b[0] = b'X';
    let e = decode(&b[..], &DecodeOptions::default()).unwrap_err();
    assert!(matches!(e.kind(), ErrorKind::BadMagic(_)), "{e}");
    assert!(e.to_string().contains("not a seen filter"));

    let mut b = bytes.clone();
    let last = b.len() - 10;
    b[last] ^= 0x40;
    let e = decode(&b[..], &DecodeOptions::default()).unwrap_err();
    assert!(
        matches!(
            e.kind(),
            ErrorKind::BadChecksum {
                section: "body",
                ..
            }
        ),
        "{e}"
    );

    let mut b = bytes.clone();
    b[30] ^= 1; // capacity
    let e = decode(&b[..], &DecodeOptions::default()).unwrap_err();
    assert!(
        matches!(
            e.kind(),
            ErrorKind::BadChecksum {
                section: "header",
                ..
            }
        ),
        "{e}"
    );

    let e = BloomFilter::decode(&samples()[1].1[..], &DecodeOptions::default()).unwrap_err();
    assert!(e.to_string().contains("found a Scalable filter"), "{e}");
}

/// A header whose checksum is valid but whose parameters are impossible or
/// enormous is refused before any allocation.
#[test]
fn hostile_headers_with_valid_checksums() {
    let (_, bytes) = samples().remove(0);
    let header_len = 56 + 40;
    let reseal = |mut b: Vec<u8>| {
        let crc = crc32fast::hash(&b[..header_len]);
        b[header_len..header_len + 4].copy_from_slice(&crc.to_le_bytes());
        b
    };
    // Link size of 2^50 blocks (64 PiB): far over the limit.
    let mut b = bytes.clone();
    b[56..64].copy_from_slice(&(1u64 << 50).to_le_bytes());
    let e = decode(&reseal(b)[..], &DecodeOptions::default()).unwrap_err();
    assert!(matches!(e.kind(), ErrorKind::TooLarge { .. }), "{e}");
    // Size that overflows when turned into bytes.
    let mut b = bytes.clone();
    b[56..64].copy_from_slice(&u64::MAX.to_le_bytes());
    let e = decode(&reseal(b)[..], &DecodeOptions::default()).unwrap_err();
    assert!(matches!(e.kind(), ErrorKind::Corrupt(_)), "{e}");
    // Zero hashes.
    let mut b = bytes.clone();
    b[64..68].copy_from_slice(&0u32.to_le_bytes());
    let e = decode(&reseal(b)[..], &DecodeOptions::default()).unwrap_err();
    assert!(e.to_string().contains("0 hashes"), "{e}");
    // Error rate of 2.
    let mut b = bytes.clone();
    b[32..40].copy_from_slice(&2f64.to_le_bytes());
    let e = decode(&reseal(b)[..], &DecodeOptions::default()).unwrap_err();
    assert!(e.to_string().contains("error rate 2"), "{e}");
    // Unknown kind.
    let mut b = bytes.clone();
    b[10] = 9;
    let e = decode(&reseal(b)[..], &DecodeOptions::default()).unwrap_err();
    assert!(e.to_string().contains("unknown filter kind"), "{e}");
    // A huge link count is refused before reading the link table.
    let mut b = bytes.clone();
    b[52..56].copy_from_slice(&u32::MAX.to_le_bytes());
    let e = decode(&b[..], &DecodeOptions::default()).unwrap_err();
    assert!(e.to_string().contains("link count"), "{e}");
}

/// Pseudo-random mutations (a fixed-seed fuzz run inside the test suite; the
/// cargo-fuzz target `filter_decode` does the same without end).
#[test]
fn random_mutations_never_panic() {
    use rand::{Rng, SeedableRng};
    let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(42);
    let samples = samples();
    let mut decoded_ok = 0;
    for round in 0..20_000 {
        let (_, base) = &samples[round % samples.len()];
        let mut b = base.clone();
        for _ in 0..rng.gen_range(1..8) {
            match rng.gen_range(0..4) {
                0 => {
                    let i = rng.gen_range(0..b.len());
                    b[i] = rng.gen();
                }
                1 => b.truncate(rng.gen_range(0..b.len())),
                2 => b.extend((0..rng.gen_range(1..16)).map(|_| rng.gen::<u8>())),
                _ => {
                    let i = rng.gen_range(0..b.len());
                    b.insert(i, rng.gen());
                }
            }
            if b.is_empty() {
                break;
            }
        }
        if let Ok(f) = decode(&b[..], &DecodeOptions { max_bytes: 1 << 20 }) {
            // Only trailing garbage after a complete filter decodes.
            assert!(matches!(
                f,
                AnyFilter::Bloom(_) | AnyFilter::Scalable(_) | AnyFilter::Counting(_)
            ));
            decoded_ok += 1;
        }
    }
    assert!(decoded_ok < 2_000, "{decoded_ok} mutated streams decoded");
}
