//! `AUTH` as Redis 7 answers it without ACL users (the replies were taken
//! from redis-server 7.0.15), failed attempts in the log, and error
//! replies in `INFO stats`.

use crate::support::{info_field, python_ok, text, Raw, Server};

fn stat(c: &mut Raw, field: &str) -> u64 {
    info_field(c, "stats", field)
}

#[test]
fn without_a_password_the_default_user_is_taken_with_any_password() {
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::start(tmp.path(), &[]);
    let mut c = server.raw();
    assert_eq!(c.cmd(&["AUTH", "default", "x"]), b"+OK\r\n");
    assert_eq!(c.cmd(&["AUTH", "default", ""]), b"+OK\r\n");
    assert_eq!(
        text(&c.cmd(&["AUTH", "x"])),
        "-ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?\r\n"
    );
    let wrongpass = "-WRONGPASS invalid username-password pair or user is disabled.\r\n";
    assert_eq!(text(&c.cmd(&["AUTH", "other", "x"])), wrongpass);
    assert_eq!(text(&c.cmd(&["AUTH", "Default", "x"])), wrongpass);
    assert_eq!(
        text(&c.cmd(&["HELLO", "2", "AUTH", "other", "x"])),
        wrongpass
    );
    let hello = c.cmd(&["HELLO", "3", "AUTH", "default", "x"]);
    assert!(hello.starts_with(b"%7\r\n"), "{}", text(&hello));
    // Clients that always send a username connect.
    let script = format!(
        r#"
import redis
for proto in (2, 3):
    r = redis.Redis(port={port}, username="default", password="anything", protocol=proto)
    assert r.execute_command("BF.ADD", "k", "x") in (0, 1, True, False)
print("ok")
"#,
        port = server.port
    );
    python_ok(&script);
    let url = format!("redis://default:anything@127.0.0.1:{}/", server.port);
    let mut conn = redis::Client::open(url).unwrap().get_connection().unwrap();
    let found: bool = redis::cmd("BF.EXISTS")
        .arg("k")
        .arg("x")
        .query(&mut conn)
        .unwrap();
    assert!(found);
}

#[test]
fn a_flood_of_failed_auths_writes_a_few_log_lines_and_counts_every_error() {
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::start(tmp.path(), &["--requirepass", "s3cret"]);
    let mut admin = server.raw();
    assert_eq!(admin.cmd(&["AUTH", "s3cret"]), b"+OK\r\n");
    let before = stat(&mut admin, "total_error_replies");
    // 20,000 wrong passwords in pipelines of 1,000, as fast as one
    // connection sends them.
    let mut c = server.raw();
    let mut batch = Vec::new();
    for _ in 0..1000 {
        batch.extend_from_slice(b"*2\r\n$4\r\nAUTH\r\n$5\r\nguess\r\n");
    }
    for _ in 0..20 {
        c.send_raw(&batch);
        for _ in 0..1000 {
            let r = c.read_reply_bytes().unwrap();
            assert!(r.starts_with(b"-WRONGPASS"), "{}", text(&r));
        }
    }
    // And 100 commands refused with NOAUTH.
    for _ in 0..100 {
        assert_eq!(
            c.cmd(&["BF.ADD", "k", "x"]),
            b"-NOAUTH Authentication required.\r\n"
        );
    }
    let errors = stat(&mut admin, "total_error_replies") - before;
    assert_eq!(errors, 20_100);
    let log = server.log_text();
    let lines: Vec<&str> = log.lines().filter(|l| l.contains("failed AUTH")).collect();
    assert!(
        !lines.is_empty() && lines.len() <= 3,
        "{} lines about failed AUTH: {lines:?}",
        lines.len()
    );
    assert!(lines[0].contains("1 failed AUTH attempt"), "{lines:?}");
}
