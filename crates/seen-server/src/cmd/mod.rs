//! Commands. Each takes the request's arguments, applies them to the shared
//! state and returns a [`Reply`] value (never writing to the socket), so
//! commands are tested without a network.

mod bf_add;
mod bf_debug;
mod bf_dump;
mod bf_exists;
mod bf_info;
mod bf_reserve;
mod conn;
mod docs;
mod expire;
mod keys;
mod server;
mod table;

use std::sync::Arc;

use bytes::Bytes;
use seen_core::AnyFilter;
use seen_resp::{lowercase_name, Protocol, Reply, Request};
use seen_store::{ErrorKind, Pending};

use crate::state::Shared;

pub(crate) use table::COMMANDS;

/// One connection's state.
pub(crate) struct Client {
    pub(crate) id: u64,
    pub(crate) addr: String,
    pub(crate) proto: Protocol,
    pub(crate) authenticated: bool,
    pub(crate) name: Option<Bytes>,
    pub(crate) lib_name: Option<Bytes>,
    pub(crate) lib_ver: Option<Bytes>,
    /// Durability the replies produced so far depend on.
    pub(crate) pending: Pending,
    /// Close after sending the replies so far (`QUIT`, `SHUTDOWN`).
    pub(crate) close: bool,
    /// Send no reply to the current command (`SHUTDOWN`).
    pub(crate) no_reply: bool,
}

impl Client {
    pub(crate) fn new(id: u64, addr: String, authenticated: bool) -> Client {
        Client {
            id,
            addr,
            proto: Protocol::Resp2,
            authenticated,
            name: None,
            lib_name: None,
            lib_ver: None,
            pending: Pending::default(),
            close: false,
            no_reply: false,
        }
    }
}

/// What a command handler sees.
pub(crate) struct Ctx<'a> {
    pub(crate) shared: &'a Arc<Shared>,
    pub(crate) client: &'a mut Client,
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

pub(crate) const WRONGTYPE: &str =
    "WRONGTYPE Operation against a key holding the wrong kind of value";

/// Redis's arity error, with the command's lowercase name.
pub(crate) fn wrong_arity(name: &str) -> Reply {
    Reply::error(format!(
        "ERR wrong number of arguments for '{name}' command"
    ))
}

pub(crate) fn not_integer() -> Reply {
    Reply::error("ERR value is not an integer or out of range")
}

pub(crate) fn syntax_error() -> Reply {
    Reply::error("ERR syntax error")
}

/// A store error as a reply. A persistence error says what the client may
/// assume: nothing of the command is acknowledged, though it may have been
/// applied all the same: a command of several items (or a dump chunk),
/// logged and applied in pieces, may have kept the pieces before the
/// failure (a full disk part-way through a BF.MADD of 1,000 items kept 912
/// of them), and one whose sync failed was applied (DEL, EXPIRE, an add),
/// and is made durable by the checkpoint that follows the failure.
pub(crate) fn store_error(e: &seen_store::Error) -> Reply {
    match e.kind() {
        ErrorKind::NotFound => Reply::error("ERR not found"),
        ErrorKind::Exists => Reply::error("ERR item exists"),
        ErrorKind::Filter(f) => filter_error(f),
        ErrorKind::Io { .. } | ErrorKind::Poisoned(_) => Reply::error(format!(
            "ERR persistence error, not acknowledged (the command may have been applied, in whole or in part): {e}"
        )),
        _ => Reply::error(format!("ERR {e}")),
    }
}

/// A core-library error as a reply.
pub(crate) fn filter_error(e: &seen_core::Error) -> Reply {
    match e.kind() {
        seen_core::ErrorKind::Full => Reply::error("ERR non scaling filter is full"),
        seen_core::ErrorKind::TooLarge { needed, limit } => Reply::error(format!(
            "ERR the filter needs {needed} bytes, more than the {limit} bytes left under maxmemory and max-filter-bytes"
        )),
        _ => Reply::error(format!("ERR {e}")),
    }
}

/// Why an add stopped before its end, as RedisBloom replies: a full
/// non-scaling filter, or (for a chain that could not grow: memory, the
/// limits, the most sub-filters) "problem inserting", seen's reason
/// going to the log.
pub(crate) fn add_stopped(e: &seen_core::Error) -> Reply {
    match e.kind() {
        seen_core::ErrorKind::Full => Reply::error("ERR non scaling filter is full"),
        _ => {
            tracing::warn!("an add stopped: {e}");
            Reply::error("ERR problem inserting into filter")
        }
    }
}

/// What kind of value a key holds, for type checks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum KeyKind {
    /// A Bloom filter `BF.*` works on (scalable chain or fixed filter).
    Bloom,
    /// A counting filter (made by the library or the CLI; not a `BF.*`
    /// type).
    Counting,
}

impl KeyKind {
    pub(crate) fn of(f: &AnyFilter) -> KeyKind {
        match f {
            AnyFilter::Counting(_) => KeyKind::Counting,
            _ => KeyKind::Bloom,
        }
    }

    /// `TYPE`'s answer.
    pub(crate) fn type_name(self) -> &'static str {
        match self {
            KeyKind::Bloom => "MBbloom--",
            KeyKind::Counting => "seen-cbf-",
        }
    }
}

/// The kind of the value at `key`, if any.
pub(crate) fn key_kind(shared: &Shared, key: &[u8]) -> Result<Option<KeyKind>, Reply> {
    shared
        .store
        .with_filter(key, KeyKind::of)
        .map_err(|e| store_error(&e))
}

/// Runs one request. Every error reply counts in `total_error_replies`,
/// as in Redis (an unknown command, `NOAUTH`, a wrong arity included).
pub(crate) fn execute(shared: &Arc<Shared>, client: &mut Client, req: &Request) -> Reply {
    let reply = run(shared, client, req);
    if matches!(reply, Reply::Error(_)) {
        shared
            .stats
            .errors
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }
    reply
}

fn run(shared: &Arc<Shared>, client: &mut Client, req: &Request) -> Reply {
    let args = req.args();
    let Some(name) = args.first() else {
        return Reply::error("ERR empty command");
    };
    let mut buf = [0u8; 32];
    let Some(lower) = lowercase_name(name, &mut buf) else {
        return unknown_command(args);
    };
    let Some(spec) = table::lookup(lower) else {
        return unknown_command(args);
    };
    shared
        .stats
        .commands
        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    if !client.authenticated && !matches!(spec.name, "auth" | "hello" | "quit") {
        return Reply::error("NOAUTH Authentication required.");
    }
    if (spec.arity > 0 && args.len() != spec.arity as usize)
        || (spec.arity < 0 && args.len() < (-spec.arity) as usize)
    {
        return wrong_arity(spec.name);
    }
    let mut ctx = Ctx { shared, client };
    (spec.handler)(&mut ctx, args)
}

/// Which fused family a request belongs to: adds (`BF.ADD`, `BF.MADD`) or
/// lookups (`BF.EXISTS`, `BF.MEXISTS`), and whether it answers an array.
fn fused_kind(args: &[Bytes]) -> Option<(bool, bool)> {
    let name = args.first()?;
    let (add, multi) = if name.eq_ignore_ascii_case(b"bf.add") {
        (true, false)
    } else if name.eq_ignore_ascii_case(b"bf.madd") {
        (true, true)
    } else if name.eq_ignore_ascii_case(b"bf.exists") {
        (false, false)
    } else if name.eq_ignore_ascii_case(b"bf.mexists") {
        (false, true)
    } else {
        return None;
    };
    let ok = if multi {
        args.len() >= 3
    } else {
        args.len() == 3
    };
    ok.then_some((add, multi))
}

/// How many requests at the front of `reqs` can run as one fused batch:
/// consecutive adds (`BF.ADD`/`BF.MADD`), or consecutive lookups
/// (`BF.EXISTS`/`BF.MEXISTS`), of the same key (what a pipelining client
/// sends). 0 or 1: run the first one alone.
pub(crate) fn fusable_len(client: &Client, reqs: &[Request]) -> usize {
    if !client.authenticated || reqs.len() < 2 {
        return 0;
    }
    let first = reqs[0].args();
    let Some((add, _)) = fused_kind(first) else {
        return 0;
    };
    reqs.iter()
        .take_while(|r| {
            let a = r.args();
            matches!(fused_kind(a), Some((k, _)) if k == add) && a[1] == first[1]
        })
        .count()
}

/// Runs a fused run found by [`fusable_len`] with one store call (one lock,
/// one log record), giving the same replies, in the same order, as running
/// the requests one by one. May answer fewer requests than given (a full
/// filter stops a run of adds); the caller runs the rest normally.
pub(crate) fn execute_fused(
    shared: &Arc<Shared>,
    client: &mut Client,
    reqs: &[Request],
) -> Vec<Reply> {
    shared
        .stats
        .commands
        .fetch_add(reqs.len() as u64, std::sync::atomic::Ordering::Relaxed);
    let key = reqs[0].args()[1].clone();
    let add = fused_kind(reqs[0].args()).is_some_and(|(a, _)| a);
    let items: Vec<Bytes> = reqs
        .iter()
        .flat_map(|r| r.args()[2..].iter().cloned())
        .collect();
    let mut ctx = Ctx { shared, client };
    let (answers, stopped) = if add {
        match bf_add::add_batch(&mut ctx, &key, &items) {
            Ok(x) => x,
            Err(r) => return vec![r; reqs.len()],
        }
    } else {
        match bf_exists::lookup_batch(&mut ctx, &key, &items) {
            Ok(v) => (v, None),
            Err(r) => return vec![r; reqs.len()],
        }
    };
    // Split the answers back into one reply per command.
    let mut out = Vec::with_capacity(reqs.len());
    let mut answers = answers.into_iter();
    let mut stopped = stopped;
    for r in reqs {
        let multi = fused_kind(r.args()).is_some_and(|(_, m)| m);
        let n = r.args().len() - 2;
        let got: Vec<Reply> = answers.by_ref().take(n).map(Reply::Bool).collect();
        if got.len() == n {
            out.push(if multi {
                Reply::Array(got)
            } else {
                got.into_iter().next().expect("one")
            });
            continue;
        }
        // The batch stopped inside this command: it answers what it got
        // and the error; the commands after it run on their own.
        let err = stopped
            .take()
            .unwrap_or_else(|| Reply::error("ERR internal: short batch"));
        out.push(if multi {
            let mut got = got;
            got.push(err);
            Reply::Array(got)
        } else {
            err
        });
        break;
    }
    out
}

/// Redis 7's text for a command it does not know.
fn unknown_command(args: &[Bytes]) -> Reply {
    let name = String::from_utf8_lossy(&args[0]);
    let name: String = name.chars().take(128).collect();
    let mut rest = String::new();
    for a in &args[1..] {
        if rest.len() >= 128 {
            break;
        }
        let room = 128 - rest.len();
        let a = String::from_utf8_lossy(a);
        let a: String = a.chars().take(room).collect();
        rest.push_str(&format!("'{a}' "));
    }
    Reply::error(format!(
        "ERR unknown command '{name}', with args beginning with: {rest}"
    ))
}

/// The handler type of the command table.
pub(crate) type Handler = fn(&mut Ctx<'_>, &[Bytes]) -> Reply;
