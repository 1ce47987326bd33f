//! The crate's one error type.
//!
//! [`Error`] holds an [`ErrorKind`]; the kind says what went wrong and its
//! message quotes the offending value (a key, a URL with its password
//! blanked out, a field of the metadata), so a caller can match on it and
//! show it to a person. Retries are decided inside the crate by the kind of
//! the Redis error, never by its text; what reaches the caller has already
//! been retried as far as the [`RetryPolicy`](crate::RetryPolicy) allows.

use std::time::Duration;

seen_core::kind_error! {
    /// An error from opening, using or managing a filter kept in Redis.
    ErrorKind
}

impl Error {
    /// What went wrong underneath: for [`ErrorKind::Incomplete`], the kind
    /// of its cause; for any other error, its kind.
    pub fn root_kind(&self) -> &ErrorKind {
        match self.kind() {
            ErrorKind::Incomplete { cause, .. } => cause.root_kind(),
            kind => kind,
        }
    }
}

impl From<seen_core::Error> for Error {
    fn from(err: seen_core::Error) -> Self {
        ErrorKind::Params(err).into()
    }
}

/// The kinds of [`Error`].
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ErrorKind {
    /// The capacity or error rate cannot make a filter (zero capacity, a rate
    /// outside (0, 1), a size no blocked filter reaches).
    #[error("invalid filter parameters: {0}")]
    Params(#[source] seen_core::Error),
    /// A parameter of this crate is out of range (shard size, TTL).
    #[error("invalid parameter: {0}")]
    InvalidParameter(String),
    /// The connection URL cannot be used. The URL is quoted with any password
    /// replaced by `***`.
    #[error("invalid Redis URL {url:?}: {reason}")]
    InvalidUrl {
        /// The URL, password blanked out.
        url: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The filter name cannot be used in a key.
    #[error("invalid filter name {name:?}: {reason}")]
    InvalidName {
        /// The name (lossy UTF-8).
        name: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// No filter of that name exists (never created, deleted, or lost with
    /// the data of a Redis that does not persist).
    #[error("no filter named {name:?} in Redis (metadata key {key:?} does not exist)")]
    NotFound {
        /// The filter name (lossy UTF-8).
        name: String,
        /// The metadata key looked up.
        key: String,
    },
    /// The filter's TTL ran out: Redis has dropped (or is about to drop)
    /// every key of it. Open it again with
    /// [`RedisFilter::open_or_create`](crate::RedisFilter::open_or_create)
    /// to start a new, empty one.
    #[error("filter {name:?} has expired")]
    Expired {
        /// The filter name (lossy UTF-8).
        name: String,
    },
    /// The filter exists with other parameters than the ones asked for.
    /// Opening it anyway would put items at other bit positions: every
    /// lookup of an item added by the other clients would be a false
    /// negative.
    #[error("filter {name:?} exists with {field} {stored}, not the {requested} asked for")]
    Mismatch {
        /// The filter name (lossy UTF-8).
        name: String,
        /// Which parameter differs.
        field: &'static str,
        /// The value stored in Redis.
        stored: String,
        /// The value asked for.
        requested: String,
    },
    /// The filter was deleted and created again with another layout while
    /// this handle was using it.
    #[error("filter {name:?} was re-created with another layout ({detail}); open it again")]
    Changed {
        /// The filter name (lossy UTF-8).
        name: String,
        /// What differs.
        detail: String,
    },
    /// The metadata was written by a newer version of seen (or is version 0).
    #[error("metadata key {key:?} has format version {found}; this build reads versions 1 to {supported}")]
    UnsupportedVersion {
        /// The metadata key.
        key: String,
        /// The version stored.
        found: u16,
        /// The newest version this build reads.
        supported: u16,
    },
    /// The metadata value is not valid seen metadata.
    #[error("corrupt filter metadata in key {key:?}: {reason}")]
    CorruptMetadata {
        /// The metadata key.
        key: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A key of the filter holds another Redis type than a string.
    #[error("key {key:?} holds the wrong kind of value for a seen filter (Redis said {detail})")]
    WrongType {
        /// The key.
        key: String,
        /// Redis's error message.
        detail: String,
    },
    /// Redis answered with something no correct server sends (a short
    /// BITFIELD reply, a string where a number belongs).
    #[error("unexpected reply from Redis to {command} on key {key:?}: {detail}")]
    BadReply {
        /// The command.
        command: &'static str,
        /// The key it addressed.
        key: String,
        /// What was wrong with the reply.
        detail: String,
    },
    /// Redis refused a command with an error that retrying cannot fix
    /// (out of memory, a permission the user lacks, a command disabled).
    #[error("Redis refused {command} on key {key:?}: {error}")]
    Server {
        /// The command.
        command: &'static str,
        /// The key it addressed.
        key: String,
        /// The error.
        #[source]
        error: redis::RedisError,
    },
    /// Redis stayed unreachable (or kept answering "try again") for the
    /// whole retry budget. The outcome of the call is unknown: an add may
    /// have been applied in part. Adding the same items again is safe.
    #[error("Redis unavailable: gave up after {attempts} attempts over {elapsed:?}: {last}")]
    Unavailable {
        /// Attempts made.
        attempts: u32,
        /// Time spent.
        elapsed: Duration,
        /// The last error.
        #[source]
        last: redis::RedisError,
    },
    /// An add gave up (its `cause`: Redis unavailable past the retry
    /// budget, or an error retrying cannot fix) after sending some of its
    /// items: `answers[i]` says what is known of item `i`. An item whose
    /// answer is [`Answer::Unknown`] may or may not be in the filter now,
    /// and a later add of it may say "present" although no add ever said
    /// "new": treat it as new (a duplicate is better than a loss).
    #[error("{cause} ({unknown} of {total} items with an unknown outcome)",
        unknown = count(answers, Answer::Unknown), total = answers.len())]
    Incomplete {
        /// What is known of each item of the call, in order.
        answers: Vec<Answer>,
        /// Why the call gave up.
        #[source]
        cause: Box<Error>,
    },
    /// A client-side error of the Redis library that retrying cannot fix
    /// (bad credentials, an unusable address).
    #[error("Redis client error: {0}")]
    Client(#[source] redis::RedisError),
}

/// What an add that gave up knows of one of its items
/// ([`ErrorKind::Incomplete`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Answer {
    /// Added, and it was new.
    New,
    /// Added, and it was already present.
    Present,
    /// Sent, but no answer came back: it may or may not be in the filter.
    Unknown,
    /// Never sent: not added by this call.
    NotSent,
}

fn count(answers: &[Answer], which: Answer) -> usize {
    answers.iter().filter(|&&a| a == which).count()
}

/// Lossy UTF-8 of bytes, for messages.
pub(crate) fn lossy(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}
