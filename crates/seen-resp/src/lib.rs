//! # seen-resp
//!
//! The Redis wire protocol for `seen serve`: the server that answers
//! RedisBloom's `BF.*` commands byte for byte, so existing Redis clients
//! and RedisBloom users can point at seen without changing a line.
//!
//! The crate has no I/O and no async. The connection loop reads bytes into a
//! [`BytesMut`](bytes::BytesMut), asks a [`RequestParser`] for the next
//! [`Request`], hands it to a command, and encodes the [`Reply`] the command
//! returned for the client's [`Protocol`]. Because commands take a
//! `Request` and return a `Reply` value, they are unit-tested without a
//! socket, and so is this crate.
//!
//! * Requests: RESP multibulk (`*N\r\n$len\r\n...`) and inline commands
//!   (`PING\r\n`, `set k "a b"\n`), parsed by the rules and with the
//!   exact error texts of Redis's `networking.c`, under [`Limits`] like
//!   Redis's (`proto-max-bulk-len` and friends). A partial frame is
//!   `Ok(None)`, not an error; a [`ProtocolError`] means reply with
//!   [`ProtocolError::to_reply`] and close.
//! * Replies: one [`Reply`] type encoded as RESP3, or downgraded to RESP2
//!   exactly as Redis does (maps become flat arrays, booleans integers, ...).
//! * The client side, [`parse_reply`], splits a byte stream into reply
//!   frames: tests replay recorded RedisBloom transcripts through it.
//! * [`name_eq`], [`name_is_prefix`] and [`lowercase_name`] match command
//!   names and options case-insensitively without allocating.
//!
//! Nothing here panics on any input: every parser returns `Ok` or `Err`,
//! which property tests and the `resp_request` / `resp_reply` fuzz targets
//! check.
//!
//! ```
//! use bytes::BytesMut;
//! use seen_resp::{Limits, Protocol, Reply, RequestParser};
//!
//! let mut parser = RequestParser::new(Limits::default());
//! let mut input = BytesMut::from(&b"*3\r\n$6\r\nbf.add\r\n$4\r\nurls\r\n$3\r\nabc\r\n"[..]);
//! let mut output = BytesMut::new();
//! while let Some(req) = parser.next(&mut input)? {
//!     let reply = if req.is_command(b"BF.ADD") {
//!         Reply::Bool(true)
//!     } else {
//!         Reply::error("ERR unknown command")
//!     };
//!     reply.encode(Protocol::Resp3, &mut output);
//! }
//! assert_eq!(&output[..], b"#t\r\n");
//! # Ok::<(), seen_resp::ProtocolError>(())
//! ```

#![warn(missing_docs)]

mod command_name;
mod error;
mod inline;
mod limits;
mod number;
mod reply;
mod reply_parser;
mod request;
mod request_parser;

pub use command_name::{lowercase_name, name_eq, name_is_prefix};
pub use error::{ErrorKind, ProtocolError};
pub use limits::Limits;
pub use number::{put_g, string2ll};
pub use reply::{Protocol, Reply};
pub use reply_parser::{parse_reply, MAX_REPLY_DEPTH};
pub use request::{encode_request, Request};
pub use request_parser::{parse_request, RequestParser};
