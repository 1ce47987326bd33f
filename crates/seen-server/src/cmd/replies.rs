//! The error replies commands share, in Redis's and RedisBloom's words.

use seen_resp::Reply;
use seen_store::ErrorKind;

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
