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
mod bf_import;
mod bf_info;
mod bf_reserve;
mod client;
mod command;
mod config;
mod context;
mod docs;
mod expire;
mod identity;
mod info;
mod key_kind;
mod keys;
mod replies;
mod slowlog;
mod table;

use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use seen_resp::{lowercase_name, Reply, Request};

pub(crate) use context::Client;
use context::Ctx;
use replies::wrong_arity;

use crate::args::is;
use crate::state::Shared;
use crate::stats::{CommandIndex, Outcome};

/// Counts the error replies in `reply` (an array's errors included, as a
/// `BF.MADD` that filled its filter answers) by prefix; whether there was
/// one, which makes the call a failed one, as in Redis.
fn count_errors(shared: &Shared, reply: &Reply) -> bool {
    match reply {
        Reply::Error(text) => {
            shared.stats.error_reply(text);
            true
        }
        Reply::Array(items) => {
            // Every error is counted: no stopping at the first.
            let mut any = false;
            for item in items {
                any |= count_errors(shared, item);
            }
            any
        }
        _ => false,
    }
}

/// The names of the commands, in the table's order (for the counters).
pub(crate) fn command_names() -> Vec<&'static str> {
    table::COMMANDS.iter().map(|s| s.name).collect()
}

/// Runs one request and counts it: every error reply by its prefix (an
/// unknown command included), and a known command's call, time and
/// outcome, as Redis does.
pub(crate) fn execute(shared: &Arc<Shared>, client: &mut Client, req: &Request) -> Reply {
    let started = Instant::now();
    let (reply, counted) = run(shared, client, req, started);
    let failed = count_errors(shared, &reply);
    if let Some((cmd, ran)) = counted {
        let outcome = match (ran, failed) {
            (false, _) => Outcome::Rejected,
            (true, true) => Outcome::Failed,
            (true, false) => Outcome::Ok,
        };
        let elapsed = started.elapsed();
        shared.stats.command(cmd, 1, elapsed, outcome);
        if ran && shared.slowlog.is_slow(elapsed) {
            shared.slowlog.record(req.args(), elapsed, &client.handle);
        }
        if ran && shared.monitor.is_watched() && !is(&req.args()[0], "monitor") {
            shared.monitor.publish(&client.handle, req.args());
        }
    }
    reply
}

/// Runs one request: its reply, and for a known command its place and
/// whether it ran (false: refused before, for arity or authentication).
fn run(
    shared: &Arc<Shared>,
    client: &mut Client,
    req: &Request,
    started: Instant,
) -> (Reply, Option<(CommandIndex, bool)>) {
    let args = req.args();
    let Some(name) = args.first() else {
        return (Reply::error("ERR empty command"), None);
    };
    let mut buf = [0u8; 32];
    let Some(lower) = lowercase_name(name, &mut buf) else {
        return (unknown_command(args), None);
    };
    let Some((cmd, spec)) = table::lookup(lower) else {
        return (unknown_command(args), None);
    };
    client.handle.ran(cmd, started);
    if !client.authenticated && !matches!(spec.name, "auth" | "hello" | "quit") {
        return (
            Reply::error("NOAUTH Authentication required."),
            Some((cmd, false)),
        );
    }
    if (spec.arity > 0 && args.len() != spec.arity as usize)
        || (spec.arity < 0 && args.len() < (-spec.arity) as usize)
    {
        return (wrong_arity(spec.name), Some((cmd, false)));
    }
    let mut ctx = Ctx {
        shared,
        client,
        commands: table::COMMANDS,
    };
    ((spec.handler)(&mut ctx, args), Some((cmd, true)))
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
    let started = Instant::now();
    let replies = run_fused(shared, client, reqs);
    count_fused(shared, client, &reqs[..replies.len()], &replies, started);
    replies
}

/// Counts the commands of a fused run as if each had run alone: a run of
/// the same command as one update of its counters, the run's time shared
/// out by commands.
fn count_fused(
    shared: &Shared,
    client: &Client,
    reqs: &[Request],
    replies: &[Reply],
    started: Instant,
) {
    let per_command = started.elapsed() / reqs.len().max(1) as u32;
    let mut i = 0;
    while i < reqs.len() {
        let name = &reqs[i].args()[0];
        let same = reqs[i..]
            .iter()
            .take_while(|r| r.args()[0].eq_ignore_ascii_case(name))
            .count();
        let ok = replies[i..i + same]
            .iter()
            .filter(|reply| !count_errors(shared, reply))
            .count() as u64;
        let mut buf = [0u8; 32];
        let cmd = lowercase_name(name, &mut buf).and_then(table::lookup);
        if let Some((cmd, _)) = cmd {
            client.handle.ran(cmd, started);
            let failed = same as u64 - ok;
            let stats = &shared.stats;
            stats.command(cmd, ok, per_command * ok as u32, Outcome::Ok);
            stats.command(cmd, failed, per_command * failed as u32, Outcome::Failed);
            if shared.monitor.is_watched() {
                for r in &reqs[i..i + same] {
                    shared.monitor.publish(&client.handle, r.args());
                }
            }
            if shared.slowlog.is_slow(per_command) {
                for r in &reqs[i..i + same] {
                    shared.slowlog.record(r.args(), per_command, &client.handle);
                }
            }
        }
        i += same;
    }
}

/// The replies of a fused run (fewer than the requests when a full filter
/// stopped a run of adds).
fn run_fused(shared: &Arc<Shared>, client: &mut Client, reqs: &[Request]) -> Vec<Reply> {
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
