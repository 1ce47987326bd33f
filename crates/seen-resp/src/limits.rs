//! Size limits on requests, the same knobs Redis has.

/// Limits the request parser enforces, so a client cannot make the server
/// buffer or allocate without bound.
///
/// The defaults are Redis's: `proto-max-bulk-len` 512 MiB, a multibulk
/// count of at most 1024 * 1024, and 64 KiB for an inline request or a
/// `*`/`$` header line that has no terminator yet.
///
/// ```
/// use seen_resp::Limits;
///
/// let limits = Limits { max_bulk_len: 16 << 20, ..Limits::default() };
/// assert_eq!(limits.max_inline_len, 64 * 1024);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Largest accepted bulk argument in bytes (`proto-max-bulk-len`).
    /// A longer `$<len>` is `invalid bulk length`.
    pub max_bulk_len: usize,
    /// Largest accepted argument count of one multibulk request. A larger
    /// `*<count>` is `invalid multibulk length`.
    pub max_multibulk_len: usize,
    /// Most bytes buffered while waiting for the end of an inline line or a
    /// `*`/`$` header line (Redis's `PROTO_INLINE_MAX_SIZE`).
    pub max_inline_len: usize,
}

impl Limits {
    /// Redis's default `proto-max-bulk-len`: 512 MiB.
    pub const DEFAULT_MAX_BULK_LEN: usize = 512 * 1024 * 1024;
    /// Redis's historical multibulk count limit: 1024 * 1024 arguments.
    pub const DEFAULT_MAX_MULTIBULK_LEN: usize = 1024 * 1024;
    /// Redis's `PROTO_INLINE_MAX_SIZE`: 64 KiB.
    pub const DEFAULT_MAX_INLINE_LEN: usize = 64 * 1024;
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_bulk_len: Self::DEFAULT_MAX_BULK_LEN,
            max_multibulk_len: Self::DEFAULT_MAX_MULTIBULK_LEN,
            max_inline_len: Self::DEFAULT_MAX_INLINE_LEN,
        }
    }
}
