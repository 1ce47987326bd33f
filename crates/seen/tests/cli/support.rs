//! Running the real `seen` binary, generated inputs, and a throwaway
//! `redis-server`.

use std::collections::HashSet;
use std::io::Write;
use std::path::Path;
use std::process::{Command, Output, Stdio};

pub fn seen() -> Command {
    Command::new(env!("CARGO_BIN_EXE_seen"))
}

/// Runs `seen args...` with `stdin` as input.
pub fn run(args: &[&str], stdin: &[u8]) -> Output {
    let mut child = seen()
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run seen");
    let mut input = child.stdin.take().unwrap();
    let data = stdin.to_vec();
    let feeder = std::thread::spawn(move || {
        let _ = input.write_all(&data);
    });
    let out = child.wait_with_output().expect("wait for seen");
    feeder.join().unwrap();
    out
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Asserts the run failed with exit 2 and one `seen: ...` line that
/// contains `needle`.
pub fn assert_error(o: &Output, needle: &str) {
    let err = stderr(o);
    assert_eq!(o.status.code(), Some(2), "exit status; stderr: {err}");
    assert!(err.starts_with("seen: "), "error line: {err:?}");
    assert_eq!(err.trim_end().lines().count(), 1, "one line: {err:?}");
    assert!(err.contains(needle), "{err:?} should mention {needle:?}");
    assert!(o.stdout.is_empty(), "no output on error");
}

/// A small reproducible generator (xorshift64*).
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed | 1)
    }
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// `lines` URL-like lines of which about `dup` are repeats of earlier ones.
/// Returns the lines and the number of distinct ones.
pub fn urls(lines: usize, dup: f64, seed: u64) -> (Vec<String>, usize) {
    let mut rng = Rng::new(seed);
    let mut distinct: Vec<String> = Vec::new();
    let mut out = Vec::with_capacity(lines);
    for _ in 0..lines {
        let r = (rng.next() >> 11) as f64 / (1u64 << 53) as f64;
        if !distinct.is_empty() && r < dup {
            let i = rng.below(distinct.len() as u64) as usize;
            out.push(distinct[i].clone());
        } else {
            let n = distinct.len();
            let u = format!(
                "https://www.example-{:04}.com/article/{:012x}/{n}?ref=feed",
                rng.below(5000),
                rng.next() >> 16
            );
            distinct.push(u.clone());
            out.push(u);
        }
    }
    (out, distinct.len())
}

pub fn joined(lines: &[String]) -> Vec<u8> {
    let mut v = Vec::new();
    for l in lines {
        v.extend_from_slice(l.as_bytes());
        v.push(b'\n');
    }
    v
}

pub fn out_lines(o: &Output) -> Vec<String> {
    String::from_utf8(o.stdout.clone())
        .expect("utf-8 output")
        .lines()
        .map(str::to_owned)
        .collect()
}

/// Checks that `out` is the input's distinct lines in first-seen order,
/// minus some (false positives): never a line twice, never a line that is
/// not in the input, order kept. Returns how many distinct lines are
/// missing.
pub fn check_dedup(input: &[String], out: &[String]) -> usize {
    let mut seen = HashSet::new();
    let firsts: Vec<&String> = input.iter().filter(|l| seen.insert(l.as_str())).collect();
    let mut printed = HashSet::new();
    for l in out {
        assert!(printed.insert(l.as_str()), "line printed twice: {l}");
    }
    // Output is a subsequence of the first occurrences.
    let mut it = firsts.iter();
    for l in out {
        assert!(
            it.any(|f| *f == l),
            "line {l} out of order or not in the input"
        );
    }
    firsts.len() - out.len()
}

/// A port on 127.0.0.1 nobody listens on now.
pub fn free_port() -> u16 {
    crate::redis_server::free_port(false)
}

pub fn write_file(path: &Path, data: &[u8]) {
    std::fs::write(path, data).unwrap();
}
