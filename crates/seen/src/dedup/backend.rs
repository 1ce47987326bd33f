//! Where `seen dedup` gets its answers: a local filter (with its state
//! file) or a filter shared through Redis.

use std::path::{Path, PathBuf};

use anyhow::{anyhow, bail, Result};
use seen_core::{for_each_prefetched, guava, AnyFilter, BloomFilter, ItemHash};
use seen_redis::{FilterParams, RedisFilter, RetryPolicy, Target};

use super::{DedupArgs, DEFAULT_CAPACITY, DEFAULT_FPP, REDIS_WAIT_TIMEOUT};
use crate::filter_file::{self, Content, FileFormat};

/// Where the "seen before?" answers come from.
pub(super) enum Backend {
    Local {
        filter: Box<BloomFilter>,
        state: Option<PathBuf>,
        format: FileFormat,
        hashes: Vec<ItemHash>,
    },
    Redis {
        filter: Box<RedisFilter>,
        batch: usize,
    },
}

impl Backend {
    pub(super) fn capacity(&self) -> u64 {
        match self {
            Backend::Local { filter, .. } => filter.capacity(),
            Backend::Redis { filter, .. } => filter.metadata().capacity,
        }
    }

    pub(super) fn error_rate(&self) -> f64 {
        match self {
            Backend::Local { filter, .. } => filter.error_rate(),
            Backend::Redis { filter, .. } => filter.metadata().error_rate,
        }
    }

    /// Adds `records`, pushing "was new" for each to `out`; with
    /// `read_only`, only looks them up ("was absent"). If Redis gave up
    /// after part of them was sent, `out` answers only the records that
    /// were, and the result says how many of those are unknown.
    pub(super) fn add(
        &mut self,
        records: &[&[u8]],
        read_only: bool,
        out: &mut Vec<bool>,
    ) -> Result<Option<Incomplete>> {
        out.clear();
        if read_only {
            match self {
                Backend::Local { filter, .. } => {
                    out.extend(filter.contains_many(records).into_iter().map(|c| !c))
                }
                Backend::Redis { filter, batch, .. } => {
                    for part in records.chunks(*batch) {
                        let found = filter
                            .contains_many(part)
                            .map_err(|e| anyhow!("redis: {e}"))?;
                        out.extend(found.into_iter().map(|c| !c));
                    }
                }
            }
            return Ok(None);
        }
        match self {
            Backend::Local { filter, hashes, .. } => {
                hashes.clear();
                hashes.extend(records.iter().map(|r| filter.hash(r)));
                for_each_prefetched(
                    filter,
                    hashes.iter().copied(),
                    |f, h| f.prefetch(h),
                    |f, h| out.push(f.add_hash_mut(h)),
                );
            }
            Backend::Redis { filter, batch, .. } => {
                for part in records.chunks(*batch) {
                    match filter.add_many(part) {
                        Ok(new) => out.extend(new),
                        Err(e) => return incomplete(e, out),
                    }
                }
            }
        }
        Ok(None)
    }
}

/// An add to Redis that gave up after sending some lines.
pub(super) struct Incomplete {
    /// Lines sent whose outcome is unknown: reported as new.
    pub(super) unknown: u64,
    pub(super) cause: seen_redis::Error,
}

/// Turns an add that gave up into answers for the lines that were sent:
/// new, present, or unknown and so reported new (a line printed twice is
/// better than a line never printed). Lines never sent get no answer: the
/// run ends before them, and a rerun finds them new.
fn incomplete(err: seen_redis::Error, out: &mut Vec<bool>) -> Result<Option<Incomplete>> {
    use seen_redis::{Answer, ErrorKind};
    let (answers, cause) = match err.into_kind() {
        ErrorKind::Incomplete { answers, cause } => (answers, *cause),
        // Nothing of this piece was sent: the pieces before it keep their
        // answers, and their new lines are printed.
        other => (Vec::new(), seen_redis::Error::from(other)),
    };
    let mut unknown = 0;
    for a in answers {
        match a {
            Answer::New => out.push(true),
            Answer::Present => out.push(false),
            Answer::Unknown => {
                unknown += 1;
                out.push(true);
            }
            Answer::NotSent => break,
        }
    }
    Ok(Some(Incomplete { unknown, cause }))
}

pub(super) fn open_backend(args: &DedupArgs) -> Result<Backend> {
    if let (Some(url), Some(name)) = (&args.redis, &args.name) {
        return open_redis(args, url, name);
    }
    if let (Some(path), false) = (&args.state, args.read_only) {
        check_state_writable(path)?;
    }
    let format = args.format.unwrap_or(FileFormat::Seen);
    let filter = match &args.state {
        Some(path) => match load_state(path, format)? {
            Some(f) => {
                warn_ignored(
                    args,
                    f.capacity(),
                    f.error_rate(),
                    &format!("state file '{}'", path.display()),
                );
                Some(f)
            }
            None if args.read_only => bail!(
                "state file '{}' does not exist: --read-only looks lines up in a filter made by an earlier run",
                path.display()
            ),
            None => None,
        },
        None if args.read_only => {
            bail!("--read-only needs a filter to look lines up in: give --state PATH or --redis URL --name NAME")
        }
        None => None,
    };
    let filter = match filter {
        Some(f) => f,
        None => {
            let capacity = args.capacity.unwrap_or(DEFAULT_CAPACITY);
            let fpp = args.fpp.unwrap_or(DEFAULT_FPP);
            let made = match format {
                FileFormat::Seen => BloomFilter::new(capacity, fpp),
                // Sized as Guava's BloomFilter.create sizes it.
                FileFormat::Guava => guava::create(capacity, fpp),
            };
            made.map_err(|e| {
                anyhow!("cannot make a filter for --capacity {capacity} --fpp {fpp}: {e}")
            })?
        }
    };
    Ok(Backend::Local {
        filter: Box::new(filter),
        state: args.state.clone(),
        format,
        hashes: Vec::new(),
    })
}

fn warn_ignored(args: &DedupArgs, capacity: u64, fpp: f64, what: &str) {
    let cap_differs = args.capacity.is_some_and(|c| c != capacity);
    let fpp_differs = args.fpp.is_some_and(|p| (p - fpp).abs() > p * 1e-9);
    if cap_differs || fpp_differs {
        eprintln!(
            "seen: warning: {what} already exists with capacity {capacity} and fpp {fpp}; it keeps them, --capacity and --fpp apply only when it is created"
        );
    }
}

fn open_redis(args: &DedupArgs, url: &str, name: &str) -> Result<Backend> {
    let target = Target::parse(url).map_err(|e| anyhow!("--redis: {e}"))?;
    let policy = RetryPolicy {
        max_attempts: u32::MAX,
        max_elapsed: args.redis_retry,
        ..RetryPolicy::default()
    };
    let existing = match RedisFilter::open_with(&target, name, policy.clone()) {
        Ok(f) => Some(f),
        Err(e) if matches!(e.kind(), seen_redis::ErrorKind::NotFound { .. }) => None,
        Err(e) => return Err(anyhow!("redis: cannot open filter '{name}': {e}")),
    };
    let filter = match existing {
        Some(f) => {
            let m = *f.metadata();
            warn_ignored(
                args,
                m.capacity,
                m.error_rate,
                &format!("Redis filter '{name}'"),
            );
            f
        }
        None if args.read_only => bail!(
            "redis: there is no filter '{name}' to look lines up in (--read-only does not create one)"
        ),
        None => {
            let capacity = args.capacity.unwrap_or(DEFAULT_CAPACITY);
            let fpp = args.fpp.unwrap_or(DEFAULT_FPP);
            let mut params = FilterParams::new(capacity, fpp);
            if let Some(ttl) = args.ttl {
                params = params.ttl(ttl);
            }
            // Another worker may create it at the same moment: then this
            // opens theirs, and different parameters are an error.
            RedisFilter::open_or_create_with(&target, name, &params, policy)
                .map_err(|e| anyhow!("redis: cannot create filter '{name}': {e}"))?
        }
    };
    let mut filter = filter;
    filter.wait_for_replicas(args.redis_wait, REDIS_WAIT_TIMEOUT);
    Ok(Backend::Redis {
        filter: Box::new(filter),
        batch: args.batch as usize,
    })
}

/// Reads a state file in `format`; `None` when it does not exist yet.
fn load_state(path: &Path, format: FileFormat) -> Result<Option<BloomFilter>> {
    let Some((f, content)) = filter_file::open_sniffed(path, "state file")? else {
        return Ok(None);
    };
    let unusable = |e: anyhow::Error| {
        anyhow!("state file {e}; it was left unchanged (move it away to start afresh)")
    };
    match (content, format) {
        (Content::Guava, FileFormat::Guava) => {
            filter_file::read_guava(path, f).map(Some).map_err(unusable)
        }
        (Content::Guava, FileFormat::Seen) => bail!(
            "state file '{}' is a Guava filter file: add --format guava to use it (it is written back \
             in Guava's format)",
            path.display()
        ),
        (Content::SeenFilter, FileFormat::Seen) => match filter_file::read_seen(path, f) {
            Ok(AnyFilter::Bloom(f)) => Ok(Some(f)),
            Ok(other) => bail!(
                "state file '{}' holds a {:?} filter; seen dedup keeps a Bloom filter (give another --state path)",
                path.display(),
                other.kind()
            ),
            Err(e) => Err(unusable(e)),
        },
        (Content::SeenFilter, FileFormat::Guava) => bail!(
            "state file '{}' is in seen's format, not Guava's: drop --format guava, or make a Guava \
             file of it with `seen convert --to guava` (possible for Guava-layout filters only)",
            path.display()
        ),
        (Content::SeenSnapshot, _) => bail!(
            "state file '{}' is a snapshot of a seen serve data directory, not a state file",
            path.display()
        ),
        (Content::Unknown(..), FileFormat::Guava) => bail!(
            "state file '{}' cannot be used: it is not a Guava filter file (a strategy byte, a hash \
             count, a word count and that many words); it was left unchanged",
            path.display()
        ),
        (Content::Unknown(..), FileFormat::Seen) => bail!(
            "state file '{}' cannot be used: it is not a seen filter (no SEENFLTR magic); it was \
             left unchanged (move it away to start afresh)",
            path.display()
        ),
    }
}

/// Makes and removes the state's temporary file, so that a state that
/// could not be saved (no such directory, no permission, a read-only
/// disk) is reported before any input is read, not after all of it.
fn check_state_writable(path: &Path) -> Result<()> {
    filter_file::check_writable(path)
        .map_err(|e| anyhow!("cannot save state file: {e} (nothing was read)"))
}

/// Writes the filter to `path` in `format` atomically: a temporary file in
/// the same directory, fsync, rename over the old one, fsync the directory.
pub(super) fn save_state(filter: &BloomFilter, path: &Path, format: FileFormat) -> Result<()> {
    filter_file::save_bloom(filter, path, format)
        .map_err(|e| anyhow!("cannot save state file: {e}; the previous state is unchanged"))
}
