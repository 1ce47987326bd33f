//! The commands an operator runs: `CLIENT LIST`, `CLIENT KILL`, `SLOWLOG`.

use std::time::{Duration, Instant};

use seen_resp::Reply;

use crate::support::{text, Raw, Server};

/// The `CLIENT LIST` line of the client whose `name=` is `name`.
fn line_named(list: &str, name: &str) -> Option<String> {
    list.lines()
        .find(|l| l.split(' ').any(|f| f == format!("name={name}")))
        .map(str::to_string)
}

fn field<'a>(line: &'a str, key: &str) -> &'a str {
    line.split(' ')
        .find_map(|f| f.strip_prefix(&format!("{key}=")))
        .unwrap_or_else(|| panic!("no {key} in {line}"))
}

/// `CLIENT LIST [args...]`'s text.
fn client_list(c: &mut Raw, args: &[&str]) -> String {
    let mut cmd = vec!["CLIENT", "LIST"];
    cmd.extend_from_slice(args);
    c.send(&cmd);
    match c.read_reply() {
        Reply::Bulk(b) => text(&b),
        other => panic!("{other:?}"),
    }
}

/// Waits until a connection reads end of file (the server closed it).
fn closed_soon(c: &mut Raw) -> bool {
    let deadline = Instant::now() + Duration::from_secs(5);
    while Instant::now() < deadline {
        if c.is_closed() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}

#[test]
fn client_list_shows_every_connection_and_client_kill_closes_the_chosen_ones() {
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::start(&tmp.path().join("d"), &[]);
    let mut admin = server.raw();
    let mut worker = server.raw();
    let mut other = server.raw();
    assert_eq!(admin.cmd(&["CLIENT", "SETNAME", "admin"]), b"+OK\r\n");
    assert_eq!(worker.cmd(&["CLIENT", "SETNAME", "worker"]), b"+OK\r\n");
    assert_eq!(worker.cmd(&["BF.ADD", "k", "a"]), b":1\r\n");
    assert_eq!(other.cmd(&["HELLO", "3", "SETNAME", "other"])[0], b'%');

    let list = client_list(&mut admin, &[]);
    let w = line_named(&list, "worker").expect(&list);
    assert_eq!(field(&w, "cmd"), "bf.add");
    assert_eq!(field(&w, "resp"), "2");
    assert_eq!(field(&w, "laddr"), format!("127.0.0.1:{}", server.port));
    let o = line_named(&list, "other").expect(&list);
    assert_eq!(field(&o, "resp"), "3");
    let me = line_named(&list, "admin").expect(&list);
    assert_eq!(field(&me, "cmd"), "client");
    assert_eq!(list.lines().count(), 3, "{list}");
    let worker_id = field(&w, "id").to_string();
    let only = client_list(&mut admin, &["ID", &worker_id]);
    assert_eq!(only.lines().count(), 1, "{only}");

    // By id: answers how many it closed; that connection is closed.
    assert_eq!(admin.cmd(&["CLIENT", "KILL", "ID", &worker_id]), b":1\r\n");
    assert!(closed_soon(&mut worker));
    // The old form, by address.
    let other_addr = field(&o, "addr").to_string();
    assert_eq!(admin.cmd(&["CLIENT", "KILL", &other_addr]), b"+OK\r\n");
    assert!(closed_soon(&mut other));
    assert_eq!(
        admin.cmd(&["CLIENT", "KILL", &other_addr]),
        b"-ERR No such client\r\n"
    );
    // SKIPME yes (the default) spares the caller.
    assert_eq!(admin.cmd(&["CLIENT", "KILL", "USER", "default"]), b":0\r\n");
    assert_eq!(admin.cmd(&["PING"]), b"+PONG\r\n");
    assert_eq!(
        admin.cmd(&["CLIENT", "KILL", "ID", "0"]),
        b"-ERR client-id should be greater than 0\r\n"
    );
    let list = client_list(&mut admin, &[]);
    assert_eq!(list.lines().count(), 1, "{list}");
    // The filters went nowhere else.
    assert_eq!(admin.cmd(&["BF.EXISTS", "k", "a"]), b":1\r\n");
}

#[test]
fn slowlog_keeps_the_commands_past_the_threshold() {
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::start(
        &tmp.path().join("d"),
        &["--slowlog-log-slower-than", "0", "--slowlog-max-len", "5"],
    );
    let mut c = server.raw();
    assert_eq!(c.cmd(&["CLIENT", "SETNAME", "crawler"]), b"+OK\r\n");
    let long = "x".repeat(200);
    assert_eq!(c.cmd(&["BF.ADD", "urls", &long]), b":1\r\n");
    c.send(&["SLOWLOG", "GET", "1"]);
    let Reply::Array(entries) = c.read_reply() else {
        panic!("an array")
    };
    assert_eq!(entries.len(), 1);
    let Reply::Array(e) = &entries[0] else {
        panic!("{entries:?}")
    };
    let Reply::Array(args) = &e[3] else {
        panic!("{e:?}")
    };
    // The newest entry: the BF.ADD (SLOWLOG GET runs after its reply is
    // made), its long item cut as Redis cuts it.
    assert_eq!(args[0], Reply::bulk("BF.ADD"));
    assert_eq!(
        args[2],
        Reply::bulk(format!("{}... (72 more bytes)", "x".repeat(128)))
    );
    assert_eq!(e[5], Reply::bulk("crawler"));
    assert!(matches!(e[2], Reply::Integer(us) if us >= 0));
    for i in 0..10 {
        c.cmd(&["BF.EXISTS", "urls", &i.to_string()]);
    }
    assert_eq!(c.cmd(&["SLOWLOG", "LEN"]), b":5\r\n");
    // The threshold changes while the server runs; negative turns it off.
    assert_eq!(
        c.cmd(&["CONFIG", "SET", "slowlog-log-slower-than", "-1"]),
        b"+OK\r\n"
    );
    assert_eq!(c.cmd(&["SLOWLOG", "RESET"]), b"+OK\r\n");
    c.cmd(&["BF.ADD", "urls", "b"]);
    assert_eq!(c.cmd(&["SLOWLOG", "LEN"]), b":0\r\n");
    assert_eq!(
        c.cmd(&["SLOWLOG", "GET", "-2"]),
        b"-ERR count should be greater than or equal to -1\r\n"
    );
}

/// `MONITOR` streams the commands of other clients, in Redis's form,
/// without `AUTH`'s password.
#[test]
fn monitor_streams_every_command_but_passwords() {
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::start(&tmp.path().join("d"), &["--requirepass", "s3cret"]);
    let mut watcher = server.raw();
    assert_eq!(watcher.cmd(&["AUTH", "s3cret"]), b"+OK\r\n");
    assert_eq!(watcher.cmd(&["MONITOR"]), b"+OK\r\n");
    let mut c = server.raw();
    assert_eq!(c.cmd(&["AUTH", "s3cret"]), b"+OK\r\n");
    assert_eq!(c.cmd(&["BF.ADD", "urls", "a \"quoted\" item"]), b":1\r\n");
    for i in 0..3 {
        c.send(&["BF.EXISTS", "urls", &i.to_string()]);
    }
    for _ in 0..3 {
        c.read_reply_bytes().unwrap();
    }
    let mut lines = Vec::new();
    for _ in 0..4 {
        match watcher.read_reply() {
            Reply::Simple(l) => lines.push(text(&l)),
            other => panic!("{other:?}"),
        }
    }
    assert!(
        lines[0].ends_with(r#"] "BF.ADD" "urls" "a \"quoted\" item""#),
        "{lines:?}"
    );
    assert!(
        lines[3].ends_with(r#"] "BF.EXISTS" "urls" "2""#),
        "{lines:?}"
    );
    assert!(lines.iter().all(|l| !l.contains("s3cret")), "{lines:?}");
    let (secs, _) = lines[0].split_once(' ').unwrap();
    assert!(secs.parse::<f64>().unwrap() > 1.7e9, "{secs}");
}

/// `CLIENT KILL` closes a client that reads nothing (a `MONITOR` client
/// whose socket is full), and `CONFIG SET timeout` closes clients idle
/// already; the slow log keeps no password.
#[test]
fn kills_and_timeouts_reach_clients_that_wait() {
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::start(&tmp.path().join("d"), &["--slowlog-log-slower-than", "0"]);
    let mut admin = server.raw();
    let mut stuck = server.raw();
    assert_eq!(stuck.cmd(&["CLIENT", "SETNAME", "stuck"]), b"+OK\r\n");
    assert_eq!(stuck.cmd(&["MONITOR"]), b"+OK\r\n");
    let stuck_id = field(
        &line_named(&client_list(&mut admin, &[]), "stuck").unwrap(),
        "id",
    )
    .to_string();
    // Lines for the monitor until its socket buffers are full: it reads
    // nothing, so the server's write to it waits.
    let big = "x".repeat(64 * 1024);
    for _ in 0..200 {
        assert_eq!(
            admin.cmd(&["ECHO", &big]).len(),
            big.len() + "$65536\r\n\r\n".len()
        );
    }
    assert_eq!(admin.cmd(&["CLIENT", "KILL", "ID", &stuck_id]), b":1\r\n");
    let deadline = Instant::now() + Duration::from_secs(5);
    while line_named(&client_list(&mut admin, &[]), "stuck").is_some() {
        assert!(
            Instant::now() < deadline,
            "the killed client is still listed"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    drop(stuck);

    let mut idle = server.raw();
    assert_eq!(idle.cmd(&["PING"]), b"+PONG\r\n");
    assert_eq!(admin.cmd(&["CONFIG", "SET", "timeout", "1"]), b"+OK\r\n");
    assert!(
        closed_soon(&mut idle),
        "an idle client outlived the new timeout"
    );
    // The admin connection sat idle meanwhile too: a new one.
    let mut admin = server.raw();
    assert_eq!(admin.cmd(&["CONFIG", "SET", "timeout", "0"]), b"+OK\r\n");

    assert_eq!(admin.cmd(&["AUTH", "default", "whatever"]), b"+OK\r\n");
    c_slowlog_has_no_password(&mut admin);
}

fn c_slowlog_has_no_password(c: &mut Raw) {
    c.send(&["SLOWLOG", "GET", "-1"]);
    let reply = format!("{:?}", c.read_reply());
    assert!(
        reply.contains("(redacted)") && !reply.contains("whatever"),
        "{reply}"
    );
}
