//! `BF.DEBUG key`: RedisBloom's sizing report, `size:<items>` and then one
//! line per sub-filter, exactly as RedisBloom prints it
//! (`BFDebug_RedisCommand` in its `src/rebloom.c`):
//!
//! ```text
//! bytes:16 bits:128 hashes:8 hashwidth:64 capacity:10 size:10 ratio:0.005
//! ```
//!
//! A filter of seen's blocked layout prints the same fields for its links,
//! followed by ` layout:blocked`; its `bytes` is the memory its array takes
//! (whole 64-byte blocks). A Guava-layout filter's line ends with
//! ` layout:guava` (or `guava32`, Guava's older strategy).

use bytes::Bytes;
use seen_core::{AnyFilter, Layout, LinkInfo};
use seen_resp::Reply;

use super::context::Ctx;
use super::replies::{store_error, wrong_arity, WRONGTYPE};

pub(crate) fn debug(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Reply {
    if args.len() != 2 {
        return wrong_arity("bf.debug");
    }
    let lines = match ctx.shared.store.with_filter(&args[1], report) {
        Err(e) => return store_error(&e),
        Ok(None) => return Reply::error("ERR not found"),
        Ok(Some(None)) => return Reply::error(WRONGTYPE),
        Ok(Some(Some(lines))) => lines,
    };
    Reply::Array(lines.into_iter().map(Reply::bulk).collect())
}

/// The report's lines, or `None` for a filter `BF.*` does not take.
fn report(f: &AnyFilter) -> Option<Vec<String>> {
    let (items, layout, links) = match f {
        AnyFilter::Scalable(s) => (s.len(), s.layout(), s.link_info()),
        AnyFilter::Bloom(b) => {
            let link = LinkInfo {
                capacity: b.capacity(),
                error_rate: b.error_rate(),
                items: b.len(),
                size: 0,
                bits: b.bits(),
                hashes: b.hashes(),
                bytes: b.memory_bytes(),
            };
            (b.len(), b.layout(), vec![link])
        }
        _ => return None,
    };
    let mut lines = vec![format!("size:{items}")];
    lines.extend(links.iter().map(|l| link_line(l, layout)));
    Some(lines)
}

fn link_line(l: &LinkInfo, layout: Layout) -> String {
    let (bytes, suffix) = match layout {
        Layout::Classic => (l.bits / 8, ""),
        Layout::Guava => (l.bits / 8, " layout:guava"),
        Layout::Guava32 => (l.bits / 8, " layout:guava32"),
        _ => (l.bytes, " layout:blocked"),
    };
    format!(
        "bytes:{bytes} bits:{} hashes:{} hashwidth:64 capacity:{} size:{} ratio:{}{suffix}",
        l.bits,
        l.hashes,
        l.capacity,
        l.items,
        c_g(l.error_rate)
    )
}

/// `x` as C's `printf("%g")` prints it: 6 significant digits, trailing
/// zeros dropped, in exponent form (`1e-05`) below 1e-4 or from 1e6 on.
fn c_g(x: f64) -> String {
    let mut out = Vec::new();
    seen_resp::put_g(&mut out, x, 6);
    String::from_utf8(out).expect("printf digits are ASCII")
}

#[cfg(test)]
mod tests {
    use super::c_g;

    #[test]
    fn prints_as_c_does() {
        // printf("%g") of each, from glibc.
        let cases = [
            (0.01, "0.01"),
            (0.005, "0.005"),
            (0.0025, "0.0025"),
            (0.99, "0.99"),
            (0.9, "0.9"),
            (0.5, "0.5"),
            (0.000125, "0.000125"),
            (0.0001, "0.0001"),
            (0.00005, "5e-05"),
            (3.90625e-05, "3.90625e-05"),
            (1.953125e-05, "1.95313e-05"),
            (1e-9, "1e-09"),
            (5e-10, "5e-10"),
            (1e-100, "1e-100"),
            (123456.0, "123456"),
            (1234567.0, "1.23457e+06"),
            (0.1 + 0.2, "0.3"),
        ];
        for (x, want) in cases {
            assert_eq!(c_g(x), want, "{x:e}");
        }
    }
}
