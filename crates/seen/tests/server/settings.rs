//! RedisBloom's module settings (`bf-error-rate`, `bf-initial-size`,
//! `bf-expansion-factor`) as `seen serve` flags and through `CONFIG
//! GET`/`CONFIG SET`.
//!
//! The expected `BF.INFO` and `BF.DEBUG` replies were recorded from
//! RedisBloom master (b28c2945, the first with these settings as configs)
//! loaded in Redis 7.0.15, after the same `CONFIG SET`s (Redis 7.0 names
//! module settings `bf.bf-error-rate`; Redis 8, which RedisBloom targets,
//! and seen name them `bf-error-rate`).

use crate::support::{python_ok, text, Server};

fn debug_line(c: &mut crate::support::Raw, key: &str) -> String {
    text(&c.cmd(&["BF.DEBUG", key]))
}

#[test]
fn flags_set_what_bf_add_creates() {
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::start(
        tmp.path(),
        &["--bf-error-rate", "0.004", "--bf-initial-size", "1000"],
    );
    let mut c = server.raw();
    assert_eq!(
        text(&c.cmd(&["CONFIG", "GET", "bf-*"])),
        "*6\r\n$13\r\nbf-error-rate\r\n$5\r\n0.004\r\n$15\r\nbf-initial-size\r\n$4\r\n1000\r\n$19\r\nbf-expansion-factor\r\n$1\r\n2\r\n"
    );
    assert_eq!(c.cmd(&["BF.ADD", "newkey", "x"]), b":1\r\n");
    assert_eq!(
        debug_line(&mut c, "newkey"),
        "*2\r\n$6\r\nsize:1\r\n$76\r\nbytes:1624 bits:12992 hashes:9 hashwidth:64 capacity:1000 size:1 ratio:0.002\r\n"
    );
    assert_eq!(
        text(&c.cmd(&["BF.INFO", "newkey"])),
        "*10\r\n+Capacity\r\n:1000\r\n+Size\r\n:1720\r\n+Number of filters\r\n:1\r\n+Number of items inserted\r\n:1\r\n+Expansion rate\r\n:2\r\n"
    );
}

#[test]
fn a_bad_flag_stops_the_start_with_redisblooms_reason() {
    let tmp = tempfile::tempdir().unwrap();
    for (flag, value, why) in [
        (
            "--bf-error-rate",
            "2",
            "Value for `bf-error-rate` must be in the range (0.000000, 1.000000)",
        ),
        (
            "--bf-initial-size",
            "0",
            "Value for `bf-initial-size` must be in the range [1, 1073741824]",
        ),
        (
            "--bf-expansion-factor",
            "x",
            "Invalid value for `bf-expansion-factor`",
        ),
    ] {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_seen"))
            .args(["serve", "--port", "0", "--dir"])
            .arg(tmp.path())
            .args([flag, value])
            .output()
            .unwrap();
        assert!(!out.status.success(), "{flag} {value}");
        let stderr = text(&out.stderr);
        assert!(stderr.contains(why), "{flag} {value}: {stderr}");
    }
}

#[test]
fn config_set_changes_the_defaults_as_redisbloom_does() {
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::start(tmp.path(), &[]);
    let mut c = server.raw();
    // The error rate: filters BF.ADD creates from now on.
    assert_eq!(
        c.cmd(&["CONFIG", "SET", "bf-error-rate", "0.05"]),
        b"+OK\r\n"
    );
    assert_eq!(c.cmd(&["BF.ADD", "newkey", "x"]), b":1\r\n");
    assert_eq!(
        debug_line(&mut c, "newkey"),
        "*2\r\n$6\r\nsize:1\r\n$71\r\nbytes:96 bits:768 hashes:6 hashwidth:64 capacity:100 size:1 ratio:0.025\r\n"
    );
    // Above 0.25 it is taken as 0.25.
    assert_eq!(
        c.cmd(&["CONFIG", "SET", "bf-error-rate", "0.5"]),
        b"+OK\r\n"
    );
    assert_eq!(
        text(&c.cmd(&["CONFIG", "GET", "bf-error-rate"])),
        "*2\r\n$13\r\nbf-error-rate\r\n$4\r\n0.25\r\n"
    );
    assert_eq!(c.cmd(&["BF.ADD", "capkey", "x"]), b":1\r\n");
    assert_eq!(
        debug_line(&mut c, "capkey"),
        "*2\r\n$6\r\nsize:1\r\n$71\r\nbytes:56 bits:448 hashes:4 hashwidth:64 capacity:100 size:1 ratio:0.125\r\n"
    );
    // Two at once; BF.RESERVE without EXPANSION takes the factor too.
    assert_eq!(
        c.cmd(&["CONFIG", "SET", "bf-error-rate", "0.01"]),
        b"+OK\r\n"
    );
    assert_eq!(
        c.cmd(&[
            "CONFIG",
            "SET",
            "bf-initial-size",
            "1000",
            "bf-expansion-factor",
            "4"
        ]),
        b"+OK\r\n"
    );
    assert_eq!(c.cmd(&["BF.ADD", "multikey", "x"]), b":1\r\n");
    assert_eq!(
        debug_line(&mut c, "multikey"),
        "*2\r\n$6\r\nsize:1\r\n$76\r\nbytes:1384 bits:11072 hashes:8 hashwidth:64 capacity:1000 size:1 ratio:0.005\r\n"
    );
    assert_eq!(
        c.cmd(&["BF.RESERVE", "multikey2", "0.01", "10"]),
        b"+OK\r\n"
    );
    let items: Vec<String> = (0..15).map(|i| format!("i{i}")).collect();
    let mut madd = vec!["BF.MADD", "multikey2"];
    madd.extend(items.iter().map(String::as_str));
    c.cmd(&madd);
    assert_eq!(
        text(&c.cmd(&["BF.INFO", "multikey2"])),
        "*10\r\n+Capacity\r\n:50\r\n+Size\r\n:240\r\n+Number of filters\r\n:2\r\n+Number of items inserted\r\n:15\r\n+Expansion rate\r\n:4\r\n"
    );
    // Factor 0: new filters do not scale, and a BF.RESERVE that asks for
    // an expansion is refused.
    assert_eq!(
        c.cmd(&[
            "CONFIG",
            "SET",
            "bf-expansion-factor",
            "0",
            "bf-initial-size",
            "100"
        ]),
        b"+OK\r\n"
    );
    assert_eq!(c.cmd(&["BF.ADD", "nskey", "x"]), b":1\r\n");
    assert_eq!(
        text(&c.cmd(&["BF.INFO", "nskey"])),
        "*10\r\n+Capacity\r\n:100\r\n+Size\r\n:216\r\n+Number of filters\r\n:1\r\n+Number of items inserted\r\n:1\r\n+Expansion rate\r\n$-1\r\n"
    );
    assert_eq!(
        debug_line(&mut c, "nskey"),
        "*2\r\n$6\r\nsize:1\r\n$71\r\nbytes:120 bits:960 hashes:7 hashwidth:64 capacity:100 size:1 ratio:0.01\r\n"
    );
    assert_eq!(c.cmd(&["BF.RESERVE", "nskey2", "0.01", "100"]), b"+OK\r\n");
    assert_eq!(c.cmd(&["BF.INFO", "nskey2", "EXPANSION"]), b"*1\r\n$-1\r\n");
    assert_eq!(
        c.cmd(&["BF.RESERVE", "nskey3", "0.01", "100", "EXPANSION", "3"]),
        b"-Nonscaling filters cannot expand\r\n"
    );
}

#[test]
fn config_set_refuses_as_redis_does_and_changes_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::start(tmp.path(), &[]);
    let mut c = server.raw();
    let failed = |name: &str, why: &str| {
        format!("-ERR CONFIG SET failed (possibly related to argument '{name}') - {why}\r\n")
    };
    let range_rate = "Value for `bf-error-rate` must be in the range (0.000000, 1.000000)";
    let range_size = "Value for `bf-initial-size` must be in the range [1, 1073741824]";
    let range_exp = "Value for `bf-expansion-factor` must be in the range [0, 32768]";
    for (name, value, why) in [
        ("bf-error-rate", "0", range_rate),
        ("bf-error-rate", "1", range_rate),
        ("bf-error-rate", "-1", range_rate),
        ("bf-error-rate", "abc", "Invalid value for `bf-error-rate`"),
        ("bf-error-rate", "nan", "Invalid value for `bf-error-rate`"),
        ("bf-initial-size", "0", range_size),
        ("bf-initial-size", "2000000000", range_size),
        (
            "bf-initial-size",
            "1.5",
            "Invalid value for `bf-initial-size`",
        ),
        ("bf-expansion-factor", "32769", range_exp),
        ("bf-expansion-factor", "-1", range_exp),
    ] {
        assert_eq!(
            text(&c.cmd(&["CONFIG", "SET", name, value])),
            failed(name, why),
            "{name} {value}"
        );
    }
    // All or nothing: a bad second value leaves the first unchanged.
    assert_eq!(
        text(&c.cmd(&[
            "CONFIG",
            "SET",
            "bf-initial-size",
            "5",
            "bf-error-rate",
            "2"
        ])),
        failed("bf-error-rate", range_rate)
    );
    assert_eq!(
        text(&c.cmd(&[
            "CONFIG",
            "SET",
            "bf-initial-size",
            "5",
            "bf-initial-size",
            "6"
        ])),
        failed("bf-initial-size", "duplicate parameter")
    );
    assert_eq!(
        text(&c.cmd(&["CONFIG", "GET", "bf-initial-size"])),
        "*2\r\n$15\r\nbf-initial-size\r\n$3\r\n100\r\n"
    );
    assert_eq!(
        text(&c.cmd(&["CONFIG", "SET", "no-such-thing", "1"])),
        "-ERR Unknown option or number of arguments for CONFIG SET - 'no-such-thing'\r\n"
    );
    assert_eq!(
        text(&c.cmd(&["CONFIG", "SET", "port", "1"])),
        failed(
            "port",
            "seen cannot change it while running: restart `seen serve` with its flag"
        )
    );
    assert_eq!(
        text(&c.cmd(&["CONFIG", "SET", "bf-error-rate"])),
        "-ERR wrong number of arguments for 'config|set' command\r\n"
    );
}

#[test]
fn redis_py_sets_and_reads_the_settings() {
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::start(tmp.path(), &[]);
    let script = format!(
        r#"
import redis
r = redis.Redis(port={port})
assert r.config_set("bf-initial-size", 500)
assert r.config_get("bf-*") == {{"bf-error-rate": "0.01", "bf-initial-size": "500", "bf-expansion-factor": "2"}}, r.config_get("bf-*")
r.bf().add("k", "x")
assert r.bf().info("k").capacity == 500
try:
    r.config_set("bf-initial-size", 0)
    raise SystemExit("accepted 0")
except redis.ResponseError as e:
    assert "must be in the range [1, 1073741824]" in str(e), e
print("ok")
"#,
        port = server.port
    );
    python_ok(&script);
}
