//! The crate's one error type.
//!
//! Errors are a struct holding a [`ErrorKind`]; the kind says what went
//! wrong and its message quotes the offending value, so a caller can both
//! match on it and show it to a person.

/// Defines a crate's error type around its `ErrorKind`, a `thiserror`
/// enum: `pub struct Error` holding the kind (boxed: a `Result` then costs
/// one pointer more than its value, however large the error, and the hot
/// paths move less), `pub type Result<T>`, [`kind`](Error::kind),
/// [`into_kind`](Error::into_kind), `From<ErrorKind>`, and `Display` and
/// `source` as the kind's. seen-core, seen-store and seen-redis define
/// their errors with it; each adds its own conversions after it.
///
/// ```
/// #[derive(Debug, thiserror::Error)]
/// pub enum ErrorKind {
///     #[error("no such filter")]
///     NotFound,
/// }
/// seen_core::kind_error! {
///     /// An error of this crate.
///     ErrorKind
/// }
/// let e: Error = ErrorKind::NotFound.into();
/// assert_eq!(e.to_string(), "no such filter");
/// assert!(matches!(e.kind(), ErrorKind::NotFound));
/// ```
#[macro_export]
macro_rules! kind_error {
    ($(#[$doc:meta])* $kind:ident) => {
        /// A `Result` whose error is this crate's [`Error`].
        pub type Result<T, E = Error> = ::std::result::Result<T, E>;

        $(#[$doc])*
        #[derive(Debug)]
        pub struct Error {
            kind: ::std::boxed::Box<$kind>,
        }

        impl Error {
            /// What went wrong.
            pub fn kind(&self) -> &$kind {
                &self.kind
            }

            /// Consumes the error, returning its kind.
            pub fn into_kind(self) -> $kind {
                *self.kind
            }
        }

        impl ::std::convert::From<$kind> for Error {
            fn from(kind: $kind) -> Self {
                Error {
                    kind: ::std::boxed::Box::new(kind),
                }
            }
        }

        impl ::std::fmt::Display for Error {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                ::std::fmt::Display::fmt(&*self.kind, f)
            }
        }

        impl ::std::error::Error for Error {
            fn source(&self) -> ::std::option::Option<&(dyn ::std::error::Error + 'static)> {
                ::std::error::Error::source(&*self.kind)
            }
        }
    };
}

kind_error! {
    /// An error from building, using, encoding or decoding a filter.
    ErrorKind
}

impl From<std::io::Error> for Error {
    fn from(err: std::io::Error) -> Self {
        if err.kind() == std::io::ErrorKind::UnexpectedEof {
            ErrorKind::Truncated.into()
        } else {
            ErrorKind::Io(err).into()
        }
    }
}

/// The kinds of [`Error`].
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ErrorKind {
    /// The requested false-positive rate is not strictly between 0 and 1.
    #[error("error rate {0} is out of range: it must be greater than 0 and less than 1")]
    InvalidErrorRate(f64),
    /// The requested capacity is zero.
    #[error("capacity 0 is invalid: a filter must be sized for at least one item")]
    ZeroCapacity,
    /// A scalable filter's expansion factor is zero.
    #[error("expansion {0} is invalid: it must be at least 1")]
    InvalidExpansion(u32),
    /// A hash count outside what the layout supports.
    #[error("{hashes} hash functions is invalid: it must be between 1 and {max}")]
    InvalidHashCount {
        /// The hash count asked for.
        hashes: u32,
        /// The largest the layout supports.
        max: u32,
    },
    /// The filter would need more memory than the configured limit.
    #[error("the filter needs {needed} bytes, more than the limit of {limit} bytes")]
    TooLarge {
        /// Bytes the filter would need (saturated at `u64::MAX`).
        needed: u64,
        /// The configured limit.
        limit: u64,
    },
    /// The parameters cannot be met by this layout (for example an error rate
    /// so small that no blocked filter reaches it).
    #[error("{0}")]
    Unreachable(String),
    /// The allocator refused the memory for the filter.
    #[error("could not allocate {0} bytes for the filter")]
    OutOfMemory(u64),
    /// A non-scaling scalable filter is full.
    #[error("non scaling filter is full")]
    Full,
    /// A scalable filter already has the maximum number of sub-filters.
    #[error("the filter already has the maximum of {0} sub-filters")]
    TooManyLinks(usize),
    /// Two filters cannot be combined.
    #[error("filters are incompatible: {0}")]
    Incompatible(String),
    /// A byte stream does not start with the seen filter magic.
    #[error("not a seen filter: bad magic bytes {0:02x?}")]
    BadMagic([u8; 8]),
    /// A byte stream was written by a newer format version.
    #[error("format version {found} is newer than the newest this build reads ({supported})")]
    UnsupportedVersion {
        /// The version in the stream.
        found: u16,
        /// The newest version this build reads.
        supported: u16,
    },
    /// A checksum did not match.
    #[error(
        "checksum mismatch in the {section}: stored {stored:#010x}, computed {computed:#010x}"
    )]
    BadChecksum {
        /// Which part of the stream (header, bits).
        section: &'static str,
        /// The checksum stored in the stream.
        stored: u32,
        /// The checksum of the bytes read.
        computed: u32,
    },
    /// The stream ended before the filter was complete.
    #[error("the data is truncated: it ends before the filter is complete")]
    Truncated,
    /// A field holds a value that no valid filter has.
    #[error("corrupt filter data: {0}")]
    Corrupt(String),
    /// A RedisBloom dump chunk (`BF.LOADCHUNK`) does not fit its chain.
    #[error("the dump chunk does not fit the filter ({why:?}): {detail}")]
    ChunkMisfit {
        /// Which of RedisBloom's refusals it is.
        why: ChunkMisfit,
        /// Where it fell.
        detail: String,
    },
    /// An I/O error while reading or writing.
    #[error("I/O error: {0}")]
    Io(#[source] std::io::Error),
}

/// Why a RedisBloom dump chunk does not fit its chain, told apart as
/// RedisBloom tells them apart (each has its own reply there).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ChunkMisfit {
    /// The iterator is 0, or smaller than the chunk.
    BadIterator,
    /// The chunk starts past the end of the last link.
    NoLink,
    /// The chunk runs past the end of the link it starts in.
    TooBig,
}

/// Shorthand for building a [`ErrorKind::Corrupt`] error.
pub(crate) fn corrupt(msg: impl Into<String>) -> Error {
    ErrorKind::Corrupt(msg.into()).into()
}
