//! Real clients: redis-cli, redis-py (RESP2 and RESP3), the `redis` crate's
//! typed `bf_*` commands, redis-benchmark, and many clients at once.

use std::process::Command;
use std::sync::{Arc, Barrier};

use redis::Commands;

use crate::support::Server;

fn redis_cli(server: &Server, args: &[&str]) -> String {
    let out = Command::new("redis-cli")
        .args(["-p", &server.port.to_string()])
        .args(args)
        .output()
        .expect("redis-cli is required (Debian package redis-tools)");
    assert!(out.status.success(), "redis-cli {args:?}: {out:?}");
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn redis_cli_works() {
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::start(&tmp.path().join("d"), &[]);
    assert_eq!(redis_cli(&server, &["PING"]), "PONG\n");
    assert_eq!(
        redis_cli(&server, &["BF.RESERVE", "urls", "0.001", "1000"]),
        "OK\n"
    );
    assert_eq!(redis_cli(&server, &["BF.ADD", "urls", "https://a/"]), "1\n");
    assert_eq!(redis_cli(&server, &["BF.ADD", "urls", "https://a/"]), "0\n");
    assert_eq!(
        redis_cli(&server, &["BF.MADD", "urls", "https://a/", "https://b/"]),
        "0\n1\n"
    );
    assert_eq!(
        redis_cli(&server, &["BF.EXISTS", "urls", "https://b/"]),
        "1\n"
    );
    assert_eq!(redis_cli(&server, &["BF.CARD", "urls"]), "2\n");
    assert_eq!(redis_cli(&server, &["TYPE", "urls"]), "MBbloom--\n");
    assert_eq!(redis_cli(&server, &["DBSIZE"]), "1\n");
    assert!(redis_cli(&server, &["INFO", "server"]).contains("redis_version:"));
    // RESP3 through redis-cli -3.
    assert_eq!(
        redis_cli(&server, &["-3", "BF.EXISTS", "urls", "https://a/"]),
        "(true)\n"
    );
    // An unknown command is an error, not a crash.
    let out = redis_cli(&server, &["NOSUCHCMD", "x"]);
    assert!(out.contains("unknown command 'NOSUCHCMD'"), "{out}");
    // Interactive-style pipe of several commands (redis-cli reads stdin).
    let out = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "printf 'BF.ADD piped x\\nBF.EXISTS piped x\\n' | redis-cli -p {}",
            server.port
        ))
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout), "1\n1\n");
}

#[test]
fn redis_py_resp2_and_resp3() {
    let has_py = Command::new("python3")
        .args(["-c", "import redis"])
        .status()
        .map(|s| s.success())
        .unwrap_or(false);
    assert!(
        has_py,
        "redis-py is required: run the tests with scripts/test, which installs it"
    );
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::start(&tmp.path().join("d"), &[]);
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/python_client.py"
    );
    let out = Command::new("python3")
        .arg(script)
        .arg(server.port.to_string())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "python client failed: {stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(stdout, "RESP2: ok\nRESP3: ok\n");
}

#[test]
fn redis_crate_bf_commands() {
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::start(&tmp.path().join("d"), &[]);
    let mut c = server.redis();
    let () = redis::cmd("BF.RESERVE")
        .arg("titles")
        .arg(0.01)
        .arg(1000)
        .query(&mut c)
        .unwrap();
    assert!(c
        .bf_add::<_, _, bool>("titles", "Rust 2027 released")
        .unwrap());
    assert!(!c
        .bf_add::<_, _, bool>("titles", "Rust 2027 released")
        .unwrap());
    assert!(c
        .bf_exists::<_, _, bool>("titles", "Rust 2027 released")
        .unwrap());
    assert!(!c.bf_exists::<_, _, bool>("titles", "never added").unwrap());
    let added: Vec<bool> = c.bf_madd("titles", &["a", "b", "a"]).unwrap();
    assert_eq!(added, vec![true, true, false]);
    let found: Vec<bool> = c.bf_mexists("titles", &["a", "zzz"]).unwrap();
    assert_eq!(found, vec![true, false]);
    let card: usize = c.bf_card("titles").unwrap();
    assert_eq!(card, 3);
    let info: std::collections::HashMap<String, redis::Value> =
        redis::cmd("BF.INFO").arg("titles").query(&mut c).unwrap();
    assert_eq!(info.get("Capacity"), Some(&redis::Value::Int(1000)));
    // Errors are typed errors; the connection goes on.
    let e = c
        .bf_add::<_, _, bool>("titles", "x")
        .map(|_| ())
        .and_then(|_| {
            redis::cmd("BF.RESERVE")
                .arg("titles")
                .arg(0.01)
                .arg(10)
                .query::<()>(&mut c)
        });
    assert!(e.unwrap_err().to_string().contains("item exists"));
    let pong: String = redis::cmd("PING").query(&mut c).unwrap();
    assert_eq!(pong, "PONG");
}

/// Many clients add the same new items at the same moment: for every item,
/// exactly one of them is told "new".
#[test]
fn concurrent_adds_report_each_item_new_exactly_once() {
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::start(&tmp.path().join("d"), &[]);
    let mut c = server.redis();
    let () = redis::cmd("BF.RESERVE")
        .arg("race")
        .arg(0.0001)
        .arg(100_000)
        .query(&mut c)
        .unwrap();
    const CLIENTS: usize = 8;
    const ITEMS: usize = 5_000;
    let barrier = Arc::new(Barrier::new(CLIENTS));
    let url = server.url();
    let handles: Vec<_> = (0..CLIENTS)
        .map(|_| {
            let barrier = barrier.clone();
            let url = url.clone();
            std::thread::spawn(move || {
                let mut c = redis::Client::open(url).unwrap().get_connection().unwrap();
                barrier.wait();
                let mut news = vec![false; ITEMS];
                for chunk in (0..ITEMS).collect::<Vec<_>>().chunks(50) {
                    let mut p = redis::pipe();
                    for &i in chunk {
                        p.cmd("BF.ADD").arg("race").arg(format!("https://race/{i}"));
                    }
                    let r: Vec<bool> = p.query(&mut c).unwrap();
                    for (&i, n) in chunk.iter().zip(r) {
                        news[i] = n;
                    }
                }
                news
            })
        })
        .collect();
    let mut total = vec![0u32; ITEMS];
    for h in handles {
        for (i, n) in h.join().unwrap().into_iter().enumerate() {
            total[i] += u32::from(n);
        }
    }
    // At fpp 1e-4 an item may be a false positive before anyone adds it
    // (then nobody is told "new"); never may two clients both be told.
    assert!(total.iter().all(|&t| t <= 1), "an item was new twice");
    let never = total.iter().filter(|&&t| t == 0).count();
    assert!(never <= 5, "{never} items never reported new");
    let card: usize = c.bf_card("race").unwrap();
    assert_eq!(card, ITEMS - never);
}

/// A short load test: redis-benchmark, 50 clients, pipelining 16, BF.ADD
/// and BF.EXISTS; no errors, and the server is healthy afterwards.
#[test]
fn redis_benchmark_load_has_no_errors() {
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::start(&tmp.path().join("d"), &[]);
    let mut c = server.redis();
    let () = redis::cmd("BF.RESERVE")
        .arg("bench")
        .arg(0.001)
        .arg(1_000_000)
        .query(&mut c)
        .unwrap();
    for cmd in [
        "BF.ADD bench __rand_int__",
        "BF.EXISTS bench __rand_int__",
        "BF.MADD bench __rand_int__ __rand_int__ __rand_int__",
    ] {
        let mut args = vec![
            "-p".to_string(),
            server.port.to_string(),
            "-c".into(),
            "50".into(),
            "-P".into(),
            "16".into(),
            "-n".into(),
            "200000".into(),
            "-r".into(),
            "1000000".into(),
            "-q".into(),
            "-e".into(),
        ];
        args.extend(cmd.split(' ').map(String::from));
        let out = Command::new("redis-benchmark")
            .args(&args)
            .output()
            .expect("redis-benchmark is required (Debian package redis-tools)");
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{cmd}: {out:?}");
        assert!(!stdout.contains("rror"), "{cmd}: {stdout}");
        assert!(stdout.contains("requests per second"), "{cmd}: {stdout}");
    }
    let card: i64 = c.bf_card("bench").unwrap();
    assert!(card > 100_000, "{card}");
    let pong: String = redis::cmd("PING").query(&mut c).unwrap();
    assert_eq!(pong, "PONG");
}
