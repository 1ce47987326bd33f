//! Connection commands: `PING`, `ECHO`, `HELLO`, `AUTH`, `SELECT`, `QUIT`,
//! `CLIENT`.

use bytes::Bytes;
use seen_resp::{Protocol, Reply};

use super::context::Ctx;
use super::identity::{bf_module, REDIS_VERSION};
use super::replies::{not_integer, syntax_error, wrong_arity};
use crate::args::{is, parse_i64};
use crate::clients::ClientHandle;
use crate::state::Shared;

pub(crate) fn ping(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Reply {
    let _ = ctx;
    match args.len() {
        1 => Reply::simple("PONG"),
        2 => Reply::Bulk(args[1].clone()),
        _ => wrong_arity("ping"),
    }
}

pub(crate) fn echo(_ctx: &mut Ctx<'_>, args: &[Bytes]) -> Reply {
    Reply::Bulk(args[1].clone())
}

/// Constant-time comparison of a password, so that its length or prefix
/// cannot be timed.
fn password_ok(given: &[u8], expected: &str) -> bool {
    let e = expected.as_bytes();
    let mut diff = u8::from(given.len() != e.len());
    for (i, &b) in e.iter().enumerate() {
        diff |= b ^ given.get(i).copied().unwrap_or(0);
    }
    diff == 0
}

const WRONGPASS: &str = "WRONGPASS invalid username-password pair or user is disabled.";

/// Checks `user`/`pass` as Redis 7 without ACL users does: the one user is
/// `default` (case matters); with no password set it takes any password,
/// and `AUTH <password>` alone is an error. Failed attempts are logged at
/// most once every few seconds, with their count.
fn authenticate(ctx: &mut Ctx<'_>, user: Option<&Bytes>, pass: &Bytes) -> Result<(), Reply> {
    let user_ok = user.is_none_or(|u| &u[..] == b"default");
    let accepted = match ctx.shared.config.requirepass.as_deref() {
        None if user.is_none() => {
            return Err(Reply::error(
                "ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?",
            ))
        }
        None => user_ok,
        Some(expected) => user_ok && password_ok(pass, expected),
    };
    if accepted {
        ctx.client.authenticated = true;
        Ok(())
    } else {
        ctx.shared.auth_failures.record(&ctx.client.handle.addr);
        Err(Reply::error(WRONGPASS))
    }
}

pub(crate) fn auth(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Reply {
    let r = match args.len() {
        2 => authenticate(ctx, None, &args[1]),
        3 => authenticate(ctx, Some(&args[1]), &args[2]),
        _ => return syntax_error(),
    };
    match r {
        Ok(()) => Reply::ok(),
        Err(e) => e,
    }
}

pub(crate) fn hello(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Reply {
    let mut proto = None;
    let mut i = 1;
    if let Some(v) = args.get(1) {
        match parse_i64(v) {
            Some(2) => proto = Some(Protocol::Resp2),
            Some(3) => proto = Some(Protocol::Resp3),
            Some(_) => return Reply::error("NOPROTO unsupported protocol version"),
            None => return Reply::error("ERR Protocol version is not an integer or out of range"),
        }
        i = 2;
    }
    let mut setname = None;
    while i < args.len() {
        let more = args.len() - i - 1;
        if is(&args[i], "auth") && more >= 2 {
            if let Err(r) = authenticate(ctx, Some(&args[i + 1]), &args[i + 2]) {
                return r;
            }
            i += 3;
        } else if is(&args[i], "setname") && more >= 1 {
            setname = Some(Bytes::copy_from_slice(&args[i + 1]));
            i += 2;
        } else {
            return Reply::error(format!(
                "ERR Syntax error in HELLO option '{}'",
                String::from_utf8_lossy(&args[i])
            ));
        }
    }
    if !ctx.client.authenticated {
        return Reply::error("NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO <proto> AUTH <user> <pass> option can be used to authenticate the client and select the RESP protocol version at the same time");
    }
    if let Some(name) = setname {
        if let Err(r) = check_name(&name) {
            return r;
        }
        ctx.client
            .handle
            .set_names(|n| n.name = (!name.is_empty()).then_some(name));
    }
    if let Some(p) = proto {
        ctx.client.set_proto(p);
    }
    let proto_num = match ctx.client.proto {
        Protocol::Resp2 => 2,
        Protocol::Resp3 => 3,
    };
    Reply::Map(vec![
        (Reply::bulk("server"), Reply::bulk("redis")),
        (Reply::bulk("version"), Reply::bulk(REDIS_VERSION)),
        (Reply::bulk("proto"), Reply::Integer(proto_num)),
        (
            Reply::bulk("id"),
            Reply::Integer(ctx.client.handle.id as i64),
        ),
        (Reply::bulk("mode"), Reply::bulk("standalone")),
        (Reply::bulk("role"), Reply::bulk("master")),
        (Reply::bulk("modules"), Reply::Array(vec![bf_module()])),
    ])
}

/// `MONITOR`: from now on, this connection is sent every command the
/// server runs (see [`crate::monitor`]).
pub(crate) fn monitor(ctx: &mut Ctx<'_>, _args: &[Bytes]) -> Reply {
    if ctx.client.monitor.is_none() {
        ctx.client.monitor = Some(ctx.shared.monitor.watch());
    }
    Reply::ok()
}

pub(crate) fn select(_ctx: &mut Ctx<'_>, args: &[Bytes]) -> Reply {
    match parse_i64(&args[1]) {
        Some(0) => Reply::ok(),
        Some(_) => Reply::error("ERR DB index is out of range"),
        None => not_integer(),
    }
}

pub(crate) fn quit(ctx: &mut Ctx<'_>, _args: &[Bytes]) -> Reply {
    ctx.client.close = true;
    Reply::ok()
}

fn check_name(name: &[u8]) -> Result<(), Reply> {
    if name.iter().any(|&c| !(b'!'..=b'~').contains(&c)) {
        return Err(Reply::error(
            "ERR Client names cannot contain spaces, newlines or special characters.",
        ));
    }
    Ok(())
}

pub(crate) fn client(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Reply {
    let sub = &args[1];
    let n = args.len();
    if is(sub, "setname") {
        if n != 3 {
            return wrong_arity("client|setname");
        }
        if let Err(r) = check_name(&args[2]) {
            return r;
        }
        let name = (!args[2].is_empty()).then(|| Bytes::copy_from_slice(&args[2]));
        ctx.client.handle.set_names(|n| n.name = name);
        Reply::ok()
    } else if is(sub, "getname") {
        if n != 2 {
            return wrong_arity("client|getname");
        }
        ctx.client
            .handle
            .names()
            .name
            .map_or(Reply::Null, Reply::Bulk)
    } else if is(sub, "id") {
        if n != 2 {
            return wrong_arity("client|id");
        }
        Reply::Integer(ctx.client.handle.id as i64)
    } else if is(sub, "setinfo") {
        if n != 4 {
            return wrong_arity("client|setinfo");
        }
        if args[3].iter().any(|&c| !(b'!'..=b'~').contains(&c)) {
            return Reply::error(format!(
                "ERR {} cannot contain spaces, newlines or special characters.",
                String::from_utf8_lossy(&args[2]).to_ascii_lowercase()
            ));
        }
        let value = Some(Bytes::copy_from_slice(&args[3]));
        if is(&args[2], "lib-name") {
            ctx.client.handle.set_names(|n| n.lib_name = value);
        } else if is(&args[2], "lib-ver") {
            ctx.client.handle.set_names(|n| n.lib_ver = value);
        } else {
            return Reply::error(format!(
                "ERR Unrecognized option '{}'",
                String::from_utf8_lossy(&args[2])
            ));
        }
        Reply::ok()
    } else if is(sub, "info") {
        if n != 2 {
            return wrong_arity("client|info");
        }
        Reply::verbatim_text(client_line(ctx.shared, &ctx.client.handle))
    } else if is(sub, "list") {
        client_list(ctx, args)
    } else if is(sub, "kill") {
        client_kill(ctx, args)
    } else {
        Reply::error(format!(
            "ERR unknown subcommand '{}'. Try CLIENT HELP.",
            String::from_utf8_lossy(sub)
        ))
    }
}

/// `CLIENT LIST [ID id ...]`: one line per connection, oldest first.
fn client_list(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Reply {
    let wanted: Option<Vec<u64>> = match args.get(2) {
        None => None,
        Some(a) if is(a, "id") && args.len() > 3 => {
            let ids: Option<Vec<u64>> = args[3..]
                .iter()
                .map(|a| parse_i64(a).and_then(|n| u64::try_from(n).ok()))
                .collect();
            match ids {
                Some(ids) => Some(ids),
                None => return Reply::error("ERR Invalid client ID"),
            }
        }
        Some(a) if is(a, "type") && args.len() == 4 => {
            if !(is(&args[3], "normal")
                || is(&args[3], "master")
                || is(&args[3], "replica")
                || is(&args[3], "pubsub"))
            {
                return Reply::error(format!(
                    "ERR Unknown client type '{}'",
                    String::from_utf8_lossy(&args[3])
                ));
            }
            // Every client of seen is a normal one.
            if !is(&args[3], "normal") {
                return Reply::verbatim_text(String::new());
            }
            None
        }
        Some(_) => return syntax_error(),
    };
    let mut out = String::new();
    for c in ctx.shared.clients.all() {
        if wanted.as_ref().is_none_or(|ids| ids.contains(&c.id)) {
            out.push_str(&client_line(ctx.shared, &c));
        }
    }
    Reply::verbatim_text(out)
}

/// `CLIENT KILL ip:port` (answers `OK`), or `CLIENT KILL <filter value>
/// ...` with the filters `ID`, `ADDR`, `LADDR`, `USER`, `SKIPME` and
/// `MAXAGE` (answers how many it closed), as Redis 7.
fn client_kill(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Reply {
    let me = ctx.client.handle.id;
    let all = ctx.shared.clients.all();
    if args.len() == 3 {
        let addr = String::from_utf8_lossy(&args[2]);
        return match all.iter().find(|c| c.addr == addr) {
            Some(c) => {
                kill(ctx, c);
                Reply::ok()
            }
            None => Reply::error("ERR No such client"),
        };
    }
    if args.len() < 3 || !(args.len() - 2).is_multiple_of(2) {
        return syntax_error();
    }
    let mut id = None;
    let mut addr = None;
    let mut laddr = None;
    let mut skipme = true;
    let mut max_age = None;
    for pair in args[2..].chunks(2) {
        let (option, value) = (&pair[0], &pair[1]);
        if is(option, "id") {
            match parse_i64(value)
                .and_then(|n| u64::try_from(n).ok())
                .filter(|&n| n > 0)
            {
                Some(n) => id = Some(n),
                None => return Reply::error("ERR client-id should be greater than 0"),
            }
        } else if is(option, "addr") {
            addr = Some(String::from_utf8_lossy(value).into_owned());
        } else if is(option, "laddr") {
            laddr = Some(String::from_utf8_lossy(value).into_owned());
        } else if is(option, "user") {
            if !is(value, "default") {
                return Reply::error(format!(
                    "ERR No such user '{}'",
                    String::from_utf8_lossy(value)
                ));
            }
        } else if is(option, "skipme") {
            if is(value, "yes") {
                skipme = true;
            } else if is(value, "no") {
                skipme = false;
            } else {
                return syntax_error();
            }
        } else if is(option, "maxage") {
            match parse_i64(value).and_then(|n| u64::try_from(n).ok()) {
                Some(n) => max_age = Some(std::time::Duration::from_secs(n)),
                None => return not_integer(),
            }
        } else {
            return syntax_error();
        }
    }
    let mut killed = 0;
    for c in &all {
        let matches = id.is_none_or(|id| c.id == id)
            && addr.as_ref().is_none_or(|a| &c.addr == a)
            && laddr.as_ref().is_none_or(|a| &c.laddr == a)
            && max_age.is_none_or(|age| c.age() >= age)
            && !(skipme && c.id == me);
        if matches {
            kill(ctx, c);
            killed += 1;
        }
    }
    Reply::Integer(killed)
}

/// Closes connection `c`: this one after its reply, another at once.
fn kill(ctx: &mut Ctx<'_>, c: &ClientHandle) {
    tracing::info!(client = %c.addr, id = c.id, by = %ctx.client.handle.addr, "CLIENT KILL");
    if c.id == ctx.client.handle.id {
        ctx.client.close = true;
    } else {
        c.kill();
    }
}

/// A connection as a line of `CLIENT LIST`, with Redis 7's fields (those
/// seen has no use for at their neutral values).
fn client_line(shared: &Shared, c: &ClientHandle) -> String {
    let names = c.names();
    let s = |b: &Option<Bytes>| {
        b.as_ref()
            .map(|b| String::from_utf8_lossy(b).into_owned())
            .unwrap_or_default()
    };
    let cmd = c
        .last_command()
        .and_then(|i| shared.stats.command_name(i))
        .unwrap_or("NULL");
    format!(
        "id={} addr={} laddr={} fd=-1 name={} age={} idle={} flags=N db=0 sub=0 psub=0 ssub=0 multi=-1 qbuf=0 qbuf-free=0 argv-mem=0 multi-mem=0 rbs=0 rbp=0 obl=0 oll=0 omem=0 tot-mem=0 events=r cmd={cmd} user=default redir=-1 resp={} lib-name={} lib-ver={}\n",
        c.id,
        c.addr,
        c.laddr,
        s(&names.name),
        c.age().as_secs(),
        c.idle().as_secs(),
        if c.is_resp3() { 3 } else { 2 },
        s(&names.lib_name),
        s(&names.lib_ver),
    )
}
