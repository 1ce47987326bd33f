//! Whole-filter expiry: `EXPIRE`, `PEXPIRE`, `EXPIREAT`, `PEXPIREAT`
//! (with `NX`/`XX`/`GT`/`LT`), `TTL`, `PTTL`, `PERSIST`. A crawler that
//! forgets everything after 30 days runs `EXPIRE urls 2592000`.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use seen_resp::Reply;

use super::context::Ctx;
use super::replies::{not_integer, store_error};
use crate::args::{is, parse_i64};

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// Milliseconds since the epoch of a key's expiry; `Ok(None)` no key,
/// `Ok(Some(None))` no expiry.
fn expiry_ms(ctx: &Ctx<'_>, key: &[u8]) -> Result<Option<Option<i64>>, Reply> {
    match ctx.shared.store.expires_at(key) {
        Err(e) => Err(store_error(&e)),
        Ok(None) => Ok(None),
        Ok(Some(None)) => Ok(Some(None)),
        Ok(Some(Some(t))) => Ok(Some(Some(
            t.duration_since(UNIX_EPOCH)
                .map(|d| d.as_millis() as i64)
                .unwrap_or(0),
        ))),
    }
}

/// `to_ms` turns the argument into an absolute expiry in milliseconds.
fn generic(ctx: &mut Ctx<'_>, args: &[Bytes], name: &str, to_ms: fn(i64) -> Option<i64>) -> Reply {
    let Some(n) = parse_i64(&args[2]) else {
        return not_integer();
    };
    let (mut nx, mut xx, mut gt, mut lt) = (false, false, false, false);
    for a in &args[3..] {
        if is(a, "nx") {
            nx = true;
        } else if is(a, "xx") {
            xx = true;
        } else if is(a, "gt") {
            gt = true;
        } else if is(a, "lt") {
            lt = true;
        } else {
            return Reply::error(format!(
                "ERR Unsupported option {}",
                String::from_utf8_lossy(a)
            ));
        }
    }
    if nx && (xx || gt || lt) {
        return Reply::error("ERR NX and XX, GT or LT options at the same time are not compatible");
    }
    if gt && lt {
        return Reply::error("ERR GT and LT options at the same time are not compatible");
    }
    let Some(at_ms) = to_ms(n) else {
        return Reply::error(format!("ERR invalid expire time in '{name}' command"));
    };
    let current = match expiry_ms(ctx, &args[1]) {
        Err(r) => return r,
        Ok(None) => return Reply::Integer(0),
        Ok(Some(c)) => c,
    };
    let allowed = match current {
        None => !xx && !gt,
        Some(cur) => !nx && (!gt || at_ms > cur) && (!lt || at_ms < cur),
    };
    if !allowed {
        return Reply::Integer(0);
    }
    let when = if at_ms <= 0 {
        UNIX_EPOCH + Duration::from_millis(1)
    } else {
        UNIX_EPOCH + Duration::from_millis(at_ms as u64)
    };
    match ctx.shared.store.expire_at(&args[1], Some(when)) {
        Ok(true) => {
            ctx.dirty(1);
            Reply::Integer(1)
        }
        Ok(false) => Reply::Integer(0),
        Err(e) => store_error(&e),
    }
}

pub(crate) fn expire(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Reply {
    generic(ctx, args, "expire", |s| {
        s.checked_mul(1000)?.checked_add(now_ms())
    })
}

pub(crate) fn pexpire(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Reply {
    generic(ctx, args, "pexpire", |ms| ms.checked_add(now_ms()))
}

pub(crate) fn expireat(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Reply {
    generic(ctx, args, "expireat", |s| s.checked_mul(1000))
}

pub(crate) fn pexpireat(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Reply {
    generic(ctx, args, "pexpireat", Some)
}

fn ttl_generic(ctx: &mut Ctx<'_>, args: &[Bytes], ms: bool) -> Reply {
    match expiry_ms(ctx, &args[1]) {
        Err(r) => r,
        Ok(None) => Reply::Integer(-2),
        Ok(Some(None)) => Reply::Integer(-1),
        Ok(Some(Some(at))) => {
            let left = (at - now_ms()).max(0);
            Reply::Integer(if ms { left } else { (left + 500) / 1000 })
        }
    }
}

pub(crate) fn ttl(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Reply {
    ttl_generic(ctx, args, false)
}

pub(crate) fn pttl(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Reply {
    ttl_generic(ctx, args, true)
}

pub(crate) fn persist(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Reply {
    match expiry_ms(ctx, &args[1]) {
        Err(r) => r,
        Ok(None) | Ok(Some(None)) => Reply::Integer(0),
        Ok(Some(Some(_))) => match ctx.shared.store.expire_at(&args[1], None) {
            Ok(true) => {
                ctx.dirty(1);
                Reply::Integer(1)
            }
            Ok(false) => Reply::Integer(0),
            Err(e) => store_error(&e),
        },
    }
}
