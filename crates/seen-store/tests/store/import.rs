//! Whole filters put under a name (`Store::import`, what `BF.IMPORT`
//! does): they survive reopening and checkpoints bit for bit, a taken name
//! refuses them, and an import cut short by a fault leaves no filter, not
//! part of one.

use seen_core::{guava, AnyFilter};
use seen_store::{ErrorKind, FsyncPolicy, Store, StoreOptions};

use crate::basics::{bloom, encoded};
use crate::faults::{faulty_with, item, reopen};

/// A Guava-layout filter of `n` items, `item(0..n)`: about 1.2 bytes an
/// item at 1%, so more than 4 MiB (more than one log record) from 3.5M.
fn guava_filter(n: usize) -> AnyFilter {
    let f = guava::create(n as u64, 0.01).unwrap();
    for i in 0..n {
        f.add(item(i));
    }
    AnyFilter::Bloom(f)
}

fn encode(f: &AnyFilter) -> Vec<u8> {
    let mut out = Vec::new();
    f.encode(&mut out).unwrap();
    out
}

fn all_present(s: &Store, name: &[u8], n: usize) -> bool {
    let items: Vec<Vec<u8>> = (0..n).map(item).collect();
    let refs: Vec<&[u8]> = items.iter().map(Vec::as_slice).collect();
    s.contains(name, &refs).unwrap().unwrap().iter().all(|&p| p)
}

#[test]
fn an_import_survives_reopening_and_checkpoints_bit_for_bit() {
    let dir = tempfile::tempdir().unwrap();
    let n = 4_000_000;
    let filter = guava_filter(n);
    let bytes = encode(&filter);
    assert!(bytes.len() > 4 << 20, "more than one record");
    {
        let s = Store::open(dir.path(), StoreOptions::default()).unwrap();
        s.import(b"crawl", filter, u64::MAX).unwrap();
        assert_eq!(encoded(&s, b"crawl"), bytes);
        assert!(all_present(&s, b"crawl", n));
    }
    // Replayed from the log.
    let s = reopen(dir.path());
    assert_eq!(encoded(&s, b"crawl"), bytes);
    // Adds after the import, then a checkpoint, then the snapshot.
    let more: Vec<Vec<u8>> = (n..n + 1000).map(item).collect();
    let refs: Vec<&[u8]> = more.iter().map(Vec::as_slice).collect();
    s.add(b"crawl", &refs, None).unwrap();
    let after = encoded(&s, b"crawl");
    s.checkpoint().unwrap();
    drop(s);
    let s = reopen(dir.path());
    assert_eq!(encoded(&s, b"crawl"), after);
    assert!(all_present(&s, b"crawl", n + 1000));
}

#[test]
fn a_taken_name_refuses_an_import_now_and_on_replay() {
    let dir = tempfile::tempdir().unwrap();
    let s = Store::open(dir.path(), StoreOptions::default()).unwrap();
    s.create(b"f", &bloom()).unwrap();
    s.add(b"f", &[b"mine"], None).unwrap();
    let before = encoded(&s, b"f");
    let e = s.import(b"f", guava_filter(100), u64::MAX).unwrap_err();
    assert!(matches!(e.kind(), ErrorKind::Exists), "{e}");
    // Too large for the limit given: refused before anything is logged.
    let e = s.import(b"g", guava_filter(100), 64).unwrap_err();
    assert!(e.to_string().contains("limit of 64 bytes"), "{e}");
    drop(s);
    let s = reopen(dir.path());
    assert_eq!(encoded(&s, b"f"), before);
    assert_eq!(s.names(), vec![b"f".to_vec()]);
}

#[test]
fn an_import_cut_short_by_a_full_disk_leaves_no_filter() {
    let dir = tempfile::tempdir().unwrap();
    let n = 4_000_000;
    let opts = StoreOptions {
        fsync: FsyncPolicy::Always,
        ..Default::default()
    };
    {
        let (s, faults) = faulty_with(dir.path(), opts.clone());
        s.create(b"other", &bloom()).unwrap();
        s.add(b"other", &[b"kept"], None).unwrap();
        // Room for the first piece (4 MiB) and not the second (0.6 MiB).
        faults.set_room((4 << 20) + (256 << 10));
        let e = s.import(b"crawl", guava_filter(n), u64::MAX).unwrap_err();
        assert!(e.to_string().contains("No space"), "{e}");
        assert!(s.contains(b"crawl", &[b"x"]).unwrap().is_none());
    }
    let s = reopen(dir.path());
    assert!(s.contains(b"crawl", &[b"x"]).unwrap().is_none());
    assert!(s.contains(b"other", &[b"kept"]).unwrap().unwrap()[0]);
    // The name is free: imported again, it is whole, now and replayed.
    s.import(b"crawl", guava_filter(n), u64::MAX).unwrap();
    assert!(all_present(&s, b"crawl", n));
    drop(s);
    let s = reopen(dir.path());
    assert!(all_present(&s, b"crawl", n));
}

/// An import racing a create of the same name: whichever wins (the create
/// can come between the import's first and last pieces, and then the
/// import is refused), the reopened store holds exactly the winner.
#[test]
fn an_import_racing_a_create_of_its_name_replays_as_it_ended() {
    let n = 4_000_000;
    let filter = guava_filter(n);
    let bytes = encode(&filter);
    let mut outcomes = [0usize; 2];
    for round in 0..12 {
        let dir = tempfile::tempdir().unwrap();
        let s = Store::open(dir.path(), StoreOptions::default()).unwrap();
        let copy = seen_core::decode(&bytes[..], &Default::default()).unwrap();
        let (imported, created) = std::thread::scope(|scope| {
            let importer = scope.spawn(|| s.import(b"x", copy, u64::MAX).is_ok());
            // Start creating a little after the import began, later each round.
            std::thread::sleep(std::time::Duration::from_millis(round * 4));
            let created = s.create(b"x", &bloom()).is_ok();
            (importer.join().unwrap(), created)
        });
        assert!(
            imported != created,
            "round {round}: exactly one of them wins"
        );
        outcomes[imported as usize] += 1;
        let live = encoded(&s, b"x");
        drop(s);
        let s = reopen(dir.path());
        assert_eq!(encoded(&s, b"x"), live, "round {round}: replay differs");
        assert_eq!(live == bytes, imported, "round {round}");
    }
    eprintln!(
        "import won {} rounds, the create {}",
        outcomes[1], outcomes[0]
    );
}
