//! Faults: Redis killed with SIGKILL and restarted under a writer; a
//! connection cut after a request was sent but before its reply.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use seen_redis::{Answer, ErrorKind, FilterParams, RedisFilter, RetryPolicy};

use crate::proxy::{Cut, Proxy};
use crate::server::RedisServer;
use crate::{reference, target};

#[test]
fn acknowledged_adds_survive_kill_9_and_the_writer_continues() {
    let mut server = RedisServer::start_aof_always();
    let t = target(&server.url());
    let params = FilterParams::new(1_000_000, 1e-6).max_shard_bytes(1 << 20);
    let f = RedisFilter::open_or_create(&t, "crash", &params).unwrap();
    let mem = reference(f.metadata());
    drop(f);

    let acked = Arc::new(Mutex::new(Vec::<String>::new()));
    let batches = Arc::new(AtomicUsize::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let (t, params) = (t.clone(), params.clone());
        let (acked, batches, stop) = (acked.clone(), batches.clone(), stop.clone());
        thread::spawn(move || -> Result<usize, String> {
            let mut f = RedisFilter::open_or_create(&t, "crash", &params).unwrap();
            let mut said_present = 0;
            let mut b = 0;
            while !stop.load(Ordering::Relaxed) {
                let items: Vec<String> = (0..200).map(|j| format!("item-{b}-{j}")).collect();
                let answers = f.add_many(&items).map_err(|e| format!("batch {b}: {e}"))?;
                // Every item is distinct: an item reported present that was
                // not a false positive in memory is the bug this guards.
                for (item, new) in items.iter().zip(&answers) {
                    let expected_new = mem.add(item);
                    if expected_new && !new {
                        said_present += 1;
                    }
                }
                acked.lock().unwrap().extend(items);
                batches.fetch_add(1, Ordering::Relaxed);
                b += 1;
            }
            Ok(said_present)
        })
    };
    let wait_for = |n: usize| {
        let deadline = Instant::now() + Duration::from_secs(40);
        while batches.load(Ordering::Relaxed) < n {
            assert!(Instant::now() < deadline, "writer stalled at {n} batches");
            thread::sleep(Duration::from_millis(5));
        }
    };
    wait_for(30);
    server.kill9();
    let at_kill = batches.load(Ordering::Relaxed);
    thread::sleep(Duration::from_millis(300));
    server.restart();
    wait_for(at_kill + 30);
    stop.store(true, Ordering::Relaxed);
    let said_present = writer.join().unwrap().expect("the writer continued");
    assert_eq!(said_present, 0, "new items reported as already present");

    let acked = acked.lock().unwrap();
    let mut f = RedisFilter::open(&t, "crash").unwrap();
    let present = f.contains_many(&acked).unwrap();
    let missing = present.iter().filter(|&&p| !p).count();
    assert_eq!(
        missing,
        0,
        "{missing} of {} acknowledged adds lost",
        acked.len()
    );
}

#[test]
fn a_lost_reply_changes_no_answer() {
    let server = RedisServer::start();
    let proxy = Proxy::start(server.port, Cut::OnDemand);
    let t = target(&format!("redis://127.0.0.1:{}", proxy.port));
    let params = FilterParams::new(100_000, 1e-6).max_shard_bytes(8192);
    let mut f = RedisFilter::open_or_create(&t, "cut", &params).unwrap();
    let mut direct = RedisFilter::open(&target(&server.url()), "cut").unwrap();

    let items: Vec<String> = (0..300).map(|i| format!("u{i}")).collect();
    assert!(f.add_many(&items[..100]).unwrap().iter().all(|&n| n));

    // The request reaches Redis and runs; the reply is lost; the retry gets
    // the answers recorded by the run that was lost: new, exactly as
    // without the fault (a repeat within the batch new only once).
    proxy.cut_next.store(true, Ordering::SeqCst);
    let mut batch: Vec<&str> = items[100..200].iter().map(String::as_str).collect();
    batch.push("u150");
    let got = f.add_many(&batch).unwrap();
    assert_eq!(proxy.drops.load(Ordering::SeqCst), 1, "the proxy cut once");
    assert!(
        got[..100].iter().all(|&n| n),
        "an item reported present after a lost reply"
    );
    assert!(!got[100], "a repeat within the batch is new only once");
    assert!(direct
        .contains_many(&items[100..200])
        .unwrap()
        .iter()
        .all(|&p| p));
    // Without a fault, present items are present again.
    assert!(f.add_many(&items[100..200]).unwrap().iter().all(|&n| !n));

    // With no retries the same fault is an error, never an answer.
    let mut once = RedisFilter::open_with(&t, "cut", RetryPolicy::no_retry()).unwrap();
    proxy.cut_next.store(true, Ordering::SeqCst);
    let e = once.add_many(&items[200..]).unwrap_err();
    let ErrorKind::Incomplete { answers, cause } = e.kind() else {
        panic!("{e}")
    };
    assert!(answers.iter().all(|&a| a == Answer::Unknown), "{e}");
    assert!(
        matches!(cause.kind(), ErrorKind::Unavailable { attempts: 1, .. }),
        "{e}"
    );
    assert_eq!(proxy.drops.load(Ordering::SeqCst), 2);
    // Lookups are retried like everything else and simply answer.
    proxy.cut_next.store(true, Ordering::SeqCst);
    assert!(f.contains_many(&items[..100]).unwrap().iter().all(|&p| p));
    assert_eq!(proxy.drops.load(Ordering::SeqCst), 3);
}

/// A command of an earlier round run late (a connection the worker gave up
/// on, its requests still queued) is refused and leaves the worker's
/// recorded answers alone.
#[test]
fn a_late_command_of_an_earlier_round_is_refused() {
    let server = RedisServer::start();
    let t = target(&server.url());
    let params = FilterParams::new(10_000, 0.01);
    let mut f = RedisFilter::open_or_create(&t, "late", &params).unwrap();
    f.add_many(&["a", "b"]).unwrap();
    f.add_many(&["c", "d"]).unwrap();
    let mut conn = server.conn();
    let done: Vec<Vec<u8>> = redis::cmd("KEYS")
        .arg("seen:{late:0}:done:*")
        .query(&mut conn)
        .unwrap();
    assert_eq!(done.len(), 1, "one worker, one shard");
    let before: Vec<(String, String)> = redis::cmd("HGETALL")
        .arg(&done[0])
        .query(&mut conn)
        .unwrap();
    assert!(before.contains(&("round".into(), "2".into())), "{before:?}");
    let e = redis::cmd("EVAL")
        .arg(seen_redis::ADD_SCRIPT)
        .arg(2)
        .arg(seen_redis::shard_key(b"late", 0))
        .arg(&done[0])
        .arg(1)
        .arg(0)
        .arg(600_000)
        .arg(7)
        .query::<redis::Value>(&mut conn)
        .unwrap_err();
    assert!(e.to_string().contains("STALE"), "{e}");
    let after: Vec<(String, String)> = redis::cmd("HGETALL")
        .arg(&done[0])
        .query(&mut conn)
        .unwrap();
    assert_eq!(before, after);
}
