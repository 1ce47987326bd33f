//! The keyspace: `DBSIZE`, `EXISTS`, `DEL`/`UNLINK`, `TYPE`, `KEYS`,
//! `SCAN`, `FLUSHDB`/`FLUSHALL`. Every key is a filter.

use bytes::Bytes;
use seen_resp::Reply;

use super::context::Ctx;
use super::key_kind::key_kind;
use super::replies::{not_integer, store_error, syntax_error};
use crate::args::{is, parse_i64};
use crate::glob;

pub(crate) fn dbsize(ctx: &mut Ctx<'_>, _args: &[Bytes]) -> Reply {
    Reply::Integer(ctx.shared.store.names().len() as i64)
}

pub(crate) fn exists(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Reply {
    let mut n = 0;
    for k in &args[1..] {
        match key_kind(ctx.shared, k) {
            Ok(Some(_)) => n += 1,
            Ok(None) => {}
            Err(r) => return r,
        }
    }
    Reply::Integer(n)
}

pub(crate) fn del(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Reply {
    let mut n = 0;
    for k in &args[1..] {
        match ctx.shared.store.delete(k) {
            Ok(true) => n += 1,
            Ok(false) => {}
            Err(e) => return store_error(&e),
        }
    }
    ctx.dirty(n as u64);
    Reply::Integer(n)
}

pub(crate) fn type_(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Reply {
    match key_kind(ctx.shared, &args[1]) {
        Ok(Some(k)) => Reply::simple(k.type_name()),
        Ok(None) => Reply::simple("none"),
        Err(r) => r,
    }
}

pub(crate) fn keys(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Reply {
    let mut names = ctx.shared.store.names();
    names.sort();
    Reply::Array(
        names
            .into_iter()
            .filter(|n| glob::matches(&args[1], n, false))
            .map(|n| Reply::Bulk(Bytes::from(n)))
            .collect(),
    )
}

/// A key's place in `SCAN` order: a hash of the name, so that the cursor
/// stays meaningful while keys come and go (a key present for the whole
/// scan is returned at least once, as Redis promises).
fn scan_pos(name: &[u8]) -> u64 {
    // 63 bits: cursors stay positive in every client's integer type.
    seen_core::HashAlgorithm::Xxh3_128.hash(name, 0).lo >> 1
}

pub(crate) fn scan(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Reply {
    let Some(cursor) = parse_i64(&args[1]).and_then(|c| u64::try_from(c).ok()) else {
        return Reply::error("ERR invalid cursor");
    };
    let mut pattern: Option<&Bytes> = None;
    let mut count = 10usize;
    let mut type_filter: Option<&Bytes> = None;
    let mut i = 2;
    while i < args.len() {
        let Some(value) = args.get(i + 1) else {
            return syntax_error();
        };
        if is(&args[i], "match") {
            pattern = Some(value);
        } else if is(&args[i], "count") {
            match parse_i64(value) {
                Some(c) if c >= 1 => count = c as usize,
                Some(_) => return syntax_error(),
                None => return not_integer(),
            }
        } else if is(&args[i], "type") {
            type_filter = Some(value);
        } else {
            return syntax_error();
        }
        i += 2;
    }
    let mut all: Vec<(u64, Vec<u8>)> = ctx
        .shared
        .store
        .names()
        .into_iter()
        .map(|n| (scan_pos(&n), n))
        .filter(|(p, _)| *p >= cursor)
        .collect();
    all.sort();
    let mut out = Vec::new();
    let mut next = 0u64;
    let mut taken = 0usize;
    let mut idx = 0;
    while idx < all.len() {
        // Never split names of equal position between two calls.
        let pos = all[idx].0;
        if taken >= count {
            next = pos;
            break;
        }
        while idx < all.len() && all[idx].0 == pos {
            let name = &all[idx].1;
            taken += 1;
            let keep = pattern.is_none_or(|p| glob::matches(p, name, false))
                && type_filter.is_none_or(|t| {
                    matches!(key_kind(ctx.shared, name), Ok(Some(k)) if t.eq_ignore_ascii_case(k.type_name().as_bytes()))
                });
            if keep {
                out.push(Reply::Bulk(Bytes::from(name.clone())));
            }
            idx += 1;
        }
    }
    Reply::Array(vec![
        Reply::Bulk(Bytes::from(next.to_string())),
        Reply::Array(out),
    ])
}

pub(crate) fn flush(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Reply {
    if args.len() > 2 || (args.len() == 2 && !is(&args[1], "async") && !is(&args[1], "sync")) {
        return syntax_error();
    }
    let mut n = 0;
    for name in ctx.shared.store.names() {
        match ctx.shared.store.delete(&name) {
            Ok(_) => n += 1,
            Err(e) => return store_error(&e),
        }
    }
    ctx.dirty(n);
    Reply::ok()
}
