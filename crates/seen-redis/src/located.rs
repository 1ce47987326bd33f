//! One round's items with their bits located, and the commands that set or
//! read those bits, shard by shard.

use seen_core::ItemHash;

use crate::layout::Plan;
use crate::link::{Batch, SetCall};

/// Most bit operations in one command: one command never holds Redis for
/// long (about a hundred microseconds), and a batch is many commands, so
/// that Redis runs one while the client reads the reply to the one before
/// (see `link::stream`).
pub(crate) const MAX_OPS: usize = 512;

/// The items whose answers one command's reply holds, in reply order.
pub(crate) type Members = Vec<Member>;

/// An item's share of a command's reply.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Member {
    /// The item's index in the round.
    pub item: usize,
    /// Its bits in the reply.
    pub ops: usize,
}

/// One item's place: its shard, and where its offsets are.
struct Placed {
    shard: u64,
    item: usize,
    start: usize,
    ops: usize,
}

/// Where the round's answers go and what else to send (for adds).
pub(crate) struct SetRound<'a> {
    /// SHA-1 of the add script.
    pub sha: &'a str,
    /// The worker's answers hash of each shard.
    pub done: &'a [Vec<u8>],
    /// The round's number.
    pub round: u64,
    /// TTL of the answers, in milliseconds.
    pub answers_ttl_ms: u64,
    /// The filter's time left, for a `PEXPIRE` after each shard's writes.
    pub filter_ttl_ms: Option<u64>,
}

/// A round's items, located: shard, and the Redis bit offsets inside it, in
/// shard order (items in input order within a shard).
pub(crate) struct Located {
    items: Vec<Placed>,
    offsets: Vec<u64>,
}

impl Located {
    pub(crate) fn new(plan: &Plan, hashes: &[ItemHash]) -> Located {
        let mut items = Vec::with_capacity(hashes.len());
        let mut offsets = Vec::with_capacity(hashes.len() * plan.hashes as usize);
        for (i, &h) in hashes.iter().enumerate() {
            let (shard, block) = plan.locate(h);
            let start = offsets.len();
            plan.offsets(h, block, &mut offsets);
            items.push(Placed {
                shard,
                item: i,
                start,
                ops: offsets.len() - start,
            });
        }
        if plan.shards > 1 {
            items.sort_unstable_by_key(|p| (p.shard, p.item));
        }
        Located { items, offsets }
    }

    /// Adds the commands of the round to `batch`, at most [`MAX_OPS`] bit
    /// operations each (more only for a single item, whose bits are never
    /// split): with `set`, runs of the add script, each shard's followed
    /// by `PEXPIRE shard ttl` if the filter has a TTL; without,
    /// `BITFIELD_RO ... GET`. Returns, for each command added, the items its
    /// reply answers (`None` for `PEXPIRE`).
    pub(crate) fn commands(
        &self,
        batch: &mut Batch,
        keys: &[Vec<u8>],
        set: Option<&SetRound<'_>>,
    ) -> Vec<Option<Members>> {
        let mut parts = Vec::new();
        let mut rest = &self.items[..];
        while let Some(first) = rest.first() {
            let shard = first.shard;
            let n = rest.iter().take_while(|p| p.shard == shard).count();
            let (group, tail) = rest.split_at(n);
            rest = tail;
            let key = &keys[shard as usize];
            let mut cmd_start = 0;
            while cmd_start < group.len() {
                let mut ops = group[cmd_start].ops;
                let mut end = cmd_start + 1;
                while end < group.len() && ops + group[end].ops <= MAX_OPS {
                    ops += group[end].ops;
                    end += 1;
                }
                let members = &group[cmd_start..end];
                let offsets = members
                    .iter()
                    .flat_map(|p| &self.offsets[p.start..p.start + p.ops])
                    .copied();
                match set {
                    Some(r) => batch.add_set_script(
                        &SetCall {
                            sha: r.sha,
                            key,
                            done: &r.done[shard as usize],
                            round: r.round,
                            command: parts.len(),
                            answers_ttl_ms: r.answers_ttl_ms,
                            ops,
                        },
                        offsets,
                    ),
                    None => batch.add_bitfield_ro(key, ops, offsets),
                }
                parts.push(Some(
                    members
                        .iter()
                        .map(|p| Member {
                            item: p.item,
                            ops: p.ops,
                        })
                        .collect(),
                ));
                cmd_start = end;
            }
            if let Some(ms) = set.and_then(|r| r.filter_ttl_ms) {
                batch.add_expiry(key, Some(ms));
                parts.push(None);
            }
        }
        parts
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::link::{Link, RetryPolicy};
    use crate::target::Target;
    use seen_core::HashAlgorithm;

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
        let done = [b"d".to_vec()];
        let round = SetRound {
            sha: "0",
            done: &done,
            round: 1,
            answers_ttl_ms: 1000,
            filter_ttl_ms: Some(5),
        };
        let parts = located.commands(&mut batch, &[b"k".to_vec()], Some(&round));
        assert_eq!(batch.len(), parts.len());
        assert!(parts.last().unwrap().is_none(), "PEXPIRE last");
        let mut next = 0;
        for members in parts.iter().flatten() {
            let ops: usize = members.iter().map(|m| m.ops).sum();
            assert!(ops <= MAX_OPS && ops + 6 > MAX_OPS || next + members.len() == 1000);
            for m in members {
                assert_eq!(m.item, next);
                assert!((1..=6).contains(&m.ops));
                next += 1;
            }
        }
        assert_eq!(next, 1000);
        assert_eq!(batch.label(0).0, "BITFIELD (add script)");
    }
}
