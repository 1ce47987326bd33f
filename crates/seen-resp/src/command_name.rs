//! Matching command names (and option keywords) without allocating.
//!
//! Redis command names are case-insensitive: `bf.add`, `BF.ADD` and
//! `Bf.Add` are one command. Lowercasing into a `String` per request would
//! cost an allocation on the hot path; these helpers compare bytes in place.

/// Whether `name` equals `expected` ignoring ASCII case.
///
/// ```
/// assert!(seen_resp::name_eq(b"bf.ADD", b"BF.ADD"));
/// assert!(!seen_resp::name_eq(b"bf.add", b"bf.madd"));
/// ```
#[inline]
pub fn name_eq(name: &[u8], expected: &[u8]) -> bool {
    name.eq_ignore_ascii_case(expected)
}

/// Whether `name` is a case-insensitive prefix of `keyword` and at least
/// `min_len` bytes long, the way RedisBloom matches `BF.INSERT` options
/// (`CAP` for `CAPACITY`, `NONSC` for `NONSCALING`).
///
/// ```
/// assert!(seen_resp::name_is_prefix(b"cap", b"CAPACITY", 1));
/// assert!(!seen_resp::name_is_prefix(b"capacityx", b"CAPACITY", 1));
/// assert!(!seen_resp::name_is_prefix(b"", b"CAPACITY", 1));
/// ```
#[inline]
pub fn name_is_prefix(name: &[u8], keyword: &[u8], min_len: usize) -> bool {
    name.len() >= min_len
        && name.len() <= keyword.len()
        && name.eq_ignore_ascii_case(&keyword[..name.len()])
}

/// Copies `name` lowercased into `buf` and returns it, or `None` if it does
/// not fit, so a dispatcher can `match` on byte-string literals without
/// allocating. No command name is longer than a few dozen bytes, so a
/// `None` simply means "unknown command".
///
/// ```
/// let mut buf = [0u8; 32];
/// let reply = match seen_resp::lowercase_name(b"BF.Exists", &mut buf) {
///     Some(b"bf.exists") => "exists",
///     Some(b"bf.add") => "add",
///     _ => "unknown",
/// };
/// assert_eq!(reply, "exists");
/// ```
#[inline]
pub fn lowercase_name<'a>(name: &[u8], buf: &'a mut [u8]) -> Option<&'a [u8]> {
    let out = buf.get_mut(..name.len())?;
    for (o, &b) in out.iter_mut().zip(name) {
        *o = b.to_ascii_lowercase();
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn name_eq_ignores_only_ascii_case() {
        assert!(name_eq(b"PING", b"ping"));
        assert!(name_eq(b"", b""));
        assert!(!name_eq(b"PIN", b"PING"));
        assert!(!name_eq(b"PINGS", b"PING"));
        // Non-ASCII bytes must match exactly.
        assert!(!name_eq(b"\xc9", b"\xe9"));
        assert!(name_eq(b"\xe9", b"\xe9"));
    }

    #[test]
    fn prefix_needs_min_len() {
        assert!(name_is_prefix(b"NONSC", b"NONSCALING", 5));
        assert!(!name_is_prefix(b"NONS", b"NONSCALING", 5));
        assert!(name_is_prefix(b"nonscaling", b"NONSCALING", 5));
    }

    #[test]
    fn lowercase_name_refuses_what_does_not_fit() {
        let mut buf = [0u8; 4];
        assert_eq!(lowercase_name(b"PiNg", &mut buf), Some(&b"ping"[..]));
        assert_eq!(lowercase_name(b"PINGS", &mut buf), None);
        assert_eq!(lowercase_name(b"", &mut buf), Some(&b""[..]));
    }
}
