//! Idempotent adds: the script that sets an item's bits and records the
//! answers in one atomic step, so that a retried command gets the answers
//! of the run that was lost instead of running again.
//!
//! Every handle has a random **worker id**, and numbers its add rounds
//! (one pipeline of up to 16,384 items) from 1. Each `BITFIELD` of a round
//! becomes `EVALSHA <script> 2 <shard> <done> <round> <command> <ttl>
//! <offset>...`, where `<done>` is the hash `seen:{NAME:i}:done:<worker>`:
//! in the shard's hash slot, so a Cluster runs the script on the node that
//! holds the shard. The script:
//!
//! - if `<done>` holds a later round, refuses with a `STALE` error (a
//!   command of a connection the worker gave up on, run late: its round
//!   was answered, and emptying `<done>` would lose the later one's
//!   answers);
//! - if it holds an earlier round (or nothing), empties it, records this
//!   round in its field `round` and sets its TTL;
//! - else if `<done>` already has the answers of this command (its field
//!   `<command>`), returns them without touching the bits (renewing the
//!   TTL: a write, so that a `WAIT` on the new connection covers the
//!   writes of the lost run, which came before it);
//! - else runs `BITFIELD <shard> SET u1 <offset> 1 ...`, stores the old
//!   bits as a string of `0`/`1` under `<command>`, and returns it.
//!
//! Redis runs a script atomically and replicates and persists its writes
//! together, so the bits and their answers are never apart: after a
//! dropped reply, a restart from the append-only file or a failover to a
//! replica that had the writes, a retry finds the answers of exactly the
//! bits that were set. A handle sends one round at a time and retries only
//! that round, so `<done>` holds at most one round per worker and shard
//! (one string of `0`/`1` per 512 bit operations), and the TTL drops it
//! once the worker is gone.

use std::fmt::Write;
use std::time::Duration;

use crate::layout::in_shard_slot;

/// How long Redis keeps a worker's last answers for a shard after the
/// round that wrote them began. A round stops retrying after half of it
/// (5 minutes), so every retry finds the answers.
pub const ANSWERS_TTL: Duration = Duration::from_secs(600);

/// How long one add round may be retried, however often replies arrive.
pub(crate) const ROUND_RETRY_LIMIT: Duration = Duration::from_secs(ANSWERS_TTL.as_secs() / 2);

/// The add script (Lua 5.1, as Redis runs it). `KEYS[1]` is the shard,
/// `KEYS[2]` the worker's answers hash; `ARGV` is the round, the command's
/// index in the round, the answers' TTL in milliseconds, then the bit
/// offsets.
pub const ADD_SCRIPT: &str = r#"
local done = KEYS[2]
local round = tonumber(ARGV[1])
local stored = tonumber(redis.call('HGET', done, 'round'))
if stored and stored > round then
  return redis.error_reply('STALE a later round of this worker has begun')
elseif stored ~= round then
  redis.call('DEL', done)
  redis.call('HSET', done, 'round', ARGV[1])
  redis.call('PEXPIRE', done, ARGV[3])
else
  local old = redis.call('HGET', done, ARGV[2])
  if old then
    redis.call('PEXPIRE', done, ARGV[3])
    return old
  end
end
local args = {}
local n = 0
for i = 4, #ARGV do
  args[n + 1] = 'SET'
  args[n + 2] = 'u1'
  args[n + 3] = ARGV[i]
  args[n + 4] = '1'
  n = n + 4
end
local bits = table.concat(redis.call('BITFIELD', KEYS[1], unpack(args)))
redis.call('HSET', done, ARGV[2], bits)
return bits
"#;

/// The SHA-1 of [`ADD_SCRIPT`] in hex, as `EVALSHA` names it.
pub(crate) fn add_script_sha() -> String {
    redis::Script::new(ADD_SCRIPT).get_hash().to_string()
}

/// A handle's worker id: 128 random bits in hex, so that no two handles,
/// on any machine, share an answers hash.
pub(crate) fn worker_id() -> std::io::Result<String> {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes).map_err(|e| std::io::Error::other(e.to_string()))?;
    Ok(bytes.iter().fold(String::with_capacity(32), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    }))
}

/// The answers hash of worker `worker` for shard `i` of filter `name`:
/// `seen:{NAME:i}:done:<worker>`.
pub fn done_key(name: &[u8], i: u64, worker: &str) -> Vec<u8> {
    in_shard_slot(name, i, format!("done:{worker}").as_bytes())
}
