//! The store's error type.

use std::path::PathBuf;

seen_core::kind_error! {
    /// An error from the durable store.
    ErrorKind
}

/// The kinds of [`Error`].
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ErrorKind {
    /// An I/O operation failed; the mutation that needed it was not applied
    /// durably and was not acknowledged.
    #[error("{op} {path}: {source}")]
    Io {
        /// What was being done.
        op: &'static str,
        /// On which file.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// A filter operation failed (bad parameters, full, too large...).
    #[error(transparent)]
    Filter(#[from] seen_core::Error),
    /// The log or a snapshot is corrupt at a place recovery cannot skip.
    #[error("corrupt {path} at offset {offset}: {what}")]
    Corrupt {
        /// The damaged file.
        path: PathBuf,
        /// Byte offset of the damage.
        offset: u64,
        /// What is wrong.
        what: String,
    },
    /// A snapshot whose header is sound holds a filter that this store
    /// cannot load: larger than its `max_filter_bytes`, or more memory
    /// than the allocator gives. This is not damage, so a salvaging open
    /// stops on it too rather than drop the filter; a larger limit, or
    /// more memory, opens it.
    #[error("cannot load {path}: {source}")]
    CannotLoad {
        /// The snapshot file.
        path: PathBuf,
        /// Why (`TooLarge` or `OutOfMemory`).
        source: seen_core::Error,
    },
    /// The data directory is of a format this build does not read (written
    /// by a later one), or its `FORMAT` file is unreadable.
    #[error("{path}: {what}")]
    Format {
        /// The `FORMAT` file.
        path: PathBuf,
        /// What is wrong.
        what: String,
    },
    /// Another process holds the data directory.
    #[error("data directory {0} is locked by another process")]
    Locked(PathBuf),
    /// No filter has that name.
    #[error("no such filter")]
    NotFound,
    /// A filter with that name exists already.
    #[error("a filter with that name exists")]
    Exists,
    /// The operation does not apply to this kind of filter.
    #[error("{0}")]
    WrongKind(&'static str),
    /// A filter name longer than the store takes.
    #[error("a filter name of {len} bytes is longer than the {max} bytes the store takes")]
    NameTooLong {
        /// The name's length.
        len: usize,
        /// The longest the store takes.
        max: usize,
    },
    /// An earlier sync failed (or the log's files went away); the log
    /// cannot promise durability until a checkpoint has rewritten every
    /// filter, which the store's next mutation (or lookup that finds an
    /// item, or `Store::checkpoint`) tries first.
    #[error("the write-ahead log is unusable after a failed sync: {0}")]
    Poisoned(String),
}

pub(crate) fn io_err(op: &'static str, path: &std::path::Path, source: std::io::Error) -> Error {
    ErrorKind::Io {
        op,
        path: path.to_path_buf(),
        source,
    }
    .into()
}

impl From<seen_core::Error> for Error {
    fn from(e: seen_core::Error) -> Self {
        ErrorKind::Filter(e).into()
    }
}

/// Whether an open salvages (skips damage with a warning rather than stop
/// on it), and how many damaged parts it has skipped: the open checkpoints
/// only when some were (see [`crate::StoreOptions::salvage`]).
#[derive(Debug, Default)]
pub(crate) struct Salvage {
    pub(crate) on: bool,
    pub(crate) skipped: std::cell::Cell<u64>,
}

impl Salvage {
    /// Damage at `offset` of `path`: an error naming the file and offset,
    /// or, when salvaging, a warning that says what is `skipping` (the
    /// caller then skips it), counted.
    pub(crate) fn damaged(
        &self,
        path: &std::path::Path,
        offset: u64,
        what: String,
        skipping: &str,
    ) -> Result<()> {
        if !self.on {
            let path = path.to_path_buf();
            return Err(ErrorKind::Corrupt { path, offset, what }.into());
        }
        tracing::warn!(
            "{}: {what} at offset {offset}; skipping {skipping} (salvage)",
            path.display()
        );
        self.skipped.set(self.skipped.get() + 1);
        Ok(())
    }
}
