//! The server settings `CONFIG SET` changes while `seen serve` runs,
//! beside RedisBloom's `bf-*` ones ([`crate::bf_config`]): `maxclients`,
//! `timeout`, `maxmemory`, `slowlog-log-slower-than` and
//! `slowlog-max-len`, with Redis's names and value syntax. Every other
//! setting is a flag, fixed while the server runs.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use crate::args::parse_i64;
use crate::config::Config;

/// One of the settings.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ServerSetting {
    /// Most simultaneous clients; more are refused.
    MaxClients,
    /// Seconds a client may stay idle (0: forever).
    Timeout,
    /// Bytes all filters together may use.
    MaxMemory,
    /// Microseconds past which a command goes in the slow log.
    SlowlogLogSlowerThan,
    /// Entries the slow log keeps.
    SlowlogMaxLen,
}

impl ServerSetting {
    const ALL: [ServerSetting; 5] = [
        ServerSetting::MaxClients,
        ServerSetting::Timeout,
        ServerSetting::MaxMemory,
        ServerSetting::SlowlogLogSlowerThan,
        ServerSetting::SlowlogMaxLen,
    ];

    /// Redis's name (also the key of the configuration file).
    pub(crate) fn name(self) -> &'static str {
        match self {
            ServerSetting::MaxClients => "maxclients",
            ServerSetting::Timeout => "timeout",
            ServerSetting::MaxMemory => "maxmemory",
            ServerSetting::SlowlogLogSlowerThan => "slowlog-log-slower-than",
            ServerSetting::SlowlogMaxLen => "slowlog-max-len",
        }
    }

    /// The setting of a name (any case), if it is one.
    pub(crate) fn named(name: &[u8]) -> Option<ServerSetting> {
        Self::ALL
            .into_iter()
            .find(|s| name.eq_ignore_ascii_case(s.name().as_bytes()))
    }

    /// A value as `CONFIG SET` takes it: `maxclients` at least 1,
    /// `timeout` seconds, `maxmemory` bytes with Redis's units (`k` 1000,
    /// `kb` 1024, `m`, `mb`, `g`, `gb`, any case; also `kib`, `mib`,
    /// `gib`, `tib`; 0: no limit), `slowlog-log-slower-than`
    /// microseconds (negative: off), `slowlog-max-len` entries.
    pub(crate) fn parse(self, value: &[u8]) -> Result<i64, String> {
        let n = parse_i64(value);
        match self {
            ServerSetting::MaxClients => match n {
                Some(n) if n >= 1 => Ok(n),
                _ => Err("argument must be an integer of at least 1".into()),
            },
            ServerSetting::Timeout | ServerSetting::SlowlogMaxLen => match n {
                Some(n) if n >= 0 => Ok(n),
                _ => Err("argument must be an integer, 0 or more".into()),
            },
            ServerSetting::MaxMemory => parse_memory(value)
                .and_then(|b| i64::try_from(b).ok())
                .ok_or_else(|| "argument must be a memory value".into()),
            ServerSetting::SlowlogLogSlowerThan => {
                n.ok_or_else(|| "argument must be an integer".into())
            }
        }
    }
}

/// Redis's `memtoull`: digits, then an optional unit.
fn parse_memory(v: &[u8]) -> Option<u64> {
    let split = v
        .iter()
        .position(|b| !b.is_ascii_digit())
        .unwrap_or(v.len());
    let (digits, unit) = v.split_at(split);
    if digits.is_empty() {
        return None;
    }
    let n: u64 = std::str::from_utf8(digits).ok()?.parse().ok()?;
    let mult: u64 = match unit.to_ascii_lowercase().as_slice() {
        b"" | b"b" => 1,
        b"k" => 1000,
        b"kb" => 1024,
        b"m" => 1_000_000,
        b"mb" => 1 << 20,
        b"g" => 1_000_000_000,
        b"gb" | b"gib" => 1 << 30,
        b"kib" => 1 << 10,
        b"mib" => 1 << 20,
        b"tib" => 1 << 40,
        _ => return None,
    };
    n.checked_mul(mult)
}

/// The values of `maxclients` and `timeout` now (`maxmemory` is the
/// store's), and the settings changed since start.
pub(crate) struct Runtime {
    maxclients: AtomicUsize,
    timeout_secs: AtomicU64,
    changed: Mutex<BTreeSet<&'static str>>,
}

impl Runtime {
    /// The values the server started with.
    pub(crate) fn new(config: &Config) -> Runtime {
        Runtime {
            maxclients: AtomicUsize::new(config.maxclients),
            timeout_secs: AtomicU64::new(config.timeout.map_or(0, |t| t.as_secs())),
            changed: Mutex::new(BTreeSet::new()),
        }
    }

    pub(crate) fn maxclients(&self) -> usize {
        self.maxclients.load(Ordering::Relaxed)
    }

    /// How long a client may stay idle (`None`: forever).
    pub(crate) fn timeout(&self) -> Option<Duration> {
        let secs = self.timeout_secs.load(Ordering::Relaxed);
        (secs > 0).then(|| Duration::from_secs(secs))
    }

    /// Sets `maxclients` or `timeout` (a value [`ServerSetting::parse`]
    /// took; `maxmemory` goes to the store, the slow log's to the log).
    pub(crate) fn set(&self, setting: ServerSetting, value: i64) {
        let value = u64::try_from(value).unwrap_or(0);
        match setting {
            ServerSetting::MaxClients => {
                let n = usize::try_from(value).unwrap_or(usize::MAX);
                self.maxclients.store(n, Ordering::Relaxed);
            }
            ServerSetting::Timeout => self.timeout_secs.store(value, Ordering::Relaxed),
            _ => {}
        }
    }

    /// Notes that `CONFIG SET` changed the setting `name`.
    pub(crate) fn mark_changed(&self, name: &'static str) {
        self.changed
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(name);
    }

    /// The settings `CONFIG SET` changed since start, for `CONFIG
    /// REWRITE`.
    pub(crate) fn changed(&self) -> Vec<&'static str> {
        let changed = self.changed.lock().unwrap_or_else(|e| e.into_inner());
        changed.iter().copied().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_as_redis_takes_them() {
        let mem = |v: &str| ServerSetting::MaxMemory.parse(v.as_bytes());
        assert_eq!(mem("100"), Ok(100));
        assert_eq!(mem("1k"), Ok(1000));
        assert_eq!(mem("1KB"), Ok(1024));
        assert_eq!(mem("2gb"), Ok(2 << 30));
        assert_eq!(mem("3m"), Ok(3_000_000));
        assert_eq!(mem("8GiB"), Ok(8 << 30));
        assert_eq!(ServerSetting::SlowlogLogSlowerThan.parse(b"-1"), Ok(-1));
        for bad in [
            "",
            "gb",
            "1.5gb",
            "-1",
            "1tb",
            "99999999999999999999",
            "18446744073709551615gb",
        ] {
            assert!(mem(bad).is_err(), "{bad}");
        }
        assert_eq!(ServerSetting::MaxClients.parse(b"10"), Ok(10));
        assert!(ServerSetting::MaxClients.parse(b"0").is_err());
        assert_eq!(ServerSetting::Timeout.parse(b"0"), Ok(0));
        assert!(ServerSetting::Timeout.parse(b"-1").is_err());
        assert_eq!(
            ServerSetting::named(b"MAXMEMORY"),
            Some(ServerSetting::MaxMemory)
        );
    }
}
