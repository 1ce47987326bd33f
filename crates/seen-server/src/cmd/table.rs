//! The command table: every command seen answers, with its arity, flags,
//! key positions and handler, for dispatch and `COMMAND`.

use super::command;
use super::context::Spec;
use super::{admin, bf_add, bf_debug, bf_dump, bf_exists, bf_import, bf_info, bf_reserve, client};
use super::{config, expire, info, keys, slowlog};
use crate::stats::CommandIndex;

const W: &[&str] = &["write", "denyoom"];
const R: &[&str] = &["readonly", "fast"];
const A: &[&str] = &["fast", "loading", "stale"];

macro_rules! spec {
    ($name:literal, $arity:expr, $flags:expr, $fk:expr, $lk:expr, $step:expr, $h:expr, $sum:literal) => {
        Spec {
            name: $name,
            arity: $arity,
            flags: $flags,
            first_key: $fk,
            last_key: $lk,
            step: $step,
            summary: $sum,
            handler: $h,
        }
    };
}

/// Every command seen answers. RedisBloom's commands have arity -1 (they
/// check their own arguments, with their own error texts).
pub(crate) static COMMANDS: &[Spec] = &[
    spec!(
        "bf.reserve",
        -1,
        W,
        1,
        1,
        1,
        bf_reserve::reserve,
        "Creates a new Bloom Filter"
    ),
    spec!(
        "bf.add",
        -1,
        W,
        1,
        1,
        1,
        bf_add::add,
        "Adds an item to a Bloom Filter"
    ),
    spec!(
        "bf.madd",
        -1,
        W,
        1,
        1,
        1,
        bf_add::madd,
        "Adds one or more items to a Bloom Filter. A filter will be created if it does not exist"
    ),
    spec!(
        "bf.insert",
        -1,
        W,
        1,
        1,
        1,
        bf_add::insert,
        "Adds one or more items to a Bloom Filter. A filter will be created if it does not exist"
    ),
    spec!(
        "bf.exists",
        -1,
        R,
        1,
        1,
        1,
        bf_exists::exists,
        "Checks whether an item exists in a Bloom Filter"
    ),
    spec!(
        "bf.mexists",
        -1,
        R,
        1,
        1,
        1,
        bf_exists::mexists,
        "Checks whether one or more items exist in a Bloom Filter"
    ),
    spec!(
        "bf.info",
        -1,
        R,
        1,
        1,
        1,
        bf_info::info,
        "Returns information about a Bloom Filter"
    ),
    spec!(
        "bf.card",
        -1,
        R,
        1,
        1,
        1,
        bf_info::card,
        "Returns the cardinality of a Bloom filter"
    ),
    spec!(
        "bf.debug",
        -1,
        R,
        1,
        1,
        1,
        bf_debug::debug,
        "Returns internal debug information about a Bloom Filter"
    ),
    spec!(
        "bf.scandump",
        -1,
        &["readonly"],
        1,
        1,
        1,
        bf_dump::scandump,
        "Begins an incremental save of the bloom filter"
    ),
    spec!(
        "bf.loadchunk",
        -1,
        W,
        1,
        1,
        1,
        bf_dump::loadchunk,
        "Restores a filter previously saved using SCANDUMP"
    ),
    spec!(
        "bf.import",
        4,
        W,
        1,
        1,
        1,
        bf_import::import,
        "Creates a Bloom filter from a whole filter file: Guava's BloomFilter.writeTo format (GUAVA) or seen's (SEEN)"
    ),
    spec!(
        "bf.export",
        3,
        &["readonly"],
        1,
        1,
        1,
        bf_import::export,
        "Returns a Bloom filter as a whole filter file: Guava's BloomFilter.writeTo format (GUAVA) or seen's (SEEN)"
    ),
    spec!(
        "ping",
        -1,
        A,
        0,
        0,
        0,
        client::ping,
        "Returns the server's liveliness response"
    ),
    spec!(
        "echo",
        2,
        A,
        0,
        0,
        0,
        client::echo,
        "Returns the given string"
    ),
    spec!(
        "hello",
        -1,
        A,
        0,
        0,
        0,
        client::hello,
        "Handshakes with the server (protocol, auth, name)"
    ),
    spec!(
        "auth",
        -2,
        A,
        0,
        0,
        0,
        client::auth,
        "Authenticates the connection"
    ),
    spec!(
        "select",
        2,
        A,
        0,
        0,
        0,
        client::select,
        "Changes the selected database (only 0 exists)"
    ),
    spec!(
        "quit",
        -1,
        A,
        0,
        0,
        0,
        client::quit,
        "Closes the connection"
    ),
    spec!(
        "client",
        -2,
        A,
        0,
        0,
        0,
        client::client,
        "CLIENT SETNAME, GETNAME, ID, SETINFO, INFO"
    ),
    spec!(
        "command",
        -1,
        A,
        0,
        0,
        0,
        command::command,
        "Returns information about commands"
    ),
    spec!(
        "config",
        -2,
        A,
        0,
        0,
        0,
        config::config,
        "CONFIG GET, SET, REWRITE and RESETSTAT"
    ),
    spec!(
        "info",
        -1,
        A,
        0,
        0,
        0,
        info::info,
        "Returns information and statistics about the server"
    ),
    spec!(
        "module",
        -2,
        A,
        0,
        0,
        0,
        admin::module,
        "MODULE LIST: reports the bf module seen stands in for"
    ),
    spec!(
        "dbsize",
        1,
        R,
        0,
        0,
        0,
        keys::dbsize,
        "Returns the number of keys"
    ),
    spec!(
        "exists",
        -2,
        R,
        1,
        -1,
        1,
        keys::exists,
        "Counts the given keys that exist"
    ),
    spec!("del", -2, &["write"], 1, -1, 1, keys::del, "Deletes keys"),
    spec!(
        "unlink",
        -2,
        &["write", "fast"],
        1,
        -1,
        1,
        keys::del,
        "Deletes keys"
    ),
    spec!(
        "type",
        2,
        R,
        1,
        1,
        1,
        keys::type_,
        "Returns the type of a key"
    ),
    spec!(
        "keys",
        2,
        &["readonly"],
        0,
        0,
        0,
        keys::keys,
        "Returns the keys matching a pattern"
    ),
    spec!(
        "scan",
        -2,
        &["readonly"],
        0,
        0,
        0,
        keys::scan,
        "Iterates over the keys"
    ),
    spec!(
        "flushdb",
        -1,
        &["write"],
        0,
        0,
        0,
        keys::flush,
        "Deletes every key"
    ),
    spec!(
        "flushall",
        -1,
        &["write"],
        0,
        0,
        0,
        keys::flush,
        "Deletes every key"
    ),
    spec!(
        "expire",
        -3,
        &["write", "fast"],
        1,
        1,
        1,
        expire::expire,
        "Sets a key's time to live in seconds"
    ),
    spec!(
        "pexpire",
        -3,
        &["write", "fast"],
        1,
        1,
        1,
        expire::pexpire,
        "Sets a key's time to live in milliseconds"
    ),
    spec!(
        "expireat",
        -3,
        &["write", "fast"],
        1,
        1,
        1,
        expire::expireat,
        "Sets a key's expiry as a Unix time in seconds"
    ),
    spec!(
        "pexpireat",
        -3,
        &["write", "fast"],
        1,
        1,
        1,
        expire::pexpireat,
        "Sets a key's expiry as a Unix time in milliseconds"
    ),
    spec!(
        "ttl",
        2,
        R,
        1,
        1,
        1,
        expire::ttl,
        "Returns a key's time to live in seconds"
    ),
    spec!(
        "pttl",
        2,
        R,
        1,
        1,
        1,
        expire::pttl,
        "Returns a key's time to live in milliseconds"
    ),
    spec!(
        "persist",
        2,
        &["write", "fast"],
        1,
        1,
        1,
        expire::persist,
        "Removes a key's expiry"
    ),
    spec!(
        "save",
        1,
        &["admin", "noscript"],
        0,
        0,
        0,
        admin::save,
        "Checkpoints every changed filter"
    ),
    spec!(
        "bgsave",
        -1,
        &["admin", "noscript"],
        0,
        0,
        0,
        admin::bgsave,
        "Checkpoints in the background"
    ),
    spec!(
        "lastsave",
        1,
        &["fast"],
        0,
        0,
        0,
        admin::lastsave,
        "Returns the Unix time of the last checkpoint"
    ),
    spec!(
        "shutdown",
        -1,
        &["admin", "noscript"],
        0,
        0,
        0,
        admin::shutdown,
        "Checkpoints and stops the server"
    ),
    spec!(
        "monitor",
        1,
        &["admin", "noscript", "loading", "stale"],
        0,
        0,
        0,
        client::monitor,
        "Streams every command the server runs"
    ),
    spec!(
        "slowlog",
        -2,
        &["admin", "loading", "stale"],
        0,
        0,
        0,
        slowlog::slowlog,
        "Reads or resets the log of slow commands"
    ),
];

/// The place and spec of a lowercase command name.
pub(crate) fn lookup(lower: &[u8]) -> Option<(CommandIndex, &'static Spec)> {
    let i = COMMANDS.iter().position(|s| s.name.as_bytes() == lower)?;
    Some((CommandIndex(i), &COMMANDS[i]))
}
