//! What a command handler works with: the connection's state ([`Client`]),
//! the call's context ([`Ctx`]) and the command table's row type ([`Spec`]).

use std::sync::Arc;

use bytes::Bytes;
use seen_resp::{Protocol, Reply};
use seen_store::Pending;

use crate::clients::ClientHandle;
use crate::monitor::Watcher;
use crate::state::Shared;

/// One connection's state.
pub(crate) struct Client {
    /// What other connections see of it (`CLIENT LIST`, `CLIENT KILL`):
    /// its id, addresses and names.
    pub(crate) handle: Arc<ClientHandle>,
    pub(crate) proto: Protocol,
    pub(crate) authenticated: bool,
    /// Durability the replies produced so far depend on.
    pub(crate) pending: Pending,
    /// Close after sending the replies so far (`QUIT`, `SHUTDOWN`).
    pub(crate) close: bool,
    /// Send no reply to the current command (`SHUTDOWN`).
    pub(crate) no_reply: bool,
    /// The command stream it reads after `MONITOR`.
    pub(crate) monitor: Option<Watcher>,
}

impl Client {
    pub(crate) fn new(handle: Arc<ClientHandle>, authenticated: bool) -> Client {
        Client {
            handle,
            proto: Protocol::Resp2,
            authenticated,
            pending: Pending::default(),
            close: false,
            no_reply: false,
            monitor: None,
        }
    }

    /// Switches the protocol (`HELLO`).
    pub(crate) fn set_proto(&mut self, proto: Protocol) {
        self.proto = proto;
        self.handle.set_resp3(proto == Protocol::Resp3);
    }
}

/// What a command handler sees.
pub(crate) struct Ctx<'a> {
    pub(crate) shared: &'a Arc<Shared>,
    pub(crate) client: &'a mut Client,
    /// The command table this server runs (for `COMMAND`).
    pub(crate) commands: &'static [Spec],
}

impl Ctx<'_> {
    /// Remembers that the reply depends on `p` being durable.
    pub(crate) fn depends_on(&mut self, p: Pending) {
        self.client.pending = self.client.pending.max(p);
    }

    pub(crate) fn dirty(&self, n: u64) {
        self.shared
            .dirty
            .fetch_add(n, std::sync::atomic::Ordering::Relaxed);
    }
}

/// One row of the command table: a command's name, arity (Redis's
/// convention: `n` exactly, `-n` at least), flags and key positions, for
/// dispatch and `COMMAND`, and its handler.
pub(crate) struct Spec {
    pub(crate) name: &'static str,
    pub(crate) arity: i32,
    pub(crate) flags: &'static [&'static str],
    pub(crate) first_key: i32,
    pub(crate) last_key: i32,
    pub(crate) step: i32,
    pub(crate) summary: &'static str,
    pub(crate) handler: Handler,
}

/// The handler type of the command table.
pub(crate) type Handler = fn(&mut Ctx<'_>, &[Bytes]) -> Reply;
