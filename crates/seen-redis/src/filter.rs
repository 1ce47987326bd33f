//! [`RedisFilter`]: a handle on one named filter kept in Redis.

use std::collections::HashSet;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use redis::Cmd;
use seen_core::sizing::{self, BLOCK_USABLE_BITS};
use seen_core::{HashAlgorithm, ItemHash, DEFAULT_SEED};

use crate::error::{lossy, ErrorKind, Result};
use crate::layout::{check_name, Keys, Plan, DEFAULT_MAX_SHARD_BYTES};
use crate::link::{Batch, BitOp, Link, RetryPolicy};
use crate::meta::Metadata;
use crate::reply;
use crate::target::Target;

/// Items sent in one pipeline (one round trip to each node).
const ROUND_ITEMS: usize = 16_384;

/// Most `SET`/`GET` operations in one BITFIELD command: one command never
/// holds Redis for long (about a hundred microseconds), and a batch is many
/// commands, so that Redis runs one while the client reads the reply to
/// the one before (see `link::stream`).
const MAX_OPS: usize = 512;

/// Shards per pipeline of management commands (open, info, clear, delete,
/// TTL), so a filter of many shards is handled in bounded memory.
const SHARDS_PER_PIPELINE: usize = 1_024;

/// How often a handle re-reads the metadata key, to notice that the filter
/// was deleted, re-created or given a TTL by another client.
const META_CHECK_INTERVAL: Duration = Duration::from_secs(1);

/// What to create when no filter of the name exists yet.
///
/// ```
/// use seen_redis::FilterParams;
/// use std::time::Duration;
///
/// let p = FilterParams::new(100_000_000, 0.001)
///     .ttl(Duration::from_secs(30 * 86_400)); // forget everything after 30 days
/// assert_eq!(p.capacity, 100_000_000);
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct FilterParams {
    /// Items the filter is sized for.
    pub capacity: u64,
    /// False-positive rate at capacity.
    pub error_rate: f64,
    /// Largest size of one shard in bytes; `None` for
    /// [`DEFAULT_MAX_SHARD_BYTES`](crate::DEFAULT_MAX_SHARD_BYTES). When set,
    /// opening an existing filter also checks that its shards match.
    pub max_shard_bytes: Option<u64>,
    /// Expiry of the whole filter, applied when this call creates it (an
    /// existing filter keeps its own; see [`RedisFilter::set_ttl`]).
    pub ttl: Option<Duration>,
    /// Seed of the xxh3-128 item hash ([`seen_core::DEFAULT_SEED`] unless
    /// set). Part of the filter's identity: checked when opening.
    pub seed: u64,
    /// Bits set per item; `None` for the fewest that cost at most
    /// [`SIZE_SLACK_PERCENT`](crate::SIZE_SLACK_PERCENT) more memory than
    /// the smallest filter (see [`Plan::new`]). When set, the filter is the
    /// smallest with exactly this many, and opening an existing filter
    /// also checks it.
    pub hashes: Option<u32>,
}

impl FilterParams {
    /// A filter for `capacity` items at false-positive rate `error_rate`.
    pub fn new(capacity: u64, error_rate: f64) -> Self {
        FilterParams {
            capacity,
            error_rate,
            max_shard_bytes: None,
            ttl: None,
            seed: DEFAULT_SEED,
            hashes: None,
        }
    }

    /// Sets the largest shard size in bytes (at least 64, at most 256 MiB).
    pub fn max_shard_bytes(mut self, bytes: u64) -> Self {
        self.max_shard_bytes = Some(bytes);
        self
    }

    /// Sets the expiry applied when the filter is created.
    pub fn ttl(mut self, ttl: Duration) -> Self {
        self.ttl = Some(ttl);
        self
    }

    /// Sets the hash seed.
    pub fn seed(mut self, seed: u64) -> Self {
        self.seed = seed;
        self
    }

    /// Sets the bits per item: for example the hash count of the smallest
    /// filter (`seen_core::sizing::blocked_size`), for the least memory at
    /// the cost of more work per add.
    pub fn hashes(mut self, hashes: u32) -> Self {
        self.hashes = Some(hashes);
        self
    }

    fn plan(&self) -> Result<Plan> {
        let max = self.max_shard_bytes.unwrap_or(DEFAULT_MAX_SHARD_BYTES);
        match self.hashes {
            None => Plan::new(self.capacity, self.error_rate, max),
            Some(k) => Plan::with_hashes(self.capacity, self.error_rate, max, k),
        }
    }
}

/// What [`RedisFilter::info`] reports.
#[derive(Clone, Debug, PartialEq)]
pub struct RedisFilterInfo {
    /// The filter's name (lossy UTF-8).
    pub name: String,
    /// Parameters and layout from the metadata key.
    pub metadata: Metadata,
    /// Bits that item positions can address (509 per 512-bit block).
    pub bits: u64,
    /// Bytes of all shards together.
    pub bytes: u64,
    /// Of the addressable bits, how many are set.
    pub bits_set: u64,
    /// `bits_set / bits`.
    pub fill_ratio: f64,
    /// Distinct items estimated from the bits set (Swamidass & Baldi).
    pub estimated_items: f64,
    /// False-positive rate a lookup of a never-added item has now, by the
    /// blocked sizing model at the estimated item count.
    pub current_fpp: f64,
    /// Shards whose key is missing or not of full length: data lost to
    /// eviction, `FLUSHDB`, or a write after the filter expired. 0 normally.
    pub damaged_shards: u64,
    /// Time left before Redis drops the filter, if it has a TTL.
    pub ttl: Option<Duration>,
}

/// One named Bloom filter kept in Redis strings, shared by every client
/// that opens the same name.
///
/// A handle owns one connection (one per node of a Cluster) and is used
/// from one thread at a time (`&mut self`); give each worker thread its own
/// handle. See the [crate docs](crate) for the design.
pub struct RedisFilter {
    name: Vec<u8>,
    meta: Metadata,
    keys: Keys,
    link: Link,
    /// A local instant at or before which Redis drops the filter (from the
    /// metadata key's PTTL), if it has a TTL.
    deadline: Option<Instant>,
    checked_at: Instant,
}

impl std::fmt::Debug for RedisFilter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisFilter")
            .field("name", &lossy(&self.name))
            .field("metadata", &self.meta)
            .finish_non_exhaustive()
    }
}

impl RedisFilter {
    /// Opens the filter `name`, creating it with `params` if it does not
    /// exist. An existing filter must have the same capacity, error rate and
    /// seed (and shard size, if `params` sets one), or this is an
    /// [`ErrorKind::Mismatch`] error.
    pub fn open_or_create(
        target: &Target,
        name: impl AsRef<[u8]>,
        params: &FilterParams,
    ) -> Result<RedisFilter> {
        Self::open_or_create_with(target, name, params, RetryPolicy::default())
    }

    /// [`open_or_create`](Self::open_or_create) with a retry policy.
    pub fn open_or_create_with(
        target: &Target,
        name: impl AsRef<[u8]>,
        params: &FilterParams,
        policy: RetryPolicy,
    ) -> Result<RedisFilter> {
        let name = name.as_ref();
        check_name(name)?;
        let plan = params.plan()?;
        if let Some(ttl) = params.ttl {
            ttl_millis(ttl)?;
        }
        let mut link = Link::new(target, policy)?;
        let meta_key = crate::layout::meta_key(name);
        let mut created = false;
        // If our SET NX loses, someone else's value is there to read; a
        // third round only matters if that filter is deleted meanwhile.
        let mut meta = None;
        for _ in 0..3 {
            if let Some(found) = read_meta(&mut link, &meta_key)? {
                meta = Some(found);
                break;
            }
            let fresh = Metadata {
                capacity: params.capacity,
                error_rate: params.error_rate,
                seed: params.seed,
                plan,
                created_unix_ms: SystemTime::now()
                    .duration_since(UNIX_EPOCH)
                    .map_or(0, |d| d.as_millis() as u64),
            };
            let mut set = redis::cmd("SET");
            set.arg(&meta_key).arg(fresh.encode()).arg("NX");
            if let Some(ttl) = params.ttl {
                set.arg("PX").arg(ttl_millis(ttl)?);
            }
            let mut batch = link.batch();
            batch.add("SET", &meta_key, set);
            let replies = link.run(&batch)?;
            if reply::ok_or_nil(&replies.values[0], "SET", &lossy(&meta_key))? {
                meta = Some(fresh);
                created = true;
                break;
            }
        }
        let Some(meta) = meta else {
            return Err(ErrorKind::NotFound {
                name: lossy(name),
                key: lossy(&meta_key),
            }
            .into());
        };
        if !created {
            check_params(name, &meta, params, plan)?;
        }
        Self::finish_open(name, meta, link)
    }

    /// Opens an existing filter; [`ErrorKind::NotFound`] if there is none.
    pub fn open(target: &Target, name: impl AsRef<[u8]>) -> Result<RedisFilter> {
        Self::open_with(target, name, RetryPolicy::default())
    }

    /// [`open`](Self::open) with a retry policy.
    pub fn open_with(
        target: &Target,
        name: impl AsRef<[u8]>,
        policy: RetryPolicy,
    ) -> Result<RedisFilter> {
        let name = name.as_ref();
        check_name(name)?;
        let mut link = Link::new(target, policy)?;
        let meta_key = crate::layout::meta_key(name);
        match read_meta(&mut link, &meta_key)? {
            Some(meta) => Self::finish_open(name, meta, link),
            None => Err(ErrorKind::NotFound {
                name: lossy(name),
                key: lossy(&meta_key),
            }
            .into()),
        }
    }

    fn finish_open(name: &[u8], meta: Metadata, link: Link) -> Result<RedisFilter> {
        let mut f = RedisFilter {
            name: name.to_vec(),
            keys: Keys::new(name, meta.plan.shards),
            meta,
            link,
            deadline: None,
            checked_at: Instant::now(),
        };
        f.refresh()?;
        // Every shard at full length from the start: Redis then never grows
        // (reallocates and copies) a shard under a worker's first write.
        let ttl = f.live_ttl_ms()?;
        f.prealloc_all(ttl, false)?;
        Ok(f)
    }

    /// The filter's name.
    pub fn name(&self) -> &[u8] {
        &self.name
    }

    /// Parameters and layout, as read from the metadata key.
    pub fn metadata(&self) -> &Metadata {
        &self.meta
    }

    /// The item hash this filter uses: xxh3-128 with the filter's seed.
    pub fn hash(&self, item: impl AsRef<[u8]>) -> ItemHash {
        HashAlgorithm::Xxh3_128.hash(item.as_ref(), self.meta.seed)
    }

    /// Adds items; `result[i]` says whether `items[i]` was new.
    ///
    /// Each item's bits are set by one `BITFIELD ... SET u1` command, which
    /// Redis runs atomically, and the item is new if any bit was 0 before.
    /// So when several clients add the same new item at the same moment,
    /// exactly one of them is told it was new. Items of one call go in one
    /// BITFIELD per shard (split above 512 bit operations), all sent in
    /// one pipeline per 16,384 items; the same item twice in one call is
    /// new at most once, as in memory.
    ///
    /// **Faults.** Lost connections, restarts and Cluster redirections are
    /// retried as the [`RetryPolicy`] allows. If an attempt failed after
    /// sending (its effect unknown) and a later attempt succeeds, an item
    /// of that batch that the later attempt finds present is reported as
    /// **new** (each distinct item once): the earlier attempt may have set
    /// its bits, and "already present" must never be said of an item that
    /// was not. Such an item may thus be reported new twice (by this call
    /// and by another client's), never zero times. If the retries run out
    /// the call fails with [`ErrorKind::Unavailable`]; some of its items may
    /// then be in the filter, and adding them again is safe.
    pub fn add_many<T: AsRef<[u8]>>(&mut self, items: &[T]) -> Result<Vec<bool>> {
        self.ensure_fresh()?;
        let mut out = vec![false; items.len()];
        for (round, chunk) in items.chunks(ROUND_ITEMS).enumerate() {
            let start = round * ROUND_ITEMS;
            self.add_round(chunk, &mut out[start..start + chunk.len()])?;
        }
        Ok(out)
    }

    /// Adds one item; `true` if it was new. See [`add_many`](Self::add_many).
    pub fn add(&mut self, item: impl AsRef<[u8]>) -> Result<bool> {
        Ok(self.add_many(&[item.as_ref()])?[0])
    }

    /// Looks items up; `result[i]` is `false` only if `items[i]` was
    /// certainly never added. Uses `BITFIELD_RO` (one per shard per 512
    /// bit reads), pipelined; read-only, so always safe to retry.
    pub fn contains_many<T: AsRef<[u8]>>(&mut self, items: &[T]) -> Result<Vec<bool>> {
        self.ensure_fresh()?;
        let mut out = vec![false; items.len()];
        for (round, chunk) in items.chunks(ROUND_ITEMS).enumerate() {
            let start = round * ROUND_ITEMS;
            self.contains_round(chunk, &mut out[start..start + chunk.len()])?;
        }
        Ok(out)
    }

    /// Looks one item up. See [`contains_many`](Self::contains_many).
    pub fn contains(&mut self, item: impl AsRef<[u8]>) -> Result<bool> {
        Ok(self.contains_many(&[item.as_ref()])?[0])
    }

    /// Fill ratio, estimated item count and current false-positive rate,
    /// from `BITCOUNT` and `STRLEN` of every shard (pipelined, 1,024 shards
    /// per round trip; Redis counts bits at several GB/s, so a 1 GB filter
    /// costs it a fraction of a second).
    pub fn info(&mut self) -> Result<RedisFilterInfo> {
        self.refresh()?;
        let shard_bytes = self.meta.plan.shard_bytes();
        let mut bits_set = 0u64;
        let mut damaged_shards = 0;
        for chunk in self.keys.shards.chunks(SHARDS_PER_PIPELINE) {
            let mut batch = self.link.batch();
            for key in chunk {
                batch.add("BITCOUNT", key, cmd1("BITCOUNT", key));
                batch.add("STRLEN", key, cmd1("STRLEN", key));
            }
            let replies = self.link.run(&batch)?.values;
            for (i, pair) in replies.chunks_exact(2).enumerate() {
                let key = lossy(&chunk[i]);
                bits_set += reply::count(&pair[0], "BITCOUNT", &key)?;
                if reply::count(&pair[1], "STRLEN", &key)? != shard_bytes {
                    damaged_shards += 1;
                }
            }
        }
        let plan = self.meta.plan;
        let bits = plan.blocks() * BLOCK_USABLE_BITS;
        let estimated_items = sizing::estimate_items(bits, plan.hashes, bits_set);
        let current_fpp = if estimated_items.is_finite() {
            sizing::blocked_fpp(plan.blocks(), plan.hashes, estimated_items.round() as u64)
        } else {
            1.0
        };
        Ok(RedisFilterInfo {
            name: lossy(&self.name),
            metadata: self.meta,
            bits,
            bytes: plan.shards * shard_bytes,
            bits_set,
            fill_ratio: bits_set as f64 / bits as f64,
            estimated_items,
            current_fpp,
            damaged_shards,
            ttl: self
                .deadline
                .map(|d| d.saturating_duration_since(Instant::now())),
        })
    }

    /// Empties the filter: every shard is replaced by a zeroed one
    /// (`UNLINK`, so Redis frees the old memory in the background). The
    /// metadata and the TTL stay.
    pub fn clear(&mut self) -> Result<()> {
        self.refresh()?;
        let ttl = self.live_ttl_ms()?;
        self.prealloc_all(ttl, true)
    }

    /// Deletes the filter: its metadata key first (so other clients stop at
    /// their next metadata check, within a second), then every shard.
    pub fn delete(mut self) -> Result<()> {
        let mut batch = self.link.batch();
        batch.add("UNLINK", &self.keys.meta, cmd1("UNLINK", &self.keys.meta));
        run_checked(&mut self.link, &batch)?;
        for chunk in self.keys.shards.chunks(SHARDS_PER_PIPELINE) {
            let mut batch = self.link.batch();
            for key in chunk {
                batch.add("UNLINK", key, cmd1("UNLINK", key));
            }
            run_checked(&mut self.link, &batch)?;
        }
        Ok(())
    }

    /// Sets (`Some`) or removes (`None`) the filter's expiry. The same TTL
    /// goes on every shard and then on the metadata key in one pipeline;
    /// writes made later carry the TTL left along (see the crate docs for
    /// the bound on how far apart the keys expire). Other handles pick the
    /// change up within a second.
    pub fn set_ttl(&mut self, ttl: Option<Duration>) -> Result<()> {
        self.ensure_fresh()?;
        let ms = ttl.map(ttl_millis).transpose()?;
        self.prealloc_all(ms, false)?;
        let mut batch = self.link.batch();
        let meta = &self.keys.meta;
        match ms {
            Some(ms) => {
                let mut c = cmd1("PEXPIRE", meta);
                c.arg(ms);
                batch.add("PEXPIRE", meta, c);
            }
            None => batch.add("PERSIST", meta, cmd1("PERSIST", meta)),
        }
        run_checked(&mut self.link, &batch)?;
        self.refresh()
    }

    /// Time left before Redis drops the filter, or `None` without a TTL
    /// (read from the metadata key now).
    pub fn ttl(&mut self) -> Result<Option<Duration>> {
        self.refresh()?;
        Ok(self
            .deadline
            .map(|d| d.saturating_duration_since(Instant::now())))
    }

    // ------------------------------------------------------------ internals

    fn add_round<T: AsRef<[u8]>>(&mut self, items: &[T], out: &mut [bool]) -> Result<()> {
        let ttl = self.live_ttl_ms()?;
        let plan = self.meta.plan;
        let hashes: Vec<ItemHash> = items.iter().map(|i| self.hash(i)).collect();
        let located = Located::new(&plan, &hashes);
        let mut batch = self.link.batch();
        // For each command: the items whose answers its reply holds, with
        // their operation counts; `None` for a command without bits.
        let parts = located.commands(&mut batch, &self.keys.shards, BitOp::Set, ttl);
        let replies = self.link.run(&batch)?;
        for (i, (value, members)) in replies.values.iter().zip(&parts).enumerate() {
            let (command, key) = batch.label(i);
            let Some(members) = members else {
                reply::int(value, command, &key)?;
                continue;
            };
            let ops: usize = members.iter().map(|m| m.1).sum();
            let mut old = reply::bits(value, ops, command, &key)?;
            for &(item, n) in members {
                // New if any of its bits was 0 before this command set it.
                out[item] = old.by_ref().take(n).fold(false, |new, was| new | !was);
            }
        }
        if replies.ambiguous {
            // An earlier attempt may have set these bits: report each item
            // that now looks present as new, once.
            let mut first = HashSet::new();
            for (i, h) in hashes.iter().enumerate() {
                if first.insert((h.lo, h.hi)) {
                    out[i] = true;
                }
            }
        }
        Ok(())
    }

    fn contains_round<T: AsRef<[u8]>>(&mut self, items: &[T], out: &mut [bool]) -> Result<()> {
        self.live_ttl_ms()?;
        let plan = self.meta.plan;
        let hashes: Vec<ItemHash> = items.iter().map(|i| self.hash(i)).collect();
        let located = Located::new(&plan, &hashes);
        let mut batch = self.link.batch();
        let parts = located.commands(&mut batch, &self.keys.shards, BitOp::Get, None);
        let replies = self.link.run(&batch)?;
        for (i, (value, members)) in replies.values.iter().zip(&parts).enumerate() {
            let (command, key) = batch.label(i);
            let members = members.as_ref().expect("lookups send only BITFIELD_RO");
            let ops: usize = members.iter().map(|m| m.1).sum();
            let mut bits = reply::bits(value, ops, command, &key)?;
            for &(item, n) in members {
                out[item] = bits.by_ref().take(n).fold(true, |all, set| all & set);
            }
        }
        Ok(())
    }

    /// For every shard (`UNLINK`ed first if `unlink`): the write that sizes
    /// it to full length (0 into bit 511 of its last block, which no item
    /// uses), then the TTL left, or `PERSIST` for a filter without one (so
    /// that no TTL left on a shard by an earlier filter of the same name can
    /// expire it under this one). 1,024 shards per pipeline.
    fn prealloc_all(&mut self, ttl_ms: Option<u64>, unlink: bool) -> Result<()> {
        let last = self.meta.plan.last_unused_offset();
        for chunk in self.keys.shards.chunks(SHARDS_PER_PIPELINE) {
            let mut batch = self.link.batch();
            for key in chunk {
                if unlink {
                    batch.add("UNLINK", key, cmd1("UNLINK", key));
                }
                let mut c = cmd1("BITFIELD", key);
                c.arg("SET").arg("u1").arg(last).arg(0);
                batch.add("BITFIELD", key, c);
                match ttl_ms {
                    Some(ms) => {
                        let mut c = cmd1("PEXPIRE", key);
                        c.arg(ms);
                        batch.add("PEXPIRE", key, c);
                    }
                    None => batch.add("PERSIST", key, cmd1("PERSIST", key)),
                }
            }
            run_checked(&mut self.link, &batch)?;
        }
        Ok(())
    }

    /// Re-reads the metadata if the last check is more than a second old.
    fn ensure_fresh(&mut self) -> Result<()> {
        if self.checked_at.elapsed() >= META_CHECK_INTERVAL {
            self.refresh()?;
        }
        Ok(())
    }

    /// Reads the metadata key and its TTL, checks the filter is still the
    /// one this handle computes positions for, and updates the deadline.
    fn refresh(&mut self) -> Result<()> {
        let mut batch = self.link.batch();
        batch.add("GET", &self.keys.meta, cmd1("GET", &self.keys.meta));
        batch.add("PTTL", &self.keys.meta, cmd1("PTTL", &self.keys.meta));
        let sent = Instant::now();
        let replies = self.link.run(&batch)?.values;
        self.check_meta_replies(&replies[0], &replies[1], sent)
    }

    fn check_meta_replies(
        &mut self,
        get: &redis::Value,
        pttl: &redis::Value,
        sent: Instant,
    ) -> Result<()> {
        let key = lossy(&self.keys.meta);
        let Some(bytes) = reply::bytes_or_nil(get, "GET", &key)? else {
            return Err(self.gone());
        };
        let meta = Metadata::decode(&self.keys.meta, bytes)?;
        if !meta.same_positions(&self.meta) {
            return Err(ErrorKind::Changed {
                name: lossy(&self.name),
                detail: format!(
                    "{} shards of {} blocks with {} hashes and seed {:#x}, was {} shards of {} \
                     blocks with {} hashes and seed {:#x}",
                    meta.plan.shards,
                    meta.plan.shard_blocks,
                    meta.plan.hashes,
                    meta.seed,
                    self.meta.plan.shards,
                    self.meta.plan.shard_blocks,
                    self.meta.plan.hashes,
                    self.meta.seed
                ),
            }
            .into());
        }
        self.meta = meta;
        // PTTL is measured when Redis runs it, after `sent`: `sent + ttl` is
        // at or before the real expiry.
        self.deadline = match reply::pttl(pttl, &key)? {
            None => return Err(self.gone()),
            Some(None) => None,
            Some(Some(ms)) => Some(sent + Duration::from_millis(ms)),
        };
        self.checked_at = Instant::now();
        Ok(())
    }

    fn gone(&self) -> crate::Error {
        let expired = self.deadline.is_some_and(|d| Instant::now() >= d);
        if expired {
            ErrorKind::Expired {
                name: lossy(&self.name),
            }
            .into()
        } else {
            ErrorKind::NotFound {
                name: lossy(&self.name),
                key: lossy(&self.keys.meta),
            }
            .into()
        }
    }

    /// The TTL left in whole milliseconds (rounded down, so that a key
    /// given it never outlives the metadata), or an `Expired` error.
    fn live_ttl_ms(&self) -> Result<Option<u64>> {
        match self.deadline {
            None => Ok(None),
            Some(d) => {
                let ms = d.saturating_duration_since(Instant::now()).as_millis() as u64;
                if ms == 0 {
                    Err(ErrorKind::Expired {
                        name: lossy(&self.name),
                    }
                    .into())
                } else {
                    Ok(Some(ms))
                }
            }
        }
    }
}

/// Runs a batch of management commands and checks that each reply has the
/// shape its command gives.
fn run_checked(link: &mut Link, batch: &Batch) -> Result<()> {
    let replies = link.run(batch)?;
    for (i, value) in replies.values.iter().enumerate() {
        let (command, key) = batch.label(i);
        match command {
            "BITFIELD" => reply::bits(value, 1, command, &key)?.for_each(drop),
            _ => {
                reply::int(value, command, &key)?;
            }
        }
    }
    Ok(())
}

/// A command with one key argument.
fn cmd1(name: &str, key: &[u8]) -> Cmd {
    let mut c = redis::cmd(name);
    c.arg(key);
    c
}

fn ttl_millis(ttl: Duration) -> Result<u64> {
    let ms = ttl.as_millis();
    if ms == 0 || ms > i64::MAX as u128 / 2 {
        return Err(ErrorKind::InvalidParameter(format!(
            "TTL {ttl:?} is out of range: it must be at least 1 ms"
        ))
        .into());
    }
    Ok(ms as u64)
}

/// Reads and decodes the metadata key; `None` if it does not exist.
fn read_meta(link: &mut Link, key: &[u8]) -> Result<Option<Metadata>> {
    let mut batch = link.batch();
    batch.add("GET", key, cmd1("GET", key));
    let replies = link.run(&batch)?;
    match reply::bytes_or_nil(&replies.values[0], "GET", &lossy(key))? {
        None => Ok(None),
        Some(bytes) => Ok(Some(Metadata::decode(key, bytes)?)),
    }
}

/// Refuses to open an existing filter with other parameters.
fn check_params(name: &[u8], stored: &Metadata, params: &FilterParams, plan: Plan) -> Result<()> {
    let mismatch = |field: &'static str, stored: String, requested: String| -> crate::Error {
        ErrorKind::Mismatch {
            name: lossy(name),
            field,
            stored,
            requested,
        }
        .into()
    };
    if stored.capacity != params.capacity {
        return Err(mismatch(
            "capacity",
            stored.capacity.to_string(),
            params.capacity.to_string(),
        ));
    }
    if stored.error_rate != params.error_rate {
        return Err(mismatch(
            "error rate",
            stored.error_rate.to_string(),
            params.error_rate.to_string(),
        ));
    }
    if stored.seed != params.seed {
        return Err(mismatch(
            "seed",
            format!("{:#x}", stored.seed),
            format!("{:#x}", params.seed),
        ));
    }
    if let Some(k) = params.hashes {
        if stored.plan.hashes != k {
            return Err(mismatch(
                "hashes",
                stored.plan.hashes.to_string(),
                k.to_string(),
            ));
        }
    }
    if let Some(max) = params.max_shard_bytes {
        // The shards these parameters give with the filter's own hash
        // count: a filter sized by another rule for the hash count (an
        // older release's, or `hashes` set by its creator) still opens.
        // (With `hashes` given, it equals the stored count, checked above.)
        let expected =
            Plan::with_hashes(params.capacity, params.error_rate, max, stored.plan.hashes)
                .unwrap_or(plan);
        if stored.plan != expected {
            let show = |p: &Plan| {
                format!(
                    "{} shards of {} bytes, {} hashes",
                    p.shards,
                    p.shard_bytes(),
                    p.hashes
                )
            };
            return Err(mismatch("layout", show(&stored.plan), show(&expected)));
        }
    }
    Ok(())
}

/// The `(item index, operation count)` pairs whose answers one BITFIELD
/// reply holds, in order.
type Members = Vec<(usize, usize)>;

/// One round's items with their bits located: shard, and the Redis bit
/// offsets inside it, in shard order (items in input order within a shard).
struct Located {
    /// `(shard, item index, start, count)`: the item's offsets are
    /// `offsets[start..start + count]`.
    items: Vec<(u64, usize, usize, usize)>,
    offsets: Vec<u64>,
}

impl Located {
    fn new(plan: &Plan, hashes: &[ItemHash]) -> Located {
        let mut items = Vec::with_capacity(hashes.len());
        let mut offsets = Vec::with_capacity(hashes.len() * plan.hashes as usize);
        for (i, &h) in hashes.iter().enumerate() {
            let (shard, block) = plan.locate(h);
            let start = offsets.len();
            plan.offsets(h, block, &mut offsets);
            items.push((shard, i, start, offsets.len() - start));
        }
        if plan.shards > 1 {
            items.sort_unstable_by_key(|&(shard, i, _, _)| (shard, i));
        }
        Located { items, offsets }
    }

    /// Adds `BITFIELD` (`SET`, value 1) or `BITFIELD_RO` (`GET`) commands
    /// for every shard with items: each with at most [`MAX_OPS`]
    /// operations (more only for a single item, whose bits are never
    /// split), then `PEXPIRE shard ttl` if `ttl` is given. Returns, for
    /// each command added, the items its reply answers (`None` for
    /// `PEXPIRE`).
    fn commands(
        &self,
        batch: &mut Batch,
        keys: &[Vec<u8>],
        op: BitOp,
        ttl: Option<u64>,
    ) -> Vec<Option<Members>> {
        let mut parts = Vec::new();
        let mut rest = &self.items[..];
        while let Some(&(shard, ..)) = rest.first() {
            let n = rest.iter().take_while(|e| e.0 == shard).count();
            let (group, tail) = rest.split_at(n);
            rest = tail;
            let key = &keys[shard as usize];
            let mut cmd_start = 0;
            while cmd_start < group.len() {
                let mut ops = group[cmd_start].3;
                let mut end = cmd_start + 1;
                while end < group.len() && ops + group[end].3 <= MAX_OPS {
                    ops += group[end].3;
                    end += 1;
                }
                let members = &group[cmd_start..end];
                batch.add_bitfield(
                    op,
                    key,
                    ops,
                    members
                        .iter()
                        .flat_map(|&(_, _, start, n)| &self.offsets[start..start + n])
                        .copied(),
                );
                parts.push(Some(members.iter().map(|&(_, i, _, n)| (i, n)).collect()));
                cmd_start = end;
            }
            if let Some(ms) = ttl {
                let mut c = cmd1("PEXPIRE", key);
                c.arg(ms);
                batch.add("PEXPIRE", key, c);
                parts.push(None);
            }
        }
        parts
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_split_at_item_boundaries() {
        // One shard: 1,000 items of 6 bits each, 85 items per command.
        let plan = Plan {
            shards: 1,
            shard_blocks: 1 << 10,
            hashes: 6,
        };
        let hashes: Vec<ItemHash> = (0..1000u64)
            .map(|i| HashAlgorithm::Xxh3_128.hash(&i.to_le_bytes(), 7))
            .collect();
        let located = Located::new(&plan, &hashes);
        let target: Target = "redis://127.0.0.1:1".parse().unwrap();
        let link = Link::new(&target, RetryPolicy::no_retry()).unwrap();
        let mut batch = link.batch();
        let parts = located.commands(&mut batch, &[b"k".to_vec()], BitOp::Set, Some(5));
        assert_eq!(batch.len(), parts.len());
        assert!(parts.last().unwrap().is_none(), "PEXPIRE last");
        let mut next = 0;
        for members in parts.iter().flatten() {
            let ops: usize = members.iter().map(|m| m.1).sum();
            assert!(ops <= MAX_OPS && ops + 6 > MAX_OPS || next + members.len() == 1000);
            for m in members {
                assert_eq!(m.0, next);
                assert!((1..=6).contains(&m.1));
                next += 1;
            }
        }
        assert_eq!(next, 1000);
        assert_eq!(batch.label(0).0, "BITFIELD");
    }

    #[test]
    fn ttl_range() {
        assert!(ttl_millis(Duration::from_micros(10)).is_err());
        assert_eq!(ttl_millis(Duration::from_secs(2)).unwrap(), 2000);
        assert!(ttl_millis(Duration::MAX).is_err());
    }
}
