//! The open connections, as `CLIENT LIST` shows them and `CLIENT KILL`
//! ends them.
//!
//! Each connection registers a [`ClientHandle`] while it is open: what
//! other connections may read of it (addresses, name, age, idle time, last
//! command) and a way to ask it to close. The connection writes its own
//! handle only (relaxed atomic stores after each command), so the registry
//! costs the hot path no lock and no shared cache line.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use tokio::sync::Notify;

use crate::stats::CommandIndex;

/// The names a client gives itself (`CLIENT SETNAME`, `CLIENT SETINFO`,
/// `HELLO ... SETNAME`).
#[derive(Clone, Debug, Default)]
pub(crate) struct ClientNames {
    pub(crate) name: Option<Bytes>,
    pub(crate) lib_name: Option<Bytes>,
    pub(crate) lib_ver: Option<Bytes>,
}

/// What the server knows of one open connection.
pub(crate) struct ClientHandle {
    pub(crate) id: u64,
    /// The peer's address (`ip:port`).
    pub(crate) addr: String,
    /// The server's address of the connection.
    pub(crate) laddr: String,
    connected: Instant,
    /// When the last command ran, in ms after `connected`.
    last_active_ms: AtomicU64,
    /// The last command's place in the table, plus one (0: none yet).
    last_cmd: AtomicUsize,
    resp3: AtomicBool,
    names: Mutex<ClientNames>,
    killed: AtomicBool,
    /// Wakes the connection's wait: it was killed, or a setting it reads
    /// (`timeout`) changed.
    wake: Notify,
}

impl ClientHandle {
    pub(crate) fn names(&self) -> ClientNames {
        self.names.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    pub(crate) fn set_names(&self, change: impl FnOnce(&mut ClientNames)) {
        change(&mut self.names.lock().unwrap_or_else(|e| e.into_inner()));
    }

    /// Notes that command `cmd` ran at `at`.
    pub(crate) fn ran(&self, cmd: CommandIndex, at: Instant) {
        let ms = at.saturating_duration_since(self.connected).as_millis() as u64;
        self.last_active_ms.store(ms, Ordering::Relaxed);
        self.last_cmd.store(cmd.0 + 1, Ordering::Relaxed);
    }

    /// The last command that ran, if any.
    pub(crate) fn last_command(&self) -> Option<CommandIndex> {
        self.last_cmd
            .load(Ordering::Relaxed)
            .checked_sub(1)
            .map(CommandIndex)
    }

    pub(crate) fn set_resp3(&self, resp3: bool) {
        self.resp3.store(resp3, Ordering::Relaxed);
    }

    pub(crate) fn is_resp3(&self) -> bool {
        self.resp3.load(Ordering::Relaxed)
    }

    /// How long it has been connected.
    pub(crate) fn age(&self) -> Duration {
        self.connected.elapsed()
    }

    /// How long since its last command (or since it connected).
    pub(crate) fn idle(&self) -> Duration {
        let last = Duration::from_millis(self.last_active_ms.load(Ordering::Relaxed));
        self.connected.elapsed().saturating_sub(last)
    }

    /// Asks the connection to close (`CLIENT KILL`): at once when it waits
    /// for input or for the client to read, or once the command it may be
    /// running has answered.
    pub(crate) fn kill(&self) {
        self.killed.store(true, Ordering::Release);
        self.wake.notify_one();
    }

    /// Has the connection look at its settings again (`CONFIG SET
    /// timeout` reaching clients that wait for input).
    pub(crate) fn wake(&self) {
        self.wake.notify_one();
    }

    /// Resolves at the next [`kill`](Self::kill) or [`wake`](Self::wake)
    /// (at once if one came since the last wait).
    pub(crate) async fn woken(&self) {
        self.wake.notified().await;
    }

    pub(crate) fn is_killed(&self) -> bool {
        self.killed.load(Ordering::Acquire)
    }

    /// Resolves once [`kill`](Self::kill) was called.
    pub(crate) async fn killed(&self) {
        while !self.is_killed() {
            self.wake.notified().await;
        }
    }
}

/// Every open connection, by id.
#[derive(Default)]
pub(crate) struct Clients {
    open: Mutex<BTreeMap<u64, Arc<ClientHandle>>>,
}

impl Clients {
    /// Registers a new connection; [`remove`](Self::remove) it when it
    /// closes.
    pub(crate) fn register(&self, id: u64, addr: String, laddr: String) -> Arc<ClientHandle> {
        let handle = Arc::new(ClientHandle {
            id,
            addr,
            laddr,
            connected: Instant::now(),
            last_active_ms: AtomicU64::new(0),
            last_cmd: AtomicUsize::new(0),
            resp3: AtomicBool::new(false),
            names: Mutex::new(ClientNames::default()),
            killed: AtomicBool::new(false),
            wake: Notify::new(),
        });
        let mut open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        open.insert(id, handle.clone());
        handle
    }

    pub(crate) fn remove(&self, id: u64) {
        self.open
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&id);
    }

    /// The open connections, oldest first.
    pub(crate) fn all(&self) -> Vec<Arc<ClientHandle>> {
        let open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        open.values().cloned().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_kill_reaches_the_connection_once_asked() {
        let clients = Clients::default();
        let a = clients.register(1, "127.0.0.1:1".into(), "127.0.0.1:6379".into());
        let b = clients.register(2, "127.0.0.1:2".into(), "127.0.0.1:6379".into());
        assert_eq!(
            clients.all().iter().map(|c| c.id).collect::<Vec<_>>(),
            [1, 2]
        );
        a.ran(CommandIndex(4), Instant::now());
        assert_eq!(a.last_command(), Some(CommandIndex(4)));
        assert_eq!(b.last_command(), None);
        b.kill();
        tokio::time::timeout(Duration::from_secs(1), b.killed())
            .await
            .expect("the kill is seen");
        assert!(!a.is_killed());
        clients.remove(2);
        assert_eq!(clients.all().len(), 1);
    }
}
