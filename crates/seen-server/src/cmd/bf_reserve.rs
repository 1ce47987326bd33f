//! `BF.RESERVE key error_rate capacity [EXPANSION n] [NONSCALING]
//! [LAYOUT CLASSIC|BLOCKED|GUAVA]`, with RedisBloom 2.8's checks, order and
//! error texts. `LAYOUT` is seen's: `BLOCKED` keeps all of an item's bits
//! in one cache line (faster, about the same memory), `CLASSIC` (the
//! default) is RedisBloom's layout, which `BF.SCANDUMP` can export, and
//! `GUAVA` is Guava's `BloomFilter`, sized as Guava's `BloomFilter.create`
//! sizes it and of a fixed size as Guava's are (adds past its capacity go
//! on, at a rising error rate), which `BF.EXPORT key GUAVA` exports.

use bytes::Bytes;
use seen_core::Layout;
use seen_resp::Reply;
use seen_store::FilterSpec;

use super::context::Ctx;
use super::key_kind::key_kind;
use super::replies::{store_error, wrong_arity, WRONGTYPE};
use crate::args::{is, parse_f64, parse_i64};

/// Where a keyword is among the options (after the three fixed arguments).
fn find(args: &[Bytes], keyword: &str) -> Option<usize> {
    (4..args.len()).find(|&i| is(&args[i], keyword))
}

/// Parses `LAYOUT x` if present (seen's extension).
pub(crate) fn parse_layout(value: Option<&Bytes>) -> Result<Layout, Reply> {
    match value {
        None => Err(Reply::error(
            "ERR no layout (expected CLASSIC, BLOCKED or GUAVA)",
        )),
        Some(v) if is(v, "classic") => Ok(Layout::Classic),
        Some(v) if is(v, "blocked") => Ok(Layout::Blocked),
        Some(v) if is(v, "guava") => Ok(Layout::Guava),
        Some(v) => Err(Reply::error(format!(
            "ERR bad layout '{}' (expected CLASSIC, BLOCKED or GUAVA)",
            String::from_utf8_lossy(v)
        ))),
    }
}

/// What to create for the options given: a scalable chain, or for
/// `LAYOUT GUAVA` a filter of one fixed size, as Guava's are (an
/// `EXPANSION` is refused then).
pub(crate) fn spec_for(
    layout: Layout,
    capacity: u64,
    error_rate: f64,
    expansion: Option<u32>,
    nonscaling: bool,
    default_expansion: u32,
) -> Result<FilterSpec, Reply> {
    if layout == Layout::Guava {
        if expansion.is_some() {
            return Err(Reply::error(
                "ERR a filter of LAYOUT GUAVA does not scale (Guava's filters have one size): \
                 drop EXPANSION",
            ));
        }
        return Ok(FilterSpec::Bloom {
            capacity,
            error_rate,
            layout,
        });
    }
    Ok(FilterSpec::Scalable {
        capacity,
        error_rate,
        layout,
        expansion: expansion.unwrap_or(default_expansion),
        nonscaling,
    })
}

pub(crate) fn reserve(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Reply {
    if args.len() < 4 || args.len() > 9 {
        return wrong_arity("bf.reserve");
    }
    let Some(error_rate) = parse_f64(&args[2]) else {
        return Reply::error("ERR bad error rate");
    };
    if !(error_rate > 0.0 && error_rate < 1.0) {
        return Reply::error("ERR (0 < error rate range < 1) ");
    }
    let Some(capacity) = parse_i64(&args[3]) else {
        return Reply::error("ERR bad capacity");
    };
    if capacity <= 0 {
        return Reply::error("ERR (capacity should be larger than 0)");
    }
    // `bf-expansion-factor` 0 makes filters not scale unless EXPANSION
    // says otherwise.
    let defaults = ctx.shared.bf_defaults();
    let nonscaling = find(args, "NONSCALING").is_some() || defaults.expansion() == 0;
    let mut expansion = None;
    if let Some(at) = find(args, "EXPANSION") {
        if at + 1 == args.len() {
            return Reply::error("ERR no expansion");
        }
        if nonscaling {
            return Reply::error("Nonscaling filters cannot expand");
        }
        let Some(e) = parse_i64(&args[at + 1]) else {
            return Reply::error("ERR bad expansion");
        };
        if e < 1 {
            return Reply::error("ERR expansion should be greater or equal to 1");
        }
        expansion = Some(u32::try_from(e).unwrap_or(u32::MAX));
    }
    let layout = match find(args, "LAYOUT") {
        Some(at) => match parse_layout(args.get(at + 1)) {
            Ok(l) => l,
            Err(r) => return r,
        },
        None => Layout::Classic,
    };
    let key = &args[1];
    match key_kind(ctx.shared, key) {
        Err(r) => return r,
        Ok(Some(super::key_kind::KeyKind::Bloom)) => return Reply::error("ERR item exists"),
        Ok(Some(_)) => return Reply::error(WRONGTYPE),
        Ok(None) => {}
    }
    let default_expansion = defaults.expansion().max(1);
    let spec = match spec_for(
        layout,
        capacity as u64,
        error_rate,
        expansion,
        nonscaling,
        default_expansion,
    ) {
        Ok(s) => s,
        Err(r) => return r,
    };
    match create(ctx, key, &spec) {
        Ok(()) => {
            ctx.dirty(1);
            Reply::ok()
        }
        Err(r) => r,
    }
}

/// Creates a filter within the memory limits, `max-filter-bytes` and
/// `maxmemory` for all filters together, which the store keeps (durably:
/// creation is rare, so it waits for its own log record). A filter the
/// limits or the allocator refuse gets RedisBloom's "Insufficient memory"
/// reply, seen's reason going to the log.
pub(crate) fn create(ctx: &mut Ctx<'_>, key: &[u8], spec: &FilterSpec) -> Result<(), Reply> {
    ctx.shared
        .store
        .create(key, spec)
        .map_err(|e| not_created(key, &e))
}

/// The reply to a filter the store did not make (created or imported):
/// RedisBloom's "Insufficient memory" for one the limits or the allocator
/// refused, seen's reason going to the log.
pub(crate) fn not_created(key: &[u8], e: &seen_store::Error) -> Reply {
    use seen_core::ErrorKind as Core;
    match e.kind() {
        seen_store::ErrorKind::Filter(f) => {
            tracing::warn!(key = %String::from_utf8_lossy(key), "filter not created: {f}");
            match f.kind() {
                Core::TooLarge { .. } | Core::OutOfMemory(_) => {
                    Reply::error("ERR Insufficient memory to create filter")
                }
                _ => Reply::error("ERR could not create filter"),
            }
        }
        _ => store_error(e),
    }
}
