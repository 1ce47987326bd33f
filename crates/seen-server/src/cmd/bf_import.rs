//! `BF.IMPORT key GUAVA|SEEN data` and `BF.EXPORT key GUAVA|SEEN`, seen's:
//! a whole filter in one bulk string, in Guava's `BloomFilter.writeTo`
//! format or seen's byte format (a `seen dedup --state` file), into a new
//! key and out of one. A Java service's Guava filter comes in without an
//! item added again (`redis-cli -x BF.IMPORT crawl GUAVA < crawl.guava`),
//! and goes back out bit for bit.
//!
//! An import is all or nothing, through a crash too (`Store::import`). Its
//! size is bounded by `proto-max-bulk-len` (512 MiB by default) and the
//! memory limits (`max-filter-bytes`, what `maxmemory` leaves); while it
//! runs it holds the argument, the filter and the filter's encoding for the
//! log, about three times the filter. An export holds the filter's readers'
//! lock while it encodes (adds to that filter wait, lookups do not), and
//! the encoding until it is sent. Both run as blocking work, off the
//! connections' threads.

use bytes::Bytes;
use seen_core::{guava, AnyFilter, DecodeOptions};
use seen_resp::Reply;

use super::bf_reserve::not_created;
use super::context::Ctx;
use super::key_kind::{key_kind, KeyKind};
use super::replies::{store_error, wrong_arity, WRONGTYPE};
use crate::args::is;
use crate::blocking::blocking;

/// The file formats of a whole filter.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Format {
    Guava,
    Seen,
}

fn parse_format(arg: &[u8]) -> Result<Format, Reply> {
    if is(arg, "guava") {
        Ok(Format::Guava)
    } else if is(arg, "seen") {
        Ok(Format::Seen)
    } else {
        Err(Reply::error(format!(
            "ERR bad format '{}' (expected GUAVA or SEEN)",
            String::from_utf8_lossy(arg)
        )))
    }
}

/// The filter in `data`, refused with a reply if it is not one whole
/// filter of `format` within `max_bytes`.
fn read(format: Format, data: &[u8], max_bytes: u64) -> Result<AnyFilter, Reply> {
    let bad = |what: &str, e: seen_core::Error| match e.kind() {
        seen_core::ErrorKind::TooLarge { .. } => {
            Reply::error("ERR Insufficient memory to create filter")
        }
        _ => Reply::error(format!("ERR not a {what}: {e}")),
    };
    match format {
        Format::Guava => guava::from_bytes(data, max_bytes)
            .map(AnyFilter::Bloom)
            .map_err(|e| bad("Guava filter (BloomFilter.writeTo's format)", e)),
        Format::Seen => {
            let mut rest = data;
            // A filter's words are in its bytes: a header that claims more
            // than the data holds is refused before anything is allocated.
            let opts = DecodeOptions {
                max_bytes: max_bytes.min(data.len() as u64),
            };
            let f = seen_core::decode(&mut rest, &opts).map_err(|e| match e.kind() {
                seen_core::ErrorKind::TooLarge { needed, .. } if *needed <= max_bytes => {
                    Reply::error(format!(
                        "ERR not a seen filter: it is truncated (its header holds {needed} \
                         bytes of bits, the data {} bytes in all)",
                        data.len()
                    ))
                }
                _ => bad("seen filter", e),
            })?;
            if !rest.is_empty() {
                return Err(Reply::error(format!(
                    "ERR not a seen filter: {} bytes follow it",
                    rest.len()
                )));
            }
            match f {
                AnyFilter::Counting(_) => Err(Reply::error(
                    "ERR BF.IMPORT takes Bloom filters (fixed or scalable), not counting filters",
                )),
                f => Ok(f),
            }
        }
    }
}

pub(crate) fn import(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Reply {
    if args.len() != 4 {
        return wrong_arity("bf.import");
    }
    let format = match parse_format(&args[2]) {
        Ok(f) => f,
        Err(r) => return r,
    };
    let key = &args[1];
    match key_kind(ctx.shared, key) {
        Err(r) => return r,
        Ok(Some(KeyKind::Bloom)) => return Reply::error("ERR item exists"),
        Ok(Some(_)) => return Reply::error(WRONGTYPE),
        Ok(None) => {}
    }
    let store = &ctx.shared.store;
    let max_bytes = ctx
        .shared
        .config
        .max_filter_bytes
        .min(store.memory_available());
    let imported = blocking(|| {
        let filter = read(format, &args[3], max_bytes)?;
        Ok(store.import(key, filter, max_bytes))
    });
    let imported = match imported {
        Ok(i) => i,
        Err(r) => return r,
    };
    match imported {
        Ok(()) => {
            ctx.dirty(1);
            Reply::ok()
        }
        Err(e) => not_created(key, &e),
    }
}

pub(crate) fn export(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Reply {
    if args.len() != 3 {
        return wrong_arity("bf.export");
    }
    let format = match parse_format(&args[2]) {
        Ok(f) => f,
        Err(r) => return r,
    };
    let written = blocking(|| {
        ctx.shared.store.with_filter(&args[1], |f| {
            // The encoding's size, near enough that the buffer is not regrown.
            let bits_bytes = match f {
                AnyFilter::Bloom(b) => b.memory_bytes(),
                AnyFilter::Scalable(s) => s.memory_bytes(),
                _ => 0,
            };
            let mut out = Vec::with_capacity(bits_bytes as usize + 64 * 1024);
            let result = match (format, f) {
                (_, AnyFilter::Counting(_)) => return Err(Reply::error(WRONGTYPE)),
                (Format::Seen, f) => f.encode(&mut out),
                (Format::Guava, AnyFilter::Bloom(b))
                    if guava::strategy_ordinal(b.layout()).is_some() =>
                {
                    guava::write(b, &mut out)
                }
                (Format::Guava, _) => {
                    return Err(Reply::error(
                        "ERR only a filter of Guava's layout exports to Guava's format \
                     (BF.RESERVE ... LAYOUT GUAVA, or BF.IMPORT ... GUAVA); this one's bits are \
                     not where Guava looks for them",
                    ))
                }
            };
            result
                .map(|()| out)
                .map_err(|e| Reply::error(format!("ERR {e}")))
        })
    });
    match written {
        Err(e) => store_error(&e),
        Ok(None) => Reply::error("ERR not found"),
        Ok(Some(Err(r))) => r,
        Ok(Some(Ok(bytes))) => Reply::Bulk(Bytes::from(bytes)),
    }
}
