//! Races between a checkpoint and the clients of the store.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, SystemTime};

use seen_store::{FsyncPolicy, Store, StoreOptions};

use crate::basics::bloom;
use crate::faulty::FaultyFs;

/// Holds the first snapshot rename after it is armed until released.
#[derive(Default)]
struct Gate {
    armed: AtomicBool,
    /// (a rename is waiting, it may go on)
    state: Mutex<(bool, bool)>,
    cv: Condvar,
}

impl Gate {
    fn wait_for(&self, f: impl Fn(&(bool, bool)) -> bool) {
        let mut s = self.state.lock().unwrap();
        while !f(&s) {
            s = self.cv.wait(s).unwrap();
        }
    }
}

/// A checkpoint that finds a filter expired deletes that filter, not one
/// made under the same name while the checkpoint ran (which had an
/// acknowledged add). Deleting by name loses that add in most rounds.
#[test]
fn a_checkpoint_does_not_delete_a_filter_made_again_meanwhile() {
    for round in 0..10 {
        let dir = tempfile::tempdir().unwrap();
        let gate = Arc::new(Gate::default());
        let (fs, faults) = FaultyFs::new();
        {
            let gate = gate.clone();
            *faults.on_rename.lock().unwrap() = Some(Box::new(move |to| {
                let snapshot = to.extension().is_some_and(|e| e == "snap");
                if !(snapshot && gate.armed.swap(false, Ordering::SeqCst)) {
                    return false;
                }
                gate.state.lock().unwrap().0 = true;
                gate.cv.notify_all();
                gate.wait_for(|s| s.1);
                true
            }));
        }
        let opts = StoreOptions {
            fsync: FsyncPolicy::EverySec,
            segment_size: 1 << 20,
            ..Default::default()
        };
        let s = Arc::new(Store::open_with_fs(dir.path(), opts, fs).unwrap());
        for i in 0..20 {
            s.create(format!("f{i}").as_bytes(), &bloom()).unwrap();
        }
        s.create(b"n", &bloom()).unwrap();
        let soon = SystemTime::now() + Duration::from_millis(100);
        s.expire_at(b"n", Some(soon)).unwrap();
        std::thread::sleep(Duration::from_millis(200));
        gate.armed.store(true, Ordering::SeqCst);
        let cp = {
            let s = s.clone();
            std::thread::spawn(move || s.checkpoint())
        };
        // The checkpoint waits in a snapshot's rename: make "n" again.
        gate.wait_for(|s| s.0);
        s.create(b"n", &bloom()).unwrap();
        assert_eq!(s.add(b"n", &[b"x"], None).unwrap().new, vec![true]);
        gate.state.lock().unwrap().1 = true;
        gate.cv.notify_all();
        cp.join().unwrap().unwrap();
        assert_eq!(
            s.contains(b"n", &[b"x"]).unwrap(),
            Some(vec![true]),
            "round {round}: an acknowledged add was lost"
        );
    }
}
