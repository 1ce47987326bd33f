//! "No false negatives, ever": for any sequence of adds, every added item is
//! reported present, in every filter kind and layout, before and after an
//! encode/decode round trip, after union, and after removes of other items
//! in the counting filter.

use proptest::prelude::*;
use seen_core::{
    BloomFilter, CountingBloomFilter, DecodeOptions, ErrorKind, Layout, Removal,
    ScalableBloomFilter,
};

fn layouts() -> impl Strategy<Value = Layout> {
    prop_oneof![
        Just(Layout::Blocked),
        Just(Layout::Classic),
        Just(Layout::Guava),
        Just(Layout::Guava32)
    ]
}

fn items() -> impl Strategy<Value = Vec<Vec<u8>>> {
    prop::collection::vec(prop::collection::vec(any::<u8>(), 0..40), 0..300)
}

fn rates() -> impl Strategy<Value = f64> {
    prop_oneof![Just(0.5), Just(0.1), Just(0.01), Just(1e-4)]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn bloom_never_forgets(
        layout in layouts(),
        capacity in 1u64..500,
        p in rates(),
        items in items(),
    ) {
        let f = BloomFilter::builder(capacity, p).layout(layout).build().unwrap();
        let mut new_count = 0;
        for (i, item) in items.iter().enumerate() {
            if f.add(item) {
                new_count += 1;
            }
            // Everything added so far is present, now.
            for earlier in &items[..=i] {
                prop_assert!(f.contains(earlier));
            }
        }
        prop_assert_eq!(f.len(), new_count);
        prop_assert!(f.contains_many(&items).iter().all(|&b| b));
        // Adding again never reports new.
        prop_assert!(f.add_many(&items).iter().all(|&b| !b));

        let mut bytes = Vec::new();
        f.encode(&mut bytes).unwrap();
        let g = BloomFilter::decode(&bytes[..], &DecodeOptions::default()).unwrap();
        for item in &items {
            prop_assert!(g.contains(item));
        }
        prop_assert_eq!(g.len(), f.len());
    }

    #[test]
    fn add_mut_and_add_agree(layout in layouts(), items in items()) {
        let shared = BloomFilter::builder(200, 0.01).layout(layout).build().unwrap();
        let mut owned = BloomFilter::builder(200, 0.01).layout(layout).build().unwrap();
        for item in &items {
            prop_assert_eq!(shared.add(item), owned.add_mut(item));
        }
        let (mut a, mut b) = (Vec::new(), Vec::new());
        shared.encode(&mut a).unwrap();
        owned.encode(&mut b).unwrap();
        prop_assert_eq!(a, b);
    }

    #[test]
    fn union_keeps_both_sides(
        layout in layouts(),
        left in items(),
        right in items(),
    ) {
        let mut a = BloomFilter::builder(300, 0.01).layout(layout).build().unwrap();
        let b = BloomFilter::builder(300, 0.01).layout(layout).build().unwrap();
        for x in &left { a.add(x); }
        for x in &right { b.add(x); }
        let mut both = BloomFilter::builder(300, 0.01).layout(layout).build().unwrap();
        for x in left.iter().filter(|x| right.contains(x)) { both.add(x); }
        let mut inter = BloomFilter::builder(300, 0.01).layout(layout).build().unwrap();
        inter.union_with(&a).unwrap();
        inter.intersect_with(&b).unwrap();
        for x in left.iter().filter(|x| right.contains(x)) {
            prop_assert!(inter.contains(x));
        }
        a.union_with(&b).unwrap();
        for x in left.iter().chain(&right) {
            prop_assert!(a.contains(x));
        }
        both.union_with(&a).unwrap();
    }

    #[test]
    fn scalable_never_forgets(
        layout in layouts(),
        capacity in 1u64..50,
        expansion in 1u32..5,
        p in rates(),
        items in items(),
    ) {
        let f = ScalableBloomFilter::builder(capacity, p)
            .layout(layout)
            .expansion(expansion)
            .build()
            .unwrap();
        // A blocked chain with expansion 1 can run out of reachable error
        // rates (each link halves the rate); such an add is an error, and
        // everything accepted before stays present.
        let mut accepted = Vec::new();
        for item in &items {
            match f.add(item) {
                Ok(_) => accepted.push(item.clone()),
                Err(e) => {
                    prop_assert!(matches!(e.kind(), ErrorKind::Unreachable(_)), "{}", e);
                    break;
                }
            }
        }
        let items = accepted;
        for item in &items {
            prop_assert!(f.contains(item));
        }
        let mut bytes = Vec::new();
        f.encode(&mut bytes).unwrap();
        let g = ScalableBloomFilter::decode(&bytes[..], &DecodeOptions::default()).unwrap();
        prop_assert_eq!(g.links(), f.links());
        prop_assert_eq!(g.len(), f.len());
        for item in &items {
            prop_assert!(g.contains(item));
            prop_assert!(!g.add(item).unwrap());
        }
        // A chain decoded keeps growing correctly.
        let mut h = g;
        let mut more: Vec<Vec<u8>> = Vec::new();
        for i in 0..200u32 {
            let x = i.to_le_bytes().to_vec();
            if h.add(&x).is_err() { break; }
            more.push(x);
        }
        for x in items.iter().chain(&more) { prop_assert!(h.contains(x)); }
        let other = ScalableBloomFilter::decode(&bytes[..], &DecodeOptions::default()).unwrap();
        if other.links() == h.links() {
            h.union_with(&other).unwrap();
            for x in items.iter().chain(&more) { prop_assert!(h.contains(x)); }
        }
    }

    #[test]
    fn nonscaling_never_forgets_even_when_full(
        layout in layouts(),
        capacity in 1u64..50,
        items in items(),
    ) {
        let f = ScalableBloomFilter::builder(capacity, 0.01)
            .layout(layout)
            .nonscaling(true)
            .build()
            .unwrap();
        let mut accepted = Vec::new();
        for item in &items {
            match f.add(item) {
                Ok(_) => accepted.push(item),
                Err(e) => prop_assert_eq!(e.to_string(), "non scaling filter is full"),
            }
        }
        prop_assert!(f.len() <= capacity);
        for item in accepted {
            prop_assert!(f.contains(item));
        }
    }

    #[test]
    fn counting_never_forgets_items_still_in(
        items in items(),
        remove_mask in prop::collection::vec(any::<bool>(), 300),
    ) {
        let mut f = CountingBloomFilter::new(400, 0.01).unwrap();
        for item in &items { f.add(item); }
        // Remove some of the added items (once per occurrence we remove).
        let mut remaining: Vec<&Vec<u8>> = Vec::new();
        for (i, item) in items.iter().enumerate() {
            if remove_mask[i] {
                prop_assert_eq!(f.remove(item), Removal::Removed);
            } else {
                remaining.push(item);
            }
        }
        for item in &remaining {
            prop_assert!(f.contains(item), "lost an item that was not removed");
        }
        let mut bytes = Vec::new();
        f.encode(&mut bytes).unwrap();
        let g = CountingBloomFilter::decode(&bytes[..], &DecodeOptions::default()).unwrap();
        for item in &remaining {
            prop_assert!(g.contains(item));
        }
        let mut u = g.clone();
        u.union_with(&f).unwrap();
        for item in &remaining {
            prop_assert!(u.contains(item));
        }
        let mut i = g;
        i.intersect_with(&f).unwrap();
        for item in &remaining {
            prop_assert!(i.contains(item));
        }
    }
}
