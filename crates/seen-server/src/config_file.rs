//! The configuration file of `seen serve` (`--config seen.toml`): one TOML
//! key per flag, named as the flag without its dashes (`port = 6380`,
//! `fsync = "always"`, `bind = ["127.0.0.1", "::1"]`, `salvage = true`).
//!
//! This module reads the file into settings, each with the line it is on
//! (the command line checks the values, as it checks its flags, and names
//! the line of a bad one), and writes settings back (`CONFIG REWRITE`),
//! keeping the file's comments, order and other keys.

use std::fmt;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use toml_edit::{Document, DocumentMut, Item, Value};

/// One setting of the file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileSetting {
    /// The key: a flag's name without its dashes.
    pub key: String,
    /// Its values as text (one, except for arrays; none for a `false`
    /// switch, one empty for `true`).
    pub values: Vec<String>,
    /// A switch (a `true` or `false` value), given without a value.
    pub switch: bool,
    /// The line it is on, from 1.
    pub line: usize,
}

/// Why a configuration file cannot be used.
#[derive(Debug)]
pub enum ConfigFileError {
    /// It cannot be read or written.
    Io {
        /// The file.
        path: PathBuf,
        /// The error.
        source: io::Error,
    },
    /// It is not TOML, or holds a value no flag takes.
    Invalid {
        /// The file.
        path: PathBuf,
        /// The line, from 1.
        line: usize,
        /// What is wrong there.
        what: String,
    },
}

impl fmt::Display for ConfigFileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConfigFileError::Io { path, .. } => write!(f, "cannot use {}", path.display()),
            ConfigFileError::Invalid { path, line, what } => {
                write!(f, "{} line {line}: {what}", path.display())
            }
        }
    }
}

impl std::error::Error for ConfigFileError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ConfigFileError::Io { source, .. } => Some(source),
            ConfigFileError::Invalid { .. } => None,
        }
    }
}

/// The line (from 1) of byte `offset` of `text`.
fn line_of(text: &str, offset: usize) -> usize {
    text.as_bytes()[..offset.min(text.len())]
        .iter()
        .filter(|&&b| b == b'\n')
        .count()
        + 1
}

/// The error of a file that is not TOML, at the line the parser names.
fn not_toml(path: &Path, text: &str, e: &toml_edit::TomlError) -> ConfigFileError {
    ConfigFileError::Invalid {
        path: path.to_path_buf(),
        line: e.span().map_or(1, |s| line_of(text, s.start)),
        what: e.message().trim().to_string(),
    }
}

/// A value as the text a flag would be given.
fn as_text(v: &Value) -> Option<String> {
    Some(match v {
        Value::String(s) => s.value().clone(),
        Value::Integer(i) => i.value().to_string(),
        Value::Float(x) => x.value().to_string(),
        _ => return None,
    })
}

/// Reads the settings of the file at `path`, in the file's order.
pub fn read_config_file(path: &Path) -> Result<Vec<FileSetting>, ConfigFileError> {
    let text = std::fs::read_to_string(path).map_err(|source| ConfigFileError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    let invalid = |line: usize, what: String| ConfigFileError::Invalid {
        path: path.to_path_buf(),
        line,
        what,
    };
    let doc = Document::parse(text.as_str()).map_err(|e| not_toml(path, &text, &e))?;
    let mut out = Vec::new();
    for (key, item) in doc.as_table().iter() {
        let line = doc
            .as_table()
            .key(key)
            .and_then(|k| k.span())
            .map_or(1, |s| line_of(&text, s.start));
        let bad = |what: &str| invalid(line, format!("key '{key}': {what}"));
        let value = match item {
            Item::Value(v) => v,
            _ => return Err(bad("a table is not a setting; write `key = value` lines")),
        };
        let (values, switch) = match value {
            Value::Boolean(b) => (
                if *b.value() {
                    vec![String::new()]
                } else {
                    Vec::new()
                },
                true,
            ),
            Value::Array(a) => {
                let values: Option<Vec<String>> = a.iter().map(as_text).collect();
                (
                    values.ok_or_else(|| bad("an array holds strings and numbers only"))?,
                    false,
                )
            }
            v => (
                vec![as_text(v).ok_or_else(|| bad("not a string, number, boolean or array"))?],
                false,
            ),
        };
        out.push(FileSetting {
            key: key.to_string(),
            values,
            switch,
            line,
        });
    }
    Ok(out)
}

/// Sets `settings` (key and value, as `CONFIG GET` shows them) in the file
/// at `path`, keeping everything else in it, and replaces the file
/// atomically (a new file synced, then renamed over the old one). A
/// value that is a whole number is written as a TOML integer.
pub fn rewrite_config_file(
    path: &Path,
    settings: &[(&str, String)],
) -> Result<(), ConfigFileError> {
    // One rewrite at a time: two would share the temporary file.
    static REWRITING: Mutex<()> = Mutex::new(());
    let _one = REWRITING.lock().unwrap_or_else(|e| e.into_inner());
    let io_err = |source: io::Error| ConfigFileError::Io {
        path: path.to_path_buf(),
        source,
    };
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == io::ErrorKind::NotFound => String::new(),
        Err(e) => return Err(io_err(e)),
    };
    let mut doc: DocumentMut = text
        .parse()
        .map_err(|e: toml_edit::TomlError| not_toml(path, &text, &e))?;
    for (key, value) in settings {
        let v = match value.parse::<i64>() {
            Ok(i) => toml_edit::value(i),
            Err(_) => toml_edit::value(value.as_str()),
        };
        // Keep the decoration (comments, spacing) of a key already there.
        match doc.get_mut(key).and_then(Item::as_value_mut) {
            Some(old) => {
                let decor = old.decor().clone();
                *old = v.into_value().expect("a value");
                *old.decor_mut() = decor;
            }
            None => {
                doc.insert(key, v);
            }
        }
    }
    let tmp = path.with_extension("toml.tmp");
    let write = || -> io::Result<()> {
        use std::io::Write as _;
        // Owner-only until it has the old file's permissions: a file that
        // holds `requirepass` must not become readable by others.
        let mut options = std::fs::OpenOptions::new();
        options.write(true).create(true).truncate(true);
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
        let mut f = options.open(&tmp)?;
        if let Ok(meta) = std::fs::metadata(path) {
            f.set_permissions(meta.permissions())?;
        }
        f.write_all(doc.to_string().as_bytes())?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)?;
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::File::open(dir)?.sync_all()?;
        }
        Ok(())
    };
    write().map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        io_err(e)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_come_with_their_lines() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("seen.toml");
        std::fs::write(
            &path,
            "# a comment\nport = 6380\nfsync = \"always\"\n\nbind = [\"127.0.0.1\", \"::1\"]\nsalvage = true\nmaxmemory = \"8GiB\"\nbf-error-rate = 0.001\n",
        )
        .unwrap();
        let s = read_config_file(&path).unwrap();
        let view: Vec<(&str, Vec<&str>, usize)> = s
            .iter()
            .map(|s| {
                (
                    s.key.as_str(),
                    s.values.iter().map(|v| v.as_str()).collect(),
                    s.line,
                )
            })
            .collect();
        assert_eq!(
            view,
            vec![
                ("port", vec!["6380"], 2),
                ("fsync", vec!["always"], 3),
                ("bind", vec!["127.0.0.1", "::1"], 5),
                ("salvage", vec![""], 6),
                ("maxmemory", vec!["8GiB"], 7),
                ("bf-error-rate", vec!["0.001"], 8),
            ]
        );
        assert!(s[3].switch && !s[0].switch);
    }

    #[test]
    fn bad_files_name_the_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("seen.toml");
        for (text, line, needle) in [
            ("port = 1\nport = 2\n", 2, "duplicate key"),
            (
                "port = 1\n\n[server]\nport = 2\n",
                3,
                "a table is not a setting",
            ),
            ("port = 1\nfsync = always\n", 2, ""),
            ("when = 1979-05-27\n", 1, "not a string, number"),
        ] {
            std::fs::write(&path, text).unwrap();
            let e = read_config_file(&path).unwrap_err();
            let shown = e.to_string();
            assert!(
                shown.contains(&format!("line {line}:")),
                "{text:?}: {shown}"
            );
            assert!(shown.contains(needle), "{text:?}: {shown}");
        }
    }

    #[test]
    fn rewrite_keeps_comments_and_other_keys() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("seen.toml");
        std::fs::write(
            &path,
            "# top\nport = 6380 # the port\nmaxclients = 10 # few\n",
        )
        .unwrap();
        rewrite_config_file(
            &path,
            &[
                ("maxclients", "77".into()),
                ("bf-error-rate", "0.05".into()),
            ],
        )
        .unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(
            text,
            "# top\nport = 6380 # the port\nmaxclients = 77 # few\nbf-error-rate = \"0.05\"\n"
        );
        let again = read_config_file(&path).unwrap();
        assert_eq!(again[1].values, vec!["77"]);
    }
}
