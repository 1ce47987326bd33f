//! Every subcommand ends quietly, with exit 0, when its output is closed
//! before it writes (`seen calc --table | head -1`, a reader that went
//! away): no panic, no message.

use std::process::Stdio;

use crate::support::seen;

/// Runs `seen args...` with stdout a pipe whose reading end is already
/// closed, and `stdin` as input; returns the exit code and stderr.
fn with_closed_stdout(args: &[&str], stdin: &[u8]) -> (Option<i32>, String) {
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    let mut child = seen()
        .args(args)
        .stdin(Stdio::piped())
        .stdout(writer)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut input = child.stdin.take().unwrap();
    let data = stdin.to_vec();
    let feeder = std::thread::spawn(move || {
        let _ = std::io::Write::write_all(&mut input, &data);
    });
    let out = child.wait_with_output().unwrap();
    feeder.join().unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn every_subcommand_ends_quietly_when_its_output_is_closed() {
    let tmp = tempfile::tempdir().unwrap();
    let state = tmp.path().join("state");
    let state = state.to_str().unwrap();
    let lines: Vec<u8> = (0..100_000)
        .flat_map(|i| format!("line {i}\n").into_bytes())
        .collect();
    let made = seen()
        .args(["dedup", "--capacity", "1000000", "--state", state])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(
        made.status.success(),
        "{}",
        String::from_utf8_lossy(&made.stderr)
    );
    let cases: Vec<(Vec<&str>, &[u8])> = vec![
        (vec!["calc", "--capacity", "1M", "--fpp", "0.01"], b""),
        (
            vec!["calc", "--capacity", "1M", "--fpp", "0.01", "--json"],
            b"",
        ),
        (vec!["calc", "--table"], b""),
        (vec!["calc", "--table", "--json"], b""),
        (vec!["inspect", state], b""),
        (vec!["inspect", state, "--json"], b""),
        (vec!["dedup", "--capacity", "1000000"], &lines),
        (vec!["dedup", "--capacity", "1000000", "--count"], &lines),
        (vec!["--help"], b""),
        (vec!["calc", "--help"], b""),
        (vec!["convert", "--help"], b""),
        (vec!["--version"], b""),
    ];
    for (args, input) in cases {
        let (code, stderr) = with_closed_stdout(&args, input);
        assert_eq!(code, Some(0), "{args:?}: {stderr}");
        assert!(stderr.is_empty(), "{args:?} wrote to stderr: {stderr}");
    }
}
