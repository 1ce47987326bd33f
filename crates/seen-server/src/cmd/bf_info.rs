//! `BF.INFO key [CAPACITY|SIZE|FILTERS|ITEMS|EXPANSION]` and `BF.CARD`,
//! as RedisBloom answers them, and seen's `BF.INFO key HEALTH`.

use bytes::Bytes;
use seen_core::{AnyFilter, Layout};
use seen_resp::{Protocol, Reply};

use super::context::Ctx;
use super::key_kind::KeyKind;
use super::replies::{store_error, wrong_arity, WRONGTYPE};
use crate::args::is;

/// The five numbers `BF.INFO` reports, RedisBloom's way.
struct Info {
    capacity: u64,
    size: u64,
    filters: u64,
    items: u64,
    /// `None` for a filter that does not grow.
    expansion: Option<u64>,
}

fn info_of(f: &AnyFilter) -> Option<Info> {
    match f {
        AnyFilter::Scalable(s) => Some(Info {
            capacity: s.capacity(),
            size: if s.layout() == Layout::Classic {
                s.redis_info_size()
            } else {
                32 + 64 * s.links() as u64 + s.memory_bytes()
            },
            filters: s.links() as u64,
            items: s.len(),
            expansion: (!s.is_nonscaling()).then_some(u64::from(s.expansion())),
        }),
        AnyFilter::Bloom(b) => Some(Info {
            capacity: b.capacity(),
            size: 32 + 64 + b.memory_bytes(),
            filters: 1,
            items: b.len(),
            expansion: None,
        }),
        _ => None,
    }
}

fn int(v: u64) -> Reply {
    Reply::Integer(i64::try_from(v).unwrap_or(i64::MAX))
}

/// `BF.INFO key HEALTH` (seen's): what an operator alerts on, from one
/// pass over the filter's bits: its fill, the items estimated from it,
/// and its error rate now against the one it was sized for.
fn health(ctx: &mut Ctx<'_>, key: &[u8]) -> Reply {
    let got = ctx.shared.store.with_filter(key, |f| match f {
        AnyFilter::Counting(_) => None,
        f => {
            let stats = f.stats();
            Some((f.is_over_capacity(&stats), stats))
        }
    });
    let (over, s) = match got {
        Err(e) => return store_error(&e),
        Ok(None) => return Reply::error("ERR not found"),
        Ok(Some(None)) => return Reply::error(WRONGTYPE),
        Ok(Some(Some(h))) => h,
    };
    Reply::Map(vec![
        (Reply::simple("Capacity"), int(s.capacity)),
        (Reply::simple("Number of items inserted"), int(s.items)),
        (Reply::simple("Bits"), int(s.bits)),
        (Reply::simple("Bits set"), int(s.bits_set)),
        (Reply::simple("Fill ratio"), Reply::Double(s.fill_ratio)),
        (
            Reply::simple("Estimated items"),
            Reply::Double(s.estimated_items),
        ),
        (Reply::simple("Error rate"), Reply::Double(s.error_rate)),
        (
            Reply::simple("Error rate now"),
            Reply::Double(s.current_fpp),
        ),
        (
            Reply::simple("Over capacity"),
            Reply::Integer(i64::from(over)),
        ),
    ])
}

pub(crate) fn info(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Reply {
    if args.len() != 2 && args.len() != 3 {
        return wrong_arity("bf.info");
    }
    if args.get(2).is_some_and(|a| is(a, "health")) {
        return health(ctx, &args[1]);
    }
    let info = match ctx.shared.store.with_filter(&args[1], info_of) {
        Err(e) => return store_error(&e),
        Ok(None) => return Reply::error("ERR not found"),
        Ok(Some(None)) => return Reply::error(WRONGTYPE),
        Ok(Some(Some(i))) => i,
    };
    let expansion = info.expansion.map_or(Reply::Null, int);
    let fields = [
        ("Capacity", "capacity", int(info.capacity)),
        ("Size", "size", int(info.size)),
        ("Number of filters", "filters", int(info.filters)),
        ("Number of items inserted", "items", int(info.items)),
        ("Expansion rate", "expansion", expansion),
    ];
    match args.get(2) {
        None => Reply::Map(
            fields
                .into_iter()
                .map(|(label, _, v)| (Reply::simple(label), v))
                .collect(),
        ),
        Some(which) => match fields.into_iter().find(|(_, opt, _)| is(which, opt)) {
            None => Reply::error("Invalid information value"),
            Some((label, _, v)) => match ctx.client.proto {
                Protocol::Resp2 => Reply::Array(vec![v]),
                Protocol::Resp3 => Reply::Map(vec![(Reply::simple(label), v)]),
            },
        },
    }
}

pub(crate) fn card(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Reply {
    if args.len() != 2 {
        return wrong_arity("bf.card");
    }
    match ctx
        .shared
        .store
        .with_filter(&args[1], |f| (KeyKind::of(f), info_of(f).map(|i| i.items)))
    {
        Err(e) => store_error(&e),
        Ok(None) => Reply::Integer(0),
        Ok(Some((KeyKind::Bloom, Some(items)))) => int(items),
        Ok(Some(_)) => Reply::error(WRONGTYPE),
    }
}
