//! A data directory of format 6, written by the store before its log was
//! rebuilt (`tests/fixtures/format6.tar.gz`, made by
//! `tests/fixtures/make_format6.rs.txt` at commit f2c739a): killed with
//! adds in its log lanes and staging rings and snapshots copied while adds
//! went on. It opens as the code that wrote it opened it, filter for
//! filter, bit for bit, and an upgrade cut short anywhere opens the same.

use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;

use seen_store::{Store, StoreOptions};

use crate::faulty::FaultyFs;

/// The fixture unpacked into a new directory: the data directory and the
/// expected filters (`name expiry encoded-length crc32` per line, from the
/// old code's open of a copy).
fn unpack() -> (tempfile::TempDir, PathBuf, String) {
    let tmp = tempfile::tempdir().unwrap();
    let archive = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/format6.tar.gz");
    let status = std::process::Command::new("tar")
        .arg("xzf")
        .arg(&archive)
        .arg("-C")
        .arg(tmp.path())
        .status()
        .unwrap();
    assert!(status.success());
    let dir = tmp.path().join("dir");
    stamp_rings_with_this_boot(&dir);
    let expected = std::fs::read_to_string(tmp.path().join("expected/filters.txt")).unwrap();
    (tmp, dir, expected)
}

/// The rings hold adds only on the boot that wrote them (a power loss
/// between makes them hold nothing): give them this machine's boot id, as
/// if the process had been killed a moment ago here.
fn stamp_rings_with_this_boot(dir: &Path) {
    let text = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").unwrap();
    let hex: Vec<u8> = text.bytes().filter(u8::is_ascii_hexdigit).collect();
    let boot: Vec<u8> = hex
        .chunks(2)
        .map(|p| u8::from_str_radix(std::str::from_utf8(p).unwrap(), 16).unwrap())
        .collect();
    for e in std::fs::read_dir(dir.join("rings")).unwrap() {
        let path = e.unwrap().path();
        let mut b = std::fs::read(&path).unwrap();
        b[24..40].copy_from_slice(&boot);
        let crc = crc32fast::hash(&b[..40]);
        b[40..44].copy_from_slice(&crc.to_le_bytes());
        std::fs::write(&path, b).unwrap();
    }
}

/// The store's filters as the fixture's expected list states them.
fn described(s: &Store) -> String {
    let mut names = s.names();
    names.sort();
    names
        .iter()
        .map(|n| {
            let bytes = s
                .with_filter(n, |f| {
                    let mut b = Vec::new();
                    f.encode(&mut b).unwrap();
                    b
                })
                .unwrap()
                .unwrap();
            let at = s.expires_at(n).unwrap().unwrap();
            let ms = at.map_or(0, |t| {
                t.duration_since(std::time::UNIX_EPOCH).unwrap().as_millis()
            });
            let name = String::from_utf8_lossy(n);
            format!(
                "{name} {ms} {} {:08x}\n",
                bytes.len(),
                crc32fast::hash(&bytes)
            )
        })
        .collect()
}

#[test]
fn a_format_6_directory_opens_as_its_own_code_opened_it() {
    let (_tmp, dir, expected) = unpack();
    let s = Store::open(&dir, StoreOptions::default()).unwrap();
    assert!(s.recovery().staged > 0, "{:?}", s.recovery());
    assert_eq!(described(&s), expected);
    drop(s);
    assert_eq!(
        std::fs::read_to_string(dir.join("FORMAT")).unwrap(),
        "seen-store data directory, format 8\n"
    );
    for old in ["wal", "rings"] {
        assert_eq!(
            std::fs::read_dir(dir.join(old)).unwrap().count(),
            0,
            "{old}"
        );
    }
    // Reopened, written anew and reopened again: the same filters.
    let s = Store::open(&dir, StoreOptions::default()).unwrap();
    assert_eq!(described(&s), expected);
    s.add(b"bloom", &[b"after the upgrade".as_slice()], None)
        .unwrap();
    s.checkpoint().unwrap();
    drop(s);
    let s = Store::open(&dir, StoreOptions::default()).unwrap();
    assert_eq!(
        s.contains(b"bloom", &[b"after the upgrade"]).unwrap(),
        Some(vec![true])
    );
}

/// An upgrade that fails at one of its reads, writes, syncs, renames or
/// removes (every fifth, to keep the test short) is run again by the next
/// open, which ends with the same filters.
#[test]
fn an_upgrade_cut_short_anywhere_is_done_again_by_the_next_open() {
    let (_tmp, dir, expected) = unpack();
    let mut point = 0;
    loop {
        let copy = tempfile::tempdir().unwrap();
        crate::crash::copy_dir(&dir, copy.path(), &["", "snapshots", "wal", "rings"]);
        let (fs, faults) = FaultyFs::new();
        faults.fail_point.store(point, Ordering::SeqCst);
        let opened = Store::open_with_fs(copy.path(), StoreOptions::default(), fs);
        let failed = faults.failed.lock().unwrap().clone();
        drop(opened);
        let Some(failed) = failed else {
            break; // no fault point left: the whole upgrade ran
        };
        let s = Store::open(copy.path(), StoreOptions::default()).unwrap();
        assert_eq!(described(&s), expected, "after a failed {failed}");
        point += 5;
    }
    eprintln!("{point} fault points");
    assert!(point > 100, "only {point} fault points");
}
