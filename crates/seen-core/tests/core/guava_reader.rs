//! Property tests of the Guava layouts and reader: no false negatives in
//! either strategy, files that round-trip exactly, and every malformed
//! file (truncated, a word count that is not its length, hash count 0, an
//! unknown strategy, random bytes) refused with an error, never a panic or
//! a filter of the wrong size.

use proptest::prelude::*;
use seen_core::{guava, BloomFilter, ErrorKind, Layout};

fn layouts() -> impl Strategy<Value = Layout> {
    prop_oneof![Just(Layout::Guava), Just(Layout::Guava32)]
}

fn filter(layout: Layout, capacity: u64, items: &[Vec<u8>]) -> BloomFilter {
    let f = BloomFilter::builder(capacity, 0.01)
        .layout(layout)
        .build()
        .unwrap();
    for i in items {
        f.add(i);
    }
    f
}

fn write(f: &BloomFilter) -> Vec<u8> {
    let mut out = Vec::new();
    guava::write(f, &mut out).unwrap();
    out
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn written_and_read_back_nothing_is_lost(
        layout in layouts(),
        capacity in 1u64..5_000,
        items in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..40), 0..300),
    ) {
        let f = filter(layout, capacity, &items);
        let bytes = write(&f);
        let g = guava::from_bytes(&bytes, u64::MAX).unwrap();
        prop_assert_eq!(g.layout(), layout);
        prop_assert_eq!((g.bits(), g.hashes()), (f.bits(), f.hashes()));
        prop_assert!(items.iter().all(|i| g.contains(i)));
        prop_assert_eq!(write(&g), bytes.clone());
        // And through seen's own format.
        let mut seen = Vec::new();
        g.encode(&mut seen).unwrap();
        let h = BloomFilter::decode(&seen[..], &Default::default()).unwrap();
        prop_assert!(items.iter().all(|i| h.contains(i)));
        prop_assert_eq!(write(&h), bytes);
    }

    #[test]
    fn a_truncated_or_lengthened_file_is_refused(
        layout in layouts(),
        cut in any::<prop::sample::Index>(),
        extra in 1usize..16,
    ) {
        let bytes = write(&filter(layout, 500, &[b"a".to_vec()]));
        let short = &bytes[..cut.index(bytes.len())];
        let e = guava::from_bytes(short, u64::MAX).unwrap_err();
        prop_assert!(matches!(e.kind(), ErrorKind::Truncated), "{e}");
        prop_assert!(guava::read_file(short, u64::MAX).is_err());
        let mut long = bytes.clone();
        long.extend(std::iter::repeat_n(0u8, extra));
        prop_assert!(guava::from_bytes(&long, u64::MAX).is_err());
        prop_assert!(guava::read_file(&long[..], u64::MAX).is_err());
    }

    #[test]
    fn a_bad_header_is_refused_before_anything_is_allocated(
        strategy in any::<u8>(),
        hashes in any::<u8>(),
        words in any::<i32>(),
        body in prop::collection::vec(any::<u8>(), 0..64),
    ) {
        let mut bytes = vec![strategy, hashes];
        bytes.extend_from_slice(&words.to_be_bytes());
        bytes.extend_from_slice(&body);
        let fits = words > 0 && body.len() == words as usize * 8;
        match guava::from_bytes(&bytes, 1 << 20) {
            Ok(f) => {
                prop_assert!(strategy <= 1 && hashes > 0 && fits);
                prop_assert_eq!(f.bits(), words as u64 * 64);
                prop_assert_eq!(f.hashes(), hashes as u32);
            }
            Err(e) => prop_assert!(strategy > 1 || hashes == 0 || !fits, "{e}"),
        }
        // A word count past the limit: too large, whatever the length.
        let mut huge = vec![1, 7];
        huge.extend_from_slice(&i32::MAX.to_be_bytes());
        let e = guava::read(&huge[..], 1 << 20).unwrap_err();
        prop_assert!(matches!(e.kind(), ErrorKind::TooLarge { .. }), "{e}");
    }
}

#[test]
fn hash_counts_0_and_255_are_guavas_bounds() {
    let mut bytes = write(&filter(Layout::Guava, 100, &[]));
    bytes[1] = 0;
    let e = guava::from_bytes(&bytes, u64::MAX).unwrap_err();
    assert!(e.to_string().contains("0 hash functions"), "{e}");
    bytes[1] = 255;
    let f = guava::from_bytes(&bytes, u64::MAX).unwrap();
    assert_eq!(f.hashes(), 255);
    f.add("x");
    assert!(f.contains("x"));
}
