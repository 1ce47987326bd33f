//! Parsing replies: the client side of the protocol, for tests that replay
//! wire transcripts, for benchmarks and for tools talking to a server.

use bytes::Bytes;

use crate::error::{err, ErrorKind, ProtocolError};
use crate::number::parse_reply_int;
use crate::Reply;

/// Aggregates nested deeper than this are rejected, so hostile input cannot
/// exhaust the stack of the recursive parser.
pub const MAX_REPLY_DEPTH: usize = 128;

/// Aggregates announcing more elements than this get their memory as the
/// elements arrive, not up front.
const MAX_PREALLOCATED_ITEMS: usize = 1024;

/// Parses one RESP2 or RESP3 reply from the front of `buf`.
///
/// Returns the reply and the number of bytes it took (so `&buf[..n]` is the
/// raw frame), or `Ok(None)` if `buf` holds only part of a reply. Every
/// type is understood: `+ - : $ * _ # , ( ! = % ~ > |`. `$-1` is
/// [`Reply::Null`], `*-1` is [`Reply::NullArray`], `_` is [`Reply::Null`];
/// a blob error `!` becomes [`Reply::Error`]; an attribute `|` wraps the
/// reply after it. Streamed strings and aggregates (`$?`) are refused.
///
/// ```
/// use seen_resp::{parse_reply, Reply};
///
/// let wire = b"*2\r\n#t\r\n-ERR non scaling filter is full\r\n:1\r\n";
/// let (reply, used) = parse_reply(wire)?.unwrap();
/// assert_eq!(reply, Reply::Array(vec![
///     Reply::Bool(true),
///     Reply::error("ERR non scaling filter is full"),
/// ]));
/// assert_eq!(&wire[used..], b":1\r\n");
/// assert_eq!(parse_reply(&wire[..5])?, None);
/// # Ok::<(), seen_resp::ProtocolError>(())
/// ```
pub fn parse_reply(buf: &[u8]) -> Result<Option<(Reply, usize)>, ProtocolError> {
    value(buf, 0, 0)
}

/// Returns `Ok(None)` from the enclosing function on a partial input.
macro_rules! need {
    ($e:expr) => {
        match $e? {
            Some(v) => v,
            None => return Ok(None),
        }
    };
}

/// The line starting at `start` and the offset after its CRLF.
fn line(buf: &[u8], start: usize) -> Result<Option<(&[u8], usize)>, ProtocolError> {
    let rest = buf.get(start..).unwrap_or_default();
    let Some(cr) = memchr::memchr(b'\r', rest) else {
        return Ok(None);
    };
    match rest.get(cr + 1) {
        None => Ok(None),
        Some(b'\n') => Ok(Some((&rest[..cr], start + cr + 2))),
        Some(_) => err(ErrorKind::ExpectedCrlf),
    }
}

/// A length or count: `-1` (null) or a non-negative number.
fn length(text: &[u8]) -> Result<Option<usize>, ProtocolError> {
    if text == b"?" {
        return err(ErrorKind::StreamedReply);
    }
    match parse_reply_int(text) {
        Some(-1) => Ok(None),
        Some(n) => usize::try_from(n)
            .ok()
            .filter(|&n| n <= isize::MAX as usize)
            .map(Some)
            .ok_or_else(|| ErrorKind::InvalidReplyLength.into()),
        None => err(ErrorKind::InvalidReplyLength),
    }
}

fn value(buf: &[u8], pos: usize, depth: usize) -> Result<Option<(Reply, usize)>, ProtocolError> {
    let Some(&kind) = buf.get(pos) else {
        return Ok(None);
    };
    if !b"+-:$*_#,(!=%~>|".contains(&kind) {
        return err(ErrorKind::InvalidReplyType(kind));
    }
    let (text, next) = need!(line(buf, pos + 1));
    let copy = || Bytes::copy_from_slice(text);
    let reply = match kind {
        b'+' => Reply::Simple(copy()),
        b'-' => Reply::Error(copy()),
        b':' => Reply::Integer(parse_reply_int(text).ok_or(ErrorKind::InvalidReplyInteger)?),
        b'_' if text.is_empty() => Reply::Null,
        b'_' => return err(ErrorKind::InvalidReplyNull),
        b'#' => match text {
            b"t" => Reply::Bool(true),
            b"f" => Reply::Bool(false),
            _ => return err(ErrorKind::InvalidReplyBool),
        },
        b',' => Reply::Double(
            std::str::from_utf8(text)
                .ok()
                .and_then(|t| t.parse().ok())
                .ok_or(ErrorKind::InvalidReplyDouble)?,
        ),
        b'(' => {
            let digits = text.strip_prefix(b"-").unwrap_or(text);
            if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
                return err(ErrorKind::InvalidReplyInteger);
            }
            Reply::BigNumber(copy())
        }
        b'$' | b'!' | b'=' => {
            let Some(len) = length(text)? else {
                if kind == b'$' {
                    return Ok(Some((Reply::Null, next)));
                }
                return err(ErrorKind::InvalidReplyLength);
            };
            let end = next.checked_add(len).ok_or(ErrorKind::InvalidReplyLength)?;
            let Some(tail) = buf.get(end..end.saturating_add(2)) else {
                return Ok(None);
            };
            if tail.len() < 2 {
                return Ok(None);
            }
            if tail != b"\r\n" {
                return err(ErrorKind::ExpectedCrlf);
            }
            let data = &buf[next..end];
            let reply = match kind {
                b'$' => Reply::Bulk(Bytes::copy_from_slice(data)),
                b'!' => Reply::Error(Bytes::copy_from_slice(data)),
                _ => match data {
                    [a, b, c, b':', text @ ..] => Reply::Verbatim {
                        format: [*a, *b, *c],
                        text: Bytes::copy_from_slice(text),
                    },
                    _ => return err(ErrorKind::InvalidReplyVerbatim),
                },
            };
            return Ok(Some((reply, end + 2)));
        }
        _ => {
            // Aggregates: * ~ > hold items, % | hold pairs.
            let Some(count) = length(text)? else {
                if kind == b'*' {
                    return Ok(Some((Reply::NullArray, next)));
                }
                return err(ErrorKind::InvalidReplyLength);
            };
            if depth >= MAX_REPLY_DEPTH {
                return err(ErrorKind::ReplyTooDeep);
            }
            let mut pos = next;
            if kind == b'%' || kind == b'|' {
                let mut pairs = Vec::with_capacity(count.min(MAX_PREALLOCATED_ITEMS));
                for _ in 0..count {
                    let (key, after_key) = need!(value(buf, pos, depth + 1));
                    let (val, after_val) = need!(value(buf, after_key, depth + 1));
                    pairs.push((key, val));
                    pos = after_val;
                }
                if kind == b'%' {
                    return Ok(Some((Reply::Map(pairs), pos)));
                }
                let (described, end) = need!(value(buf, pos, depth + 1));
                let reply = Reply::Attribute {
                    attributes: pairs,
                    value: Box::new(described),
                };
                return Ok(Some((reply, end)));
            }
            let mut items = Vec::with_capacity(count.min(MAX_PREALLOCATED_ITEMS));
            for _ in 0..count {
                let (item, after) = need!(value(buf, pos, depth + 1));
                items.push(item);
                pos = after;
            }
            let reply = match kind {
                b'*' => Reply::Array(items),
                b'~' => Reply::Set(items),
                _ => Reply::Push(items),
            };
            return Ok(Some((reply, pos)));
        }
    };
    Ok(Some((reply, next)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(wire: &[u8]) -> Reply {
        let (reply, used) = parse_reply(wire).unwrap().unwrap();
        assert_eq!(used, wire.len(), "{:?}", String::from_utf8_lossy(wire));
        reply
    }

    fn kind(wire: &[u8]) -> ErrorKind {
        parse_reply(wire).unwrap_err().into_kind()
    }

    #[test]
    fn nulls() {
        assert_eq!(one(b"$-1\r\n"), Reply::Null);
        assert_eq!(one(b"*-1\r\n"), Reply::NullArray);
        assert_eq!(one(b"_\r\n"), Reply::Null);
        assert_eq!(kind(b"_x\r\n"), ErrorKind::InvalidReplyNull);
        assert_eq!(kind(b"%-1\r\n"), ErrorKind::InvalidReplyLength);
    }

    #[test]
    fn scalars() {
        assert_eq!(one(b"+OK\r\n"), Reply::ok());
        assert_eq!(one(b":-3\r\n"), Reply::Integer(-3));
        assert_eq!(one(b"#f\r\n"), Reply::Bool(false));
        assert_eq!(one(b",1.5e3\r\n"), Reply::Double(1500.0));
        assert_eq!(one(b",-inf\r\n"), Reply::Double(f64::NEG_INFINITY));
        assert!(matches!(one(b",nan\r\n"), Reply::Double(d) if d.is_nan()));
        assert_eq!(
            one(b"(-12345678901234567890\r\n"),
            Reply::BigNumber("-12345678901234567890".into())
        );
        assert_eq!(one(b"!5\r\nERR x\r\n"), Reply::error("ERR x"));
        assert_eq!(
            one(b"=8\r\nmkd:a\r\nb\r\n"),
            Reply::Verbatim {
                format: *b"mkd",
                text: "a\r\nb".into()
            }
        );
    }

    #[test]
    fn malformed() {
        assert_eq!(kind(b"?\r\n"), ErrorKind::InvalidReplyType(b'?'));
        assert_eq!(kind(b":1x\r\n"), ErrorKind::InvalidReplyInteger);
        assert_eq!(kind(b"#x\r\n"), ErrorKind::InvalidReplyBool);
        assert_eq!(kind(b",abc\r\n"), ErrorKind::InvalidReplyDouble);
        assert_eq!(kind(b"$3\r\nabcd\r\n"), ErrorKind::ExpectedCrlf);
        assert_eq!(kind(b"+OK\rX"), ErrorKind::ExpectedCrlf);
        assert_eq!(kind(b"$-2\r\n"), ErrorKind::InvalidReplyLength);
        assert_eq!(kind(b"$?\r\n"), ErrorKind::StreamedReply);
        assert_eq!(kind(b"=2\r\nab\r\n"), ErrorKind::InvalidReplyVerbatim);
        assert_eq!(
            kind(b"$9223372036854775808\r\n"),
            ErrorKind::InvalidReplyLength
        );
        // Representable but absurd: it waits for the bytes, allocating nothing.
        assert_eq!(parse_reply(b"$9223372036854775807\r\n").unwrap(), None);
    }

    #[test]
    fn partial_replies_wait() {
        let wire = b"%2\r\n+a\r\n$2\r\nxy\r\n+b\r\n*1\r\n:1\r\n";
        for cut in 0..wire.len() {
            assert_eq!(parse_reply(&wire[..cut]).unwrap(), None, "cut at {cut}");
        }
        assert!(parse_reply(wire).unwrap().is_some());
        // A huge announced count only waits; nothing is allocated for it.
        assert_eq!(parse_reply(b"*1000000000000\r\n:1\r\n").unwrap(), None);
    }

    #[test]
    fn depth_is_limited() {
        let deep = b"*1\r\n".repeat(MAX_REPLY_DEPTH + 1);
        assert_eq!(kind(&deep), ErrorKind::ReplyTooDeep);
        let mut ok = b"*1\r\n".repeat(MAX_REPLY_DEPTH);
        ok.extend_from_slice(b":1\r\n");
        assert!(parse_reply(&ok).unwrap().is_some());
    }

    #[test]
    fn attributes_wrap_the_next_reply() {
        assert_eq!(
            one(b"|1\r\n+ttl\r\n:3\r\n:7\r\n"),
            Reply::Attribute {
                attributes: vec![(Reply::simple("ttl"), Reply::Integer(3))],
                value: Box::new(Reply::Integer(7)),
            }
        );
    }
}
