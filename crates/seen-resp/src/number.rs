//! Numbers on the wire: Redis's strict integer parser and its `%.17g`
//! double format.

use std::io::Write as _;

use bytes::BufMut;

/// Redis's `LONG_STR_SIZE`: 20 characters hold any `i64`; longer is invalid.
const LONG_STR_SIZE: usize = 21;

/// Parses an integer exactly as Redis's `string2ll` does: optional `-`, no
/// `+`, no leading zeros (except `0` itself), no spaces, no `-0`, and at
/// most 20 characters.
pub fn string2ll(s: &[u8]) -> Option<i64> {
    if s.is_empty() || s.len() >= LONG_STR_SIZE {
        return None;
    }
    if s == b"0" {
        return Some(0);
    }
    let (negative, digits) = match s.split_first() {
        Some((b'-', rest)) => (true, rest),
        _ => (false, s),
    };
    match digits.first() {
        Some(b'1'..=b'9') => {}
        _ => return None,
    }
    signed_digits(negative, digits)
}

/// Parses a RESP3 reply integer: optional sign, then decimal digits.
pub(crate) fn parse_reply_int(s: &[u8]) -> Option<i64> {
    let (negative, digits) = match s.split_first() {
        Some((b'-', rest)) => (true, rest),
        Some((b'+', rest)) => (false, rest),
        _ => (false, s),
    };
    if digits.is_empty() {
        return None;
    }
    signed_digits(negative, digits)
}

/// The `i64` that decimal `digits` (nothing else) with a sign make, if it
/// fits.
fn signed_digits(negative: bool, digits: &[u8]) -> Option<i64> {
    let mut v: u64 = 0;
    for &d in digits {
        if !d.is_ascii_digit() {
            return None;
        }
        v = v.checked_mul(10)?.checked_add(u64::from(d - b'0'))?;
    }
    if negative {
        // -(i64::MIN) is one more than i64::MAX: negate through i128.
        i64::try_from(-i128::from(v)).ok()
    } else {
        i64::try_from(v).ok()
    }
}

/// Appends `value` as C's `printf("%.17g")` prints it (as Redis 7.0 replies
/// doubles).
pub(crate) fn put_double<B: BufMut>(out: &mut B, value: f64) {
    put_g(out, value, 17);
}

/// Appends `value` as C's `printf("%.<precision>g")` prints it (`%g` is a
/// precision of 6), with `inf`, `-inf`, `nan` and `-nan` spelled as glibc
/// does. `precision` is taken in 1..=17.
///
/// Rust's `{:e}` with a precision is correctly rounded, like glibc, so the
/// significant digits are taken from it and laid out by `%g`'s rules:
/// exponent form when the exponent is below -4 or at least the precision,
/// trailing zeros dropped.
pub fn put_g<B: BufMut>(out: &mut B, value: f64, precision: usize) {
    let precision = precision.clamp(1, 17);
    if value.is_sign_negative() {
        out.put_u8(b'-');
    }
    if value.is_nan() {
        out.put_slice(b"nan");
        return;
    }
    if value.is_infinite() {
        out.put_slice(b"inf");
        return;
    }
    if value == 0.0 {
        out.put_u8(b'0');
        return;
    }
    // "d.dddddddddddddddde[-]x": at most 1 + 1 + 16 + 1 + 4 = 23 bytes.
    let mut text = [0u8; 32];
    let len = {
        let mut cursor = &mut text[..];
        let room = cursor.len();
        // Cannot fail: the buffer is larger than any such rendering.
        let _ = write!(cursor, "{:.*e}", precision - 1, value.abs());
        room - cursor.len()
    };
    let text = &text[..len];
    let e_at = text.iter().position(|&b| b == b'e').unwrap_or(len);
    let exponent: i32 = std::str::from_utf8(&text[e_at + 1..])
        .ok()
        .and_then(|e| e.parse().ok())
        .unwrap_or(0);
    let mut digits = [0u8; 17];
    let mut n = 0;
    for &b in &text[..e_at] {
        if b.is_ascii_digit() && n < digits.len() {
            digits[n] = b;
            n += 1;
        }
    }
    while n > 1 && digits[n - 1] == b'0' {
        n -= 1;
    }
    let digits = &digits[..n];

    if !(-4..precision as i32).contains(&exponent) {
        out.put_u8(digits[0]);
        if digits.len() > 1 {
            out.put_u8(b'.');
            out.put_slice(&digits[1..]);
        }
        out.put_u8(b'e');
        out.put_u8(if exponent < 0 { b'-' } else { b'+' });
        let magnitude = exponent.unsigned_abs();
        if magnitude < 10 {
            out.put_u8(b'0');
        }
        out.put_slice(itoa::Buffer::new().format(magnitude).as_bytes());
    } else if exponent >= 0 {
        let int_len = exponent as usize + 1;
        if digits.len() <= int_len {
            out.put_slice(digits);
            out.put_bytes(b'0', int_len - digits.len());
        } else {
            out.put_slice(&digits[..int_len]);
            out.put_u8(b'.');
            out.put_slice(&digits[int_len..]);
        }
    } else {
        out.put_slice(b"0.");
        out.put_bytes(b'0', (-exponent - 1) as usize);
        out.put_slice(digits);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn string2ll_is_strict_like_redis() {
        assert_eq!(string2ll(b"0"), Some(0));
        assert_eq!(string2ll(b"3"), Some(3));
        assert_eq!(string2ll(b"-10"), Some(-10));
        assert_eq!(string2ll(b"9223372036854775807"), Some(i64::MAX));
        assert_eq!(string2ll(b"-9223372036854775808"), Some(i64::MIN));
        for bad in [
            &b""[..],
            b"-",
            b"-0",
            b"+1",
            b"01",
            b"00",
            b" 1",
            b"1 ",
            b"1x",
            b"9223372036854775808",
            b"-9223372036854775809",
            b"99999999999999999999",
            b"000000000000000000001",
        ] {
            assert_eq!(string2ll(bad), None, "{:?}", String::from_utf8_lossy(bad));
        }
    }

    #[test]
    fn reply_ints_accept_a_sign() {
        assert_eq!(parse_reply_int(b"+5"), Some(5));
        assert_eq!(parse_reply_int(b"-0"), Some(0));
        assert_eq!(parse_reply_int(b"007"), Some(7));
        assert_eq!(parse_reply_int(b"-"), None);
        assert_eq!(parse_reply_int(b"1.5"), None);
        assert_eq!(parse_reply_int(b"-9223372036854775808"), Some(i64::MIN));
        assert_eq!(parse_reply_int(b"9223372036854775808"), None);
    }

    fn g17(value: f64) -> String {
        let mut out = bytes::BytesMut::new();
        put_double(&mut out, value);
        String::from_utf8(out.to_vec()).unwrap()
    }

    #[test]
    fn doubles_print_like_printf_g17() {
        // Expected values are what glibc's printf("%.17g") prints.
        let cases: &[(f64, &str)] = &[
            (0.0, "0"),
            (-0.0, "-0"),
            (1.0, "1"),
            (-2.5, "-2.5"),
            (0.1, "0.10000000000000001"),
            (0.01, "0.01"),
            (0.5, "0.5"),
            (123.0, "123"),
            (1e16, "10000000000000000"),
            (1e17, "1e+17"),
            (1.5e300, "1.5000000000000001e+300"),
            (0.0001, "0.0001"),
            (0.00001, "1.0000000000000001e-05"),
            (1.0 / 3.0, "0.33333333333333331"),
            (f64::MAX, "1.7976931348623157e+308"),
            (f64::MIN_POSITIVE, "2.2250738585072014e-308"),
            (5e-324, "4.9406564584124654e-324"),
            (f64::INFINITY, "inf"),
            (f64::NEG_INFINITY, "-inf"),
            (f64::NAN, "nan"),
            (-f64::NAN, "-nan"),
            (12345678901234567890.0, "1.2345678901234567e+19"),
            (99999999999999999.0, "1e+17"),
            (0.000123456, "0.00012345600000000001"),
        ];
        for &(value, text) in cases {
            assert_eq!(g17(value), text, "{value:e}");
        }
    }
}
