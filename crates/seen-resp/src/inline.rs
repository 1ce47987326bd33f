//! Splitting an inline request line into arguments, as Redis's
//! `sdssplitargs` does (what `redis-cli` and a `telnet` session send).

use crate::error::{err, ErrorKind, ProtocolError};

/// C's `isspace` in the "C" locale.
fn is_space(byte: u8) -> bool {
    matches!(byte, b' ' | b'\t' | b'\n' | b'\x0b' | b'\x0c' | b'\r')
}

fn hex_value(byte: u8) -> Option<u8> {
    match byte {
        b'0'..=b'9' => Some(byte - b'0'),
        b'a'..=b'f' => Some(byte - b'a' + 10),
        b'A'..=b'F' => Some(byte - b'A' + 10),
        _ => None,
    }
}

/// Splits `line` into arguments, appending their unescaped bytes to `data`
/// and each argument's `start..end` in `data` to `spans`.
///
/// Rules (Redis's): blanks separate arguments; `"..."` understands `\xHH`,
/// `\n`, `\r`, `\t`, `\b`, `\a` and `\<any>` for that byte; `'...'`
/// understands only `\'`; a quote can open mid-argument (`a"b c"` is
/// `ab c`); a closing quote must be followed by a blank or the end of the
/// line, and an unclosed quote is an error. Like the C original, which
/// reads a NUL-terminated string, a NUL byte ends the line.
pub(crate) fn split_args(
    line: &[u8],
    data: &mut Vec<u8>,
    spans: &mut Vec<(usize, usize)>,
) -> Result<(), ProtocolError> {
    // Reading past the end yields the C string's terminating NUL.
    let at = |i: usize| line.get(i).copied().unwrap_or(0);
    let unbalanced = || err(ErrorKind::UnbalancedQuotes);
    let mut p = 0;
    loop {
        while at(p) != 0 && is_space(at(p)) {
            p += 1;
        }
        if at(p) == 0 {
            return Ok(());
        }
        let start = data.len();
        let (mut in_double, mut in_single, mut done) = (false, false, false);
        while !done {
            let c = at(p);
            if in_double {
                let hex = (c == b'\\' && at(p + 1) == b'x')
                    .then(|| Some(hex_value(at(p + 2))? * 16 + hex_value(at(p + 3))?))
                    .flatten();
                if let Some(byte) = hex {
                    data.push(byte);
                    p += 3;
                } else if c == b'\\' && at(p + 1) != 0 {
                    p += 1;
                    data.push(match at(p) {
                        b'n' => b'\n',
                        b'r' => b'\r',
                        b't' => b'\t',
                        b'b' => b'\x08',
                        b'a' => b'\x07',
                        other => other,
                    });
                } else if c == b'"' {
                    if at(p + 1) != 0 && !is_space(at(p + 1)) {
                        return unbalanced();
                    }
                    done = true;
                } else if c == 0 {
                    return unbalanced();
                } else {
                    data.push(c);
                }
            } else if in_single {
                if c == b'\\' && at(p + 1) == b'\'' {
                    p += 1;
                    data.push(b'\'');
                } else if c == b'\'' {
                    if at(p + 1) != 0 && !is_space(at(p + 1)) {
                        return unbalanced();
                    }
                    done = true;
                } else if c == 0 {
                    return unbalanced();
                } else {
                    data.push(c);
                }
            } else {
                match c {
                    b' ' | b'\n' | b'\r' | b'\t' | 0 => done = true,
                    b'"' => in_double = true,
                    b'\'' => in_single = true,
                    other => data.push(other),
                }
            }
            if at(p) != 0 {
                p += 1;
            }
        }
        spans.push((start, data.len()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn split(line: &[u8]) -> Result<Vec<Vec<u8>>, ProtocolError> {
        let (mut data, mut spans) = (Vec::new(), Vec::new());
        split_args(line, &mut data, &mut spans)?;
        Ok(spans.iter().map(|&(s, e)| data[s..e].to_vec()).collect())
    }

    fn ok(line: &[u8]) -> Vec<Vec<u8>> {
        split(line).unwrap()
    }

    fn v(args: &[&[u8]]) -> Vec<Vec<u8>> {
        args.iter().map(|a| a.to_vec()).collect()
    }

    #[test]
    fn blanks_separate_arguments() {
        assert_eq!(ok(b"set  a\tb "), v(&[b"set", b"a", b"b"]));
        assert_eq!(ok(b""), v(&[]));
        assert_eq!(ok(b" \t\x0b\x0c\r"), v(&[]));
        // \v and \f are skipped before an argument but belong to it after.
        assert_eq!(ok(b"\x0ba\x0bb"), v(&[b"a\x0bb"]));
    }

    #[test]
    fn double_quotes_unescape() {
        assert_eq!(ok(br#""a b""#), v(&[b"a b"]));
        assert_eq!(
            ok(br#""\x41\xff\x00\n\r\t\b\a\\\"\q""#),
            v(&[b"A\xff\x00\n\r\t\x08\x07\\\"q"])
        );
        // \x needs two hex digits, otherwise it is just "x".
        assert_eq!(ok(br#""\x4g""#), v(&[b"x4g"]));
        assert_eq!(ok(br#""""#), v(&[b""]));
        assert_eq!(ok(br#""a" "b""#), v(&[b"a", b"b"]));
    }

    #[test]
    fn single_quotes_only_escape_the_quote() {
        assert_eq!(ok(br"'a\'b\n'"), v(&[b"a'b\\n"]));
        assert_eq!(ok(b"''"), v(&[b""]));
    }

    #[test]
    fn quotes_open_mid_argument() {
        assert_eq!(ok(br#"ab"c d" e"#), v(&[b"abc d", b"e"]));
    }

    #[test]
    fn unbalanced_quotes_are_errors() {
        for line in [
            &br#""abc"#[..],
            br#""abc"x"#,
            b"'abc",
            b"'abc'x",
            br#""abc\"#,
            br#"a "b"#,
        ] {
            let e = split(line).unwrap_err();
            assert_eq!(e.kind(), &ErrorKind::UnbalancedQuotes, "{line:?}");
        }
    }

    #[test]
    fn nul_ends_the_line() {
        assert_eq!(ok(b"get a\0b c"), v(&[b"get", b"a"]));
        assert_eq!(
            split(b"get \"a\0\"").unwrap_err().kind(),
            &ErrorKind::UnbalancedQuotes
        );
    }
}
