//! `seen serve --config seen.toml`: every flag from the file, flags over
//! the file, `CONFIG REWRITE` across a restart, bad files refused with
//! their line; the shipped example file and service unit.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::Path;
use std::process::Command;

use crate::support::{free_port, text, Raw, Server};

/// The flags of `seen serve --help`, without their dashes (`--config`
/// and `--help` left out).
fn serve_flags() -> Vec<String> {
    let out = Command::new(env!("CARGO_BIN_EXE_seen"))
        .args(["serve", "--help"])
        .output()
        .unwrap();
    let help = text(&out.stdout);
    // An option's line: at most six spaces, then `--name` and a space, a
    // value name or the end (a wrapped description is indented further).
    let mut flags: Vec<String> = help
        .lines()
        .filter(|l| l.len() - l.trim_start().len() <= 6)
        .filter_map(|l| l.trim_start().strip_prefix("--"))
        .filter_map(|l| {
            let name: String = l
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '-')
                .collect();
            matches!(l[name.len()..].chars().next(), None | Some(' ')).then_some(name)
        })
        .filter(|f| f != "config" && f != "help")
        .collect();
    flags.dedup();
    assert!(flags.len() >= 15, "{help}");
    flags
}

/// `CONFIG GET *` as a map.
fn config_get_all(c: &mut Raw) -> BTreeMap<String, String> {
    c.send(&["CONFIG", "GET", "*"]);
    let reply = c.read_reply();
    let seen_resp::Reply::Array(items) = reply else {
        panic!("{reply:?}")
    };
    let s = |r: &seen_resp::Reply| match r {
        seen_resp::Reply::Bulk(b) => text(b),
        other => panic!("{other:?}"),
    };
    items.chunks(2).map(|p| (s(&p[0]), s(&p[1]))).collect()
}

/// Starts `seen serve --config FILE extra...` on `port` (the file or the
/// extra flags name it).
fn start_with(file: &Path, port: u16, extra: &[&str]) -> Server {
    let mut args: Vec<OsString> = vec!["serve".into(), "--config".into(), file.into()];
    args.extend(extra.iter().map(OsString::from));
    Server::launch(&args, port, &file.with_extension("log")).expect("the port was taken")
}

#[test]
fn every_flag_can_be_set_from_the_file() {
    let tmp = tempfile::tempdir().unwrap();
    let port = free_port();
    let metrics_port = free_port();
    let data = tmp.path().join("from-file");
    let keys = [
        ("dir", format!("{:?}", data.display().to_string())),
        ("bind", "[\"127.0.0.1\"]".to_string()),
        ("port", port.to_string()),
        ("fsync", "\"always\"".into()),
        ("requirepass", "\"pw\"".into()),
        ("maxclients", "123".into()),
        ("maxmemory", "\"64MiB\"".into()),
        ("max-filter-bytes", "\"32MiB\"".into()),
        ("proto-max-bulk-len", "\"1MiB\"".into()),
        ("client-query-buffer-limit", "\"2MiB\"".into()),
        ("timeout", "77".into()),
        ("save-interval", "55".into()),
        ("save-log-size", "\"3MiB\"".into()),
        ("salvage", "true".into()),
        ("threads", "2".into()),
        ("bf-error-rate", "0.002".into()),
        ("bf-initial-size", "333".into()),
        ("bf-expansion-factor", "4".into()),
        ("slowlog-log-slower-than", "-1".into()),
        ("slowlog-max-len", "9".into()),
        ("metrics", format!("\"127.0.0.1:{metrics_port}\"")),
        ("metrics-max-filters", "7".into()),
        ("log", "\"debug\"".into()),
        ("log-format", "\"json\"".into()),
    ];
    // The file below sets every flag `seen serve` has, and the shipped
    // example lists every one.
    let example = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../packaging/seen.toml"
    ))
    .unwrap();
    for flag in serve_flags() {
        assert!(
            keys.iter().any(|(k, _)| *k == flag),
            "--{flag} is not in this test's file"
        );
        assert!(
            example.contains(&format!("\n# {flag} = ")),
            "--{flag} is not in packaging/seen.toml"
        );
    }
    let file = tmp.path().join("seen.toml");
    let body: String = keys.iter().map(|(k, v)| format!("{k} = {v}\n")).collect();
    std::fs::write(&file, body).unwrap();
    let server = start_with(&file, port, &[]);
    let mut c = server.raw();
    assert_eq!(c.cmd(&["AUTH", "pw"]), b"+OK\r\n");
    let got = config_get_all(&mut c);
    for (name, want) in [
        ("bind", "127.0.0.1"),
        ("port", &port.to_string()),
        ("dir", &data.display().to_string()),
        ("appendfsync", "always"),
        ("requirepass", "pw"),
        ("maxclients", "123"),
        ("maxmemory", "67108864"),
        ("max-filter-bytes", "33554432"),
        ("proto-max-bulk-len", "1048576"),
        ("client-query-buffer-limit", "2097152"),
        ("timeout", "77"),
        ("save-interval", "55"),
        ("save-log-size", "3145728"),
        ("salvage", "yes"),
        ("threads", "2"),
        ("bf-error-rate", "0.002"),
        ("bf-initial-size", "333"),
        ("bf-expansion-factor", "4"),
        ("slowlog-log-slower-than", "-1"),
        ("slowlog-max-len", "9"),
        ("metrics", &format!("127.0.0.1:{metrics_port}")),
        ("metrics-max-filters", "7"),
    ] {
        assert_eq!(
            got.get(name).map(String::as_str),
            Some(want),
            "{name}: {got:?}"
        );
    }
    // log = "debug" and log-format = "json" took.
    let log = server.log_text();
    let first = log.lines().next().expect("a log line");
    let v: serde_json::Value = serde_json::from_str(first).expect("a JSON line");
    assert!(v["level"].is_string(), "{first}");
    assert!(log.contains("\"level\":\"DEBUG\""), "{log}");
    let info = text(&c.cmd(&["INFO", "server"]));
    assert!(
        info.contains(&format!("config_file:{}", file.display())),
        "{info}"
    );
}

#[test]
fn a_flag_overrides_the_file() {
    let tmp = tempfile::tempdir().unwrap();
    let port = free_port();
    let file = tmp.path().join("seen.toml");
    let dir = tmp.path().join("d");
    std::fs::write(
        &file,
        format!(
            "port = 1\nmaxclients = 10\nbf-initial-size = 7\nrequirepass = \"-dash\"\ndir = {:?}\n",
            dir.display().to_string()
        ),
    )
    .unwrap();
    let server = start_with(
        &file,
        port,
        &["--port", &port.to_string(), "--maxclients", "20"],
    );
    let mut c = server.raw();
    // A value that starts with a dash is a value.
    assert_eq!(c.cmd(&["AUTH", "-dash"]), b"+OK\r\n");
    let got = config_get_all(&mut c);
    assert_eq!(got["port"], port.to_string());
    assert_eq!(got["maxclients"], "20");
    assert_eq!(
        got["bf-initial-size"], "7",
        "the file's, where no flag was given"
    );
}

#[test]
fn config_rewrite_keeps_what_config_set_changed_across_a_restart() {
    let tmp = tempfile::tempdir().unwrap();
    let port = free_port();
    let file = tmp.path().join("seen.toml");
    let dir = tmp.path().join("d");
    let original = format!(
        "# my settings\nport = {port} # the port\nmaxclients = 10 # few\ndir = {:?}\n",
        dir.display().to_string()
    );
    std::fs::write(&file, &original).unwrap();
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
    let server = start_with(&file, port, &[]);
    let mut c = server.raw();
    assert_eq!(
        c.cmd(&[
            "CONFIG",
            "SET",
            "maxclients",
            "77",
            "bf-initial-size",
            "500",
            "timeout",
            "9"
        ]),
        b"+OK\r\n"
    );
    assert_eq!(c.cmd(&["CONFIG", "SET", "maxmemory", "100mb"]), b"+OK\r\n");
    assert_eq!(c.cmd(&["CONFIG", "REWRITE"]), b"+OK\r\n");
    let rewritten = std::fs::read_to_string(&file).unwrap();
    let mode = std::fs::metadata(&file).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600, "the rewrite kept the file private");
    assert!(
        rewritten.starts_with(&format!(
            "# my settings\nport = {port} # the port\nmaxclients = 77 # few\n"
        )),
        "{rewritten}"
    );
    c.send(&["SHUTDOWN"]);
    assert!(server.wait().success());

    let server = start_with(&file, port, &[]);
    let got = config_get_all(&mut server.raw());
    assert_eq!(got["maxclients"], "77");
    assert_eq!(got["bf-initial-size"], "500");
    assert_eq!(got["timeout"], "9");
    assert_eq!(got["maxmemory"], (100u64 << 20).to_string());

    // Without a file there is nothing to rewrite.
    let plain = Server::start(&tmp.path().join("plain"), &[]);
    assert_eq!(
        plain.raw().cmd(&["CONFIG", "REWRITE"]),
        b"-ERR The server is running without a config file\r\n"
    );
}

#[test]
fn a_bad_file_is_refused_at_start_naming_the_key_and_line() {
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("seen.toml");
    for (body, needle) in [
        (
            "port = 7000\nfsync = \"sometimes\"\n",
            "line 2: key 'fsync': invalid value 'sometimes'",
        ),
        (
            "port = 7000\n\nprot = 7001\n",
            "line 3: key 'prot': not a setting",
        ),
        (
            "maxmemory = \"lots\"\n",
            "line 1: key 'maxmemory': invalid value 'lots'",
        ),
        ("port = 7000\nport = 7001\n", "line 2: duplicate key"),
        (
            "[server]\nport = 7000\n",
            "line 1: key 'server': a table is not a setting",
        ),
        ("port = \n", "line 1:"),
        (
            "config = \"other.toml\"\n",
            "line 1: key 'config': not a setting",
        ),
    ] {
        std::fs::write(&file, body).unwrap();
        let out = Command::new(env!("CARGO_BIN_EXE_seen"))
            .args(["serve", "--port", "0", "--dir"])
            .arg(tmp.path().join("d"))
            .arg("--config")
            .arg(&file)
            .output()
            .unwrap();
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{body:?}: {err}");
        assert!(
            err.starts_with(&format!("seen: {}", file.display())) && err.contains(needle),
            "{body:?}: {err}"
        );
    }
}

#[test]
fn the_service_unit_passes_systemd_analyze_verify() {
    let unit = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../packaging/seen.service"
    ))
    .unwrap();
    assert!(unit.contains("ExecStart=/usr/local/bin/seen serve --config /etc/seen/seen.toml"));
    // verify checks that ExecStart's binary exists: point it at the one
    // built here.
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("seen.service");
    std::fs::write(
        &path,
        unit.replace("/usr/local/bin/seen", env!("CARGO_BIN_EXE_seen")),
    )
    .unwrap();
    let out = Command::new("systemd-analyze")
        .arg("verify")
        .arg(&path)
        .output()
        .expect(
            "systemd-analyze is not installed: run the tests with scripts/test, which installs it",
        );
    assert!(
        out.status.success() && out.stderr.is_empty(),
        "{}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
}
