//! The connection to Redis: pipelines, reconnection, retries with backoff,
//! and the one fact the filter needs about a failure: might the commands
//! have run?
//!
//! Standalone servers and Clusters share everything here except how a
//! pipeline is sent: a plain [`redis::Pipeline`] on one
//! [`redis::Connection`], or a [`ClusterPipeline`] that the `redis` crate
//! splits by node and sends to all nodes before reading any reply.
//!
//! # Why the Cluster client is told never to retry
//!
//! The `redis` crate's Cluster connection retries a failed command by
//! itself, including one whose connection broke after the command was sent.
//! For `BITFIELD ... SET` that is wrong: if the first send did run, the
//! second one finds the bits set and reports a new item as "already
//! present", and no worker would ever be told it was new. So the Cluster
//! client is built with `retries(0)`, and every retry happens here, where an
//! attempt that may have run marks the batch *ambiguous* (see
//! [`RedisFilter::add_many`](crate::RedisFilter::add_many) for what that
//! changes). MOVED, ASK, TRYAGAIN and CLUSTERDOWN replies mean the command did
//! not run: the batch is retried on a fresh connection, which reloads the
//! slot map.

use std::thread;
use std::time::{Duration, Instant};

use redis::cluster::{ClusterClient, ClusterClientBuilder, ClusterConnection, ClusterPipeline};
use redis::{Cmd, RedisError, ServerError, ServerErrorKind, Value};

use crate::error::{lossy, ErrorKind, Result};
use crate::target::{Target, TargetKind};

/// How faults are handled: timeouts, and how long to keep retrying.
///
/// Connection loss, refused connections, a restarting server (`LOADING`),
/// Cluster redirections and failovers (`MOVED`, `ASK`, `TRYAGAIN`,
/// `CLUSTERDOWN`, `MASTERDOWN`, `READONLY`) are retried after a backoff that
/// doubles from `first_backoff` up to `max_backoff`, until `max_attempts`
/// attempts or `max_elapsed` have been spent; then the call fails with
/// [`ErrorKind::Unavailable`]. Other errors fail at once.
#[derive(Clone, Debug)]
pub struct RetryPolicy {
    /// Attempts per call, the first included (at least 1).
    pub max_attempts: u32,
    /// Wait before the first retry.
    pub first_backoff: Duration,
    /// Longest wait between two attempts.
    pub max_backoff: Duration,
    /// No retry starts after this much time since the call began.
    pub max_elapsed: Duration,
    /// Timeout for establishing a connection.
    pub connect_timeout: Duration,
    /// Timeout for reading a reply (or writing a request).
    pub response_timeout: Duration,
}

impl Default for RetryPolicy {
    /// Up to 40 attempts within 30 s, backoff 10 ms doubling to 1 s;
    /// connect timeout 2 s, response timeout 10 s.
    fn default() -> Self {
        RetryPolicy {
            max_attempts: 40,
            first_backoff: Duration::from_millis(10),
            max_backoff: Duration::from_secs(1),
            max_elapsed: Duration::from_secs(30),
            connect_timeout: Duration::from_secs(2),
            response_timeout: Duration::from_secs(10),
        }
    }
}

impl RetryPolicy {
    /// No retries at all: every fault is an error at once.
    pub fn no_retry() -> Self {
        RetryPolicy {
            max_attempts: 1,
            ..RetryPolicy::default()
        }
    }
}

/// Commands sent together, with what each is, for error messages.
pub(crate) struct Batch {
    pipe: Pipe,
    labels: Vec<(&'static str, Vec<u8>)>,
}

enum Pipe {
    /// For a standalone server: every command already encoded (RESP), one
    /// after another in `buf`; command `i` ends at `ends[i]`. Sent by
    /// [`stream`], which keeps Redis busy while replies are read.
    Single {
        buf: Vec<u8>,
        ends: Vec<usize>,
    },
    Cluster(ClusterPipeline),
}

/// A `BITFIELD` operation on one-bit fields.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum BitOp {
    /// `BITFIELD key SET u1 <offset> 1 ...`: sets bits, replies their old
    /// values.
    Set,
    /// `BITFIELD_RO key GET u1 <offset> ...`: reads bits.
    Get,
}

impl BitOp {
    pub(crate) fn command(self) -> &'static str {
        match self {
            BitOp::Set => "BITFIELD",
            BitOp::Get => "BITFIELD_RO",
        }
    }
}

impl Batch {
    pub(crate) fn add(&mut self, command: &'static str, key: &[u8], cmd: Cmd) {
        match &mut self.pipe {
            Pipe::Single { buf, ends } => {
                cmd.write_packed_command(buf);
                ends.push(buf.len());
            }
            Pipe::Cluster(p) => {
                p.add_command(cmd);
            }
        }
        self.labels.push((command, key.to_vec()));
    }

    /// Adds one `BITFIELD` (or `BITFIELD_RO`) command on `key` with an
    /// operation for each of the `ops` offsets. For a standalone server it
    /// is encoded straight into the batch's buffer: a batch of 1,000 items
    /// is some 24,000 arguments, and building a [`Cmd`] of each and then
    /// encoding it costs more client time than Redis spends running them.
    pub(crate) fn add_bitfield(
        &mut self,
        op: BitOp,
        key: &[u8],
        ops: usize,
        offsets: impl Iterator<Item = u64>,
    ) {
        match &mut self.pipe {
            Pipe::Single { buf, ends } => {
                let per_op = match op {
                    BitOp::Set => 4,
                    BitOp::Get => 3,
                };
                let start = buf.len();
                resp_array(buf, 2 + per_op * ops);
                resp_bulk(buf, op.command().as_bytes());
                resp_bulk(buf, key);
                let mut written = 0;
                for off in offsets {
                    match op {
                        BitOp::Set => buf.extend_from_slice(b"$3\r\nSET\r\n$2\r\nu1\r\n"),
                        BitOp::Get => buf.extend_from_slice(b"$3\r\nGET\r\n$2\r\nu1\r\n"),
                    }
                    resp_bulk_u64(buf, off);
                    if op == BitOp::Set {
                        buf.extend_from_slice(b"$1\r\n1\r\n");
                    }
                    written += 1;
                }
                // The header promised `ops` operations: a miscount would put
                // the connection out of step, so it is a bug caught here.
                assert_eq!(written, ops, "BITFIELD operation count");
                debug_assert!(buf.len() > start);
                ends.push(buf.len());
            }
            Pipe::Cluster(p) => {
                let mut c = redis::cmd(op.command());
                c.arg(key);
                for off in offsets {
                    match op {
                        BitOp::Set => c.arg("SET").arg("u1").arg(off).arg(1),
                        BitOp::Get => c.arg("GET").arg("u1").arg(off),
                    };
                }
                p.add_command(c);
            }
        }
        self.labels.push((op.command(), key.to_vec()));
    }

    pub(crate) fn len(&self) -> usize {
        self.labels.len()
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.labels.is_empty()
    }

    /// The command name and key of command `i`.
    pub(crate) fn label(&self, i: usize) -> (&'static str, String) {
        match self.labels.get(i) {
            Some((c, k)) => (c, lossy(k)),
            None => ("pipeline", String::new()),
        }
    }
}

fn resp_array(buf: &mut Vec<u8>, len: usize) {
    buf.push(b'*');
    buf.extend_from_slice(itoa::Buffer::new().format(len).as_bytes());
    buf.extend_from_slice(b"\r\n");
}

fn resp_bulk(buf: &mut Vec<u8>, arg: &[u8]) {
    buf.push(b'$');
    buf.extend_from_slice(itoa::Buffer::new().format(arg.len()).as_bytes());
    buf.extend_from_slice(b"\r\n");
    buf.extend_from_slice(arg);
    buf.extend_from_slice(b"\r\n");
}

fn resp_bulk_u64(buf: &mut Vec<u8>, n: u64) {
    let mut digits = itoa::Buffer::new();
    resp_bulk(buf, digits.format(n).as_bytes());
}

/// Bytes of commands sent ahead of the reply being waited for: enough that
/// Redis always has the next command in its socket while this side parses
/// a reply, little enough to stay within the socket buffers.
const SEND_AHEAD: usize = 128 << 10;

/// Sends encoded commands and reads their replies, overlapping the two:
/// up to [`SEND_AHEAD`] bytes of commands are in flight while replies are
/// read, so Redis runs command `i + 1` while this side parses reply `i`
/// (a [`redis::Pipeline`] writes everything, then reads everything, and
/// one side idles while the other works). Replies are in command order;
/// error replies are values here, as in a pipeline. On `Err`, some
/// commands were sent if the `bool` says so, and the connection is out of
/// step and must be dropped.
fn stream(
    conn: &mut redis::Connection,
    buf: &[u8],
    ends: &[usize],
) -> std::result::Result<Vec<Value>, (RedisError, bool)> {
    let n = ends.len();
    let mut values = Vec::with_capacity(n);
    let mut sent = 0; // commands sent
    let mut sent_bytes = 0;
    while values.len() < n {
        // Bytes of commands whose replies are not read yet.
        let answered = values.len().checked_sub(1).map_or(0, |i| ends[i]);
        if sent < n && sent_bytes - answered < SEND_AHEAD {
            let mut upto = sent + 1;
            while upto < n && ends[upto] - answered <= SEND_AHEAD {
                upto += 1;
            }
            conn.send_packed_command(&buf[sent_bytes..ends[upto - 1]])
                .map_err(|e| (e, true))?;
            sent = upto;
            sent_bytes = ends[upto - 1];
            continue;
        }
        match conn.recv_response().map_err(|e| (e, true))? {
            // Out-of-band (RESP3) pushes are not replies: counting one as
            // a reply would leave a reply unread on the connection.
            Value::Push { .. } => {}
            value => values.push(value),
        }
    }
    Ok(values)
}

/// Replies of a batch, and whether an earlier failed attempt of it may have
/// run some of its commands.
pub(crate) struct Replies {
    pub values: Vec<Value>,
    pub ambiguous: bool,
}

enum Conn {
    Single(redis::Connection),
    Cluster(Box<ClusterConnection>),
}

/// A lazily (re)connected link to the target, with the retry policy.
pub(crate) struct Link {
    target: Target,
    policy: RetryPolicy,
    cluster: Option<ClusterClient>,
    conn: Option<Conn>,
}

/// What a failed attempt means for the next one.
enum Verdict {
    /// Retry; `ran` says whether some command may have run.
    Retry {
        ran: bool,
    },
    Fatal,
}

impl Link {
    pub(crate) fn new(target: &Target, policy: RetryPolicy) -> Result<Link> {
        let cluster = match target.kind() {
            TargetKind::Standalone(_) => None,
            TargetKind::Cluster(nodes) => Some(
                ClusterClientBuilder::new(nodes.clone())
                    .retries(0)
                    .connection_timeout(policy.connect_timeout)
                    .response_timeout(policy.response_timeout)
                    .build()
                    .map_err(ErrorKind::Client)?,
            ),
        };
        Ok(Link {
            target: target.clone(),
            policy: RetryPolicy {
                max_attempts: policy.max_attempts.max(1),
                ..policy
            },
            cluster,
            conn: None,
        })
    }

    pub(crate) fn batch(&self) -> Batch {
        Batch {
            pipe: match self.target.kind() {
                TargetKind::Standalone(_) => Pipe::Single {
                    buf: Vec::new(),
                    ends: Vec::new(),
                },
                TargetKind::Cluster(_) => Pipe::Cluster(redis::cluster::cluster_pipe()),
            },
            labels: Vec::new(),
        }
    }

    fn connect(&mut self) -> redis::RedisResult<&mut Conn> {
        if self.conn.is_none() {
            let conn = match (self.target.kind(), &self.cluster) {
                (_, Some(client)) => Conn::Cluster(Box::new(client.get_connection()?)),
                (TargetKind::Standalone(info), None) => {
                    let client = redis::Client::open(info.clone())?;
                    let conn = client.get_connection_with_timeout(self.policy.connect_timeout)?;
                    conn.set_read_timeout(Some(self.policy.response_timeout))?;
                    conn.set_write_timeout(Some(self.policy.response_timeout))?;
                    Conn::Single(conn)
                }
                (TargetKind::Cluster(_), None) => {
                    unreachable!("Link::new builds a cluster client for a cluster target")
                }
            };
            self.conn = Some(conn);
        }
        Ok(self.conn.as_mut().expect("connected just above"))
    }

    /// Sends a batch, retrying as the policy allows. The replies are in
    /// command order, one per command.
    pub(crate) fn run(&mut self, batch: &Batch) -> Result<Replies> {
        if batch.is_empty() {
            return Ok(Replies {
                values: Vec::new(),
                ambiguous: false,
            });
        }
        let start = Instant::now();
        let mut ambiguous = false;
        let mut backoff = self.policy.first_backoff;
        let mut attempt = 0u32;
        loop {
            attempt += 1;
            let failure = match self.connect() {
                Err(e) => Failure::new(e, false),
                Ok(conn) => {
                    let result = match (conn, &batch.pipe) {
                        (Conn::Single(c), Pipe::Single { buf, ends }) => {
                            match stream(c, buf, ends) {
                                Ok(values) => server_errors(values),
                                Err((e, sent)) => {
                                    // Replies may be left unread.
                                    self.conn = None;
                                    Err(Failure::new(e, sent))
                                }
                            }
                        }
                        (Conn::Cluster(c), Pipe::Cluster(p)) => {
                            p.query::<Vec<Value>>(c).map_err(|e| Failure::new(e, true))
                        }
                        _ => unreachable!("batches are made for their link's kind"),
                    };
                    match result {
                        Ok(values) if values.len() == batch.len() => {
                            return Ok(Replies { values, ambiguous })
                        }
                        Ok(values) => {
                            // The connection is out of step with its replies.
                            self.conn = None;
                            let (command, key) = batch.label(0);
                            return Err(ErrorKind::BadReply {
                                command,
                                key,
                                detail: format!(
                                    "{} replies to a pipeline of {} commands",
                                    values.len(),
                                    batch.len()
                                ),
                            }
                            .into());
                        }
                        Err(f) => f,
                    }
                }
            };
            match classify(&failure, batch.len()) {
                Verdict::Fatal => return Err(fatal(failure, batch)),
                Verdict::Retry { ran } => {
                    ambiguous |= ran;
                    // A fresh connection: resynchronised, and for a Cluster a
                    // fresh slot map.
                    self.conn = None;
                    let elapsed = start.elapsed();
                    if attempt >= self.policy.max_attempts
                        || elapsed + backoff > self.policy.max_elapsed
                    {
                        return Err(ErrorKind::Unavailable {
                            attempts: attempt,
                            elapsed,
                            last: failure.into_redis(),
                        }
                        .into());
                    }
                    thread::sleep(backoff);
                    backoff = (backoff * 2).min(self.policy.max_backoff);
                }
            }
        }
    }
}

/// Server errors after which the command certainly did not run and a later
/// attempt can succeed.
fn retryable_server(kind: ServerErrorKind) -> bool {
    matches!(
        kind,
        ServerErrorKind::BusyLoading
            | ServerErrorKind::TryAgain
            | ServerErrorKind::ClusterDown
            | ServerErrorKind::MasterDown
            | ServerErrorKind::Moved
            | ServerErrorKind::Ask
            | ServerErrorKind::ReadOnly
    )
}

/// Why an attempt failed.
enum Failure {
    /// No reply, or a reply that does not parse; the `bool` says whether
    /// the commands were sent (some may then have run).
    Redis(RedisError, bool),
    /// Every command was answered, and these (index, error) replies are
    /// errors; the other commands ran.
    Server(Vec<(usize, ServerError)>),
}

impl Failure {
    /// The one place a client error becomes a `Failure`: the error replies
    /// of commands that were sent, or the error itself.
    fn new(err: RedisError, sent: bool) -> Failure {
        match err.clone().into_server_errors() {
            Some(errors) if sent => Failure::Server(errors.to_vec()),
            _ => Failure::Redis(err, sent),
        }
    }

    fn into_redis(self) -> RedisError {
        match self {
            Failure::Redis(e, _) => e,
            Failure::Server(mut errors) => errors.swap_remove(0).1.into(),
        }
    }
}

/// The replies, or the error replies among them.
fn server_errors(values: Vec<Value>) -> std::result::Result<Vec<Value>, Failure> {
    let errors: Vec<(usize, ServerError)> = values
        .iter()
        .enumerate()
        .filter_map(|(i, v)| match v {
            Value::ServerError(e) => Some((i, e.clone())),
            _ => None,
        })
        .collect();
    if errors.is_empty() {
        Ok(values)
    } else {
        Err(Failure::Server(errors))
    }
}

/// Whether every error reply says its command did not run.
fn all_retryable(errors: &[(usize, ServerError)]) -> bool {
    errors
        .iter()
        .all(|(_, e)| e.kind().is_some_and(retryable_server))
}

/// Decides by the error's kind (never its text) whether to retry, and
/// whether the failed attempt may have run any command.
fn classify(failure: &Failure, commands: usize) -> Verdict {
    use redis::ErrorKind as K;
    match failure {
        Failure::Redis(err, sent) => match err.kind() {
            K::Io | K::ClusterConnectionNotFound => Verdict::Retry { ran: *sent },
            // A reply that does not parse: the stream is out of step, reconnect.
            K::Parse => Verdict::Retry { ran: *sent },
            // A server error before anything was sent (while connecting).
            K::Server(_) | K::Extension => match err.clone().into_server_errors() {
                Some(errors) if all_retryable(&errors) => Verdict::Retry { ran: false },
                _ => Verdict::Fatal,
            },
            _ => Verdict::Fatal,
        },
        // Retry only if every error says its command did not run; the other
        // commands did run.
        Failure::Server(errors) if all_retryable(errors) => Verdict::Retry {
            ran: errors.len() < commands,
        },
        Failure::Server(_) => Verdict::Fatal,
    }
}

/// The error a caller sees for a failure that retrying cannot fix.
fn fatal(failure: Failure, batch: &Batch) -> crate::Error {
    let errors = match failure {
        Failure::Redis(err, false) => return ErrorKind::Client(err).into(),
        Failure::Redis(err, true) => {
            let (command, key) = batch.label(0);
            return ErrorKind::Server {
                command,
                key,
                error: err,
            }
            .into();
        }
        Failure::Server(errors) => errors,
    };
    let (index, server) = errors
        .iter()
        .find(|(_, e)| !e.kind().is_some_and(retryable_server))
        .unwrap_or(&errors[0]);
    let (command, key) = batch.label(*index);
    if server.code() == "WRONGTYPE" {
        return ErrorKind::WrongType {
            key,
            detail: server.to_string(),
        }
        .into();
    }
    ErrorKind::Server {
        command,
        key,
        error: server.clone().into(),
    }
    .into()
}
