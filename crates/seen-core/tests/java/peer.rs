//! The real Guava for seen's tests: compiles `GuavaPeer.java` once per test
//! binary against Debian's `libguava-java` (`/usr/share/java/guava.jar`, or
//! the jar `SEEN_GUAVA_JAR` names) and runs it. Shared by the test crates
//! that compare seen with Guava (`#[path]`-included).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

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
