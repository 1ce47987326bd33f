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
use redis::{Cmd, RedisError, ServerErrorKind, Value};

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
    Single(redis::Pipeline),
    Cluster(ClusterPipeline),
}

impl Batch {
    pub(crate) fn add(&mut self, command: &'static str, key: &[u8], cmd: Cmd) {
        match &mut self.pipe {
            Pipe::Single(p) => {
                p.add_command(cmd);
            }
            Pipe::Cluster(p) => {
                p.add_command(cmd);
            }
        }
        self.labels.push((command, key.to_vec()));
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
                TargetKind::Standalone(_) => Pipe::Single(redis::pipe()),
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
            let (err, sent) = match self.connect() {
                Err(e) => (e, false),
                Ok(conn) => {
                    let result = match (conn, &batch.pipe) {
                        (Conn::Single(c), Pipe::Single(p)) => p.query::<Vec<Value>>(c),
                        (Conn::Cluster(c), Pipe::Cluster(p)) => p.query::<Vec<Value>>(c),
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
                        Err(e) => (e, true),
                    }
                }
            };
            match classify(&err, sent, batch.len()) {
                Verdict::Fatal => return Err(fatal(err, sent, batch)),
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
                            last: err,
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

/// Decides by the error's kind (never its text) whether to retry, and
/// whether the failed attempt may have run any command.
fn classify(err: &RedisError, sent: bool, commands: usize) -> Verdict {
    use redis::ErrorKind as K;
    match err.kind() {
        K::Io | K::ClusterConnectionNotFound => Verdict::Retry { ran: sent },
        // A reply that does not parse: the stream is out of step, reconnect.
        K::Parse => Verdict::Retry { ran: sent },
        K::Server(_) | K::Extension => {
            // A pipeline's server errors: retry only if every one of them says
            // its command did not run; the other commands did run.
            let Some(errors) = err.clone().into_server_errors() else {
                return Verdict::Fatal;
            };
            if errors
                .iter()
                .all(|(_, e)| e.kind().is_some_and(retryable_server))
            {
                Verdict::Retry {
                    ran: sent && errors.len() < commands,
                }
            } else {
                Verdict::Fatal
            }
        }
        _ => Verdict::Fatal,
    }
}

/// The error a caller sees for a failure that retrying cannot fix.
fn fatal(err: RedisError, sent: bool, batch: &Batch) -> crate::Error {
    if !sent {
        return ErrorKind::Client(err).into();
    }
    if let Some(errors) = err.clone().into_server_errors() {
        if let Some((index, server)) = errors
            .iter()
            .find(|(_, e)| !e.kind().is_some_and(retryable_server))
        {
            let (command, key) = batch.label(*index);
            if server.code() == "WRONGTYPE" {
                return ErrorKind::WrongType {
                    key,
                    detail: server.to_string(),
                }
                .into();
            }
            return ErrorKind::Server {
                command,
                key,
                error: server.clone().into(),
            }
            .into();
        }
    }
    let (command, key) = batch.label(0);
    ErrorKind::Server {
        command,
        key,
        error: err,
    }
    .into()
}
