//! Reply values and their encoding in RESP2 and RESP3.
//!
//! Commands return a [`Reply`]; the connection encodes it for the protocol
//! the client chose with `HELLO`. RESP2 has no maps, sets, booleans,
//! doubles or verbatim strings, so [`Reply::encode`] downgrades them exactly
//! as Redis does; that is what lets one command implementation answer both.

use bytes::{BufMut, Bytes, BytesMut};

use crate::number::put_double;

/// The protocol version a connection speaks (`HELLO 2` / `HELLO 3`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Protocol {
    /// RESP2, every connection's protocol until it sends `HELLO 3`.
    #[default]
    Resp2,
    /// RESP3.
    Resp3,
}

/// A reply to a client, in protocol-independent form.
///
/// | variant | RESP3 | RESP2 |
/// | --- | --- | --- |
/// | `Simple` | `+OK` | same |
/// | `Error` | `-ERR text` | same |
/// | `Integer` | `:1` | same |
/// | `Bulk` | `$3\r\nabc` | same |
/// | `Null` | `_` | `$-1` |
/// | `NullArray` | `_` | `*-1` |
/// | `Array` | `*N` | same |
/// | `Map` | `%N` + N pairs | `*2N`, keys and values in turn |
/// | `Set` | `~N` | `*N` |
/// | `Bool` | `#t` / `#f` | `:1` / `:0` |
/// | `Double` | `,1.5` | `$3\r\n1.5` |
/// | `BigNumber` | `(123` | bulk string |
/// | `Verbatim` | `=8\r\ntxt:text` | bulk string without `txt:` |
/// | `Push` | `>N` | `*N` |
/// | `Attribute` | `\|N` + pairs, then the value | the value alone |
///
/// ```
/// use seen_resp::{Protocol, Reply};
///
/// let info = Reply::Map(vec![
///     (Reply::simple("Capacity"), Reply::Integer(50)),
///     (Reply::simple("Expansion rate"), Reply::Null),
/// ]);
/// assert_eq!(&info.to_bytes(Protocol::Resp2)[..],
///            b"*4\r\n+Capacity\r\n:50\r\n+Expansion rate\r\n$-1\r\n");
/// assert_eq!(&info.to_bytes(Protocol::Resp3)[..],
///            b"%2\r\n+Capacity\r\n:50\r\n+Expansion rate\r\n_\r\n");
/// ```
#[derive(Debug, Clone, PartialEq)]
pub enum Reply {
    /// A status line such as `OK`. CR and LF are sent as spaces.
    Simple(Bytes),
    /// An error line, code included: `ERR not found`, `WRONGTYPE ...`.
    /// CR and LF are sent as spaces.
    Error(Bytes),
    /// A signed 64-bit integer.
    Integer(i64),
    /// A binary-safe string.
    Bulk(Bytes),
    /// The null value: a missing key, an unset field.
    Null,
    /// RESP2's null array (`*-1`); RESP3 has a single null.
    NullArray,
    /// An ordered list of replies.
    Array(Vec<Reply>),
    /// Key-value pairs, in order.
    Map(Vec<(Reply, Reply)>),
    /// An unordered collection.
    Set(Vec<Reply>),
    /// A boolean.
    Bool(bool),
    /// A floating-point number, printed as Redis 7.0 does (`%.17g`).
    Double(f64),
    /// An integer of any size, as decimal digits with an optional `-`.
    BigNumber(Bytes),
    /// Text with a three-byte format (`txt`, `mkd`), as `INFO` replies in
    /// RESP3.
    Verbatim {
        /// The format, such as `*b"txt"`.
        format: [u8; 3],
        /// The text, without the `txt:` prefix.
        text: Bytes,
    },
    /// An out-of-band message (RESP3 push; an array in RESP2).
    Push(Vec<Reply>),
    /// A reply carrying attributes (RESP3); RESP2 sends only the value.
    Attribute {
        /// The attribute pairs.
        attributes: Vec<(Reply, Reply)>,
        /// The reply they describe.
        value: Box<Reply>,
    },
}

impl Reply {
    /// `+OK`.
    pub fn ok() -> Reply {
        Reply::Simple(Bytes::from_static(b"OK"))
    }

    /// A status line from static text, without copying it.
    pub fn simple(text: &'static str) -> Reply {
        Reply::Simple(Bytes::from_static(text.as_bytes()))
    }

    /// An error line; `text` includes the code (`ERR`, `WRONGTYPE`, ...).
    ///
    /// ```
    /// use seen_resp::{Protocol, Reply};
    ///
    /// let reply = Reply::error("ERR item exists");
    /// assert_eq!(&reply.to_bytes(Protocol::Resp3)[..], b"-ERR item exists\r\n");
    /// ```
    pub fn error(text: impl Into<Bytes>) -> Reply {
        Reply::Error(text.into())
    }

    /// A bulk string.
    pub fn bulk(data: impl Into<Bytes>) -> Reply {
        Reply::Bulk(data.into())
    }

    /// A `txt` verbatim string (a plain bulk string in RESP2).
    pub fn verbatim_text(text: impl Into<Bytes>) -> Reply {
        Reply::Verbatim {
            format: *b"txt",
            text: text.into(),
        }
    }

    /// Appends this reply, encoded for `proto`, to `out`.
    pub fn encode(&self, proto: Protocol, out: &mut BytesMut) {
        let resp3 = proto == Protocol::Resp3;
        match self {
            Reply::Simple(text) => put_line(out, b'+', text),
            Reply::Error(text) => put_line(out, b'-', text),
            Reply::Integer(n) => put_integer(out, b':', *n),
            Reply::Bulk(data) => put_blob(out, b'$', &[], data),
            Reply::Null if resp3 => out.put_slice(b"_\r\n"),
            Reply::Null => out.put_slice(b"$-1\r\n"),
            Reply::NullArray if resp3 => out.put_slice(b"_\r\n"),
            Reply::NullArray => out.put_slice(b"*-1\r\n"),
            Reply::Array(items) => put_items(out, proto, b'*', items),
            Reply::Set(items) => put_items(out, proto, if resp3 { b'~' } else { b'*' }, items),
            Reply::Push(items) => put_items(out, proto, if resp3 { b'>' } else { b'*' }, items),
            Reply::Map(pairs) if resp3 => put_pairs(out, proto, b'%', pairs),
            Reply::Map(pairs) => {
                put_header(out, b'*', pairs.len() * 2);
                for (key, value) in pairs {
                    key.encode(proto, out);
                    value.encode(proto, out);
                }
            }
            Reply::Bool(b) if resp3 => out.put_slice(if *b { b"#t\r\n" } else { b"#f\r\n" }),
            Reply::Bool(b) => out.put_slice(if *b { b":1\r\n" } else { b":0\r\n" }),
            Reply::Double(d) if resp3 => {
                out.put_u8(b',');
                put_double(out, *d);
                out.put_slice(b"\r\n");
            }
            Reply::Double(d) => {
                // At most 24 bytes ("-1.2345678901234567e-308").
                let mut text = [0u8; 32];
                let mut room = &mut text[..];
                put_double(&mut room, *d);
                let len = 32 - room.len();
                put_blob(out, b'$', &[], &text[..len]);
            }
            Reply::BigNumber(digits) if resp3 => put_line(out, b'(', digits),
            Reply::BigNumber(digits) => put_blob(out, b'$', &[], digits),
            Reply::Verbatim { format, text } if resp3 => {
                put_blob(out, b'=', &[format[0], format[1], format[2], b':'], text)
            }
            Reply::Verbatim { text, .. } => put_blob(out, b'$', &[], text),
            Reply::Attribute { attributes, value } => {
                if resp3 {
                    put_pairs(out, proto, b'|', attributes);
                }
                value.encode(proto, out);
            }
        }
    }

    /// This reply encoded for `proto`, in a new buffer.
    pub fn to_bytes(&self, proto: Protocol) -> BytesMut {
        let mut out = BytesMut::new();
        self.encode(proto, &mut out);
        out
    }
}

impl From<i64> for Reply {
    fn from(n: i64) -> Self {
        Reply::Integer(n)
    }
}

impl From<bool> for Reply {
    fn from(b: bool) -> Self {
        Reply::Bool(b)
    }
}

/// A one-line reply. A CR or LF inside would end the line early and
/// desynchronise the client, so they are sent as spaces (as Redis does for
/// error texts).
fn put_line(out: &mut BytesMut, prefix: u8, text: &[u8]) {
    out.put_u8(prefix);
    if memchr::memchr2(b'\r', b'\n', text).is_none() {
        out.put_slice(text);
    } else {
        out.extend(
            text.iter()
                .map(|&b| if b == b'\r' || b == b'\n' { b' ' } else { b }),
        );
    }
    out.put_slice(b"\r\n");
}

fn put_integer(out: &mut BytesMut, prefix: u8, n: i64) {
    out.put_u8(prefix);
    out.put_slice(itoa::Buffer::new().format(n).as_bytes());
    out.put_slice(b"\r\n");
}

fn put_header(out: &mut BytesMut, prefix: u8, len: usize) {
    out.put_u8(prefix);
    out.put_slice(itoa::Buffer::new().format(len).as_bytes());
    out.put_slice(b"\r\n");
}

/// `<prefix><len>\r\n<head><data>\r\n`, where the length counts both.
fn put_blob(out: &mut BytesMut, prefix: u8, head: &[u8], data: &[u8]) {
    put_header(out, prefix, head.len() + data.len());
    out.reserve(head.len() + data.len() + 2);
    out.put_slice(head);
    out.put_slice(data);
    out.put_slice(b"\r\n");
}

fn put_items(out: &mut BytesMut, proto: Protocol, prefix: u8, items: &[Reply]) {
    put_header(out, prefix, items.len());
    for item in items {
        item.encode(proto, out);
    }
}

fn put_pairs(out: &mut BytesMut, proto: Protocol, prefix: u8, pairs: &[(Reply, Reply)]) {
    put_header(out, prefix, pairs.len());
    for (key, value) in pairs {
        key.encode(proto, out);
        value.encode(proto, out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn both(reply: &Reply) -> (BytesMut, BytesMut) {
        (
            reply.to_bytes(Protocol::Resp2),
            reply.to_bytes(Protocol::Resp3),
        )
    }

    #[test]
    fn scalars() {
        let cases: &[(Reply, &[u8], &[u8])] = &[
            (Reply::ok(), b"+OK\r\n", b"+OK\r\n"),
            (
                Reply::error("ERR not found"),
                b"-ERR not found\r\n",
                b"-ERR not found\r\n",
            ),
            (Reply::Integer(-42), b":-42\r\n", b":-42\r\n"),
            (
                Reply::Integer(i64::MIN),
                b":-9223372036854775808\r\n",
                b":-9223372036854775808\r\n",
            ),
            (
                Reply::bulk("a\r\nb"),
                b"$4\r\na\r\nb\r\n",
                b"$4\r\na\r\nb\r\n",
            ),
            (Reply::bulk(""), b"$0\r\n\r\n", b"$0\r\n\r\n"),
            (Reply::Null, b"$-1\r\n", b"_\r\n"),
            (Reply::NullArray, b"*-1\r\n", b"_\r\n"),
            (Reply::Bool(true), b":1\r\n", b"#t\r\n"),
            (Reply::Bool(false), b":0\r\n", b"#f\r\n"),
            (Reply::Double(1.5), b"$3\r\n1.5\r\n", b",1.5\r\n"),
            (
                Reply::Double(0.1),
                b"$19\r\n0.10000000000000001\r\n",
                b",0.10000000000000001\r\n",
            ),
            (Reply::Double(f64::INFINITY), b"$3\r\ninf\r\n", b",inf\r\n"),
            (
                Reply::Double(f64::NEG_INFINITY),
                b"$4\r\n-inf\r\n",
                b",-inf\r\n",
            ),
            (
                Reply::BigNumber("-123".into()),
                b"$4\r\n-123\r\n",
                b"(-123\r\n",
            ),
            (
                Reply::verbatim_text("a:b"),
                b"$3\r\na:b\r\n",
                b"=7\r\ntxt:a:b\r\n",
            ),
        ];
        for (reply, resp2, resp3) in cases {
            let (two, three) = both(reply);
            assert_eq!(&two[..], *resp2, "{reply:?} in RESP2");
            assert_eq!(&three[..], *resp3, "{reply:?} in RESP3");
        }
    }

    #[test]
    fn lines_never_carry_crlf() {
        let reply = Reply::error("ERR bad\r\nthing");
        assert_eq!(&reply.to_bytes(Protocol::Resp2)[..], b"-ERR bad  thing\r\n");
        let reply = Reply::Simple("a\nb".into());
        assert_eq!(&reply.to_bytes(Protocol::Resp3)[..], b"+a b\r\n");
    }

    #[test]
    fn aggregates_downgrade_in_resp2() {
        let set = Reply::Set(vec![Reply::Integer(1), Reply::Bool(true)]);
        let (two, three) = both(&set);
        assert_eq!(&two[..], b"*2\r\n:1\r\n:1\r\n");
        assert_eq!(&three[..], b"~2\r\n:1\r\n#t\r\n");

        let push = Reply::Push(vec![Reply::bulk("message")]);
        let (two, three) = both(&push);
        assert_eq!(&two[..], b"*1\r\n$7\r\nmessage\r\n");
        assert_eq!(&three[..], b">1\r\n$7\r\nmessage\r\n");

        let attr = Reply::Attribute {
            attributes: vec![(Reply::simple("ttl"), Reply::Integer(3))],
            value: Box::new(Reply::Integer(7)),
        };
        let (two, three) = both(&attr);
        assert_eq!(&two[..], b":7\r\n");
        assert_eq!(&three[..], b"|1\r\n+ttl\r\n:3\r\n:7\r\n");

        let nested = Reply::Array(vec![
            Reply::Map(vec![(Reply::bulk("k"), Reply::Null)]),
            Reply::Array(vec![]),
        ]);
        let (two, three) = both(&nested);
        assert_eq!(&two[..], b"*2\r\n*2\r\n$1\r\nk\r\n$-1\r\n*0\r\n");
        assert_eq!(&three[..], b"*2\r\n%1\r\n$1\r\nk\r\n_\r\n*0\r\n");
    }
}
