//! `BF.EXISTS` and `BF.MEXISTS`. A missing key, or a key of another type,
//! answers "no" for every item (RedisBloom does the same).

use bytes::Bytes;
use seen_resp::Reply;

use super::context::Ctx;
use super::key_kind::{key_kind, KeyKind};
use super::replies::{store_error, wrong_arity};

fn lookup(ctx: &mut Ctx<'_>, key: &[u8], items: &[Bytes]) -> Result<Vec<bool>, Reply> {
    if key_kind(ctx.shared, key)? != Some(KeyKind::Bloom) {
        ctx.shared
            .stats
            .misses
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        return Ok(vec![false; items.len()]);
    }
    let refs: Vec<&[u8]> = items.iter().map(|b| &b[..]).collect();
    match ctx.shared.store.contains_pending(key, &refs) {
        Ok((found, pending)) => {
            // "Present" may rest on an add not yet durable: answer only
            // once it is.
            ctx.depends_on(pending);
            ctx.shared
                .stats
                .hits
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            Ok(found.unwrap_or_else(|| vec![false; items.len()]))
        }
        Err(e) => Err(store_error(&e)),
    }
}

pub(crate) fn exists(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Reply {
    if args.len() != 3 {
        return wrong_arity("bf.exists");
    }
    match lookup(ctx, &args[1], &args[2..]) {
        Ok(v) => Reply::Bool(v[0]),
        Err(r) => r,
    }
}

/// The lookups of consecutive `BF.EXISTS`/`BF.MEXISTS` commands of one
/// pipeline, as one batch.
pub(crate) fn lookup_batch(
    ctx: &mut Ctx<'_>,
    key: &[u8],
    items: &[Bytes],
) -> Result<Vec<bool>, Reply> {
    lookup(ctx, key, items)
}

pub(crate) fn mexists(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Reply {
    if args.len() < 3 {
        return wrong_arity("bf.mexists");
    }
    match lookup(ctx, &args[1], &args[2..]) {
        Ok(v) => Reply::Array(v.into_iter().map(Reply::Bool).collect()),
        Err(r) => r,
    }
}
