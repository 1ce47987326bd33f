//! Property test: for any sequence of add and lookup batches, the filter in
//! Redis answers exactly as the in-memory filter of the same shape.

use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use seen_redis::{FilterParams, RedisFilter};

use crate::server::RedisServer;
use crate::{reference, target};

#[derive(Clone, Debug)]
enum Op {
    Add(Vec<Vec<u8>>),
    Contains(Vec<Vec<u8>>),
}

fn item() -> impl Strategy<Value = Vec<u8>> {
    // Few distinct values, so batches repeat items within and across.
    prop::collection::vec(0u8..4, 0..4)
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        prop::collection::vec(item(), 0..40).prop_map(Op::Add),
        prop::collection::vec(item(), 0..40).prop_map(Op::Contains),
    ]
}

#[test]
fn same_answers_as_the_in_memory_filter() {
    let server = RedisServer::start();
    let t = target(&server.url());
    let mut runner = TestRunner::new(Config {
        cases: 64,
        failure_persistence: None,
        ..Config::default()
    });
    let case = std::sync::atomic::AtomicU32::new(0);
    let strategy = (
        1u64..150,
        prop::sample::select(vec![0.5, 0.1, 0.01]),
        prop::sample::select(vec![64u64, 128, 1024]),
        prop::collection::vec(op(), 1..12),
    );
    runner
        .run(&strategy, |(capacity, rate, shard, ops)| {
            let n = case.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let name = format!("prop-{n}");
            let params = FilterParams::new(capacity, rate).max_shard_bytes(shard);
            let mut f = RedisFilter::open_or_create(&t, &name, &params).unwrap();
            let mem = reference(f.metadata());
            for op in &ops {
                match op {
                    Op::Add(items) => {
                        let want: Vec<bool> = items.iter().map(|i| mem.add(i)).collect();
                        prop_assert_eq!(f.add_many(items).unwrap(), want);
                    }
                    Op::Contains(items) => {
                        let want: Vec<bool> = items.iter().map(|i| mem.contains(i)).collect();
                        prop_assert_eq!(f.contains_many(items).unwrap(), want);
                    }
                }
            }
            f.delete().unwrap();
            Ok(())
        })
        .unwrap();
}
