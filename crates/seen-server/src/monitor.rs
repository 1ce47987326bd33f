//! `MONITOR`: every command the server runs, streamed to the clients that
//! asked, one line each in Redis's form:
//! `+1702000000.123456 [0 127.0.0.1:52555] "BF.ADD" "urls" "a"`.
//!
//! With nobody watching, a command pays one relaxed atomic load. Lines go
//! through a bounded broadcast channel; a watcher too slow to keep up
//! misses lines (it is told how many) rather than slow the server down.
//! `AUTH` and `HELLO` are not shown (their arguments may hold passwords).

use std::fmt::Write as _;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use tokio::sync::broadcast;

use crate::args::carries_password;
use crate::clients::ClientHandle;

/// Lines a watcher may fall behind by before it misses some.
const BACKLOG: usize = 4096;

/// The stream of commands and how many are watching it.
pub(crate) struct Monitor {
    watchers: Arc<AtomicUsize>,
    lines: broadcast::Sender<Bytes>,
}

/// One `MONITOR` client's end of the stream.
pub(crate) struct Watcher {
    lines: broadcast::Receiver<Bytes>,
    watchers: Arc<AtomicUsize>,
}

impl Drop for Watcher {
    fn drop(&mut self) {
        self.watchers.fetch_sub(1, Ordering::Relaxed);
    }
}

impl Default for Monitor {
    fn default() -> Self {
        Monitor {
            watchers: Arc::new(AtomicUsize::new(0)),
            lines: broadcast::channel(BACKLOG).0,
        }
    }
}

impl Monitor {
    /// Whether any client is watching.
    pub(crate) fn is_watched(&self) -> bool {
        self.watchers.load(Ordering::Relaxed) > 0
    }

    pub(crate) fn watch(&self) -> Watcher {
        self.watchers.fetch_add(1, Ordering::Relaxed);
        Watcher {
            lines: self.lines.subscribe(),
            watchers: self.watchers.clone(),
        }
    }

    /// Sends the line of a command `client` ran, with arguments `args`.
    pub(crate) fn publish(&self, client: &ClientHandle, args: &[Bytes]) {
        let name = args.first().map_or(&b""[..], |a| &a[..]);
        if carries_password(name) {
            return;
        }
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default();
        let mut line = format!(
            "+{}.{:06} [0 {}]",
            now.as_secs(),
            now.subsec_micros(),
            client.addr
        );
        for a in args {
            line.push(' ');
            quote(&mut line, a);
        }
        line.push_str("\r\n");
        // No receiver left (the last watcher just went) is not an error.
        let _ = self.lines.send(Bytes::from(line));
    }
}

impl Watcher {
    /// The next line, or a note of how many were missed.
    pub(crate) async fn next(&mut self) -> Bytes {
        loop {
            match self.lines.recv().await {
                Ok(line) => return line,
                Err(broadcast::error::RecvError::Lagged(n)) => {
                    return Bytes::from(format!(
                        "+(seen: {n} line(s) not shown, the client read too slowly)\r\n"
                    ));
                }
                Err(broadcast::error::RecvError::Closed) => std::future::pending::<()>().await,
            }
        }
    }
}

/// Appends `arg` as Redis's `sdscatrepr` does: in double quotes, with `\\`,
/// `"`, `\n`, `\r`, `\t`, `\a`, `\b` escaped and other unprintable bytes as
/// `\xHH`.
fn quote(out: &mut String, arg: &[u8]) {
    out.push('"');
    for &b in arg {
        match b {
            b'\\' => out.push_str("\\\\"),
            b'"' => out.push_str("\\\""),
            b'\n' => out.push_str("\\n"),
            b'\r' => out.push_str("\\r"),
            b'\t' => out.push_str("\\t"),
            0x07 => out.push_str("\\a"),
            0x08 => out.push_str("\\b"),
            b if b.is_ascii_graphic() || b == b' ' => out.push(b as char),
            b => {
                let _ = write!(out, "\\x{b:02x}");
            }
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clients::Clients;

    #[tokio::test]
    async fn watchers_get_each_line_and_passwords_stay_out() {
        let monitor = Monitor::default();
        assert!(!monitor.is_watched());
        let clients = Clients::default();
        let c = clients.register(1, "127.0.0.1:7".into(), "127.0.0.1:6379".into());
        let mut w = monitor.watch();
        assert!(monitor.is_watched());
        let args = |v: &[&[u8]]| {
            v.iter()
                .map(|a| Bytes::copy_from_slice(a))
                .collect::<Vec<_>>()
        };
        monitor.publish(&c, &args(&[b"AUTH", b"secret"]));
        monitor.publish(&c, &args(&[b"BF.ADD", b"k", b"a \"b\"\n\x01"]));
        let line = w.next().await;
        let text = String::from_utf8_lossy(&line);
        assert!(text.starts_with('+') && text.ends_with("\r\n"), "{text}");
        assert!(
            text.contains(r#" [0 127.0.0.1:7] "BF.ADD" "k" "a \"b\"\n\x01""#),
            "{text}"
        );
        drop(w);
        assert!(!monitor.is_watched());
    }
}
