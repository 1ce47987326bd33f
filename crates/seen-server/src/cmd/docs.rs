//! `COMMAND DOCS`: for RedisBloom's commands, RedisBloom's own
//! documentation (its `src/cmd_info/bf_info.c`: since, complexity and
//! arguments; the summary is in the command table), in the shape Redis
//! gives a module's commands, so that client generators and `redis-cli`'s
//! hints see what they see with RedisBloom. Other commands get their
//! summary alone.

use seen_resp::Reply;

use super::context::Spec;

/// The type of a command argument, as `COMMAND DOCS` names it.
#[derive(Clone, Copy)]
enum Type {
    Key,
    String,
    Integer,
    Double,
    Block,
    PureToken,
    OneOf,
}

impl Type {
    fn name(self) -> &'static str {
        match self {
            Type::Key => "key",
            Type::String => "string",
            Type::Integer => "integer",
            Type::Double => "double",
            Type::Block => "block",
            Type::PureToken => "pure-token",
            Type::OneOf => "oneof",
        }
    }
}

/// One argument of a command.
struct Arg {
    name: &'static str,
    kind: Type,
    token: Option<&'static str>,
    /// `optional`, `multiple`.
    flags: &'static [&'static str],
    args: &'static [Arg],
}

const fn arg(name: &'static str, kind: Type) -> Arg {
    Arg {
        name,
        kind,
        token: None,
        flags: &[],
        args: &[],
    }
}

/// The first argument of every `BF.*` command: its key.
const KEY: Arg = arg("key", Type::Key);
const ITEM: Arg = arg("item", Type::String);
const ITEMS: Arg = Arg {
    flags: &["multiple"],
    ..ITEM
};

/// `TOKEN value` as RedisBloom documents it: an optional block holding
/// the value.
const fn optional_block(name: &'static str, token: &'static str, value: &'static [Arg]) -> Arg {
    Arg {
        token: Some(token),
        flags: &["optional"],
        args: value,
        ..arg(name, Type::Block)
    }
}

const fn token(name: &'static str, token: &'static str, flags: &'static [&'static str]) -> Arg {
    Arg {
        token: Some(token),
        flags,
        ..arg(name, Type::PureToken)
    }
}

/// What RedisBloom documents of a command besides its summary.
struct ModuleDoc {
    name: &'static str,
    since: &'static str,
    complexity: &'static str,
    args: &'static [Arg],
}

const K_HASHES: &str = "O(k), where k is the number of hash functions used by the last sub-filter";
const KN_HASHES: &str =
    "O(k * n), where k is the number of hash functions and n is the number of items";
const CAPACITY: &str = "O(n), where n is the capacity";

static REDISBLOOM: &[ModuleDoc] = &[
    ModuleDoc {
        name: "bf.reserve",
        since: "1.0.0",
        complexity: "O(1)",
        args: &[
            KEY,
            arg("error_rate", Type::Double),
            arg("capacity", Type::Integer),
            optional_block("expansion", "EXPANSION", &[arg("expansion", Type::Integer)]),
            token("nonscaling", "NONSCALING", &["optional"]),
        ],
    },
    ModuleDoc {
        name: "bf.add",
        since: "1.0.0",
        complexity: K_HASHES,
        args: &[KEY, ITEM],
    },
    ModuleDoc {
        name: "bf.madd",
        since: "1.0.0",
        complexity: KN_HASHES,
        args: &[KEY, ITEMS],
    },
    ModuleDoc {
        name: "bf.insert",
        since: "1.0.0",
        complexity: KN_HASHES,
        args: &[
            KEY,
            optional_block("capacity", "CAPACITY", &[arg("capacity", Type::Integer)]),
            optional_block("error", "ERROR", &[arg("error", Type::Double)]),
            optional_block("expansion", "EXPANSION", &[arg("expansion", Type::Integer)]),
            token("nocreate", "NOCREATE", &["optional"]),
            token("nonscaling", "NONSCALING", &["optional"]),
            token("items", "ITEMS", &[]),
            ITEMS,
        ],
    },
    ModuleDoc {
        name: "bf.exists",
        since: "1.0.0",
        complexity: K_HASHES,
        args: &[KEY, ITEM],
    },
    ModuleDoc {
        name: "bf.mexists",
        since: "1.0.0",
        complexity: KN_HASHES,
        args: &[KEY, ITEMS],
    },
    ModuleDoc {
        name: "bf.info",
        since: "1.0.0",
        complexity: "O(1)",
        args: &[
            KEY,
            Arg {
                flags: &["optional"],
                // RedisBloom's spelling of the first one.
                args: &[
                    token("capcaity", "CAPACITY", &[]),
                    token("SIZE", "SIZE", &[]),
                    token("FILTERS", "FILTERS", &[]),
                    token("ITEMS", "ITEMS", &[]),
                    token("EXPANSION", "EXPANSION", &[]),
                ],
                ..arg("single_value", Type::OneOf)
            },
        ],
    },
    ModuleDoc {
        name: "bf.card",
        since: "2.4.4",
        complexity: "O(1)",
        args: &[KEY],
    },
    ModuleDoc {
        name: "bf.debug",
        since: "1.0.0",
        complexity: "O(n), where n is the number of sub-filters",
        args: &[KEY],
    },
    ModuleDoc {
        name: "bf.scandump",
        since: "1.0.0",
        complexity: CAPACITY,
        args: &[KEY, arg("iterator", Type::Integer)],
    },
    ModuleDoc {
        name: "bf.loadchunk",
        since: "1.0.0",
        complexity: CAPACITY,
        args: &[
            KEY,
            arg("iterator", Type::Integer),
            arg("data", Type::String),
        ],
    },
];

fn field(name: &'static str, value: Reply) -> (Reply, Reply) {
    (Reply::bulk(name), value)
}

fn arg_doc(a: &Arg) -> Reply {
    let mut fields = vec![
        field("name", Reply::bulk(a.name)),
        field("type", Reply::bulk(a.kind.name())),
    ];
    if let Type::Key = a.kind {
        fields.push(field("key_spec_index", Reply::Integer(0)));
    }
    if let Some(t) = a.token {
        fields.push(field("token", Reply::bulk(t)));
    }
    if !a.flags.is_empty() {
        let flags = a.flags.iter().map(|f| Reply::simple(f)).collect();
        fields.push(field("flags", Reply::Set(flags)));
    }
    if !a.args.is_empty() {
        fields.push(field(
            "arguments",
            Reply::Array(a.args.iter().map(arg_doc).collect()),
        ));
    }
    Reply::Map(fields)
}

/// A command's entry in `COMMAND DOCS`.
pub(crate) fn command_doc(s: &Spec) -> Reply {
    let summary = field("summary", Reply::bulk(s.summary));
    let Some(d) = REDISBLOOM.iter().find(|d| d.name == s.name) else {
        return Reply::Map(vec![
            summary,
            field("since", Reply::bulk("1.0.0")),
            field("group", Reply::bulk("generic")),
        ]);
    };
    Reply::Map(vec![
        summary,
        field("since", Reply::bulk(d.since)),
        field("group", Reply::bulk("module")),
        field("complexity", Reply::bulk(d.complexity)),
        field("module", Reply::bulk("bf")),
        field(
            "arguments",
            Reply::Array(d.args.iter().map(arg_doc).collect()),
        ),
    ])
}
