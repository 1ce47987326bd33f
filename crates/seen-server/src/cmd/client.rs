//! Connection commands: `PING`, `ECHO`, `HELLO`, `AUTH`, `SELECT`, `QUIT`,
//! `CLIENT`.

use bytes::Bytes;
use seen_resp::{Protocol, Reply};

use super::context::Ctx;
use super::identity::{bf_module, REDIS_VERSION};
use super::replies::{not_integer, syntax_error, wrong_arity};
use crate::args::{is, parse_i64};

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
        ctx.shared.auth_failures.record(&ctx.client.addr);
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
            setname = Some(args[i + 1].clone());
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
        ctx.client.name = (!name.is_empty()).then_some(name);
    }
    if let Some(p) = proto {
        ctx.client.proto = p;
    }
    let proto_num = match ctx.client.proto {
        Protocol::Resp2 => 2,
        Protocol::Resp3 => 3,
    };
    Reply::Map(vec![
        (Reply::bulk("server"), Reply::bulk("redis")),
        (Reply::bulk("version"), Reply::bulk(REDIS_VERSION)),
        (Reply::bulk("proto"), Reply::Integer(proto_num)),
        (Reply::bulk("id"), Reply::Integer(ctx.client.id as i64)),
        (Reply::bulk("mode"), Reply::bulk("standalone")),
        (Reply::bulk("role"), Reply::bulk("master")),
        (Reply::bulk("modules"), Reply::Array(vec![bf_module()])),
    ])
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
        ctx.client.name = (!args[2].is_empty()).then(|| args[2].clone());
        Reply::ok()
    } else if is(sub, "getname") {
        if n != 2 {
            return wrong_arity("client|getname");
        }
        ctx.client.name.clone().map_or(Reply::Null, Reply::Bulk)
    } else if is(sub, "id") {
        if n != 2 {
            return wrong_arity("client|id");
        }
        Reply::Integer(ctx.client.id as i64)
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
        if is(&args[2], "lib-name") {
            ctx.client.lib_name = Some(args[3].clone());
        } else if is(&args[2], "lib-ver") {
            ctx.client.lib_ver = Some(args[3].clone());
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
        Reply::verbatim_text(client_line(ctx))
    } else {
        Reply::error(format!(
            "ERR unknown subcommand '{}'. Try CLIENT HELP.",
            String::from_utf8_lossy(sub)
        ))
    }
}

fn client_line(ctx: &Ctx<'_>) -> String {
    let s = |b: &Option<Bytes>| {
        b.as_ref()
            .map(|b| String::from_utf8_lossy(b).into_owned())
            .unwrap_or_default()
    };
    format!(
        "id={} addr={} name={} db=0 resp={} lib-name={} lib-ver={}\n",
        ctx.client.id,
        ctx.client.addr,
        s(&ctx.client.name),
        if ctx.client.proto == Protocol::Resp3 {
            3
        } else {
            2
        },
        s(&ctx.client.lib_name),
        s(&ctx.client.lib_ver),
    )
}
