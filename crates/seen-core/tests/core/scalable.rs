//! Scalable chains: growth (and its refusals: full, the chain's own
//! memory limit, a shared budget), the exclusive-access add, parameters.

use seen_core::{ErrorKind, Layout, MemoryBudget, ScalableBloomFilter};

/// `room_mut` reports a full non-scaling chain, and grows a scaling one.
#[test]
fn room_mut_reports_a_full_chain_and_grows_a_scaling_one() {
    let mut f = ScalableBloomFilter::builder(10, 0.01)
        .nonscaling(true)
        .build()
        .unwrap();
    for i in 0..40u32 {
        if f.add_hash_mut(f.hash(i.to_le_bytes())).is_err() {
            break;
        }
    }
    assert_eq!(f.len(), 10);
    assert!(matches!(f.room_mut().unwrap_err().kind(), ErrorKind::Full));
    let mut g = ScalableBloomFilter::new(4, 0.01).unwrap();
    for i in 0..4u32 {
        g.add_hash_mut(g.hash(i.to_le_bytes())).unwrap();
    }
    assert_eq!(g.links(), 1);
    assert_eq!(g.room_mut().unwrap(), 8);
    assert_eq!(g.links(), 2);
}

/// The exclusive-access add gives the same answers, counts and bits as
/// the shared one, growth and a full non-scaling chain included.
#[test]
fn add_hash_mut_matches_add_hash() {
    for layout in [Layout::Classic, Layout::Blocked] {
        for nonscaling in [false, true] {
            let build = || {
                ScalableBloomFilter::builder(50, 0.01)
                    .layout(layout)
                    .nonscaling(nonscaling)
                    .build()
                    .unwrap()
            };
            let shared = build();
            let mut exclusive = build();
            for i in 0..2_000u32 {
                let h = shared.hash(format!("item {}", i % 1500));
                let a = shared.add_hash(h).map_err(|e| e.to_string());
                let b = exclusive.add_hash_mut(h).map_err(|e| e.to_string());
                assert_eq!(a, b, "{layout:?} nonscaling={nonscaling} item {i}");
            }
            assert_eq!(shared.len(), exclusive.len());
            assert_eq!(shared.link_info(), exclusive.link_info());
        }
    }
}

#[test]
fn grows_and_keeps_everything() {
    for layout in [Layout::Blocked, Layout::Classic] {
        let f = ScalableBloomFilter::builder(100, 0.01)
            .layout(layout)
            .build()
            .unwrap();
        for i in 0..10_000 {
            f.add(format!("x{i}")).unwrap();
        }
        assert!(f.links() >= 6, "{layout:?}: {}", f.links());
        for i in 0..10_000 {
            assert!(f.contains(format!("x{i}")));
        }
        let info = f.link_info();
        for w in info.windows(2) {
            assert_eq!(w[1].capacity, w[0].capacity * 2);
            assert_eq!(w[1].error_rate, w[0].error_rate * 0.5);
        }
    }
}

#[test]
fn nonscaling_reports_full() {
    let f = ScalableBloomFilter::builder(10, 0.01)
        .layout(Layout::Classic)
        .nonscaling(true)
        .build()
        .unwrap();
    for i in 0..10 {
        assert!(f.add(format!("i{i}")).unwrap());
    }
    assert!(matches!(
        f.add("one-more").unwrap_err().kind(),
        ErrorKind::Full
    ));
    assert!(!f.add("i3").unwrap(), "present items are not an error");
    assert!(f.is_full());
}

/// Chains growing at once on several threads, charged to one budget:
/// together they never pass it, each keeps every item it accepted,
/// and the budget holds exactly what they hold.
#[test]
fn chains_sharing_a_budget_stay_under_it_together() {
    let budget = MemoryBudget::new(256 << 10);
    let chains: Vec<ScalableBloomFilter> = (0..4)
        .map(|_| {
            let mut c = ScalableBloomFilter::builder(500, 0.01).build().unwrap();
            c.set_charge(budget.charge(c.memory_bytes()).unwrap());
            c
        })
        .collect();
    let start = std::sync::Barrier::new(chains.len());
    let accepted: Vec<Vec<String>> = std::thread::scope(|s| {
        let hs: Vec<_> = chains
            .iter()
            .enumerate()
            .map(|(t, c)| {
                let start = &start;
                s.spawn(move || {
                    start.wait();
                    let mut ok = Vec::new();
                    for i in 0..1_000_000 {
                        let item = format!("t{t}-{i}");
                        match c.add(&item) {
                            Ok(_) => ok.push(item),
                            Err(e) => {
                                assert!(matches!(e.kind(), ErrorKind::TooLarge { .. }), "{e}");
                                return ok;
                            }
                        }
                    }
                    panic!("chain {t} never reached the budget")
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let held: u64 = chains.iter().map(|c| c.memory_bytes()).sum();
    assert_eq!(budget.used(), held);
    assert!(held <= budget.limit(), "{held}");
    // Growth went on until the budget ran out (the first links took
    // 2.4 KB of the 256 KiB).
    let links: usize = chains.iter().map(|c| c.links()).sum();
    assert!(links >= 4 + 8, "{links} links");
    assert!(held > budget.limit() / 2, "{held}");
    for (c, items) in chains.iter().zip(&accepted) {
        assert!(items.iter().all(|i| c.contains(i)), "no false negatives");
    }
    drop(chains);
    assert_eq!(budget.used(), 0);
}

/// A chain refused growth by its own limit says which limit it met,
/// and holds of the budget what its sub-filters hold (its own limit is
/// checked before the budget is asked).
#[test]
fn a_chain_at_its_own_limit_takes_nothing_from_the_budget() {
    let budget = MemoryBudget::new(1 << 30);
    let mut f = ScalableBloomFilter::builder(1000, 0.01)
        .max_bytes(4096)
        .build()
        .unwrap();
    f.set_charge(budget.charge(f.memory_bytes()).unwrap());
    let e = (0..100_000)
        .find_map(|i| f.add(format!("x{i}")).err())
        .expect("must hit the limit");
    assert!(
        matches!(e.kind(), ErrorKind::TooLarge { limit: 4096, .. }),
        "{e}"
    );
    assert_eq!(budget.used(), f.memory_bytes());
}

#[test]
fn growth_respects_memory_limit() {
    let f = ScalableBloomFilter::builder(1000, 0.01)
        .max_bytes(4096)
        .build()
        .unwrap();
    let mut err = None;
    for i in 0..100_000 {
        if let Err(e) = f.add(format!("x{i}")) {
            err = Some(e);
            break;
        }
    }
    let err = err.expect("must hit the limit");
    assert!(
        matches!(err.kind(), ErrorKind::TooLarge { limit: 4096, .. }),
        "{err}"
    );
    assert!(f.memory_bytes() <= 4096);
}

#[test]
fn bad_parameters() {
    assert!(ScalableBloomFilter::builder(10, 0.01)
        .expansion(0)
        .build()
        .is_err());
    assert!(ScalableBloomFilter::new(0, 0.01).is_err());
    assert!(ScalableBloomFilter::new(10, 0.0).is_err());
}
