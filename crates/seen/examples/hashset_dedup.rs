//! The exact-set peer of `seen dedup` in BENCHMARKS.md: every distinct line
//! kept in a `HashSet<String>` (std's default hasher), first occurrences
//! printed. Exact, and its memory grows with the input.
//!
//! `cargo build --release -p seen --example hashset_dedup`
//! `target/release/examples/hashset_dedup < urls.txt > unique.txt`

use std::collections::HashSet;
use std::io::{self, BufRead, BufWriter, Write};

fn main() -> io::Result<()> {
    let stdin = io::stdin();
    let mut input = stdin.lock();
    let stdout = io::stdout();
    let mut out = BufWriter::with_capacity(256 << 10, stdout.lock());
    let mut seen: HashSet<String> = HashSet::new();
    let mut line = String::new();
    loop {
        line.clear();
        if input.read_line(&mut line)? == 0 {
            break;
        }
        let l = line.strip_suffix('\n').unwrap_or(&line);
        if !seen.contains(l) {
            out.write_all(l.as_bytes())?;
            out.write_all(b"\n")?;
            seen.insert(l.to_owned());
        }
    }
    out.flush()
}
