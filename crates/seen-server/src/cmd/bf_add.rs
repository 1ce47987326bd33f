//! `BF.ADD`, `BF.MADD` and `BF.INSERT`: add items, creating the filter
//! first where RedisBloom does.

use bytes::Bytes;
use seen_core::Layout;
use seen_resp::Reply;
use seen_store::FilterSpec;

use super::bf_reserve::{parse_layout, spec_for};
use super::context::Ctx;
use super::key_kind::{key_kind, KeyKind};
use super::replies::{add_stopped, store_error, wrong_arity, WRONGTYPE};
use crate::args::{byte_at, parse_f64, parse_i64};

/// What `BF.ADD`/`BF.MADD` create when the key is missing: the `bf-*`
/// settings' filter (by default RedisBloom's: error 0.01, capacity 100,
/// expansion 2), in RedisBloom's layout.
fn default_spec(ctx: &Ctx<'_>) -> FilterSpec {
    let d = ctx.shared.bf_defaults();
    FilterSpec::Scalable {
        capacity: d.initial_size(),
        error_rate: d.error_rate(),
        layout: Layout::Classic,
        expansion: d.expansion().max(1),
        nonscaling: d.expansion() == 0,
    }
}

pub(crate) fn add(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Reply {
    if args.len() != 3 {
        return wrong_arity("bf.add");
    }
    match add_items(ctx, &args[1], &args[2..], Some(&default_spec(ctx))) {
        Ok((new, None)) => Reply::Bool(new[0]),
        Ok((_, Some(err))) => err,
        Err(r) => r,
    }
}

/// The adds of consecutive `BF.ADD`/`BF.MADD` commands of one pipeline, as
/// one batch: whether each item was new, and the error that stopped the
/// batch, if one did.
pub(crate) fn add_batch(
    ctx: &mut Ctx<'_>,
    key: &[u8],
    items: &[Bytes],
) -> Result<(Vec<bool>, Option<Reply>), Reply> {
    add_items(ctx, key, items, Some(&default_spec(ctx)))
}

pub(crate) fn madd(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Reply {
    if args.len() < 3 {
        return wrong_arity("bf.madd");
    }
    multi(ctx, &args[1], &args[2..], Some(&default_spec(ctx)))
}

/// The array reply of a multi-add: one boolean per item added, then the
/// error that stopped the batch, if one did (RedisBloom's shape).
fn multi(ctx: &mut Ctx<'_>, key: &[u8], items: &[Bytes], create: Option<&FilterSpec>) -> Reply {
    match add_items(ctx, key, items, create) {
        Ok((new, stopped)) => {
            let mut out: Vec<Reply> = new.into_iter().map(Reply::Bool).collect();
            out.extend(stopped);
            Reply::Array(out)
        }
        Err(r) => r,
    }
}

/// Adds items; `Err` is a reply for the whole command, the optional reply
/// in `Ok` the error that stopped the batch after the items in the vector.
fn add_items(
    ctx: &mut Ctx<'_>,
    key: &[u8],
    items: &[Bytes],
    create: Option<&FilterSpec>,
) -> Result<(Vec<bool>, Option<Reply>), Reply> {
    let kind = key_kind(ctx.shared, key)?;
    match kind {
        Some(KeyKind::Bloom) => {}
        Some(_) => return Err(Reply::error(WRONGTYPE)),
        None => match create {
            None => return Err(Reply::error("ERR not found")),
            Some(spec) => match super::bf_reserve::create(ctx, key, spec) {
                Ok(()) => ctx.dirty(1),
                // Someone else created it in between: add to theirs.
                Err(Reply::Error(e)) if &e[..] == b"ERR item exists" => {}
                Err(r) => return Err(r),
            },
        },
    }
    let refs: Vec<&[u8]> = items.iter().map(|b| &b[..]).collect();
    match ctx.shared.store.add_pending(key, &refs, None, 0) {
        Ok((outcome, pending)) => {
            ctx.depends_on(pending);
            let added = outcome.new.iter().filter(|&&n| n).count() as u64;
            ctx.dirty(added);
            Ok((outcome.new, outcome.stopped.as_ref().map(add_stopped)))
        }
        Err(e) => Err(store_error(&e)),
    }
}

/// `BF.INSERT key [CAPACITY c] [ERROR e] [EXPANSION n] [NOCREATE]
/// [NONSCALING] [LAYOUT CLASSIC|BLOCKED|GUAVA] ITEMS item...`, parsed as
/// RedisBloom 2.8 does: options by their first letters, checked after the
/// scan.
pub(crate) fn insert(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Reply {
    if args.len() < 4 {
        return wrong_arity("bf.insert");
    }
    let defaults = ctx.shared.bf_defaults();
    let mut capacity = i64::try_from(defaults.initial_size()).unwrap_or(i64::MAX);
    let mut error_rate = defaults.error_rate();
    let mut expansion = None;
    let mut autocreate = true;
    let mut nonscaling = false;
    let mut layout = Layout::Classic;
    let mut items_at = None;
    let mut pos = 2;
    while pos < args.len() && items_at.is_none() {
        let arg = &args[pos];
        match byte_at(arg, 0) {
            b'i' => {
                pos += 1;
                items_at = Some(pos);
            }
            b'e' => {
                pos += 1;
                if pos == args.len() {
                    return wrong_arity("bf.insert");
                }
                if byte_at(arg, 1) == b'r' {
                    match parse_f64(&args[pos]) {
                        Some(v) => error_rate = v,
                        None => return Reply::error("Bad error rate"),
                    }
                } else {
                    match parse_i64(&args[pos]) {
                        Some(v) => expansion = Some(v),
                        None => return Reply::error("Bad expansion"),
                    }
                }
                pos += 1;
            }
            b'c' => {
                pos += 1;
                if pos == args.len() {
                    return wrong_arity("bf.insert");
                }
                match parse_i64(&args[pos]) {
                    Some(v) => capacity = v,
                    None => return Reply::error("Bad capacity"),
                }
                pos += 1;
            }
            b'n' => {
                if byte_at(arg, 2) == b'c' {
                    autocreate = false;
                } else {
                    nonscaling = true;
                }
                pos += 1;
            }
            b'l' => {
                // seen's extension: LAYOUT CLASSIC|BLOCKED|GUAVA.
                match parse_layout(args.get(pos + 1)) {
                    Ok(l) => layout = l,
                    Err(r) => return r,
                }
                pos += 2;
            }
            _ => return Reply::error("Unknown argument received"),
        }
    }
    let Some(items_at) = items_at.filter(|&i| i < args.len()) else {
        return wrong_arity("bf.insert");
    };
    // Without EXPANSION, `bf-expansion-factor` (0: not scaling).
    if expansion.is_none() {
        nonscaling |= defaults.expansion() == 0;
    }
    if !(error_rate > 0.0 && error_rate < 1.0) || capacity < 1 || expansion.is_some_and(|e| e < 1) {
        return Reply::error("Bad argument received");
    }
    let expansion = expansion.map(|e| u32::try_from(e).unwrap_or(u32::MAX));
    let spec = match spec_for(
        layout,
        capacity as u64,
        error_rate,
        expansion,
        nonscaling,
        defaults.expansion().max(1),
    ) {
        Ok(s) => s,
        Err(r) => return r,
    };
    multi(
        ctx,
        &args[1],
        &args[items_at..],
        autocreate.then_some(&spec),
    )
}
