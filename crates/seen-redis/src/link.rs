//! The connection to Redis: pipelines, reconnection, retries with backoff,
//! and how far a batch got before a failure.
//!
//! Standalone servers and Clusters share everything here except how a
//! pipeline is sent: a plain [`redis::Pipeline`] on one
//! [`redis::Connection`], or a [`ClusterPipeline`] that the `redis` crate
//! splits by node and sends to all nodes before reading any reply.
//!
//! # Why the Cluster client is told never to retry
//!
//! The `redis` crate's Cluster connection retries a failed command by
//! itself, and its pipelines all or nothing. Retrying here instead keeps
//! one retry budget per outage for both kinds of target, loads the add
//! script where a node answers `NOSCRIPT`, and waits for replicas
//! (`WAIT`) where asked. Every command a batch holds is safe to send twice
//! (adds answer a retry from their recorded answers, see `answers.rs`),
//! so a retry never asks whether the failed attempt ran. MOVED, ASK,
//! TRYAGAIN and CLUSTERDOWN replies are retried on a fresh connection,
//! which reloads the slot map.

use std::thread;
use std::time::{Duration, Instant};

use redis::cluster::{ClusterClient, ClusterClientBuilder, ClusterConnection, ClusterPipeline};
use redis::{Cmd, RedisError, ServerError, ServerErrorKind, Value};

use crate::answers::ADD_SCRIPT;
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

/// One run of the add script: which shard, where its answers go, and
/// which command of which round it is.
pub(crate) struct SetCall<'a> {
    pub sha: &'a str,
    pub key: &'a [u8],
    pub done: &'a [u8],
    pub round: u64,
    pub command: usize,
    pub answers_ttl_ms: u64,
    /// Bit offsets that follow.
    pub ops: usize,
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

    /// Queues `PEXPIRE key ms`, or `PERSIST key` where there is no TTL.
    pub(crate) fn add_expiry(&mut self, key: &[u8], ttl_ms: Option<u64>) {
        match ttl_ms {
            Some(ms) => {
                let mut c = redis::cmd("PEXPIRE");
                c.arg(key).arg(ms);
                self.add("PEXPIRE", key, c);
            }
            None => {
                let mut c = redis::cmd("PERSIST");
                c.arg(key);
                self.add("PERSIST", key, c);
            }
        }
    }

    /// Adds one `BITFIELD_RO key GET u1 <offset> ...` with an operation
    /// for each of the `ops` offsets. For a standalone server it is encoded
    /// straight into the batch's buffer: a batch of 1,000 items is some
    /// 24,000 arguments, and building a [`Cmd`] of each and then encoding
    /// it costs more client time than Redis spends running them.
    pub(crate) fn add_bitfield_ro(
        &mut self,
        key: &[u8],
        ops: usize,
        offsets: impl Iterator<Item = u64>,
    ) {
        const NAME: &str = "BITFIELD_RO";
        match &mut self.pipe {
            Pipe::Single { buf, ends } => {
                resp_array(buf, 2 + 3 * ops);
                resp_bulk(buf, NAME.as_bytes());
                resp_bulk(buf, key);
                let mut written = 0;
                for off in offsets {
                    buf.extend_from_slice(b"$3\r\nGET\r\n$2\r\nu1\r\n");
                    resp_bulk_u64(buf, off);
                    written += 1;
                }
                // The header promised `ops` operations: a miscount would put
                // the connection out of step, so it is a bug caught here.
                assert_eq!(written, ops, "BITFIELD_RO operation count");
                ends.push(buf.len());
            }
            Pipe::Cluster(p) => {
                let mut c = redis::cmd(NAME);
                c.arg(key);
                for off in offsets {
                    c.arg("GET").arg("u1").arg(off);
                }
                p.add_command(c);
            }
        }
        self.labels.push((NAME, key.to_vec()));
    }

    /// Adds one run of the add script ([`ADD_SCRIPT`]): sets the bits at
    /// the `ops` offsets of shard `key` as command `command` of round
    /// `round`, recording the answers in `done` (see `answers.rs`).
    pub(crate) fn add_set_script(
        &mut self,
        call: &SetCall<'_>,
        offsets: impl Iterator<Item = u64>,
    ) {
        const NAME: &str = "EVALSHA";
        let mut round = itoa::Buffer::new();
        let mut command = itoa::Buffer::new();
        let mut ttl = itoa::Buffer::new();
        let head: [&[u8]; 8] = [
            NAME.as_bytes(),
            call.sha.as_bytes(),
            b"2",
            call.key,
            call.done,
            round.format(call.round).as_bytes(),
            command.format(call.command).as_bytes(),
            ttl.format(call.answers_ttl_ms).as_bytes(),
        ];
        match &mut self.pipe {
            Pipe::Single { buf, ends } => {
                resp_array(buf, head.len() + call.ops);
                for arg in head {
                    resp_bulk(buf, arg);
                }
                let mut written = 0;
                for off in offsets {
                    resp_bulk_u64(buf, off);
                    written += 1;
                }
                assert_eq!(written, call.ops, "add script operation count");
                ends.push(buf.len());
            }
            Pipe::Cluster(p) => {
                let mut c = redis::cmd(NAME);
                for arg in &head[1..] {
                    c.arg(*arg);
                }
                for off in offsets {
                    c.arg(off);
                }
                p.add_command(c);
            }
        }
        self.labels
            .push(("BITFIELD (add script)", call.key.to_vec()));
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
/// one side idles while the other works). Starts at the first command
/// whose reply is not in `values` yet, and appends replies in command
/// order; error replies are values here, as in a pipeline. On `Err` the
/// connection is out of step and must be dropped; `values` keeps the
/// replies read before it.
fn stream(
    conn: &mut redis::Connection,
    buf: &[u8],
    ends: &[usize],
    values: &mut Vec<Value>,
) -> redis::RedisResult<()> {
    let n = ends.len();
    // Bytes before command `i`.
    let start_of = |i: usize| if i == 0 { 0 } else { ends[i - 1] };
    let mut sent = values.len();
    while values.len() < n {
        // Where the commands whose replies are not read yet begin.
        let answered = start_of(values.len());
        if sent < n && start_of(sent) - answered < SEND_AHEAD {
            let mut upto = sent + 1;
            while upto < n && ends[upto] - answered <= SEND_AHEAD {
                upto += 1;
            }
            conn.send_packed_command(&buf[start_of(sent)..ends[upto - 1]])?;
            sent = upto;
            continue;
        }
        match conn.recv_response()? {
            // Out-of-band (RESP3) pushes are not replies: counting one as
            // a reply would leave a reply unread on the connection.
            Value::Push { .. } => {}
            value => values.push(value),
        }
    }
    Ok(())
}

enum Conn {
    Single(redis::Connection),
    Cluster(Box<ClusterConnection>),
}

/// Replicas that must hold a batch's writes before it is answered
/// (`WAIT replicas timeout` after the batch).
#[derive(Clone, Copy, Debug)]
pub(crate) struct WaitFor {
    pub replicas: u32,
    pub timeout: Duration,
}

/// How far a batch got: the replies read (of a prefix of its commands),
/// and whether any attempt sent commands.
#[derive(Default)]
pub(crate) struct Progress {
    pub values: Vec<Value>,
    pub sent: bool,
}

/// A lazily (re)connected link to the target, with the retry policy.
pub(crate) struct Link {
    target: Target,
    policy: RetryPolicy,
    cluster: Option<ClusterClient>,
    conn: Option<Conn>,
    /// Load the add script (`SCRIPT LOAD`) before the next batch: at the
    /// first connection, and after a server answered `NOSCRIPT` (a restart,
    /// a failover to a node that never loaded it).
    load_script: bool,
    wait: Option<WaitFor>,
}

/// The retry budget of one outage: attempts and time since the last
/// attempt that made progress.
struct Budget {
    start: Instant,
    attempts: u32,
    backoff: Duration,
}

impl Budget {
    fn new(policy: &RetryPolicy) -> Budget {
        Budget {
            start: Instant::now(),
            attempts: 0,
            backoff: policy.first_backoff,
        }
    }

    /// Counts a failed attempt: waits before the next one, or gives up
    /// (also when the wait would end past `deadline`).
    fn spend(
        &mut self,
        policy: &RetryPolicy,
        deadline: Option<Instant>,
        failure: Failure,
    ) -> Result<()> {
        self.attempts += 1;
        let elapsed = self.start.elapsed();
        let late = deadline.is_some_and(|d| Instant::now() + self.backoff >= d);
        if self.attempts >= policy.max_attempts
            || elapsed + self.backoff > policy.max_elapsed
            || late
        {
            return Err(ErrorKind::Unavailable {
                attempts: self.attempts,
                elapsed,
                last: failure.into_redis(),
            }
            .into());
        }
        thread::sleep(self.backoff);
        self.backoff = (self.backoff * 2).min(policy.max_backoff);
        Ok(())
    }
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
            load_script: true,
            wait: None,
        })
    }

    /// Makes every batch wait for `wait.replicas` replicas to hold its
    /// writes before it counts as done.
    pub(crate) fn set_wait(&mut self, wait: Option<WaitFor>) {
        self.wait = wait;
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
    pub(crate) fn run(&mut self, batch: &Batch) -> Result<Vec<Value>> {
        let mut progress = Progress::default();
        self.run_into(batch, &mut progress, None)?;
        Ok(progress.values)
    }

    /// [`run`](Self::run) into `values`. On a standalone server a retry
    /// sends only the commands whose replies were not read, and any reply
    /// read resets the retry budget: a link that keeps dropping slows a
    /// batch down without ending it. (A Cluster pipeline, and any batch
    /// under [`WaitFor`], is retried whole: a `WAIT` on a fresh connection
    /// would not cover the writes of the one that broke.) Every command
    /// sent must therefore be safe to run twice. On `Err`, `values` holds
    /// the replies of a prefix of the commands: those certainly ran. No
    /// retry begins after `deadline`, however often replies arrive.
    pub(crate) fn run_into(
        &mut self,
        batch: &Batch,
        progress: &mut Progress,
        deadline: Option<Instant>,
    ) -> Result<()> {
        progress.values.clear();
        if batch.is_empty() {
            return Ok(());
        }
        let mut budget = Budget::new(&self.policy);
        loop {
            let before = progress.values.len();
            let failure = match self.attempt(batch, progress) {
                Ok(()) => return Ok(()),
                Err(f) => f,
            };
            if !retryable(&failure) {
                return Err(fatal(failure, batch));
            }
            if failure.is_no_script() {
                self.load_script = true;
            }
            // A fresh connection: resynchronised, and for a Cluster a fresh
            // slot map.
            self.conn = None;
            if self.wait.is_some() || matches!(batch.pipe, Pipe::Cluster(_)) {
                progress.values.clear();
            }
            if progress.values.len() > before {
                budget = Budget::new(&self.policy);
            }
            budget.spend(&self.policy, deadline, failure)?;
        }
    }

    /// One attempt: connect, load the script if needed, send what has no
    /// reply yet, then `WAIT` if asked.
    fn attempt(&mut self, batch: &Batch, progress: &mut Progress) -> Result<(), Failure> {
        if self.load_script {
            let mut c = redis::cmd("SCRIPT");
            c.arg("LOAD").arg(ADD_SCRIPT);
            self.query::<Value>(&c)
                .map_err(|e| Failure::new(e, false))?;
            self.load_script = false;
        } else {
            self.connect().map_err(|e| Failure::new(e, false))?;
        }
        let conn = self.conn.as_mut().expect("connected above");
        let values = &mut progress.values;
        let start = values.len();
        progress.sent = true;
        match (conn, &batch.pipe) {
            (Conn::Single(c), Pipe::Single { buf, ends }) => {
                if let Err(e) = stream(c, buf, ends, values) {
                    // Kept: the replies before the first error reply.
                    let first_error = values[start..]
                        .iter()
                        .position(|v| matches!(v, Value::ServerError(_)));
                    if let Some(i) = first_error {
                        values.truncate(start + i);
                    }
                    return Err(Failure::new(e, true));
                }
            }
            (Conn::Cluster(c), Pipe::Cluster(p)) => values.extend(
                p.query::<Vec<Value>>(c)
                    .map_err(|e| Failure::new(e, true))?,
            ),
            _ => unreachable!("batches are made for their link's kind"),
        }
        if values.len() != batch.len() {
            let got = values.len() - start;
            values.truncate(start);
            return Err(Failure::OutOfStep(got));
        }
        // Error replies: the commands before the first one ran; it and
        // those after it are sent again by the next attempt.
        let errors: Vec<(usize, ServerError)> = values
            .iter()
            .enumerate()
            .filter_map(|(i, v)| match v {
                Value::ServerError(e) => Some((i, e.clone())),
                _ => None,
            })
            .collect();
        if let Some(&(first, _)) = errors.first() {
            values.truncate(first);
            return Err(Failure::Server(errors));
        }
        if let Some(w) = self.wait {
            let mut c = redis::cmd("WAIT");
            c.arg(w.replicas).arg(w.timeout.as_millis() as u64);
            let acked = self.query::<i64>(&c).map_err(|e| Failure::new(e, true))?;
            if acked < i64::from(w.replicas) {
                return Err(Failure::Replicas {
                    acked,
                    wanted: w.replicas,
                });
            }
        }
        Ok(())
    }

    /// One command outside a batch, on the connection (made if there is
    /// none); a Cluster routes it as the `redis` crate does (`SCRIPT LOAD`
    /// to every node, `WAIT` to every master).
    fn query<T: redis::FromRedisValue>(&mut self, cmd: &Cmd) -> redis::RedisResult<T> {
        match self.connect()? {
            Conn::Single(c) => cmd.query(c),
            Conn::Cluster(c) => cmd.query(&mut **c),
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
            | ServerErrorKind::NoScript
    )
}

/// Why an attempt failed.
enum Failure {
    /// No reply, or a reply that does not parse; the `bool` says whether
    /// the commands were sent (some may then have run).
    Redis(RedisError, bool),
    /// Every command was answered, and these (index, error) replies are
    /// errors.
    Server(Vec<(usize, ServerError)>),
    /// This many replies came back for the commands sent, not one each.
    OutOfStep(usize),
    /// `WAIT` counted fewer replicas holding the writes than asked for.
    Replicas { acked: i64, wanted: u32 },
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

    fn is_no_script(&self) -> bool {
        match self {
            Failure::Server(errors) => errors
                .iter()
                .any(|(_, e)| e.kind() == Some(ServerErrorKind::NoScript)),
            Failure::Redis(err, _) => {
                err.kind() == redis::ErrorKind::Server(ServerErrorKind::NoScript)
            }
            _ => false,
        }
    }

    fn into_redis(self) -> RedisError {
        match self {
            Failure::Redis(e, _) => e,
            Failure::Server(mut errors) => errors.swap_remove(0).1.into(),
            Failure::OutOfStep(n) => (
                redis::ErrorKind::Parse,
                "replies out of step with the pipeline",
                format!("{n} replies"),
            )
                .into(),
            Failure::Replicas { acked, wanted } => (
                redis::ErrorKind::Io,
                "too few replicas hold the writes",
                format!("WAIT {wanted}: {acked} acknowledged"),
            )
                .into(),
        }
    }
}

/// Whether every error reply says its command did not run.
fn all_retryable(errors: &[(usize, ServerError)]) -> bool {
    errors
        .iter()
        .all(|(_, e)| e.kind().is_some_and(retryable_server))
}

/// Decides by the error's kind (never its text) whether a later attempt can
/// succeed. Every command is safe to send again (adds are answered from
/// their recorded answers), so whether the failed attempt ran some of them
/// does not matter.
fn retryable(failure: &Failure) -> bool {
    use redis::ErrorKind as K;
    match failure {
        Failure::Redis(err, _) => match err.kind() {
            // A broken connection, or a reply that does not parse (the
            // stream is out of step): reconnect.
            K::Io | K::ClusterConnectionNotFound | K::Parse => true,
            // A server error before anything was sent (while connecting).
            K::Server(_) | K::Extension => err
                .clone()
                .into_server_errors()
                .is_some_and(|errors| all_retryable(&errors)),
            _ => false,
        },
        Failure::Server(errors) => all_retryable(errors),
        Failure::OutOfStep(_) => false,
        Failure::Replicas { .. } => true,
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
        Failure::OutOfStep(got) => {
            let (command, key) = batch.label(0);
            return ErrorKind::BadReply {
                command,
                key,
                detail: format!("{got} replies to a pipeline of {} commands", batch.len()),
            }
            .into();
        }
        replicas @ Failure::Replicas { .. } => {
            let (command, key) = batch.label(0);
            return ErrorKind::Server {
                command,
                key,
                error: replicas.into_redis(),
            }
            .into();
        }
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
