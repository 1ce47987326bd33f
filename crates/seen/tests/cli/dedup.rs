use std::io::{BufRead, BufReader, Read, Write};
use std::process::Stdio;

use crate::support::*;

#[test]
fn known_duplicates_are_never_printed_and_few_unique_lines_are_lost() {
    let (input, distinct) = urls(200_000, 0.3, 7);
    let o = run(
        &["dedup", "--capacity", "200k", "--fpp", "1e-3"],
        &joined(&input),
    );
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(o.stderr.is_empty(), "quiet without -v: {}", stderr(&o));
    let out = out_lines(&o);
    let lost = check_dedup(&input, &out);
    // Each distinct line is lost with probability at most 1e-3 (the filter
    // is below its capacity throughout): the expected loss is below 140.
    // The generator is seeded, so this is one fixed draw, with a bound at
    // twice the worst-case mean.
    assert!(lost <= 280, "{lost} of {distinct} distinct lines lost");
    assert!(distinct > 130_000);
}

#[test]
fn print_dups_and_count() {
    let (input, _) = urls(50_000, 0.4, 11);
    let data = joined(&input);
    let uniq = run(&["dedup"], &data);
    let dups = run(&["dedup", "--print-dups"], &data);
    let n_uniq = out_lines(&uniq).len();
    let n_dups = out_lines(&dups).len();
    assert_eq!(n_uniq + n_dups, input.len());
    // Every duplicate printed is a line that appears earlier.
    let set: std::collections::HashSet<_> = out_lines(&uniq).into_iter().collect();
    for d in out_lines(&dups) {
        assert!(set.contains(&d) || input.iter().filter(|l| **l == d).count() > 1);
    }
    let c = run(&["dedup", "--count"], &data);
    assert_eq!(
        String::from_utf8_lossy(&c.stdout).trim(),
        n_uniq.to_string()
    );
    let c = run(&["dedup", "-c", "--print-dups"], &data);
    assert_eq!(
        String::from_utf8_lossy(&c.stdout).trim(),
        n_dups.to_string()
    );
}

#[test]
fn last_line_without_newline_empty_lines_and_crlf() {
    let o = run(&["dedup"], b"a\n\nb\r\na\n\nb\r\nc");
    assert!(o.status.success());
    assert_eq!(o.stdout, b"a\n\nb\r\nc\n");
}

#[test]
fn nul_separated_records() {
    let o = run(&["dedup", "-z"], b"one\ntwo\0x\0one\ntwo\0y\0x\0");
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(o.stdout, b"one\ntwo\0x\0y\0");
    let o = run(&["dedup", "--null", "--print-dups"], b"a\0b\0a\0");
    assert_eq!(o.stdout, b"a\0");
}

#[test]
fn lines_longer_than_the_read_buffer() {
    let long_a = "a".repeat(3 << 20);
    let long_b = format!("{}b", "a".repeat(3 << 20));
    let input = format!("{long_a}\n{long_b}\n{long_a}\nshort\n");
    let o = run(&["dedup"], input.as_bytes());
    assert!(o.status.success());
    assert_eq!(o.stdout, format!("{long_a}\n{long_b}\nshort\n").as_bytes());
}

#[test]
fn several_files_and_stdin_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let a = dir.path().join("a.txt");
    let b = dir.path().join("b.txt");
    write_file(&a, b"1\n2\n3");
    write_file(&b, b"3\n4\n1\n");
    let o = run(
        &["dedup", a.to_str().unwrap(), "-", b.to_str().unwrap()],
        b"2\n5\n",
    );
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(o.stdout, b"1\n2\n3\n5\n4\n");
}

#[test]
fn resume_with_state_gives_the_same_output_as_one_run() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("urls.seen");
    let st = state.to_str().unwrap();
    let (input, _) = urls(100_000, 0.3, 21);
    let (first, second) = input.split_at(60_000);
    let one = run(&["dedup", "--capacity", "100k"], &joined(&input));
    let a = run(
        &["dedup", "--capacity", "100k", "--state", st],
        &joined(first),
    );
    assert!(a.status.success(), "{}", stderr(&a));
    let saved = std::fs::read(&state).unwrap();
    // The second run takes the size from the state file (no flags needed).
    let b = run(&["dedup", "--state", st], &joined(second));
    assert!(b.status.success(), "{}", stderr(&b));
    let mut both = a.stdout.clone();
    both.extend_from_slice(&b.stdout);
    assert_eq!(both, one.stdout, "two resumed runs = one run");
    assert_ne!(std::fs::read(&state).unwrap(), saved, "state saved again");
    // A third run over everything prints nothing.
    let c = run(&["dedup", "--state", st], &joined(&input));
    assert!(c.status.success());
    assert!(c.stdout.is_empty());
    // Different flags for an existing state file: a warning, not silence.
    let d = run(&["dedup", "--state", st, "--capacity", "5M"], b"x\n");
    assert!(d.status.success());
    assert!(stderr(&d).contains("seen: warning:"), "{}", stderr(&d));
    // Nothing but the state file was left in the directory.
    let names: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
    assert_eq!(names.len(), 1, "{names:?}");
}

#[test]
fn read_only_lookup_is_a_blacklist_check() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("bl.seen");
    let st = state.to_str().unwrap();
    let o = run(
        &["dedup", "--state", st, "--count"],
        b"evil.com\nspam.net\n",
    );
    assert_eq!(String::from_utf8_lossy(&o.stdout).trim(), "2");
    let before = std::fs::read(&state).unwrap();
    let o = run(
        &["dedup", "--state", st, "--read-only", "--print-dups"],
        b"ok.org\nspam.net\nfine.io\nevil.com\nspam.net\n",
    );
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(o.stdout, b"spam.net\nevil.com\nspam.net\n");
    let o = run(
        &["dedup", "--state", st, "--read-only"],
        b"ok.org\nspam.net\nok.org\n",
    );
    assert_eq!(o.stdout, b"ok.org\nok.org\n", "absent lines, not added");
    assert_eq!(std::fs::read(&state).unwrap(), before, "state untouched");
    let missing = dir.path().join("none.seen");
    let o = run(
        &["dedup", "--state", missing.to_str().unwrap(), "--read-only"],
        b"x\n",
    );
    assert_error(&o, "does not exist");
    assert!(!missing.exists());
}

#[test]
fn error_paths_leave_the_state_file_unchanged() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("s.seen");
    let st = state.to_str().unwrap();
    assert!(run(&["dedup", "--state", st], b"a\nb\n").status.success());
    let good = std::fs::read(&state).unwrap();

    let missing = dir.path().join("missing.txt");
    let o = run(
        &["dedup", "--state", st, "-", missing.to_str().unwrap()],
        b"c\n",
    );
    assert_error(&o, "missing.txt");
    assert_eq!(std::fs::read(&state).unwrap(), good);

    let o = run(&["dedup", "--state", st, dir.path().to_str().unwrap()], b"");
    assert_error(&o, "is a directory");
    assert_eq!(std::fs::read(&state).unwrap(), good);

    // A state file that is damaged: named, and left as it is.
    let bad = dir.path().join("bad.seen");
    let mut damaged = good.clone();
    let mid = damaged.len() / 2;
    damaged[mid] ^= 0x40;
    write_file(&bad, &damaged);
    let o = run(&["dedup", "--state", bad.to_str().unwrap()], b"a\n");
    assert_error(&o, "bad.seen");
    assert_eq!(std::fs::read(&bad).unwrap(), damaged);
    let trunc = dir.path().join("trunc.seen");
    write_file(&trunc, &good[..good.len() - 9]);
    let o = run(&["dedup", "--state", trunc.to_str().unwrap()], b"a\n");
    assert_error(&o, "trunc.seen");
    let text = dir.path().join("text.seen");
    write_file(&text, b"not a filter\n");
    let o = run(&["dedup", "--state", text.to_str().unwrap()], b"a\n");
    assert_error(&o, "text.seen");
    assert_eq!(std::fs::read(&text).unwrap(), b"not a filter\n");
    let o = run(&["dedup", "--state", dir.path().to_str().unwrap()], b"a\n");
    assert_error(&o, "is a directory");

    // A state file in a directory that does not exist: refused with exit 2
    // before any input is read (stdin here never ends) or printed.
    let nodir = dir.path().join("no/such/dir/s.seen");
    let mut child = seen()
        .args(["dedup", "--state", nodir.to_str().unwrap()])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut open_stdin = child.stdin.take().unwrap();
    open_stdin.write_all(b"a\nb\n").unwrap();
    let started = std::time::Instant::now();
    let o = loop {
        if child.try_wait().unwrap().is_some() {
            break child.wait_with_output().unwrap();
        }
        assert!(
            started.elapsed() < std::time::Duration::from_secs(20),
            "seen dedup waited for input it cannot save"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    drop(open_stdin);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        o.stdout.is_empty(),
        "{}",
        String::from_utf8_lossy(&o.stdout)
    );
    assert!(
        stderr(&o).starts_with("seen: cannot save state file")
            && stderr(&o).contains("nothing was read"),
        "{}",
        stderr(&o)
    );

    // Bad flags.
    for (args, needle) in [
        (vec!["dedup", "--capacity", "0"], "--capacity"),
        (vec!["dedup", "--capacity", "lots"], "lots"),
        (vec!["dedup", "--fpp", "0"], "--fpp"),
        (vec!["dedup", "--fpp", "1.5"], "1.5"),
        (vec!["dedup", "--fpp", "200%"], "200%"),
        (
            vec!["dedup", "--capacity", "1e19", "--fpp", "1e-9"],
            "--capacity",
        ),
        (vec!["dedup", "--redis", "redis://127.0.0.1:1"], "--name"),
        (vec!["dedup", "--name", "x"], "--redis"),
        (
            vec![
                "dedup",
                "--state",
                st,
                "--redis",
                "redis://x",
                "--name",
                "n",
            ],
            "--state",
        ),
        (
            vec!["dedup", "--redis", "http://nope", "--name", "n"],
            "--redis",
        ),
        (vec!["dedup", "--ttl", "3d"], "--redis"),
        (vec!["dedup", "--progress", "sometimes"], "sometimes"),
    ] {
        let o = run(&args, b"a\n");
        assert_error(&o, needle);
    }
    assert_eq!(std::fs::read(&state).unwrap(), good);
}

#[test]
fn unreachable_redis_is_a_clear_error() {
    let port = free_port();
    let url = format!("redis://127.0.0.1:{port}");
    let o = run(&["dedup", "--redis", &url, "--name", "n"], b"a\n");
    assert_error(&o, "redis");
}

#[test]
fn over_capacity_warns() {
    let (input, _) = urls(20_000, 0.0, 3);
    let o = run(
        &["dedup", "--capacity", "1000", "--fpp", "0.01"],
        &joined(&input),
    );
    assert!(o.status.success());
    let err = stderr(&o);
    assert!(
        err.contains("seen: warning:") && err.contains("capacity of 1000"),
        "{err}"
    );
    // Far past capacity many unique lines are lost, as the warning says.
    assert!(out_lines(&o).len() < 20_000);
}

#[test]
fn verbose_summary() {
    let o = run(&["dedup", "-v"], b"a\nb\na\n");
    let err = stderr(&o);
    assert!(
        err.contains("3 lines in, 2 unique out, 1 duplicates"),
        "{err}"
    );
    assert!(err.contains("false positives"), "{err}");
    assert!(err.contains("lines/s"), "{err}");
}

#[test]
fn broken_pipe_exits_quietly_and_keeps_the_state() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.txt");
    let (lines, _) = urls(300_000, 0.1, 5);
    write_file(&input, &joined(&lines));
    let state = dir.path().join("s.seen");
    assert!(
        run(&["dedup", "--state", state.to_str().unwrap()], b"zzz\n")
            .status
            .success()
    );
    let before = std::fs::read(&state).unwrap();
    let mut child = seen()
        .args([
            "dedup",
            "--state",
            state.to_str().unwrap(),
            input.to_str().unwrap(),
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut first = String::new();
    out.read_line(&mut first).unwrap();
    assert_eq!(first.trim_end(), lines[0]);
    drop(out); // like `| head -1`
    let mut err = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(0), "{err}");
    assert!(err.is_empty(), "quiet: {err}");
    // The run did not finish: the state is the previous one, so no line
    // that was never printed is marked as seen.
    assert_eq!(std::fs::read(&state).unwrap(), before);
}

#[test]
fn killed_run_leaves_the_state_file_intact() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("s.seen");
    let st = state.to_str().unwrap();
    assert!(run(&["dedup", "--state", st, "--capacity", "1M"], b"old\n")
        .status
        .success());
    let before = std::fs::read(&state).unwrap();
    let mut child = seen()
        .args(["dedup", "--state", st])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let (lines, _) = urls(50_000, 0.2, 9);
    stdin.write_all(&joined(&lines)).unwrap();
    stdin.flush().unwrap();
    std::thread::sleep(std::time::Duration::from_millis(200));
    unsafe {
        libc::kill(child.id() as i32, libc::SIGKILL);
    }
    child.wait().unwrap();
    assert_eq!(std::fs::read(&state).unwrap(), before);
    let o = run(&["dedup", "--state", st], b"old\nnew\n");
    assert_eq!(o.stdout, b"new\n");
}

#[test]
fn streaming_output_is_flushed_while_input_waits() {
    // `tail -f log | seen dedup`: lines come out before the input ends.
    let mut child = seen()
        .args(["dedup"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    stdin.write_all(b"first\nfirst\n").unwrap();
    stdin.flush().unwrap();
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    assert_eq!(line, "first\n");
    stdin.write_all(b"second\n").unwrap();
    drop(stdin);
    line.clear();
    out.read_line(&mut line).unwrap();
    assert_eq!(line, "second\n");
    assert!(child.wait().unwrap().success());
}

#[test]
fn progress_bar_on_a_terminal_only() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.txt");
    let (lines, _) = urls(20_000, 0.3, 1);
    write_file(&input, &joined(&lines));
    // `script` gives the child a terminal for stdin, stdout and stderr.
    let cmd = format!(
        "{} dedup --progress always {} > /dev/null",
        env!("CARGO_BIN_EXE_seen"),
        input.display()
    );
    let o = std::process::Command::new("script")
        .args(["-qec", &cmd, "/dev/null"])
        .output()
        .expect("script (util-linux) runs a command on a terminal");
    assert!(o.status.success(), "{o:?}");
    let tty = String::from_utf8_lossy(&o.stdout);
    assert!(tty.contains("lines") && tty.contains("unique"), "{tty:?}");
    // Not a terminal: nothing on stderr.
    let o = run(&["dedup", input.to_str().unwrap()], b"");
    assert!(o.stderr.is_empty());
}

#[test]
fn help_explains_every_flag_with_examples() {
    let o = seen().args(["dedup", "--help"]).output().unwrap();
    let h = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success());
    for flag in [
        "--capacity",
        "--fpp",
        "--state",
        "--redis",
        "--name",
        "--print-dups",
        "--count",
        "-z",
        "--read-only",
        "--ttl",
        "--progress",
        "-v",
        "Examples:",
    ] {
        assert!(h.contains(flag), "dedup --help lacks {flag}");
    }
    for cmd in ["calc", "inspect", "serve"] {
        let o = seen().args([cmd, "--help"]).output().unwrap();
        assert!(o.status.success());
        let h = String::from_utf8_lossy(&o.stdout);
        assert!(h.contains("Usage: seen"), "{cmd}: {h}");
        assert!(h.contains("Examples:"), "{cmd} --help lacks examples");
    }
    let o = seen().output().unwrap();
    assert_eq!(o.status.code(), Some(2), "no command is a usage error");
}
