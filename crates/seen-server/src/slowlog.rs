//! The slow log (`SLOWLOG GET|LEN|RESET`): the last commands that took
//! longer than `slowlog-log-slower-than` microseconds, as Redis keeps it.
//!
//! Checking a command costs one comparison of its duration (measured for
//! the command counters anyway) with the threshold; only a slow command
//! takes the log's lock.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicI64, AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::Bytes;

use crate::args::carries_password;
use crate::clients::ClientHandle;

/// Most arguments an entry keeps (Redis's `SLOWLOG_ENTRY_MAX_ARGC`).
const MAX_ARGS: usize = 32;
/// Most bytes an entry keeps of an argument (`SLOWLOG_ENTRY_MAX_STRING`).
const MAX_ARG_BYTES: usize = 128;

/// One slow command.
#[derive(Clone, Debug)]
pub(crate) struct SlowEntry {
    pub(crate) id: u64,
    /// When it ran, in Unix seconds.
    pub(crate) unix_secs: i64,
    pub(crate) duration: Duration,
    /// Its arguments, cut as Redis cuts them.
    pub(crate) args: Vec<Bytes>,
    pub(crate) addr: String,
    pub(crate) name: Bytes,
}

/// The log and its two settings.
pub(crate) struct SlowLog {
    /// Microseconds; negative: log nothing, 0: log every command.
    slower_than_us: AtomicI64,
    max_len: AtomicUsize,
    next_id: AtomicU64,
    entries: Mutex<VecDeque<SlowEntry>>,
}

impl SlowLog {
    pub(crate) fn new(slower_than_us: i64, max_len: usize) -> SlowLog {
        SlowLog {
            slower_than_us: AtomicI64::new(slower_than_us),
            max_len: AtomicUsize::new(max_len),
            next_id: AtomicU64::new(0),
            entries: Mutex::new(VecDeque::new()),
        }
    }

    pub(crate) fn slower_than_us(&self) -> i64 {
        self.slower_than_us.load(Ordering::Relaxed)
    }

    pub(crate) fn set_slower_than_us(&self, us: i64) {
        self.slower_than_us.store(us, Ordering::Relaxed);
    }

    pub(crate) fn max_len(&self) -> usize {
        self.max_len.load(Ordering::Relaxed)
    }

    /// Changes the length, dropping the oldest entries past it.
    pub(crate) fn set_max_len(&self, len: usize) {
        self.max_len.store(len, Ordering::Relaxed);
        let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        entries.truncate(len);
    }

    /// Whether a command that took `d` goes in the log.
    pub(crate) fn is_slow(&self, d: Duration) -> bool {
        let us = self.slower_than_us();
        us >= 0 && d.as_micros() >= us as u128
    }

    /// Logs a command of `client` with arguments `args` that took `d`.
    pub(crate) fn record(&self, args: &[Bytes], d: Duration, client: &ClientHandle) {
        let max_len = self.max_len();
        if max_len == 0 {
            return;
        }
        let entry = SlowEntry {
            id: self.next_id.fetch_add(1, Ordering::Relaxed),
            unix_secs: SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_secs() as i64),
            duration: d,
            args: cut_args(args),
            addr: client.addr.clone(),
            name: client.names().name.unwrap_or_default(),
        };
        let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        entries.push_front(entry);
        entries.truncate(max_len);
    }

    /// The newest `count` entries, newest first (`None`: all).
    pub(crate) fn newest(&self, count: Option<usize>) -> Vec<SlowEntry> {
        let entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        entries
            .iter()
            .take(count.unwrap_or(usize::MAX))
            .cloned()
            .collect()
    }

    pub(crate) fn len(&self) -> usize {
        self.entries.lock().unwrap_or_else(|e| e.into_inner()).len()
    }

    pub(crate) fn reset(&self) {
        self.entries
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clear();
    }
}

/// The arguments as Redis keeps them in its slow log: at most
/// [`MAX_ARGS`] (the last one then says how many more there were), each at
/// most [`MAX_ARG_BYTES`] (then saying how many more bytes it had), and
/// those of `AUTH` and `HELLO`, which may be passwords, as `(redacted)`.
fn cut_args(args: &[Bytes]) -> Vec<Bytes> {
    let name = args.first().map_or(&b""[..], |a| &a[..]);
    if carries_password(name) {
        let redacted = args[1..].iter().map(|_| Bytes::from_static(b"(redacted)"));
        return std::iter::once(Bytes::copy_from_slice(name))
            .chain(redacted)
            .collect();
    }
    let kept = if args.len() > MAX_ARGS {
        MAX_ARGS - 1
    } else {
        args.len()
    };
    let mut out: Vec<Bytes> = args[..kept]
        .iter()
        .map(|a| {
            if a.len() > MAX_ARG_BYTES {
                let mut cut = a[..MAX_ARG_BYTES].to_vec();
                cut.extend_from_slice(
                    format!("... ({} more bytes)", a.len() - MAX_ARG_BYTES).as_bytes(),
                );
                Bytes::from(cut)
            } else {
                // A copy: the argument may share the connection's whole
                // input buffer (a 16 MiB dump chunk), which the log must
                // not keep alive.
                Bytes::copy_from_slice(a)
            }
        })
        .collect();
    if args.len() > MAX_ARGS {
        out.push(Bytes::from(format!(
            "... ({} more arguments)",
            args.len() - kept
        )));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clients::Clients;

    #[test]
    fn entries_are_kept_newest_first_and_cut_as_redis_cuts_them() {
        let clients = Clients::default();
        let c = clients.register(7, "127.0.0.1:5".into(), "127.0.0.1:6379".into());
        let log = SlowLog::new(1000, 3);
        assert!(!log.is_slow(Duration::from_micros(999)));
        assert!(log.is_slow(Duration::from_micros(1000)));
        let many: Vec<Bytes> = (0..40).map(|i| Bytes::from(format!("a{i}"))).collect();
        log.record(&many, Duration::from_millis(2), &c);
        let long = vec![Bytes::from("BF.ADD"), Bytes::from(vec![b'x'; 200])];
        log.record(&long, Duration::from_millis(3), &c);
        let got = log.newest(None);
        assert_eq!(got.len(), 2);
        assert_eq!(got[0].args[1].len(), 128 + "... (72 more bytes)".len());
        assert!(got[0].args[1].ends_with(b"... (72 more bytes)"));
        assert_eq!(got[1].args.len(), 32);
        assert_eq!(got[1].args[31], "... (9 more arguments)");
        assert_eq!((got[0].id, got[1].id), (1, 0));
        log.record(
            &[Bytes::from("AUTH"), Bytes::from("s3cret")],
            Duration::from_millis(3),
            &c,
        );
        assert_eq!(
            log.newest(Some(1))[0].args,
            vec![Bytes::from("AUTH"), Bytes::from("(redacted)")]
        );
        for _ in 0..3 {
            log.record(&long, Duration::from_millis(3), &c);
        }
        assert_eq!(log.len(), 3);
        log.set_max_len(1);
        assert_eq!(log.newest(Some(10)).len(), 1);
        log.set_slower_than_us(-1);
        assert!(!log.is_slow(Duration::from_secs(100)));
        log.reset();
        assert_eq!(log.len(), 0);
    }
}
