//! `COMMAND`: what the server answers, as Redis 7 describes its commands.

use bytes::Bytes;
use seen_resp::Reply;

use super::context::{Ctx, Spec};
use super::docs::command_doc;
use crate::args::is;

fn spec_info(s: &Spec) -> Reply {
    Reply::Array(vec![
        Reply::bulk(s.name),
        Reply::Integer(i64::from(s.arity)),
        Reply::Set(s.flags.iter().map(|f| Reply::simple(f)).collect()),
        Reply::Integer(i64::from(s.first_key)),
        Reply::Integer(i64::from(s.last_key)),
        Reply::Integer(i64::from(s.step)),
        Reply::Set(vec![]),
        Reply::Set(vec![]),
        Reply::Array(vec![]),
        Reply::Array(vec![]),
    ])
}

/// `COMMAND` and its `COUNT`, `LIST`, `INFO` and `DOCS` subcommands, read
/// from the table this server runs.
pub(crate) fn command(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Reply {
    let commands = ctx.commands;
    let Some(sub) = args.get(1) else {
        return Reply::Array(commands.iter().map(spec_info).collect());
    };
    let find = |name: &[u8]| {
        commands
            .iter()
            .find(|s| s.name.as_bytes().eq_ignore_ascii_case(name))
    };
    if is(sub, "count") {
        Reply::Integer(commands.len() as i64)
    } else if is(sub, "list") {
        Reply::Array(commands.iter().map(|s| Reply::bulk(s.name)).collect())
    } else if is(sub, "info") {
        if args.len() == 2 {
            return Reply::Array(commands.iter().map(spec_info).collect());
        }
        Reply::Array(
            args[2..]
                .iter()
                .map(|n| find(n).map_or(Reply::NullArray, spec_info))
                .collect(),
        )
    } else if is(sub, "docs") {
        let wanted: Vec<&Spec> = if args.len() == 2 {
            commands.iter().collect()
        } else {
            args[2..].iter().filter_map(|n| find(n)).collect()
        };
        Reply::Map(
            wanted
                .into_iter()
                .map(|s| (Reply::bulk(s.name), command_doc(s)))
                .collect(),
        )
    } else {
        Reply::error(format!(
            "ERR unknown subcommand '{}'. Try COMMAND HELP.",
            String::from_utf8_lossy(sub)
        ))
    }
}
