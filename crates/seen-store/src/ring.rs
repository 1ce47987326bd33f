//! Staging rings: where a writer thread puts the adds whose order does not
//! matter, under `everysec` and `no`, before they go to the log in batches.
//!
//! An add to a fixed-size Bloom filter, or to a scalable chain with room
//! reserved for it in the newest sub-filter, only sets bits, so it needs
//! no place in the log's order among its kind: only to survive (and to
//! reach the log before anything that may grow the chain, which copies
//! the rings first). A ring is a small file in
//! `<dir>/rings/`, mapped shared into memory, that one thread at a time
//! leases. The thread writes each add (the filter's id and the item's
//! hash, 24 bytes) into the ring's next slot and then moves the ring's
//! head past it, all plain stores into the page cache: from then on a
//! `kill -9` cannot lose it. When the ring holds [`FLUSH_AT`] adds, the
//! thread appends them to the log as add records of up to that many hashes
//! each (one lane lock, one lsn and one CRC for the lot), and moves the
//! ring's copied mark past them. The log's syncer copies every ring out
//! before each sync, so that a power loss loses no more than the policy
//! says, and the page helper each time it wakes (at least every 100 ms,
//! and whenever a writer needs its pages) every ring that no one is
//! copying and whose next record a free lane takes at once (it must not
//! wait behind writers: it also makes the lanes' next segments), or,
//! after a failed copy, every ring, waiting.
//!
//! So the writer's own work per add is three stores and a release store,
//! with no lock, no shared counter, and no fresh page of log; that was the
//! log's cost to the add under `everysec` before rings (BENCHMARKS.md,
//! session 14).
//!
//! After a process kill the next open reads the rings of the same boot
//! (the header holds the boot id) and replays the adds between each ring's
//! copied mark and its head, after the log; it appends them to the log
//! again, syncs, and removes the rings. An add in both places (copied to
//! the log, killed before the mark moved) is applied twice, which sets no
//! new bit. Rings of another boot are ignored: a power loss came between,
//! and the policy's promise is the log's. docs/FORMAT.md, section 6.5,
//! has the layout.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use memmap2::MmapRaw;
use seen_core::ItemHash;

use crate::error::{io_err, Result, Salvage};
use crate::fs::Fs;
use crate::wal::{self, lock};

/// The directory of the rings, in the data directory.
pub(crate) const RING_DIR: &str = "rings";

const MAGIC: &[u8; 8] = b"SEENRING";
const VERSION: u32 = 1;
/// Bytes of an entry: the filter id, then the hash (`lo`, `hi`), all
/// little-endian.
const ENTRY: usize = 24;
/// The header's page: the fixed fields, then `head` and `copied` on cache
/// lines of their own; the entries start on the next page.
const HEADER: usize = 4096;
const HEAD_AT: usize = 64;
const COPIED_AT: usize = 128;
/// Bytes of the header's fixed fields that its CRC covers.
const FIXED: usize = 40;

/// Entries a ring holds.
pub(crate) const CAPACITY: u64 = 1024;
/// Entries staged in a ring at which its thread appends them to the log,
/// before it stages more: 4 KiB of hashes a record.
pub(crate) const FLUSH_AT: u64 = 256;
/// The most hashes staged by one call (a caller splits larger batches).
pub(crate) const MAX_STAGE: usize = (CAPACITY - FLUSH_AT) as usize;

/// Bytes of a ring file.
const FILE_BYTES: usize = HEADER + ENTRY * CAPACITY as usize;

/// The file name of ring number `n`.
fn ring_name(n: usize) -> String {
    format!("{n:04}.ring")
}

/// Whether `path` is named as a ring file is: four digits, `.ring`.
fn is_ring_name(path: &Path) -> bool {
    path.file_name()
        .and_then(|n| n.to_str())
        .and_then(|n| n.strip_suffix(".ring"))
        .is_some_and(|n| n.len() == 4 && n.bytes().all(|b| b.is_ascii_digit()))
}

/// One ring: its file's shared map, and what serialises its copies into
/// the log.
pub(crate) struct Ring {
    map: MmapRaw,
    /// Held while the ring's adds are copied into the log, by its thread
    /// or anyone else; holds the lsn of the ring's last record, so that
    /// the ring's records take rising lsns (replay then applies one
    /// thread's adds in the order it made them).
    pub(crate) copying: Mutex<u64>,
    /// Leased to a thread (which alone stages into it).
    leased: AtomicBool,
}

impl Ring {
    /// Makes ring file `path`: preallocated (a write into the map can
    /// never meet a full disk), mapped, its pages faulted in, its header
    /// written. Not synced: a ring only ever matters on the boot that
    /// wrote it.
    fn create(fs: &dyn Fs, path: PathBuf, boot: [u8; 16]) -> Result<Ring> {
        let (_, map) = wal::segment_file(fs, &path, FILE_BYTES as u64, false, false)?;
        // The map alone, without the `Arc` a segment shares it through:
        // every add reaches it, and no one else holds it yet.
        let map = match Arc::try_unwrap(map) {
            Ok(map) if map.len() >= FILE_BYTES => map,
            _ => {
                let _ = fs.remove(&path);
                let short = std::io::Error::other("shorter than it was made");
                return Err(io_err("mmap", &path, short));
            }
        };
        // Best effort: the pages are then in the page cache and mapped
        // before the first add, not faulted in by it.
        let _ = map.advise(memmap2::Advice::PopulateWrite);
        let ring = Ring {
            map,
            copying: Mutex::new(0),
            leased: AtomicBool::new(false),
        };
        let mut fixed = [0u8; FIXED + 4];
        fixed[0..8].copy_from_slice(MAGIC);
        fixed[8..12].copy_from_slice(&VERSION.to_le_bytes());
        fixed[12..16].copy_from_slice(&(ENTRY as u32).to_le_bytes());
        fixed[16..24].copy_from_slice(&CAPACITY.to_le_bytes());
        fixed[24..40].copy_from_slice(&boot);
        let crc = crc32fast::hash(&fixed[..FIXED]);
        fixed[FIXED..].copy_from_slice(&crc.to_le_bytes());
        // SAFETY: the header's first bytes, inside the map (checked above),
        // which no one else uses yet.
        unsafe {
            std::ptr::copy_nonoverlapping(fixed.as_ptr(), ring.map.as_mut_ptr(), fixed.len());
        }
        ring.head().store(0, Ordering::Relaxed);
        ring.copied().store(0, Ordering::Release);
        Ok(ring)
    }

    fn word(&self, at: usize) -> &AtomicU64 {
        // SAFETY: `at` is a multiple of 8 inside the header page, so the
        // address is aligned (the map starts on a page) and in the map,
        // which lives as long as `self`; the word is only ever accessed
        // atomically.
        unsafe { &*(self.map.as_mut_ptr().add(at) as *const AtomicU64) }
    }

    /// Adds staged so far (only the leasing thread moves it).
    pub(crate) fn head(&self) -> &AtomicU64 {
        self.word(HEAD_AT)
    }

    /// Adds the log holds (moved under `copying`).
    pub(crate) fn copied(&self) -> &AtomicU64 {
        self.word(COPIED_AT)
    }

    fn slot(&self, n: u64) -> *mut u8 {
        // SAFETY: slot `n % CAPACITY` lies inside the entries, inside the
        // map (at least FILE_BYTES long, checked when it was made).
        unsafe {
            self.map
                .as_mut_ptr()
                .add(HEADER + ENTRY * (n % CAPACITY) as usize)
        }
    }

    /// Stages adds of `hashes` to filter `id`. They survive a process kill
    /// once this returns.
    ///
    /// # Safety
    ///
    /// Only the thread that leases the ring calls it (no other writes a
    /// slot or the head), and with room for them: `head - copied +
    /// hashes.len() <= CAPACITY`, so that no copier is reading a slot it
    /// writes.
    #[inline]
    pub(crate) unsafe fn stage(&self, id: u64, hashes: &[ItemHash]) {
        let head = self.head().load(Ordering::Relaxed);
        debug_assert!(
            head - self.copied().load(Ordering::Acquire) + hashes.len() as u64 <= CAPACITY
        );
        for (i, h) in hashes.iter().enumerate() {
            let words = [id.to_le(), h.lo.to_le(), h.hi.to_le()];
            // SAFETY: the slot is inside the map (`slot`), and no one
            // reads it: the copiers read only slots below `head`, and this
            // one is at or above it; they have copied whatever the slot
            // held before (the caller checked the room). Unaligned stores:
            // a slot is 8-aligned, which `write_unaligned` does not need.
            unsafe {
                std::ptr::write_unaligned(self.slot(head + i as u64) as *mut [u64; 3], words)
            };
        }
        // The entries before the head that makes them count.
        self.head()
            .store(head + hashes.len() as u64, Ordering::Release);
    }

    /// The filter id of entry `n`.
    ///
    /// # Safety
    ///
    /// `n` is below a head the caller read with acquire ordering, and at
    /// or above the copied mark, which only the caller moves (it holds
    /// `copying`): the stager wrote the entry before it moved the head past
    /// it, and writes it again only once the copied mark has passed it.
    #[inline]
    pub(crate) unsafe fn id_at(&self, n: u64) -> u64 {
        // SAFETY: inside the map (`slot`); no one writes it (above).
        u64::from_le(unsafe { std::ptr::read_unaligned(self.slot(n) as *const u64) })
    }

    /// The hash of entry `n`.
    ///
    /// # Safety
    ///
    /// As for [`id_at`](Self::id_at).
    pub(crate) unsafe fn hash_at(&self, n: u64) -> ItemHash {
        // SAFETY: as in `id_at`; the hash is the entry's last 16 bytes.
        let [lo, hi] = unsafe { std::ptr::read_unaligned(self.slot(n).add(8) as *const [u64; 2]) };
        ItemHash {
            lo: u64::from_le(lo),
            hi: u64::from_le(hi),
        }
    }

    /// Copies the hashes of entries `from..from + dst.len() / 16` into
    /// `dst`, 16 bytes each, as a log record holds them.
    ///
    /// # Safety
    ///
    /// As for [`id_at`](Self::id_at), for each of the entries.
    #[inline]
    pub(crate) unsafe fn copy_hashes(&self, from: u64, dst: &mut [u8]) {
        for (i, d) in dst.chunks_exact_mut(16).enumerate() {
            // SAFETY: as in `id_at`; 16 bytes from the entry's ninth,
            // inside it, into a 16-byte chunk of `dst`.
            unsafe {
                std::ptr::copy_nonoverlapping(self.slot(from + i as u64).add(8), d.as_mut_ptr(), 16)
            };
        }
    }
}

/// The rings of one log, and which are leased.
pub(crate) struct Rings {
    fs: Arc<dyn Fs>,
    dir: PathBuf,
    boot: [u8; 16],
    /// Unique in the process: the thread-local lease names its rings' log.
    uid: u64,
    all: Mutex<Vec<Arc<Ring>>>,
    /// Ring files named so far (each ring's number), made or being made.
    made: std::sync::atomic::AtomicUsize,
    /// When making a ring last failed (a full disk, say): no new attempt
    /// for a second, so that writers do not each try on every add.
    failed_at: Mutex<Option<std::time::Instant>>,
}

/// Most rings a log makes; threads beyond them append to the log's lanes.
const MAX_RINGS: usize = 256;

static NEXT_RINGS: AtomicU64 = AtomicU64::new(1);

/// A ring leased to the thread, until the thread ends or leases another.
struct Lease {
    ring: Arc<Ring>,
}

impl Drop for Lease {
    fn drop(&mut self) {
        let _ = LEASED.try_with(|l| l.set((0, std::ptr::null())));
        self.ring.leased.store(false, Ordering::Release);
    }
}

thread_local! {
    static LEASE: std::cell::RefCell<Option<Lease>> = const { std::cell::RefCell::new(None) };
    /// The ring of the thread's [`LEASE`] and its log's [`Rings::uid`]
    /// (0: none), for the hot path: a plain thread-local read, with no
    /// borrow flag or lazy initialisation to check.
    static LEASED: std::cell::Cell<(u64, *const Ring)> =
        const { std::cell::Cell::new((0, std::ptr::null())) };
}

impl Rings {
    /// The rings of a log whose data directory's ring directory is `dir`
    /// (which [`recover`] has emptied).
    pub(crate) fn new(fs: Arc<dyn Fs>, dir: PathBuf, boot: [u8; 16]) -> Rings {
        Rings {
            fs,
            dir,
            boot,
            uid: NEXT_RINGS.fetch_add(1, Ordering::Relaxed),
            all: Mutex::new(Vec::new()),
            made: std::sync::atomic::AtomicUsize::new(0),
            failed_at: Mutex::new(None),
        }
    }

    /// Runs `f` on the ring leased to this thread, leasing one first (a
    /// free one, or a new one) if it has none of this log's; `None` if
    /// there is none to lease. `f` must not call `with_ring` (of any log):
    /// leasing another ring would let go of the one `f` holds.
    #[inline]
    pub(crate) fn with_ring<R>(&self, f: impl FnOnce(&Ring) -> R) -> Option<R> {
        let (uid, ring) = LEASED.try_with(|l| l.get()).ok()?;
        if uid == self.uid {
            // SAFETY: `LEASED` points at the ring of the thread's lease,
            // whose `Arc` keeps it alive; the lease clears `LEASED` before
            // it lets the ring go.
            return Some(f(unsafe { &*ring }));
        }
        self.lease_here().map(|r| f(&r))
    }

    /// Leases this thread a ring of this log, in place of the one it had.
    #[cold]
    fn lease_here(&self) -> Option<Arc<Ring>> {
        let ring = self.lease()?;
        LEASE
            .try_with(|l| {
                let mut l = l.try_borrow_mut().ok()?;
                // The old lease (its drop clears `LEASED`) first.
                *l = None;
                *l = Some(Lease { ring: ring.clone() });
                LEASED.with(|c| c.set((self.uid, Arc::as_ptr(&ring))));
                Some(())
            })
            .ok()
            .flatten()
            .map(|()| ring.clone())
            .or_else(|| {
                // No thread-local to keep it in (the thread is ending):
                // give it back.
                ring.leased.store(false, Ordering::Release);
                None
            })
    }

    /// A ring no thread holds, made if there is none. The file is made
    /// holding no lock: the syncer and a checkpoint read the list of rings
    /// (`all`) and must not wait for a file system call.
    #[cold]
    fn lease(&self) -> Option<Arc<Ring>> {
        let n = {
            let all = lock(&self.all);
            for r in all.iter() {
                if r.leased
                    .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
                    .is_ok()
                {
                    return Some(r.clone());
                }
            }
            let failed = lock(&self.failed_at);
            if failed.is_some_and(|t| t.elapsed() < std::time::Duration::from_secs(1)) {
                return None;
            }
            let n = self.made.fetch_add(1, Ordering::Relaxed);
            if n >= MAX_RINGS {
                self.made.fetch_sub(1, Ordering::Relaxed);
                return None;
            }
            n
        };
        match Ring::create(&*self.fs, self.dir.join(ring_name(n)), self.boot) {
            Ok(ring) => {
                ring.leased.store(true, Ordering::Relaxed);
                let ring = Arc::new(ring);
                lock(&self.all).push(ring.clone());
                Some(ring)
            }
            Err(e) => {
                tracing::warn!("no staging ring (adds go to the log's lanes): {e}");
                *lock(&self.failed_at) = Some(std::time::Instant::now());
                None
            }
        }
    }

    /// Every ring made so far.
    pub(crate) fn all(&self) -> Vec<Arc<Ring>> {
        lock(&self.all).clone()
    }

    /// Adds staged in all rings and not yet copied into the log.
    pub(crate) fn staged(&self) -> u64 {
        lock(&self.all)
            .iter()
            .map(|r| {
                // The copied mark first: it only follows the head, so the
                // head read after it is at least as far.
                let copied = r.copied().load(Ordering::Acquire);
                r.head().load(Ordering::Acquire).saturating_sub(copied)
            })
            .sum()
    }
}

/// What the rings a killed process left hold: the adds not yet copied to
/// the log, by filter, in each ring's order.
#[derive(Debug, Default)]
pub(crate) struct Staged {
    pub(crate) adds: Vec<(u64, Vec<ItemHash>)>,
    /// The ring files read (every file of `rings/` named as a ring), to
    /// remove once the log holds their adds, each with whether its removal
    /// is needed: a whole ring of this boot that held adds to replay, or
    /// whose marks cannot be, would be read again by a later open on this
    /// boot. The others (of another boot, or cut short while made) hold
    /// nothing, and one that cannot be removed is only in the way.
    pub(crate) files: Vec<(PathBuf, bool)>,
}

impl Staged {
    /// Adds found.
    pub(crate) fn count(&self) -> u64 {
        self.adds.iter().map(|(_, h)| h.len() as u64).sum()
    }
}

/// Reads the rings in `dir` (made if missing): the adds staged and not yet
/// copied into the log by a process of this boot (`boot`). A ring of
/// another boot, or whose header a kill cut short while it was made, holds
/// nothing to recover. A ring of this boot whose marks cannot be (the
/// copied mark past the head, or more staged than it holds) is corruption:
/// an error naming the file and offset, unless `salvage`, which skips it.
pub(crate) fn recover(
    fs: &dyn Fs,
    dir: &Path,
    boot: [u8; 16],
    salvage: &Salvage,
) -> Result<Staged> {
    fs.create_dir_all(dir)
        .map_err(|e| io_err("create directory", dir, e))?;
    let mut staged = Staged::default();
    let mut paths: Vec<PathBuf> = fs
        .list(dir)
        .map_err(|e| io_err("list", dir, e))?
        .into_iter()
        .filter(|p| is_ring_name(p))
        .collect();
    paths.sort();
    for path in paths {
        let bytes = {
            use std::io::Read;
            let mut f = fs.open_read(&path).map_err(|e| io_err("open", &path, e))?;
            if !f.metadata().is_ok_and(|m| m.is_file()) {
                tracing::warn!("{}: not a file; left alone", path.display());
                continue;
            }
            let mut b = Vec::new();
            f.read_to_end(&mut b)
                .map_err(|e| io_err("read", &path, e))?;
            b
        };
        let Some((head, copied)) = header(&bytes, boot) else {
            staged.files.push((path, false));
            continue;
        };
        staged.files.push((path.clone(), head != copied));
        if copied > head || head - copied > CAPACITY {
            let what = format!(
                "staging ring's copied mark {copied} and head {head} cannot be (it holds {CAPACITY})"
            );
            salvage.damaged(&path, HEAD_AT as u64, what, "the ring")?;
            continue;
        }
        for n in copied..head {
            let o = HEADER + ENTRY * (n % CAPACITY) as usize;
            let id = u64::from_le_bytes(bytes[o..o + 8].try_into().expect("8 bytes"));
            let h = ItemHash::from_le_bytes(bytes[o + 8..o + 24].try_into().expect("16 bytes"));
            match staged.adds.last_mut() {
                Some((last, hashes)) if *last == id => hashes.push(h),
                _ => staged.adds.push((id, vec![h])),
            }
        }
    }
    Ok(staged)
}

/// A ring file's head and copied mark, if it is a whole ring of boot
/// `boot`.
fn header(bytes: &[u8], boot: [u8; 16]) -> Option<(u64, u64)> {
    let word = |at: usize| u64::from_le_bytes(bytes[at..at + 8].try_into().expect("8 bytes"));
    let whole = bytes.len() >= FILE_BYTES
        && &bytes[0..8] == MAGIC
        && bytes[8..12] == VERSION.to_le_bytes()
        && bytes[12..16] == (ENTRY as u32).to_le_bytes()
        && word(16) == CAPACITY
        && bytes[FIXED..FIXED + 4] == crc32fast::hash(&bytes[..FIXED]).to_le_bytes();
    (whole && bytes[24..40] == boot).then(|| (word(HEAD_AT), word(COPIED_AT)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fs::RealFs;

    fn h(i: u64) -> ItemHash {
        ItemHash { lo: i, hi: !i }
    }

    #[test]
    fn what_is_staged_and_not_copied_is_recovered_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let fs: Arc<dyn Fs> = Arc::new(RealFs);
        let boot = [7; 16];
        assert!(recover(&*fs, dir.path(), boot, &Salvage::default())
            .unwrap()
            .adds
            .is_empty());
        let rings = Rings::new(fs.clone(), dir.path().to_path_buf(), boot);
        // Wraps around the ring twice: copied marks moved by hand.
        rings
            .with_ring(|r| {
                for round in 0..10u64 {
                    let hashes: Vec<_> = (0..200).map(|i| h(round * 200 + i)).collect();
                    // SAFETY: this thread leases the ring; the copied mark
                    // moves below, so that 200 fit.
                    unsafe {
                        r.stage(1 + round % 2, &hashes[..100]);
                        r.stage(1 + round % 2, &hashes[100..]);
                    }
                    r.copied()
                        .store(r.head().load(Ordering::Relaxed) - 150, Ordering::Release);
                }
            })
            .unwrap();
        let staged = recover(&*fs, dir.path(), boot, &Salvage::default()).unwrap();
        assert_eq!(staged.files, [(dir.path().join("0000.ring"), true)]);
        let want: Vec<_> = (1850..2000).map(h).collect();
        assert_eq!(staged.adds, vec![(2, want)]);
        // Another boot: nothing.
        assert!(recover(&*fs, dir.path(), [8; 16], &Salvage::default())
            .unwrap()
            .adds
            .is_empty());
    }

    #[test]
    fn each_thread_leases_its_own_ring_and_a_finished_threads_is_reused() {
        let dir = tempfile::tempdir().unwrap();
        let rings = Arc::new(Rings::new(
            Arc::new(RealFs),
            dir.path().to_path_buf(),
            [1; 16],
        ));
        let here = rings.with_ring(|r| r as *const Ring as usize).unwrap();
        let r2 = rings.clone();
        let there = std::thread::spawn(move || r2.with_ring(|r| r as *const Ring as usize))
            .join()
            .unwrap()
            .unwrap();
        assert_ne!(here, there);
        let r3 = rings.clone();
        let again = std::thread::spawn(move || r3.with_ring(|r| r as *const Ring as usize))
            .join()
            .unwrap()
            .unwrap();
        assert_eq!(again, there, "the ended thread's ring is leased again");
        assert_eq!(rings.all().len(), 2);
    }

    #[test]
    fn a_ring_whose_marks_cannot_be_is_corruption_unless_salvaging() {
        let dir = tempfile::tempdir().unwrap();
        let fs: Arc<dyn Fs> = Arc::new(RealFs);
        let boot = [3; 16];
        let rings = Rings::new(fs.clone(), dir.path().to_path_buf(), boot);
        rings
            .with_ring(|r| {
                // SAFETY: this thread leases the ring, which is empty.
                unsafe { r.stage(5, &[h(1), h(2)]) };
                r.copied().store(3, Ordering::Release);
            })
            .unwrap();
        let err = recover(&*fs, dir.path(), boot, &Salvage::default()).unwrap_err();
        let msg = err.to_string();
        assert!(
            msg.contains("0000.ring") && msg.contains("copied mark 3"),
            "{msg}"
        );
        let salvage = Salvage::new(true);
        let staged = recover(&*fs, dir.path(), boot, &salvage).unwrap();
        assert!(staged.adds.is_empty());
        assert_eq!(salvage.skipped(), 1, "the skipped ring is counted");
    }

    #[test]
    fn a_ring_file_cut_short_or_not_a_ring_holds_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let fs: Arc<dyn Fs> = Arc::new(RealFs);
        std::fs::write(dir.path().join("0000.ring"), b"SEENRING").unwrap();
        std::fs::write(dir.path().join("0001.ring"), vec![0u8; FILE_BYTES]).unwrap();
        // Not named as a ring: not read, not removed.
        std::fs::write(dir.path().join("notes.txt"), b"x").unwrap();
        std::fs::create_dir(dir.path().join("0002.ring.d")).unwrap();
        let staged = recover(&*fs, dir.path(), [0; 16], &Salvage::default()).unwrap();
        assert!(staged.adds.is_empty());
        assert_eq!(
            staged.files,
            [
                (dir.path().join("0000.ring"), false),
                (dir.path().join("0001.ring"), false)
            ],
            "read, and removed if they can be"
        );
    }
}
