//! The crate's one error type: a protocol error.
//!
//! A protocol error means the byte stream cannot be trusted any more: the
//! server answers with [`ProtocolError::to_reply`] and closes the
//! connection, as Redis does. (A bad *argument* is not a protocol error; it
//! becomes an `-ERR` reply from the command and the connection stays open.)

use std::fmt;

use bytes::{BufMut, BytesMut};

use crate::Reply;

/// A malformed request or reply.
///
/// For requests, [`Display`](fmt::Display) gives Redis's own message, for
/// example `Protocol error: invalid bulk length`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProtocolError {
    kind: ErrorKind,
}

impl ProtocolError {
    /// What went wrong.
    pub fn kind(&self) -> &ErrorKind {
        &self.kind
    }

    /// Consumes the error, returning its kind.
    pub fn into_kind(self) -> ErrorKind {
        self.kind
    }

    /// The error reply Redis sends before closing the connection, byte for
    /// byte: `-ERR Protocol error: <text>\r\n` once encoded.
    ///
    /// ```
    /// use seen_resp::{parse_request, Limits, Protocol};
    ///
    /// let err = parse_request(b"*1\r\n$-5\r\n", &Limits::default()).unwrap_err();
    /// let mut out = bytes::BytesMut::new();
    /// err.to_reply().encode(Protocol::Resp2, &mut out);
    /// assert_eq!(&out[..], b"-ERR Protocol error: invalid bulk length\r\n");
    /// ```
    pub fn to_reply(&self) -> Reply {
        let mut line = BytesMut::with_capacity(64);
        line.put_slice(b"ERR Protocol error: ");
        match self.kind {
            // Redis formats the byte with `%c`, then turns CR and LF into
            // spaces so the error line stays one line; other bytes go as is.
            ErrorKind::ExpectedDollar(byte) => {
                line.put_slice(b"expected '$', got '");
                line.put_u8(sanitize_byte(byte));
                line.put_u8(b'\'');
            }
            ref kind => line.put_slice(kind.to_string().as_bytes()),
        }
        Reply::Error(line.freeze())
    }
}

impl From<ErrorKind> for ProtocolError {
    fn from(kind: ErrorKind) -> Self {
        ProtocolError { kind }
    }
}

impl fmt::Display for ProtocolError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Protocol error: {}", self.kind)
    }
}

impl std::error::Error for ProtocolError {}

/// The kinds of [`ProtocolError`].
///
/// The request kinds display Redis's exact texts (from `processMultibulkBuffer`
/// and `processInlineBuffer` in Redis's `networking.c`); the reply kinds are
/// only produced by [`parse_reply`](crate::parse_reply), a client-side parser.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ErrorKind {
    /// `*<count>` is not a number, or is above the multibulk limit.
    #[error("invalid multibulk length")]
    InvalidMultibulkLength,
    /// `$<len>` is not a number, is negative, or is above the bulk limit.
    #[error("invalid bulk length")]
    InvalidBulkLength,
    /// An element of a multibulk request does not start with `$`.
    #[error("expected '$', got '{}'", display_byte(*.0))]
    ExpectedDollar(u8),
    /// An inline request line is longer than the inline limit.
    #[error("too big inline request")]
    TooBigInlineRequest,
    /// The `*<count>` line is longer than the inline limit.
    #[error("too big mbulk count string")]
    TooBigMbulkCountString,
    /// A `$<len>` line is longer than the inline limit.
    #[error("too big bulk count string")]
    TooBigBulkCountString,
    /// An inline request has an unclosed quote, or a closing quote followed
    /// by something other than a space.
    #[error("unbalanced quotes in request")]
    UnbalancedQuotes,
    /// A reply starts with a byte that is no RESP type.
    #[error("got '{}' as reply type byte", display_byte(*.0))]
    InvalidReplyType(u8),
    /// A reply's length or count is not a valid number.
    #[error("invalid length in reply")]
    InvalidReplyLength,
    /// A reply's integer is not a valid 64-bit integer.
    #[error("invalid integer in reply")]
    InvalidReplyInteger,
    /// A reply's double is not a valid number.
    #[error("invalid double in reply")]
    InvalidReplyDouble,
    /// A reply's boolean is neither `t` nor `f`.
    #[error("invalid boolean in reply")]
    InvalidReplyBool,
    /// A reply's null (`_`) has a payload.
    #[error("invalid null in reply")]
    InvalidReplyNull,
    /// A verbatim string is shorter than its `xxx:` format prefix.
    #[error("invalid verbatim string in reply")]
    InvalidReplyVerbatim,
    /// A reply line or string is not terminated by CRLF.
    #[error("expected CRLF in reply")]
    ExpectedCrlf,
    /// Aggregates are nested deeper than [`MAX_REPLY_DEPTH`](crate::MAX_REPLY_DEPTH).
    #[error("reply nested too deeply")]
    ReplyTooDeep,
    /// A streamed string or aggregate (`$?`, `*?`), which this parser does
    /// not support.
    #[error("streamed replies are not supported")]
    StreamedReply,
}

/// CR and LF would break the one-line error reply: Redis maps them to spaces.
fn sanitize_byte(byte: u8) -> u8 {
    match byte {
        b'\r' | b'\n' => b' ',
        other => other,
    }
}

/// Bytes above ASCII show as their Latin-1 character (the wire form in
/// [`ProtocolError::to_reply`] keeps the raw byte).
fn display_byte(byte: u8) -> char {
    char::from(sanitize_byte(byte))
}

/// Shorthand for building an `Err` from a kind.
pub(crate) fn err<T>(kind: ErrorKind) -> Result<T, ProtocolError> {
    Err(ProtocolError { kind })
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;

    fn wire(kind: ErrorKind) -> Bytes {
        match ProtocolError::from(kind).to_reply() {
            Reply::Error(line) => line,
            other => panic!("not an error reply: {other:?}"),
        }
    }

    #[test]
    fn display_is_redis_text() {
        let cases = [
            (
                ErrorKind::InvalidMultibulkLength,
                "invalid multibulk length",
            ),
            (ErrorKind::InvalidBulkLength, "invalid bulk length"),
            (ErrorKind::ExpectedDollar(b'f'), "expected '$', got 'f'"),
            (ErrorKind::TooBigInlineRequest, "too big inline request"),
            (
                ErrorKind::TooBigMbulkCountString,
                "too big mbulk count string",
            ),
            (
                ErrorKind::TooBigBulkCountString,
                "too big bulk count string",
            ),
            (ErrorKind::UnbalancedQuotes, "unbalanced quotes in request"),
        ];
        for (kind, text) in cases {
            assert_eq!(kind.to_string(), text);
            let err = ProtocolError::from(kind.clone());
            assert_eq!(err.to_string(), format!("Protocol error: {text}"));
            assert_eq!(
                &wire(kind)[..],
                format!("ERR Protocol error: {text}").as_bytes()
            );
        }
    }

    #[test]
    fn expected_dollar_keeps_the_error_on_one_line() {
        assert_eq!(
            &wire(ErrorKind::ExpectedDollar(b'\r'))[..],
            b"ERR Protocol error: expected '$', got ' '"
        );
        assert_eq!(
            &wire(ErrorKind::ExpectedDollar(b'\n'))[..],
            b"ERR Protocol error: expected '$', got ' '"
        );
        assert_eq!(
            &wire(ErrorKind::ExpectedDollar(0xff))[..],
            b"ERR Protocol error: expected '$', got '\xff'"
        );
    }
}
