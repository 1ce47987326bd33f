//! `BF.SCANDUMP key iter` and `BF.LOADCHUNK key iter data`: RedisBloom's
//! chunked dump format, so filters move between RedisBloom and seen in both
//! directions. Only filters with RedisBloom's (classic) layout have this
//! format.

use bytes::Bytes;
use seen_core::AnyFilter;
use seen_resp::Reply;

use super::context::Ctx;
use super::key_kind::{key_kind, KeyKind};
use super::replies::{store_error, wrong_arity, WRONGTYPE};
use crate::args::parse_i64;

pub(crate) fn scandump(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Reply {
    if args.len() != 3 {
        return wrong_arity("bf.scandump");
    }
    // The key is checked before the iterator, as RedisBloom does.
    match key_kind(ctx.shared, &args[1]) {
        Err(r) => return r,
        Ok(None) => return Reply::error("ERR not found"),
        Ok(Some(KeyKind::Bloom)) => {}
        Ok(Some(_)) => return Reply::error(WRONGTYPE),
    }
    let Some(iter) = parse_i64(&args[2]) else {
        return Reply::error("Second argument must be numeric");
    };
    let r = ctx.shared.store.with_filter(&args[1], |f| match f {
        AnyFilter::Scalable(s) => {
            if iter < 0 {
                Ok((0, Vec::new()))
            } else {
                s.redis_scandump(iter as u64).map_err(|e| e.to_string())
            }
        }
        _ => Err("this one has a fixed size (BF.EXPORT exports it)".to_string()),
    });
    match r {
        Err(e) => store_error(&e),
        Ok(None) => Reply::error("ERR not found"),
        Ok(Some(Ok((next, data)))) => Reply::Array(vec![
            Reply::Integer(i64::try_from(next).unwrap_or(i64::MAX)),
            Reply::Bulk(Bytes::from(data)),
        ]),
        Ok(Some(Err(why))) => Reply::error(format!(
            "ERR BF.SCANDUMP needs a filter with RedisBloom's layout (LAYOUT CLASSIC): {why}"
        )),
    }
}

pub(crate) fn loadchunk(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Reply {
    if args.len() != 4 {
        return wrong_arity("bf.loadchunk");
    }
    let Some(iter) = parse_i64(&args[2]) else {
        return Reply::error("ERR Second argument must be numeric");
    };
    let (key, data) = (&args[1], &args[3]);
    let kind = match key_kind(ctx.shared, key) {
        Err(r) => return r,
        Ok(k) => k,
    };
    let result = match kind {
        None if iter == 1 => {
            let shared = ctx.shared;
            shared
                .store
                .load_redis_header(key, data, shared.config.max_filter_bytes)
        }
        None => return Reply::error("ERR not found"),
        Some(KeyKind::Bloom) => match u64::try_from(iter) {
            Ok(iter) => ctx.shared.store.load_redis_chunk(key, iter, data),
            Err(_) => return Reply::error("ERR received bad data"),
        },
        Some(_) => return Reply::error(WRONGTYPE),
    };
    match result {
        Ok(()) => {
            ctx.dirty(1);
            Reply::ok()
        }
        Err(e) => refusal(&e),
    }
}

/// RedisBloom's reply to a header or chunk it does not take (a header too
/// large to allocate included); seen's reason goes to the log.
fn refusal(e: &seen_store::Error) -> Reply {
    use seen_core::{ChunkMisfit, ErrorKind as Core};
    let reply = match e.kind() {
        seen_store::ErrorKind::Filter(f) => match f.kind() {
            Core::ChunkMisfit { why, .. } => match why {
                ChunkMisfit::NoLink => "ERR invalid offset - no link found",
                ChunkMisfit::TooBig => "ERR invalid chunk - Too big for current filter",
                ChunkMisfit::BadIterator => "ERR received bad data",
            },
            _ => "ERR received bad data",
        },
        seen_store::ErrorKind::WrongKind(_) => "ERR received bad data",
        _ => return store_error(e),
    };
    tracing::info!("BF.LOADCHUNK refused: {e}");
    Reply::error(reply)
}
