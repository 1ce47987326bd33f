//! `SLOWLOG GET [count]`, `SLOWLOG LEN`, `SLOWLOG RESET`, as Redis 7.

use bytes::Bytes;
use seen_resp::Reply;

use super::context::Ctx;
use super::replies::{not_integer, wrong_arity};
use crate::args::{is, parse_i64};

/// Entries `SLOWLOG GET` gives without a count.
const DEFAULT_COUNT: usize = 10;

pub(crate) fn slowlog(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Reply {
    let log = &ctx.shared.slowlog;
    let sub = &args[1];
    if is(sub, "get") {
        let count = match args.get(2).map(|a| parse_i64(a)) {
            _ if args.len() > 3 => return wrong_arity("slowlog|get"),
            None => Some(DEFAULT_COUNT),
            Some(Some(-1)) => None,
            Some(Some(n)) if n >= 0 => Some(usize::try_from(n).unwrap_or(usize::MAX)),
            Some(Some(_)) => {
                return Reply::error("ERR count should be greater than or equal to -1")
            }
            Some(None) => return not_integer(),
        };
        let entries = log.newest(count);
        Reply::Array(
            entries
                .into_iter()
                .map(|e| {
                    Reply::Array(vec![
                        Reply::Integer(e.id as i64),
                        Reply::Integer(e.unix_secs),
                        Reply::Integer(i64::try_from(e.duration.as_micros()).unwrap_or(i64::MAX)),
                        Reply::Array(e.args.into_iter().map(Reply::Bulk).collect()),
                        Reply::bulk(e.addr),
                        Reply::Bulk(e.name),
                    ])
                })
                .collect(),
        )
    } else if is(sub, "len") && args.len() == 2 {
        Reply::Integer(log.len() as i64)
    } else if is(sub, "reset") && args.len() == 2 {
        log.reset();
        Reply::ok()
    } else {
        Reply::error(format!(
            "ERR unknown subcommand or wrong number of arguments for '{}'. Try SLOWLOG HELP.",
            String::from_utf8_lossy(sub)
        ))
    }
}
