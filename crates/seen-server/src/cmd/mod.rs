//! Commands. Each takes the request's arguments, applies them to the shared
//! state and returns a [`Reply`] value (never writing to the socket), so
//! commands are tested without a network.
//!
//! Dependencies run one way: this file dispatches through `table`, the
//! table names the handlers, and the handlers use `context`, `replies`,
//! `key_kind`, `identity` and `docs`, which import no other command file.

mod admin;
mod bf_add;
mod bf_debug;
mod bf_dump;
mod bf_exists;
mod bf_info;
mod bf_reserve;
mod client;
mod command;
mod context;
mod docs;
mod expire;
mod identity;
mod key_kind;
mod keys;
mod replies;
mod table;

use std::sync::Arc;

use bytes::Bytes;
use seen_resp::{lowercase_name, Reply, Request};

pub(crate) use context::Client;
use context::Ctx;
use replies::wrong_arity;

use crate::state::Shared;

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
    let mut ctx = Ctx {
        shared,
        client,
        commands: table::COMMANDS,
    };
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
    let mut ctx = Ctx {
        shared,
        client,
        commands: table::COMMANDS,
    };
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
