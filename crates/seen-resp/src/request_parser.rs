//! Parsing client requests: RESP multibulk and inline commands, following
//! Redis's `processMultibulkBuffer` and `processInlineBuffer` rule for rule.
//!
//! "Need more bytes" is a state, not an error: a partial frame yields
//! `Ok(None)` and consumes nothing. A [`ProtocolError`] means the stream is
//! broken; the server replies with it and closes the connection.

use bytes::{Buf, Bytes, BytesMut};

use crate::error::{err, ErrorKind, ProtocolError};
use crate::inline::split_args;
use crate::number::string2ll;
use crate::{Limits, Request};

/// Redis preallocates at most this many argument slots for a multibulk
/// request, whatever count the client announced; the rest grow as
/// arguments actually arrive.
const MAX_PREALLOCATED_ARGS: usize = 1024;

/// The argument table of one request is kept between requests for reuse,
/// unless a huge request made it larger than this.
const MAX_KEPT_SPANS: usize = 4096;

/// Reads requests from a connection's buffer, one at a time, skipping empty
/// ones (`*0`, `*-1`, blank inline lines) as Redis does.
///
/// A multibulk request that arrives in pieces is resumed where it stopped,
/// so a large pipelined request is not re-scanned on every read. Complete
/// requests are split off the front of the buffer and their arguments are
/// slices of it: no per-argument copy.
///
/// ```
/// use bytes::BytesMut;
/// use seen_resp::{Limits, RequestParser};
///
/// let mut parser = RequestParser::new(Limits::default());
/// let mut buf = BytesMut::from(&b"*2\r\n$4\r\nECHO\r\n$2\r\nhi\r\nPING\r\n*1\r\n$4"[..]);
///
/// let echo = parser.next(&mut buf)?.unwrap();
/// assert_eq!(echo.args(), ["ECHO", "hi"]);
/// let ping = parser.next(&mut buf)?.unwrap();
/// assert!(ping.is_command(b"ping"));
/// assert_eq!(parser.next(&mut buf)?, None); // the rest is a partial frame
/// assert_eq!(&buf[..], b"*1\r\n$4");
/// # Ok::<(), seen_resp::ProtocolError>(())
/// ```
#[derive(Debug, Default)]
pub struct RequestParser {
    limits: Limits,
    partial: Option<Multibulk>,
    spans: Vec<(usize, usize)>,
}

impl RequestParser {
    /// A parser enforcing `limits`.
    pub fn new(limits: Limits) -> Self {
        RequestParser {
            limits,
            partial: None,
            spans: Vec::new(),
        }
    }

    /// The limits this parser enforces.
    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// The next complete request at the front of `buf`, removing its bytes
    /// (and those of any empty requests before it) from `buf`.
    ///
    /// Returns `Ok(None)` when `buf` holds only part of a request; call
    /// again once more bytes were appended. After an error the connection
    /// must be closed: the parser is reset, but the stream is not
    /// trustworthy.
    pub fn next(&mut self, buf: &mut BytesMut) -> Result<Option<Request>, ProtocolError> {
        loop {
            let step = match step(&mut self.partial, &mut self.spans, buf, &self.limits) {
                Ok(step) => step,
                Err(e) => {
                    self.reset();
                    return Err(e);
                }
            };
            match step {
                Step::Incomplete => return Ok(None),
                Step::Empty(consumed) => buf.advance(consumed),
                Step::Multibulk(consumed) => {
                    self.partial = None;
                    let frame = buf.split_to(consumed).freeze();
                    let args = self.spans.iter().map(|&(s, e)| frame.slice(s..e)).collect();
                    self.clear_spans();
                    return Ok(Some(Request::new(args)));
                }
                Step::Inline { consumed, data } => {
                    buf.advance(consumed);
                    let data = Bytes::from(data);
                    let args = self.spans.iter().map(|&(s, e)| data.slice(s..e)).collect();
                    self.clear_spans();
                    return Ok(Some(Request::new(args)));
                }
            }
        }
    }

    /// Forgets any partly read request (for reusing the parser on a new
    /// connection).
    pub fn reset(&mut self) {
        self.partial = None;
        self.clear_spans();
    }

    fn clear_spans(&mut self) {
        if self.spans.capacity() > MAX_KEPT_SPANS {
            self.spans = Vec::new();
        } else {
            self.spans.clear();
        }
    }
}

/// Parses one request frame from the front of `buf`, without state.
///
/// Returns the request and the number of bytes it took, or `Ok(None)` if
/// `buf` holds only part of a frame (nothing is consumed). An empty frame
/// (`*0`, `*-1`, a blank inline line) comes back as an empty [`Request`]
/// with its length, so the caller can drop those bytes; Redis ignores such
/// frames. The frame is copied once into one [`Bytes`] that the arguments
/// slice; [`RequestParser`] avoids even that copy.
///
/// ```
/// use seen_resp::{parse_request, Limits};
///
/// let limits = Limits::default();
/// let buf = b"*3\r\n$6\r\nBF.ADD\r\n$1\r\nk\r\n$4\r\na\r\nb\r\n";
/// let (req, used) = parse_request(buf, &limits)?.unwrap();
/// assert_eq!(req.args(), ["BF.ADD", "k", "a\r\nb"]);
/// assert_eq!(used, buf.len());
/// assert_eq!(parse_request(&buf[..used - 1], &limits)?, None);
/// # Ok::<(), seen_resp::ProtocolError>(())
/// ```
pub fn parse_request(
    buf: &[u8],
    limits: &Limits,
) -> Result<Option<(Request, usize)>, ProtocolError> {
    let mut partial = None;
    let mut spans = Vec::new();
    Ok(match step(&mut partial, &mut spans, buf, limits)? {
        Step::Incomplete => None,
        Step::Empty(consumed) => Some((Request::default(), consumed)),
        Step::Multibulk(consumed) => {
            let frame = Bytes::copy_from_slice(&buf[..consumed]);
            let args = spans.iter().map(|&(s, e)| frame.slice(s..e)).collect();
            Some((Request::new(args), consumed))
        }
        Step::Inline { consumed, data } => {
            let data = Bytes::from(data);
            let args = spans.iter().map(|&(s, e)| data.slice(s..e)).collect();
            Some((Request::new(args), consumed))
        }
    })
}

/// Where a partly received multibulk request stopped.
#[derive(Debug, Clone, Copy)]
struct Multibulk {
    /// Arguments still to read.
    remaining: usize,
    /// Offset in the frame of the first unread byte.
    pos: usize,
    /// Length of the argument whose `$<len>` line was read but whose bytes
    /// have not all arrived.
    bulk_len: Option<usize>,
}

/// The outcome of one parsing step over the front of a buffer.
enum Step {
    /// A partial frame; the multibulk state (if any) records the progress.
    Incomplete,
    /// An empty frame of this many bytes.
    Empty(usize),
    /// A complete multibulk frame of this many bytes; its arguments are the
    /// spans (offsets into the frame).
    Multibulk(usize),
    /// A complete inline line of `consumed` bytes; its unescaped arguments
    /// are the spans into `data`.
    Inline { consumed: usize, data: Vec<u8> },
}

fn step(
    partial: &mut Option<Multibulk>,
    spans: &mut Vec<(usize, usize)>,
    buf: &[u8],
    limits: &Limits,
) -> Result<Step, ProtocolError> {
    if let Some(state) = partial {
        return resume_multibulk(state, spans, buf, limits);
    }
    match buf.first() {
        None => Ok(Step::Incomplete),
        Some(b'*') => start_multibulk(partial, spans, buf, limits),
        Some(_) => inline(spans, buf, limits),
    }
}

/// Finds the end of a header line as Redis does, with `strchr`: the search
/// for `term` stops at a NUL byte, which therefore hides any terminator
/// after it.
fn find_terminator(buf: &[u8], term: u8) -> Option<usize> {
    memchr::memchr2(term, 0, buf).filter(|&i| buf[i] == term)
}

fn start_multibulk(
    partial: &mut Option<Multibulk>,
    spans: &mut Vec<(usize, usize)>,
    buf: &[u8],
    limits: &Limits,
) -> Result<Step, ProtocolError> {
    let Some(cr) = find_terminator(buf, b'\r') else {
        if buf.len() > limits.max_inline_len {
            return err(ErrorKind::TooBigMbulkCountString);
        }
        return Ok(Step::Incomplete);
    };
    // Redis skips the two bytes after the count without checking the
    // second is '\n'; it only waits until they are there.
    if cr + 2 > buf.len() {
        return Ok(Step::Incomplete);
    }
    let count = string2ll(&buf[1..cr]).ok_or(ErrorKind::InvalidMultibulkLength)?;
    let pos = cr + 2;
    if count <= 0 {
        return Ok(Step::Empty(pos));
    }
    let remaining = usize::try_from(count)
        .ok()
        .filter(|&n| n <= limits.max_multibulk_len)
        .ok_or(ErrorKind::InvalidMultibulkLength)?;
    spans.clear();
    spans.reserve(remaining.min(MAX_PREALLOCATED_ARGS));
    let state = partial.insert(Multibulk {
        remaining,
        pos,
        bulk_len: None,
    });
    resume_multibulk(state, spans, buf, limits)
}

fn resume_multibulk(
    state: &mut Multibulk,
    spans: &mut Vec<(usize, usize)>,
    buf: &[u8],
    limits: &Limits,
) -> Result<Step, ProtocolError> {
    while state.remaining > 0 {
        let bulk_len = match state.bulk_len {
            Some(len) => len,
            None => {
                let rest = buf.get(state.pos..).unwrap_or_default();
                let Some(cr) = find_terminator(rest, b'\r') else {
                    if rest.len() > limits.max_inline_len {
                        return err(ErrorKind::TooBigBulkCountString);
                    }
                    return Ok(Step::Incomplete);
                };
                if cr + 2 > rest.len() {
                    return Ok(Step::Incomplete);
                }
                if rest[0] != b'$' {
                    return err(ErrorKind::ExpectedDollar(rest[0]));
                }
                let len = string2ll(&rest[1..cr])
                    .and_then(|len| usize::try_from(len).ok())
                    .filter(|&len| len <= limits.max_bulk_len)
                    .ok_or(ErrorKind::InvalidBulkLength)?;
                state.pos += cr + 2;
                state.bulk_len = Some(len);
                len
            }
        };
        // Like Redis, the two bytes after the argument are skipped, not
        // checked: a wrong length shows up as "expected '$'" on the next
        // header instead.
        let available = buf.len().saturating_sub(state.pos);
        if available < bulk_len.saturating_add(2) {
            return Ok(Step::Incomplete);
        }
        spans.push((state.pos, state.pos + bulk_len));
        state.pos += bulk_len + 2;
        state.bulk_len = None;
        state.remaining -= 1;
    }
    Ok(Step::Multibulk(state.pos))
}

fn inline(
    spans: &mut Vec<(usize, usize)>,
    buf: &[u8],
    limits: &Limits,
) -> Result<Step, ProtocolError> {
    let Some(newline) = find_terminator(buf, b'\n') else {
        if buf.len() > limits.max_inline_len {
            return err(ErrorKind::TooBigInlineRequest);
        }
        return Ok(Step::Incomplete);
    };
    let line_end = if newline > 0 && buf[newline - 1] == b'\r' {
        newline - 1
    } else {
        newline
    };
    let mut data = Vec::with_capacity(line_end);
    spans.clear();
    split_args(&buf[..line_end], &mut data, spans)?;
    let consumed = newline + 1;
    if spans.is_empty() {
        Ok(Step::Empty(consumed))
    } else {
        Ok(Step::Inline { consumed, data })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(buf: &[u8]) -> Result<Option<(Request, usize)>, ProtocolError> {
        parse_request(buf, &Limits::default())
    }

    fn kind(buf: &[u8]) -> ErrorKind {
        parse(buf).unwrap_err().into_kind()
    }

    #[test]
    fn multibulk_with_binary_args() {
        let buf = b"*2\r\n$3\r\n\r\n\0\r\n$0\r\n\r\n";
        let (req, used) = parse(buf).unwrap().unwrap();
        assert_eq!(req.args(), [&b"\r\n\0"[..], b""]);
        assert_eq!(used, buf.len());
    }

    #[test]
    fn empty_multibulk_frames_are_reported_empty() {
        for buf in [&b"*0\r\n"[..], b"*-1\r\n", b"*-10\r\n"] {
            let (req, used) = parse(buf).unwrap().unwrap();
            assert!(req.is_empty());
            assert_eq!(used, buf.len());
        }
    }

    #[test]
    fn redis_protocol_tcl_cases() {
        // Cases from Redis's tests/unit/protocol.tcl.
        assert_eq!(kind(b"*20000000\r\n"), ErrorKind::InvalidMultibulkLength);
        assert_eq!(
            kind(b"*3\r\n$3\r\nSET\r\n$1\r\nx\r\nfooz\r\n"),
            ErrorKind::ExpectedDollar(b'f')
        );
        assert_eq!(
            kind(b"*3\r\n$3\r\nSET\r\n$1\r\nx\r\n$-10\r\n"),
            ErrorKind::InvalidBulkLength
        );
        assert_eq!(
            kind(b"*3\r\n$3\r\nSET\r\n$1\r\nx\r\n$2000000000\r\n"),
            ErrorKind::InvalidBulkLength
        );
        assert_eq!(
            kind(b"*3\r\n$3\r\nSET\r\n$1\r\nx\r\n$blabla\r\n"),
            ErrorKind::InvalidBulkLength
        );
        assert_eq!(kind(b"*1\r\nfoo\r\n"), ErrorKind::ExpectedDollar(b'f'));
    }

    #[test]
    fn header_needs_one_byte_after_cr() {
        assert_eq!(parse(b"*1\r").unwrap(), None);
        assert_eq!(parse(b"*1\r\n$3\r").unwrap(), None);
        // The '$' check waits for a whole line, as Redis's does.
        assert_eq!(parse(b"*1\r\nx").unwrap(), None);
        assert_eq!(kind(b"*1\r\nx\r\n"), ErrorKind::ExpectedDollar(b'x'));
        assert_eq!(kind(b"*1\r\n\r\n"), ErrorKind::ExpectedDollar(b'\r'));
    }

    #[test]
    fn crlf_after_bulk_is_skipped_unchecked_like_redis() {
        let (req, used) = parse(b"*1\r\n$3\r\nfooXY").unwrap().unwrap();
        assert_eq!(req.args(), ["foo"]);
        assert_eq!(used, 13);
        // A too-short length then fails on the next header.
        assert_eq!(
            kind(b"*2\r\n$2\r\nfoo\r\n$1\r\nx\r\n"),
            ErrorKind::ExpectedDollar(b'\n')
        );
    }

    #[test]
    fn nul_hides_the_terminator_like_strchr() {
        assert_eq!(parse(b"*1\0\r\n").unwrap(), None);
        assert_eq!(parse(b"PING\0\n").unwrap(), None);
        assert_eq!(parse(b"*1\r\n$\x003\r\n").unwrap(), None);
    }

    #[test]
    fn inline_lines() {
        let (req, used) = parse(b"set k \"a b\"\r\nrest").unwrap().unwrap();
        assert_eq!(req.args(), ["set", "k", "a b"]);
        assert_eq!(used, 13);
        let (req, used) = parse(b"PING\n").unwrap().unwrap();
        assert_eq!(req.args(), ["PING"]);
        assert_eq!(used, 5);
        // Only one '\r' before the '\n' belongs to the terminator; another
        // is a blank.
        let (req, _) = parse(b"PING\r\r\n").unwrap().unwrap();
        assert_eq!(req.args(), ["PING"]);
        let (req, used) = parse(b"   \r\n").unwrap().unwrap();
        assert!(req.is_empty());
        assert_eq!(used, 5);
        assert_eq!(parse(b"PING").unwrap(), None);
        assert_eq!(kind(b"get \"x\n"), ErrorKind::UnbalancedQuotes);
    }

    #[test]
    fn parser_resumes_a_split_bulk() {
        let mut parser = RequestParser::new(Limits::default());
        let mut buf = BytesMut::from(&b"*2\r\n$3\r\nGET\r\n$5\r\nhel"[..]);
        assert_eq!(parser.next(&mut buf).unwrap(), None);
        assert!(parser.partial.is_some_and(|p| p.bulk_len == Some(5)));
        buf.extend_from_slice(b"lo\r\n");
        let req = parser.next(&mut buf).unwrap().unwrap();
        assert_eq!(req.args(), ["GET", "hello"]);
        assert!(buf.is_empty());
        assert!(parser.partial.is_none());
    }

    #[test]
    fn parser_skips_empty_requests() {
        let mut parser = RequestParser::new(Limits::default());
        let mut buf = BytesMut::from(&b"\r\n\n*0\r\n*-1\r\n  \nPING\r\n"[..]);
        let req = parser.next(&mut buf).unwrap().unwrap();
        assert_eq!(req.args(), ["PING"]);
        assert!(buf.is_empty());
        let mut buf = BytesMut::from(&b"\n\n*0\r\n"[..]);
        assert_eq!(parser.next(&mut buf).unwrap(), None);
        assert!(buf.is_empty(), "empty requests are consumed");
    }

    #[test]
    fn parser_resets_after_an_error() {
        let mut parser = RequestParser::new(Limits::default());
        let mut buf = BytesMut::from(&b"*2\r\n$1\r\na\r\n"[..]);
        assert_eq!(parser.next(&mut buf).unwrap(), None);
        buf.extend_from_slice(b"x\r\n");
        assert_eq!(
            parser.next(&mut buf).unwrap_err().kind(),
            &ErrorKind::ExpectedDollar(b'x')
        );
        let mut fresh = BytesMut::from(&b"PING\r\n"[..]);
        assert_eq!(parser.next(&mut fresh).unwrap().unwrap().args(), ["PING"]);
    }

    #[test]
    fn no_preallocation_from_the_announced_count() {
        let mut parser = RequestParser::new(Limits::default());
        let mut buf = BytesMut::from(&b"*1048576\r\n"[..]);
        assert_eq!(parser.next(&mut buf).unwrap(), None);
        assert!(parser.spans.capacity() <= MAX_PREALLOCATED_ARGS);
    }
}
