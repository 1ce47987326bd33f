//! A data directory (docs/FORMAT.md, section 6) damaged from outside:
//! one file of a real directory, edited, then opened.
//!
//! Two real directories are made once per process, in `/dev/shm`:
//!
//! - `closed`: under `always`, every kind of filter (fixed-size blocked,
//!   classic and Guava, scalable chains of both layouts that grew, a
//!   counting filter with removes), a checkpoint half-way, a deleted
//!   filter, one with an expiry, an imported Guava-layout filter; then
//!   synced (a sync mark past every record) and dropped.
//! - `killed`: under `everysec`, adds of one item at a time, a sync
//!   half-way, then the process ends with `_exit` (a forked child), as a
//!   `kill -9` would leave it.
//!
//! The input's first byte picks the directory, whether to salvage and
//! whether to checkpoint before the reopen, the second the file, the rest edits it: `offset: u16, xor: u8` triples,
//! then a cut (one byte left: truncate there) or zeros to the end (two
//! bytes left). Then the store opens it.
//!
//! Checks: no panic (open, lookups, an add, a checkpoint, a reopen), and
//! a store that opened (salvaging or not) reopens without salvage. An
//! open without salvage either fails, with a message, or finds every
//! filter and every item the directory was made with. The exceptions
//! are the documented ones (docs/FORMAT.md, section 6.1): a torn end of
//! the newest segment is cut off, so an open that rewrote the edited file
//! is not held to every item; nor is one whose newest segment was cut
//! past the sync mark (it reads as a shorter log; below the mark, or in
//! an older segment, it is corruption).

#![no_main]

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use seen_core::Layout;
use seen_store::{FilterSpec, FsyncPolicy, Store, StoreOptions};

const SEGMENT: u64 = 16 << 10;

struct Template {
    dir: PathBuf,
    policy: FsyncPolicy,
    /// Every file, relative to `dir`, sorted.
    files: Vec<PathBuf>,
    /// Filter names and the items each must hold.
    expect: Vec<(&'static str, Vec<Vec<u8>>)>,
}

fn items(prefix: &str, range: std::ops::Range<usize>) -> Vec<Vec<u8>> {
    range
        .map(|i| format!("{prefix}-{i}").into_bytes())
        .collect()
}

fn refs(v: &[Vec<u8>]) -> Vec<&[u8]> {
    v.iter().map(|i| i.as_slice()).collect()
}

fn options(policy: FsyncPolicy, salvage: bool) -> StoreOptions {
    StoreOptions {
        fsync: policy,
        segment_size: SEGMENT,
        max_filter_bytes: 1 << 20,
        max_memory: 8 << 20,
        salvage,
    }
}

fn files_under(root: &Path, dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).expect("list template") {
        let p = e.expect("entry").path();
        if p.is_dir() {
            files_under(root, &p, out);
        } else if p.file_name() != Some("LOCK".as_ref()) {
            out.push(p.strip_prefix(root).expect("under root").to_path_buf());
        }
    }
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("mkdir");
    for e in std::fs::read_dir(from).expect("list") {
        let e = e.expect("entry");
        let (src, dst) = (e.path(), to.join(e.file_name()));
        if src.is_dir() {
            copy_dir(&src, &dst);
        } else {
            std::fs::copy(&src, &dst).expect("copy");
        }
    }
}

fn finish(
    dir: PathBuf,
    policy: FsyncPolicy,
    expect: Vec<(&'static str, Vec<Vec<u8>>)>,
) -> Template {
    let mut files = Vec::new();
    files_under(&dir, &dir, &mut files);
    files.sort();
    Template {
        dir,
        policy,
        files,
        expect,
    }
}

fn closed(root: &Path) -> Template {
    let dir = root.join("closed");
    let s = Store::open(&dir, options(FsyncPolicy::Always, false)).expect("open template");
    let specs: [(&str, FilterSpec); 6] = [
        (
            "bloom-g",
            FilterSpec::Bloom {
                capacity: 200,
                error_rate: 0.01,
                layout: Layout::Guava,
            },
        ),
        (
            "bloom-b",
            FilterSpec::Bloom {
                capacity: 200,
                error_rate: 0.01,
                layout: Layout::Blocked,
            },
        ),
        (
            "bloom-c",
            FilterSpec::Bloom {
                capacity: 200,
                error_rate: 0.01,
                layout: Layout::Classic,
            },
        ),
        (
            "chain-b",
            FilterSpec::Scalable {
                capacity: 16,
                error_rate: 0.01,
                layout: Layout::Blocked,
                expansion: 2,
                nonscaling: false,
            },
        ),
        (
            "chain-c",
            FilterSpec::Scalable {
                capacity: 16,
                error_rate: 0.01,
                layout: Layout::Classic,
                expansion: 2,
                nonscaling: false,
            },
        ),
        (
            "count",
            FilterSpec::Counting {
                capacity: 200,
                error_rate: 0.01,
            },
        ),
    ];
    let gone = FilterSpec::Bloom {
        capacity: 50,
        error_rate: 0.01,
        layout: Layout::Blocked,
    };
    s.create(b"gone", &gone).expect("create");
    s.add(b"gone", &refs(&items("gone", 0..10)), None)
        .expect("add");
    s.create(b"later", &gone).expect("create");
    s.add(b"later", &refs(&items("later", 0..10)), None)
        .expect("add");
    let far = std::time::UNIX_EPOCH + std::time::Duration::from_secs(4_102_444_800);
    assert!(s.expire_at(b"later", Some(far)).expect("expire"));
    let mut expect = Vec::new();
    for (name, spec) in &specs {
        s.create(name.as_bytes(), spec).expect("create");
        let first = items(name, 0..40);
        for chunk in first.chunks(7) {
            s.add(name.as_bytes(), &refs(chunk), None).expect("add");
        }
    }
    s.checkpoint().expect("checkpoint");
    for (name, _) in &specs {
        for one in items(name, 40..80) {
            s.add(name.as_bytes(), &[&one], None).expect("add");
        }
    }
    // A whole filter imported (BF.IMPORT), in the log only.
    let imported = seen_core::guava::create(100, 0.01).expect("a Guava filter");
    for one in items("imported", 0..60) {
        imported.add(&one);
    }
    s.import(b"imported", seen_core::AnyFilter::Bloom(imported), u64::MAX)
        .expect("import");
    // Counting: remove the first ten; they need not be found.
    s.remove(b"count", &refs(&items("count", 0..10)))
        .expect("remove");
    assert!(s.delete(b"gone").expect("delete"));
    for (name, _) in &specs {
        let from = if *name == "count" { 10 } else { 0 };
        expect.push((*name, items(name, from..80)));
    }
    expect.push(("later", items("later", 0..10)));
    expect.push(("imported", items("imported", 0..60)));
    // A shutdown that syncs without a checkpoint (the records after the
    // one above stay in the log), with a sync mark past them all.
    s.sync().expect("sync");
    drop(s);
    finish(dir, FsyncPolicy::Always, expect)
}

fn killed(root: &Path) -> Template {
    let dir = root.join("killed");
    let expect = vec![
        ("staged", items("staged", 0..300)),
        ("chain", items("chain", 0..100)),
    ];
    // SAFETY: the child only uses the store and then `_exit`s; the
    // parent waits for it.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork");
    if pid == 0 {
        let s = Store::open(&dir, options(FsyncPolicy::EverySec, false)).expect("open template");
        let bloom = FilterSpec::Bloom {
            capacity: 1000,
            error_rate: 0.01,
            layout: Layout::Blocked,
        };
        let chain = FilterSpec::Scalable {
            capacity: 1000,
            error_rate: 0.01,
            layout: Layout::Classic,
            expansion: 2,
            nonscaling: false,
        };
        s.create(b"staged", &bloom).expect("create");
        s.create(b"chain", &chain).expect("create");
        for (name, all) in &expect {
            for (i, one) in all.iter().enumerate() {
                s.add(name.as_bytes(), &[one], None).expect("add");
                if i == all.len() / 2 {
                    // A sync mark part of the way (as a sync a second in
                    // would write): below it, damage is corruption.
                    s.sync().expect("sync");
                }
            }
        }
        // As a kill: no close, no destructor.
        unsafe { libc::_exit(0) };
    }
    let mut status = 0;
    // SAFETY: waiting for our own child.
    unsafe { libc::waitpid(pid, &mut status, 0) };
    assert_eq!(status, 0, "template child failed");
    finish(dir, FsyncPolicy::EverySec, expect)
}

/// Whether offset `off` of log segment `rel` may be cut off without an
/// error: the newest segment, past the sync mark (`log/SYNCED`: the
/// segment's first lsn at 8, the length synced at 16), or with the mark
/// on an older segment.
fn past_mark(t: &Template, rel: &Path, off: usize) -> bool {
    let newest = t.files.iter().filter(|f| f.starts_with("log") && f.extension() == Some("log".as_ref())).max();
    if newest.map(|p| p.as_path()) != Some(rel) {
        return false;
    }
    let Ok(mark) = std::fs::read(t.dir.join("log/SYNCED")) else {
        return true;
    };
    let word = |at: usize| u64::from_le_bytes(mark[at..at + 8].try_into().unwrap());
    let first: u64 = rel.file_stem().and_then(|n| n.to_str()).and_then(|n| n.parse().ok()).unwrap_or(0);
    word(8) < first || (word(8) == first && off as u64 >= word(16))
}

struct Templates {
    root: PathBuf,
    all: [Template; 2],
}

fn templates() -> &'static Templates {
    static T: OnceLock<Templates> = OnceLock::new();
    T.get_or_init(|| {
        let root = PathBuf::from(format!("/dev/shm/seen-fuzz-store-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(&root).expect("mkdir");
        let k = killed(&root);
        let c = closed(&root);
        Templates { root, all: [c, k] }
    })
}

fn check_items(s: &Store, t: &Template, what: &str) {
    let mut names: Vec<Vec<u8>> = s.names();
    names.sort();
    let mut want: Vec<Vec<u8>> = t
        .expect
        .iter()
        .map(|(n, _)| n.as_bytes().to_vec())
        .collect();
    want.sort();
    assert_eq!(names, want, "{what}: the filters changed without an error");
    for (name, all) in &t.expect {
        let found = s
            .contains(name.as_bytes(), &refs(all))
            .expect("lookup")
            .expect("filter exists");
        for (i, f) in all.iter().zip(found) {
            assert!(
                f,
                "{what}: {} lost from {name} without an error",
                String::from_utf8_lossy(i)
            );
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let ts = templates();
    let &[mode, which, ..] = data else {
        return;
    };
    let edits = &data[2..];
    let t = &ts.all[(mode & 1) as usize];
    let salvage = mode & 2 != 0;
    let rel = &t.files[which as usize % t.files.len()];
    let dir = ts.root.join("run");
    let _ = std::fs::remove_dir_all(&dir);
    copy_dir(&t.dir, &dir);
    let path = dir.join(rel);
    let mut bytes = std::fs::read(&path).expect("read");
    let len = bytes.len().max(1);
    let mut changed = false;
    let mut chunks = edits.chunks_exact(3);
    for e in chunks.by_ref() {
        let off = u16::from_le_bytes([e[0], e[1]]) as usize % len;
        if off < bytes.len() {
            bytes[off] ^= e[2];
            changed |= e[2] != 0;
        }
    }
    match chunks.remainder() {
        [cut] => {
            let keep = bytes.len() * *cut as usize / 256;
            changed |= keep < bytes.len();
            bytes.truncate(keep);
        }
        [from, _] => {
            let from = bytes.len() * *from as usize / 256;
            changed |= bytes[from..].iter().any(|&b| b != 0);
            bytes[from..].fill(0);
        }
        _ => {}
    }
    std::fs::write(&path, &bytes).expect("write");
    // The newest segment cut (or its end zeroed) past the sync mark reads
    // as a shorter log, as a power loss leaves it: not held to every item.
    let written_end = |b: &[u8]| b.iter().rposition(|&x| x != 0).map_or(0, |i| i + 1);
    let original = std::fs::read(t.dir.join(rel)).expect("read template");
    let tail_wiped =
        written_end(&bytes) < written_end(&original) && past_mark(t, rel, written_end(&bytes));
    let s = match Store::open(&dir, options(t.policy, salvage)) {
        Ok(s) => s,
        Err(e) => {
            assert!(!e.to_string().is_empty());
            assert!(
                changed || salvage,
                "the template failed to open unedited: {e}"
            );
            return;
        }
    };
    // The open rewrote the edited file (a torn tail cut off) or removed
    // it: the records in it are not held to.
    let rewritten = std::fs::read(&path).map_or(true, |now| now != bytes);
    let held = !salvage && !rewritten && !tail_wiped;
    if held {
        check_items(&s, t, "open");
    } else {
        for (name, all) in &t.expect {
            let _ = s.contains(name.as_bytes(), &refs(all));
        }
    }
    // It goes on working: an add, a checkpoint, a reopen.
    let extra: &[u8] = b"added-after-open";
    let added = s.add(
        b"after",
        &[extra],
        Some(&FilterSpec::Bloom {
            capacity: 100,
            error_rate: 0.01,
            layout: Layout::Blocked,
        }),
    );
    // A checkpoint, or not (the third bit of the first byte): without one
    // the reopen below holds the salvaging open to its own checkpoint,
    // which it writes only when it skipped something.
    if mode & 4 != 0 {
        let _ = s.checkpoint();
    }
    drop(s);
    // Without salvage: a salvaging open checkpoints what it kept, so that
    // the directory opens without salvage from then on.
    let s = Store::open(&dir, options(t.policy, false)).expect("a store that opened reopens");
    if added.is_ok() {
        assert_eq!(
            s.contains(b"after", &[extra]).expect("lookup"),
            Some(vec![true]),
            "an add after the open was lost at the reopen"
        );
    }
    if held {
        for (name, all) in &t.expect {
            let found = s.contains(name.as_bytes(), &refs(all)).expect("lookup");
            assert!(
                found.is_some_and(|f| f.iter().all(|&x| x)),
                "reopen: items of {name} lost"
            );
        }
    }
});
