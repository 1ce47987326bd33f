//! How a store behaves: its fsync policy, segment size and limits.

/// When the log is synced to disk; see the crate docs for what each can
/// lose.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FsyncPolicy {
    /// Sync before acknowledging every mutation (group commit).
    Always,
    /// Sync once a second in the background.
    EverySec,
    /// Never sync explicitly.
    No,
}

impl FsyncPolicy {
    /// Its name, as `from_str` takes it and Redis's `appendfsync` shows
    /// it.
    pub fn name(self) -> &'static str {
        match self {
            FsyncPolicy::Always => "always",
            FsyncPolicy::EverySec => "everysec",
            FsyncPolicy::No => "no",
        }
    }
}

impl std::str::FromStr for FsyncPolicy {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        match s.to_ascii_lowercase().as_str() {
            "always" => Ok(FsyncPolicy::Always),
            "everysec" => Ok(FsyncPolicy::EverySec),
            "no" => Ok(FsyncPolicy::No),
            _ => Err(format!(
                "fsync policy '{s}' is not one of always, everysec, no"
            )),
        }
    }
}

/// How a [`Store`](crate::Store) behaves.
#[derive(Clone, Debug)]
pub struct StoreOptions {
    /// When the log is synced.
    pub fsync: FsyncPolicy,
    /// The size past which the log moves on to a new segment file (each
    /// checkpoint also begins one). Segments are not preallocated.
    pub segment_size: u64,
    /// Largest filter (bytes of bits) the store creates or loads.
    pub max_filter_bytes: u64,
    /// Most bytes of bits all filters together may hold (a server's
    /// `maxmemory`): a create, a load, or a scalable chain's growth that
    /// would pass it fails with [`seen_core::ErrorKind::TooLarge`]. The
    /// filters a reopen finds are kept even past it, and then only refuse
    /// to grow.
    pub max_memory: u64,
    /// Recover what can be recovered from a corrupt log or snapshot instead
    /// of refusing to open (losing the damaged part, with warnings). A
    /// damaged snapshot is renamed `<id>.snap.damaged` (or, if that name is
    /// taken, `<id>.snap.damaged.<n>`; kept, never read, its id given to no
    /// new filter). If anything was skipped ([`crate::Recovery::salvaged`]), the
    /// open ends with a checkpoint, after which the directory opens without
    /// salvage. With nothing damaged, the open is an ordinary one. A
    /// snapshot that cannot be opened or read (an I/O error other than its
    /// end coming early), or whose sound filter is larger than
    /// `max_filter_bytes` ([`crate::ErrorKind::CannotLoad`]), is not damage: it
    /// stops a salvaging open too.
    pub salvage: bool,
}

impl Default for StoreOptions {
    fn default() -> Self {
        StoreOptions {
            fsync: FsyncPolicy::EverySec,
            segment_size: 64 << 20,
            max_filter_bytes: seen_core::DEFAULT_MAX_BYTES,
            max_memory: u64::MAX,
            salvage: false,
        }
    }
}
