//! The real Guava for seen's tests: compiles `GuavaPeer.java` once per test
//! binary against Debian's `libguava-java` (`/usr/share/java/guava.jar`, or
//! the jar `SEEN_GUAVA_JAR` names) and runs it. Shared by the test crates
//! that compare seen with Guava (`#[path]`-included), each of which uses
//! part of it.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use seen_core::{guava, BloomFilter};

/// A compiled `GuavaPeer`.
pub struct GuavaPeer {
    classpath: String,
}

/// The string `GuavaPeer.item(i)` (an added item).
pub fn item(i: u64) -> String {
    format!("https://\u{4f8b}\u{3048}.jp/\u{30da}\u{30fc}\u{30b8}/{i}?q=\u{fc}\u{df}\u{1d11e}")
}

/// The string `GuavaPeer.probe(i)` (a probe never added).
pub fn probe(i: u64) -> String {
    format!("probe-{i}-\u{e9}t\u{e9}")
}

impl GuavaPeer {
    /// The peer, compiled on first use into `dir`.
    pub fn get(dir: &Path) -> &'static GuavaPeer {
        static PEER: OnceLock<GuavaPeer> = OnceLock::new();
        PEER.get_or_init(|| {
            let jar = std::env::var_os("SEEN_GUAVA_JAR")
                .map(PathBuf::from)
                .unwrap_or_else(|| PathBuf::from("/usr/share/java/guava.jar"));
            assert!(
                jar.exists(),
                "{} is missing: install Debian's libguava-java and default-jdk-headless \
                 (scripts/test does) or point SEEN_GUAVA_JAR at a Guava jar",
                jar.display()
            );
            let source = Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("../seen-core/tests/java/GuavaPeer.java");
            let classes = dir.join("guava-peer");
            std::fs::create_dir_all(&classes).expect("class directory");
            let out = Command::new("javac")
                .args(["-encoding", "UTF-8", "-cp"])
                .arg(&jar)
                .arg("-d")
                .arg(&classes)
                .arg(&source)
                .output()
                .expect("javac runs (Debian's default-jdk-headless)");
            assert!(
                out.status.success(),
                "javac failed: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            GuavaPeer {
                classpath: format!("{}:{}", jar.display(), classes.display()),
            }
        })
    }

    /// Java's `BloomFilter.create(stringFunnel(UTF_8), n, fpp)` with the
    /// strategy named (`MURMUR128_MITZ_64`, Guava's default, or
    /// `MURMUR128_MITZ_32`), items `0..n` put, written to `path`.
    pub fn build(&self, path: &Path, n: u64, fpp: f64, strategy: &str) {
        let p = path.to_str().expect("a UTF-8 path");
        self.run(&["build", p, &n.to_string(), &fpp.to_string(), strategy]);
    }

    /// Guava's answers for the filter in `path`, in [`answers`]' order,
    /// and its `approximateElementCount()`.
    pub fn probe(&self, path: &Path, items: u64, probes: u64) -> (Vec<u8>, u64) {
        let out = path.with_extension("answers");
        let count = self.run(&[
            "probe",
            path.to_str().expect("a UTF-8 path"),
            &items.to_string(),
            &probes.to_string(),
            out.to_str().expect("a UTF-8 path"),
        ]);
        let answers = std::fs::read(&out).expect("GuavaPeer's answers");
        (answers, count.trim().parse().expect("a count"))
    }

    /// Asserts that Guava and seen read the Guava file at `path` alike:
    /// every item `0..items` present, the same answer to each of them and
    /// to `probes` probes, the same element count.
    pub fn assert_agrees(&self, path: &Path, items: u64, probes: u64) {
        let bytes = std::fs::read(path).expect("the Guava file");
        let f = guava::from_bytes(&bytes, u64::MAX).expect("a Guava file seen reads");
        let (theirs, count) = self.probe(path, items, probes);
        let ours = answers(&f, items, probes);
        assert!(
            theirs[..items as usize].iter().all(|&a| a == 1),
            "Guava forgot an item"
        );
        if let Some(d) = first_difference(&ours, &theirs, items) {
            panic!("{}: {d}", path.display());
        }
        assert_eq!(guava::approximate_element_count(&f), count);
    }

    /// Runs `GuavaPeer` with `args`; its standard output.
    pub fn run(&self, args: &[&str]) -> String {
        let out = Command::new("java")
            .args(["-Xmx4g", "-cp", &self.classpath, "GuavaPeer"])
            .args(args)
            .output()
            .expect("java runs");
        assert!(
            out.status.success(),
            "GuavaPeer {args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).expect("UTF-8 output")
    }
}

/// seen's answers in `GuavaPeer probe`'s order: items `0..items`, then
/// probes `0..probes`, one byte each.
pub fn answers(f: &BloomFilter, items: u64, probes: u64) -> Vec<u8> {
    let items = (0..items).map(|i| f.contains(item(i)) as u8);
    items
        .chain((0..probes).map(|i| f.contains(probe(i)) as u8))
        .collect()
}

/// Where two answer lists first differ, for a readable failure.
pub fn first_difference(ours: &[u8], theirs: &[u8], items: u64) -> Option<String> {
    assert_eq!(ours.len(), theirs.len());
    let i = ours.iter().zip(theirs).position(|(x, y)| x != y)?;
    let (a, b) = (ours[i], theirs[i]);
    Some(match (i as u64) < items {
        true => format!("item {i}: seen {a} guava {b}"),
        false => format!("probe {}: seen {a} guava {b}", i as u64 - items),
    })
}
