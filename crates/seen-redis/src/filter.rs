//! [`RedisFilter`]: a handle on one named filter kept in Redis.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use redis::Cmd;
use seen_core::sizing::{self, BLOCK_USABLE_BITS};
use seen_core::{HashAlgorithm, ItemHash};

use crate::answers::{add_script_sha, done_key, worker_id, ANSWERS_TTL, ROUND_RETRY_LIMIT};
use crate::error::{lossy, Answer, ErrorKind, Result};
use crate::layout::{check_name, Keys, Plan};
use crate::link::{Batch, Link, Progress, RetryPolicy, WaitFor};
use crate::located::{Located, Members, SetRound};
use crate::meta::Metadata;
use crate::params::FilterParams;
use crate::reply;
use crate::target::Target;

/// Items sent in one pipeline (one round trip to each node).
const ROUND_ITEMS: usize = 16_384;

/// Shards per pipeline of management commands (open, info, clear, delete,
/// TTL), so a filter of many shards is handled in bounded memory.
const SHARDS_PER_PIPELINE: usize = 1_024;

/// How often a handle re-reads the metadata key, to notice that the filter
/// was deleted, re-created or given a TTL by another client.
const META_CHECK_INTERVAL: Duration = Duration::from_secs(1);

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
    /// This handle's answers hash of each shard (see `answers.rs`).
    done: Vec<Vec<u8>>,
    /// SHA-1 of the add script.
    sha: String,
    /// The number of the last add round sent.
    round: u64,
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
            if reply::ok_or_nil(&replies[0], "SET", &lossy(&meta_key))? {
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
        let worker = worker_id().map_err(|e| {
            ErrorKind::InvalidParameter(format!("no random worker id from the OS: {e}"))
        })?;
        let mut f = RedisFilter {
            done: (0..meta.plan.shards)
                .map(|i| done_key(name, i, &worker))
                .collect(),
            sha: add_script_sha(),
            round: 0,
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
    /// Each item's bits are set by one `BITFIELD ... SET u1`, which Redis
    /// runs atomically, and the item is new if any bit was 0 before. So
    /// when several clients add the same new item at the same moment,
    /// exactly one of them is told it was new. Items of one call go in one
    /// command per shard (split above 512 bit operations), all sent in one
    /// pipeline per 16,384 items (a **round**); the same item twice in one
    /// call is new at most once, as in memory.
    ///
    /// **Faults.** Each command runs in a script that records its answers
    /// in Redis in the same atomic step (see the crate docs), so a retry
    /// after a lost reply, a dropped connection or a restart that kept
    /// Redis's data gets the answers of the run that was lost: the answers
    /// are exactly those of a run without the fault. Retries follow the
    /// [`RetryPolicy`], whose budget starts again whenever a reply arrives.
    /// If it runs out after the call sent items, the call fails with
    /// [`ErrorKind::Incomplete`], which says for each item whether it was
    /// new, present, unknown (sent, unanswered) or not sent; if nothing
    /// was sent, with the cause itself.
    pub fn add_many<T: AsRef<[u8]>>(&mut self, items: &[T]) -> Result<Vec<bool>> {
        self.ensure_fresh()?;
        let mut out = vec![false; items.len()];
        for (round, chunk) in items.chunks(ROUND_ITEMS).enumerate() {
            let start = round * ROUND_ITEMS;
            let mut answers = vec![Answer::Unknown; chunk.len()];
            if let Err(cause) = self.add_round(chunk, &mut answers) {
                if start == 0 && answers.iter().all(|&a| a == Answer::NotSent) {
                    return Err(cause);
                }
                let mut all: Vec<Answer> = out[..start]
                    .iter()
                    .map(|&new| if new { Answer::New } else { Answer::Present })
                    .collect();
                all.extend(answers);
                all.resize(items.len(), Answer::NotSent);
                return Err(ErrorKind::Incomplete {
                    answers: all,
                    cause: Box::new(cause),
                }
                .into());
            }
            for (o, a) in out[start..].iter_mut().zip(answers) {
                *o = a == Answer::New;
            }
        }
        Ok(out)
    }

    /// Makes every add wait, before it answers, until `replicas` replicas
    /// hold its writes (`WAIT replicas timeout` after each round; fewer
    /// replicas within `timeout` is a failed attempt, retried as the
    /// [`RetryPolicy`] allows). A failover then never loses a write that
    /// was answered, so no item is reported new twice; without it, the
    /// writes a master acknowledged but had not yet sent to its replica are
    /// lost with it, and their items are reported new again (a duplicate,
    /// never a loss). `replicas` 0 turns the wait off.
    pub fn wait_for_replicas(&mut self, replicas: u32, timeout: Duration) {
        self.link
            .set_wait((replicas > 0).then_some(WaitFor { replicas, timeout }));
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
            let replies = self.link.run(&batch)?;
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
    /// their next metadata check, within a second), then every shard and
    /// this handle's answers. Other handles' answers expire on their own,
    /// within [`ANSWERS_TTL`](crate::ANSWERS_TTL).
    pub fn delete(mut self) -> Result<()> {
        let mut batch = self.link.batch();
        batch.add("UNLINK", &self.keys.meta, cmd1("UNLINK", &self.keys.meta));
        run_checked(&mut self.link, &batch)?;
        for (shards, done) in in_pipelines(&self.keys.shards, &self.done) {
            let mut batch = self.link.batch();
            for key in shards.iter().chain(done) {
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
        batch.add_expiry(meta, ms);
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

    /// Adds one round. `answers` starts all `Unknown`; on `Err` it says
    /// what is known.
    fn add_round<T: AsRef<[u8]>>(&mut self, items: &[T], answers: &mut [Answer]) -> Result<()> {
        let ttl = match self.live_ttl_ms() {
            Ok(ttl) => ttl,
            Err(e) => {
                answers.fill(Answer::NotSent);
                return Err(e);
            }
        };
        let plan = self.meta.plan;
        let hashes: Vec<ItemHash> = items.iter().map(|i| self.hash(i)).collect();
        let located = Located::new(&plan, &hashes);
        self.round += 1;
        let round = SetRound {
            sha: &self.sha,
            done: &self.done,
            round: self.round,
            // Answers never outlive the filter they answer for.
            answers_ttl_ms: ttl.map_or(ANSWERS_TTL.as_millis() as u64, |ms| {
                ms.min(ANSWERS_TTL.as_millis() as u64)
            }),
            filter_ttl_ms: ttl,
        };
        let mut batch = self.link.batch();
        let parts = located.commands(&mut batch, &self.keys.shards, Some(&round));
        // Retries stop while the answers they need are still recorded, and
        // before the filter expires.
        let mut deadline = Instant::now() + ROUND_RETRY_LIMIT;
        if let Some(ms) = ttl {
            deadline = deadline.min(Instant::now() + Duration::from_millis(ms));
        }
        let mut progress = Progress::default();
        let result = self.link.run_into(&batch, &mut progress, Some(deadline));
        if !progress.sent {
            answers.fill(Answer::NotSent);
        }
        // The replies that came back, even if the batch did not finish.
        for (i, (value, members)) in progress.values.iter().zip(&parts).enumerate() {
            let (command, key) = batch.label(i);
            let Some(members) = members else {
                reply::int(value, command, &key)?;
                continue;
            };
            let ops: usize = members.iter().map(|m| m.ops).sum();
            let mut old = reply::bit_string(value, ops, command, &key)?;
            for m in members {
                // New if any of its bits was 0 before this command set it.
                let new = old.by_ref().take(m.ops).fold(false, |new, was| new | !was);
                answers[m.item] = if new { Answer::New } else { Answer::Present };
            }
        }
        result
    }

    fn contains_round<T: AsRef<[u8]>>(&mut self, items: &[T], out: &mut [bool]) -> Result<()> {
        self.live_ttl_ms()?;
        let plan = self.meta.plan;
        let hashes: Vec<ItemHash> = items.iter().map(|i| self.hash(i)).collect();
        let located = Located::new(&plan, &hashes);
        let mut batch = self.link.batch();
        let parts = located.commands(&mut batch, &self.keys.shards, None);
        let replies = self.link.run(&batch)?;
        for (i, (value, members)) in replies.iter().zip(&parts).enumerate() {
            let (command, key) = batch.label(i);
            let members: &Members = members.as_ref().expect("lookups send only BITFIELD_RO");
            let ops: usize = members.iter().map(|m| m.ops).sum();
            let mut bits = reply::bits(value, ops, command, &key)?;
            for m in members {
                out[m.item] = bits.by_ref().take(m.ops).fold(true, |all, set| all & set);
            }
        }
        Ok(())
    }

    /// Drops this handle's answers, then for every shard (`UNLINK`ed first
    /// if `unlink`): the write that sizes it to full length (0 into bit 511 of its last block, which no item
    /// uses), then the TTL left, or `PERSIST` for a filter without one (so
    /// that no TTL left on a shard by an earlier filter of the same name can
    /// expire it under this one). 1,024 shards per pipeline.
    fn prealloc_all(&mut self, ttl_ms: Option<u64>, unlink: bool) -> Result<()> {
        let last = self.meta.plan.last_unused_offset();
        // This handle's answers go too (they must not outlive a shorter
        // TTL); before its first round it has none (a fresh open).
        let answered = self.round > 0;
        for (shards, done) in in_pipelines(&self.keys.shards, &self.done) {
            let mut batch = self.link.batch();
            for key in done.iter().filter(|_| answered) {
                batch.add("UNLINK", key, cmd1("UNLINK", key));
            }
            for key in shards {
                if unlink {
                    batch.add("UNLINK", key, cmd1("UNLINK", key));
                }
                let mut c = cmd1("BITFIELD", key);
                c.arg("SET").arg("u1").arg(last).arg(0);
                batch.add("BITFIELD", key, c);
                batch.add_expiry(key, ttl_ms);
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
        let replies = self.link.run(&batch)?;
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
    for (i, value) in replies.iter().enumerate() {
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

/// The shard keys and this handle's answer keys, a pipeline's worth at a
/// time.
fn in_pipelines<'a>(
    shards: &'a [Vec<u8>],
    done: &'a [Vec<u8>],
) -> impl Iterator<Item = (&'a [Vec<u8>], &'a [Vec<u8>])> {
    shards
        .chunks(SHARDS_PER_PIPELINE)
        .zip(done.chunks(SHARDS_PER_PIPELINE))
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
    match reply::bytes_or_nil(&replies[0], "GET", &lossy(key))? {
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
