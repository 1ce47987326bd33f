//! Argument parsing with Redis's rules, so that what Redis (and RedisBloom)
//! accepts or rejects, seen accepts or rejects too.

/// Redis's `string2ll`: an optional `-`, then digits without leading zeros
/// (`0` itself is fine), nothing else, within `i64`.
pub(crate) fn parse_i64(s: &[u8]) -> Option<i64> {
    seen_resp::string2ll(s)
}

/// Redis's `string2d` / `RedisModule_StringToDouble`: the whole string is a
/// number (`strtod` syntax: decimal, exponent, `inf`), no leading space,
/// not NaN, and neither overflowing to infinity (`1e400`) nor underflowing
/// to zero (`1e-400`), which `strtod` reports as out of range.
pub(crate) fn parse_f64(s: &[u8]) -> Option<f64> {
    if s.is_empty() || s[0].is_ascii_whitespace() {
        return None;
    }
    let text = std::str::from_utf8(s).ok()?;
    let v: f64 = text.parse().ok()?;
    let spelled_infinite = text.to_ascii_lowercase().contains("inf");
    let mantissa = text.split(['e', 'E']).next().unwrap_or("");
    let spelled_zero = !mantissa.bytes().any(|b| (b'1'..=b'9').contains(&b));
    let out_of_range = (v.is_infinite() && !spelled_infinite) || (v == 0.0 && !spelled_zero);
    if v.is_nan() || out_of_range {
        return None;
    }
    Some(v)
}

/// The byte at `i`, or 0 past the end (C strings are NUL-terminated, and
/// RedisBloom's option parser peeks at fixed offsets).
pub(crate) fn byte_at(s: &[u8], i: usize) -> u8 {
    s.get(i).copied().unwrap_or(0).to_ascii_lowercase()
}

/// Whether a command's arguments may hold a password (`AUTH`, `HELLO ...
/// AUTH`): the slow log and `MONITOR` do not show them.
pub(crate) fn carries_password(command: &[u8]) -> bool {
    is(command, "auth") || is(command, "hello")
}

/// Case-insensitive equality of an argument with an ASCII keyword.
pub(crate) fn is(arg: &[u8], keyword: &str) -> bool {
    arg.eq_ignore_ascii_case(keyword.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integers_follow_redis() {
        assert_eq!(parse_i64(b"0"), Some(0));
        assert_eq!(parse_i64(b"-5"), Some(-5));
        assert_eq!(parse_i64(b"9223372036854775807"), Some(i64::MAX));
        assert_eq!(parse_i64(b"-9223372036854775808"), Some(i64::MIN));
        for bad in [
            &b""[..],
            b"-",
            b"01",
            b"+1",
            b" 1",
            b"1 ",
            b"1.0",
            b"-0",
            b"9223372036854775808",
            b"x",
        ] {
            assert_eq!(parse_i64(bad), None, "{:?}", String::from_utf8_lossy(bad));
        }
    }

    #[test]
    fn doubles_follow_redis() {
        assert_eq!(parse_f64(b"0.01"), Some(0.01));
        assert_eq!(parse_f64(b"1e-3"), Some(0.001));
        assert_eq!(parse_f64(b"inf"), Some(f64::INFINITY));
        assert_eq!(parse_f64(b"-Infinity"), Some(f64::NEG_INFINITY));
        assert_eq!(parse_f64(b"0.0e5"), Some(0.0));
        for bad in [
            &b""[..],
            b" 1",
            b"1 ",
            b"x",
            b"nan",
            b"0.1x",
            b"1e400",
            b"1e-400",
        ] {
            assert_eq!(parse_f64(bad), None, "{:?}", String::from_utf8_lossy(bad));
        }
    }
}
