//! Redis's glob patterns (`KEYS`, `SCAN MATCH`, `CONFIG GET`): `*`, `?`,
//! `[abc]`, `[^a-z]` and `\` escapes, on bytes.

/// Whether `s` matches `pattern`, as Redis's `stringmatchlen`.
pub(crate) fn matches(pattern: &[u8], s: &[u8], nocase: bool) -> bool {
    // Iterative with one backtrack point for `*`: linear in practice, and
    // never recursive (a long pattern of stars cannot blow the stack).
    let eq = |a: u8, b: u8| {
        if nocase {
            a.eq_ignore_ascii_case(&b)
        } else {
            a == b
        }
    };
    let (mut p, mut i) = (0usize, 0usize);
    let mut star: Option<(usize, usize)> = None;
    loop {
        if p < pattern.len() {
            match pattern[p] {
                b'*' => {
                    while p < pattern.len() && pattern[p] == b'*' {
                        p += 1;
                    }
                    if p == pattern.len() {
                        return true;
                    }
                    star = Some((p, i));
                    continue;
                }
                b'?' if i < s.len() => {
                    p += 1;
                    i += 1;
                    continue;
                }
                b'[' if i < s.len() => {
                    if let Some((ok, next)) = class(pattern, p, s[i], nocase) {
                        if ok {
                            p = next;
                            i += 1;
                            continue;
                        }
                    }
                }
                b'\\' if p + 1 < pattern.len() && i < s.len() && eq(pattern[p + 1], s[i]) => {
                    p += 2;
                    i += 1;
                    continue;
                }
                c if i < s.len()
                    && c != b'?'
                    && c != b'['
                    && (c != b'\\' || p + 1 == pattern.len())
                    && eq(c, s[i]) =>
                {
                    p += 1;
                    i += 1;
                    continue;
                }
                _ => {}
            }
        } else if i == s.len() {
            return true;
        }
        // Mismatch: let the last star swallow one more byte.
        match star {
            Some((sp, si)) if si < s.len() => {
                star = Some((sp, si + 1));
                p = sp;
                i = si + 1;
            }
            _ => return false,
        }
    }
}

/// A `[...]` class at `pattern[p]` against byte `c`: (matched, index after
/// the class). An unterminated class runs to the end of the pattern, as in
/// Redis.
fn class(pattern: &[u8], p: usize, c: u8, nocase: bool) -> Option<(bool, usize)> {
    let low = |x: u8| if nocase { x.to_ascii_lowercase() } else { x };
    let c = low(c);
    let mut j = p + 1;
    let not = pattern.get(j) == Some(&b'^');
    if not {
        j += 1;
    }
    let mut hit = false;
    while j < pattern.len() && pattern[j] != b']' {
        if pattern[j] == b'\\' && j + 1 < pattern.len() {
            j += 1;
            hit |= low(pattern[j]) == c;
            j += 1;
        } else if j + 2 < pattern.len() && pattern[j + 1] == b'-' && pattern[j + 2] != b']' {
            let (mut a, mut b) = (low(pattern[j]), low(pattern[j + 2]));
            if a > b {
                std::mem::swap(&mut a, &mut b);
            }
            hit |= a <= c && c <= b;
            j += 3;
        } else {
            hit |= low(pattern[j]) == c;
            j += 1;
        }
    }
    let next = if j < pattern.len() { j + 1 } else { j };
    Some((hit != not, next))
}

#[cfg(test)]
mod tests {
    use super::matches;

    #[test]
    fn globs() {
        let t = |p: &str, s: &str| matches(p.as_bytes(), s.as_bytes(), false);
        assert!(t("*", ""));
        assert!(t("*", "abc"));
        assert!(t("a*c", "abbbc"));
        assert!(!t("a*c", "abbb"));
        assert!(t("h?llo", "hello"));
        assert!(!t("h?llo", "hllo"));
        assert!(t("h[ae]llo", "hallo"));
        assert!(!t("h[ae]llo", "hillo"));
        assert!(t("h[^e]llo", "hallo"));
        assert!(!t("h[^e]llo", "hello"));
        assert!(t("h[a-b]llo", "hbllo"));
        assert!(t("a\\*b", "a*b"));
        assert!(!t("a\\*b", "axb"));
        assert!(t("*b*", "abc"));
        assert!(t("urls:*", "urls:2026"));
        assert!(!t("urls:*", "url"));
        assert!(matches(b"MAX*", b"maxmemory", true));
        assert!(t(&"*".repeat(10_000), "x"));
    }
}
