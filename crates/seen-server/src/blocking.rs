//! Blocking work (fsync, checkpoint) on the server's runtime.

/// Runs `f`, which may block (fsync, checkpoint), without stalling the
/// other connections of this worker thread.
pub(crate) fn blocking<R>(f: impl FnOnce() -> R) -> R {
    match tokio::runtime::Handle::try_current() {
        Ok(h) if h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread => {
            tokio::task::block_in_place(f)
        }
        _ => f(),
    }
}
