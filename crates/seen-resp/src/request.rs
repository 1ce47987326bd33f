//! A parsed request: the command name and its arguments, as bytes.

use bytes::{BufMut, Bytes, BytesMut};

use crate::command_name::name_eq;

/// One command from a client: `args()[0]` is the command name, the rest are
/// its arguments. Every argument is binary-safe [`Bytes`]; for multibulk
/// requests they are slices of the connection's read buffer, not copies.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Request {
    args: Vec<Bytes>,
}

impl Request {
    /// A request made of these arguments (the first is the command name).
    pub fn new(args: Vec<Bytes>) -> Self {
        Request { args }
    }

    /// All arguments, the command name first.
    pub fn args(&self) -> &[Bytes] {
        &self.args
    }

    /// Consumes the request, returning its arguments.
    pub fn into_args(self) -> Vec<Bytes> {
        self.args
    }

    /// The command name as sent (any case), or `None` for an empty request.
    pub fn name(&self) -> Option<&[u8]> {
        self.args.first().map(|name| &name[..])
    }

    /// Whether the command name is `name`, ignoring ASCII case.
    ///
    /// ```
    /// use seen_resp::Request;
    ///
    /// let req = Request::new(vec!["bf.add".into(), "k".into(), "x".into()]);
    /// assert!(req.is_command(b"BF.ADD"));
    /// ```
    pub fn is_command(&self, name: &[u8]) -> bool {
        self.name().is_some_and(|n| name_eq(n, name))
    }

    /// Number of arguments, the command name included.
    pub fn len(&self) -> usize {
        self.args.len()
    }

    /// Whether there are no arguments at all. [`RequestParser`] never yields
    /// such a request (Redis skips `*0` and blank lines); [`parse_request`]
    /// does, so its caller can drop the bytes.
    ///
    /// [`RequestParser`]: crate::RequestParser
    /// [`parse_request`]: crate::parse_request
    pub fn is_empty(&self) -> bool {
        self.args.is_empty()
    }

    /// Appends this request in multibulk form, as a client sends it.
    pub fn encode(&self, out: &mut BytesMut) {
        encode_request(&self.args, out);
    }
}

impl<A: Into<Bytes>> FromIterator<A> for Request {
    fn from_iter<I: IntoIterator<Item = A>>(iter: I) -> Self {
        Request::new(iter.into_iter().map(Into::into).collect())
    }
}

/// Appends `args` as a RESP multibulk request (`*N\r\n$len\r\narg\r\n...`),
/// the form every Redis client sends. Used by clients, tests and benchmarks.
///
/// ```
/// let mut out = bytes::BytesMut::new();
/// seen_resp::encode_request(&["BF.ADD", "k", "x"], &mut out);
/// assert_eq!(&out[..], b"*3\r\n$6\r\nBF.ADD\r\n$1\r\nk\r\n$1\r\nx\r\n");
/// ```
pub fn encode_request<A: AsRef<[u8]>>(args: &[A], out: &mut BytesMut) {
    let mut num = itoa::Buffer::new();
    out.put_u8(b'*');
    out.put_slice(num.format(args.len()).as_bytes());
    out.put_slice(b"\r\n");
    for arg in args {
        let arg = arg.as_ref();
        out.put_u8(b'$');
        out.put_slice(num.format(arg.len()).as_bytes());
        out.put_slice(b"\r\n");
        out.put_slice(arg);
        out.put_slice(b"\r\n");
    }
}
