//! A 3-master Redis Cluster made by `redis-cli --cluster create`: the same
//! answers and bits as in memory, shards on every node, exactly-once adds,
//! management commands.

use std::collections::HashSet;
use std::time::Duration;

use seen_redis::{FilterParams, RedisFilter};

use crate::concurrency::race;
use crate::server::Cluster;
use crate::{assert_answers, body_of, reference, target, urls};

fn dbsize(node: &crate::server::RedisServer) -> u64 {
    redis::cmd("DBSIZE").query(&mut node.conn()).unwrap()
}

#[test]
fn three_master_cluster() {
    let cluster = Cluster::start(3);
    let t = target(&cluster.url());
    assert!(t.is_cluster());
    let params = FilterParams::new(50_000, 0.01).max_shard_bytes(4096);
    let mut f = RedisFilter::open_or_create(&t, "web", &params).unwrap();
    let meta = *f.metadata();
    assert!(meta.plan.shards >= 12, "{meta:?}");

    // Per-shard hash tags spread the shards over every node.
    for node in &cluster.nodes {
        assert!(dbsize(node) >= 2, "a node with no shard");
    }
    let total: u64 = cluster.nodes.iter().map(dbsize).sum();
    assert_eq!(total, meta.plan.shards + 1);
    let mut slots = HashSet::new();
    let mut conn = cluster.nodes[0].conn();
    for i in 0..meta.plan.shards {
        let slot: u64 = redis::cmd("CLUSTER")
            .arg("KEYSLOT")
            .arg(seen_redis::shard_key(b"web", i))
            .query(&mut conn)
            .unwrap();
        slots.insert(slot);
    }
    assert_eq!(slots.len() as u64, meta.plan.shards, "one slot per shard");

    // Same answers as in memory, pipelined across the nodes.
    let mem = reference(&meta);
    let items = urls("web", 30_000);
    for batch in items.chunks(3_000) {
        let got = f.add_many(batch).unwrap();
        let want: Vec<bool> = batch.iter().map(|i| mem.add(i)).collect();
        assert_answers(&got, &want);
    }
    assert!(f.contains_many(&items).unwrap().iter().all(|&p| p));
    let others = urls("other", 30_000);
    let got = f.contains_many(&others).unwrap();
    let want: Vec<bool> = others.iter().map(|i| mem.contains(i)).collect();
    assert_answers(&got, &want);

    // Same bytes, shard by shard, wherever each shard lives.
    let mut bytes = Vec::new();
    for i in 0..meta.plan.shards {
        let key = seen_redis::shard_key(b"web", i);
        let found: Vec<Vec<u8>> = cluster
            .nodes
            .iter()
            .filter_map(|n| {
                let v: Option<Vec<u8>> = redis::cmd("GET").arg(&key).query(&mut n.conn()).ok();
                v
            })
            .collect();
        assert_eq!(found.len(), 1, "shard {i} on exactly one node");
        bytes.extend_from_slice(&found[0]);
    }
    assert_eq!(bytes, body_of(&mem));

    let info = f.info().unwrap();
    assert_eq!(info.bits_set, mem.stats().bits_set);
    assert_eq!(info.damaged_shards, 0);

    f.set_ttl(Some(Duration::from_secs(100))).unwrap();
    let left = f.ttl().unwrap().expect("a TTL");
    assert!(left > Duration::from_secs(95), "{left:?}");
    for i in 0..meta.plan.shards {
        let key = seen_redis::shard_key(b"web", i);
        let ttls: Vec<i64> = cluster
            .nodes
            .iter()
            .filter_map(|n| redis::cmd("PTTL").arg(&key).query(&mut n.conn()).ok())
            .collect();
        assert_eq!(ttls.len(), 1, "{ttls:?}");
        assert!(ttls[0] > 90_000 && ttls[0] <= 100_000, "{ttls:?}");
    }
    f.clear().unwrap();
    assert_eq!(f.info().unwrap().bits_set, 0);
    assert!(f.contains_many(&items).unwrap().iter().all(|&p| !p));
    f.delete().unwrap();
    assert_eq!(cluster.nodes.iter().map(dbsize).sum::<u64>(), 0);

    resharding_is_followed(&cluster);

    // Three workers racing on 20,000 URLs: each new exactly once.
    let params = FilterParams::new(1_000_000, 1e-6).max_shard_bytes(64 * 1024);
    let counts = race(&t, "cluster-race", &params, 3, 20_000);
    assert!(
        counts.iter().all(|&c| c == 1),
        "{:?}",
        counts.iter().filter(|&&c| c != 1).count()
    );
}

fn node_id(node: &crate::server::RedisServer) -> String {
    redis::cmd("CLUSTER")
        .arg("MYID")
        .query(&mut node.conn())
        .unwrap()
}

fn setslot(node: &crate::server::RedisServer, slot: u64, state: &str, id: &str) {
    let _: () = redis::cmd("CLUSTER")
        .arg("SETSLOT")
        .arg(slot)
        .arg(state)
        .arg(id)
        .query(&mut node.conn())
        .unwrap();
}

/// Moves the slot of shard 0 to another node while a handle uses it: the
/// handle first meets ASK (mid-migration), then MOVED, and keeps answering
/// like the in-memory filter.
fn resharding_is_followed(cluster: &Cluster) {
    let t = target(&cluster.url());
    let params = FilterParams::new(20_000, 0.01).max_shard_bytes(2048);
    let mut f = RedisFilter::open_or_create(&t, "moving", &params).unwrap();
    let mem = reference(f.metadata());
    let items = urls("moving", 10_000);
    let (before, after) = items.split_at(5_000);
    let want: Vec<bool> = before.iter().map(|i| mem.add(i)).collect();
    assert_answers(&f.add_many(before).unwrap(), &want);

    let key = seen_redis::shard_key(b"moving", 0);
    let slot: u64 = redis::cmd("CLUSTER")
        .arg("KEYSLOT")
        .arg(&key)
        .query(&mut cluster.nodes[0].conn())
        .unwrap();
    let src = cluster
        .nodes
        .iter()
        .position(|n| {
            let e: i64 = redis::cmd("EXISTS")
                .arg(&key)
                .query(&mut n.conn())
                .unwrap_or(0);
            e == 1
        })
        .expect("shard 0 on some node");
    let dst = (src + 1) % cluster.nodes.len();
    let (src_node, dst_node) = (&cluster.nodes[src], &cluster.nodes[dst]);
    let (src_id, dst_id) = (node_id(src_node), node_id(dst_node));
    setslot(dst_node, slot, "IMPORTING", &src_id);
    setslot(src_node, slot, "MIGRATING", &dst_id);
    // Every key of the slot, as a resharding moves them: the shard and the
    // handle's answers.
    let keys: Vec<Vec<u8>> = redis::cmd("CLUSTER")
        .arg("GETKEYSINSLOT")
        .arg(slot)
        .arg(100)
        .query(&mut src_node.conn())
        .unwrap();
    assert_eq!(keys.len(), 2, "the shard and its answers");
    let _: () = redis::cmd("MIGRATE")
        .arg("127.0.0.1")
        .arg(dst_node.port)
        .arg("")
        .arg(0)
        .arg(5000)
        .arg("KEYS")
        .arg(&keys)
        .query(&mut src_node.conn())
        .unwrap();
    // Mid-migration the source answers ASK for the shard: the add waits,
    // retrying, until the slot is handed over.
    let late = after.to_vec();
    let adder = std::thread::spawn(move || {
        let start = std::time::Instant::now();
        let answers = f.add_many(&late);
        (f, answers, start.elapsed())
    });
    std::thread::sleep(Duration::from_millis(300));
    for node in &cluster.nodes {
        setslot(node, slot, "NODE", &dst_id);
    }
    let (mut f, answers, waited) = adder.join().unwrap();
    assert!(
        waited >= Duration::from_millis(250),
        "the add met ASK and waited: {waited:?}"
    );
    // The batch met ASK on one shard after its other shards' commands had
    // run; the retry got their recorded answers: exact.
    let want: Vec<bool> = after.iter().map(|i| mem.add(i)).collect();
    assert_answers(&answers.unwrap(), &want);
    // Without a fault, answers are exact again.
    let again: Vec<bool> = before.iter().map(|i| mem.add(i)).collect();
    assert_answers(&f.add_many(before).unwrap(), &again);
    let exists: i64 = redis::cmd("EXISTS")
        .arg(&key)
        .query(&mut dst_node.conn())
        .unwrap();
    assert_eq!(exists, 1, "shard 0 now on the destination node");
    assert!(f.contains_many(&items).unwrap().iter().all(|&p| p));
    f.delete().unwrap();
}
