//! Where the filter lives: one Redis server or a Redis Cluster, from a URL.
//!
//! * `redis://[[user]:password@]host[:port][/db]`: a standalone server (or a
//!   Valkey, or a managed service's primary endpoint). Anything the `redis`
//!   crate accepts, including `redis+unix:///path/to/socket` and
//!   `unix:///path/to/socket`.
//! * `redis+cluster://[[user]:password@]host[:port][,host[:port]...]`: a
//!   Redis Cluster, given by one or more of its nodes (the client discovers
//!   the others). Credentials apply to every node; no database number (a
//!   Cluster has only database 0). IPv6 addresses go in brackets:
//!   `redis+cluster://[::1]:7000,[::1]:7001`.
//!
//! The default port is 6379. TLS (`rediss://`) is not enabled in this build.

use std::fmt;
use std::str::FromStr;

use redis::{ConnectionInfo, IntoConnectionInfo};

use crate::error::{Error, ErrorKind, Result};

/// A Redis deployment to keep filters in, parsed from a URL.
///
/// ```
/// use seen_redis::Target;
///
/// let single: Target = "redis://127.0.0.1:6379/2".parse()?;
/// assert!(!single.is_cluster());
///
/// let cluster: Target = "redis+cluster://:secret@10.0.0.1:7000,10.0.0.2:7000".parse()?;
/// assert!(cluster.is_cluster());
/// // The password never appears in messages.
/// assert_eq!(cluster.to_string(), "redis+cluster://:***@10.0.0.1:7000,10.0.0.2:7000");
/// # Ok::<(), seen_redis::Error>(())
/// ```
#[derive(Clone, Debug)]
pub struct Target {
    kind: TargetKind,
    shown: String,
}

#[derive(Clone, Debug)]
pub(crate) enum TargetKind {
    Standalone(ConnectionInfo),
    Cluster(Vec<ConnectionInfo>),
}

impl Target {
    /// Parses a `redis://` or `redis+cluster://` URL (see the module docs).
    pub fn parse(url: &str) -> Result<Target> {
        let shown = redact(url);
        let invalid = |reason: String| -> Error {
            ErrorKind::InvalidUrl {
                url: shown.clone(),
                reason,
            }
            .into()
        };
        let (scheme, rest) = url
            .split_once("://")
            .ok_or_else(|| invalid("no scheme: expected redis:// or redis+cluster://".into()))?;
        let kind = match scheme.to_ascii_lowercase().as_str() {
            "redis" | "redis+unix" | "unix" => {
                let info = url
                    .into_connection_info()
                    .map_err(|e| invalid(e.to_string()))?;
                TargetKind::Standalone(info)
            }
            "redis+cluster" => TargetKind::Cluster(parse_cluster(rest).map_err(invalid)?),
            "rediss" | "rediss+cluster" => {
                return Err(invalid("TLS is not enabled in this build of seen".into()))
            }
            other => {
                return Err(invalid(format!(
                    "unknown scheme {other:?}: expected redis:// or redis+cluster://"
                )))
            }
        };
        Ok(Target { kind, shown })
    }

    /// A standalone server from anything the `redis` crate accepts as
    /// connection information.
    pub fn standalone(info: impl IntoConnectionInfo) -> Result<Target> {
        let info = info.into_connection_info().map_err(ErrorKind::Client)?;
        let shown = format!("redis://{}", info.addr());
        Ok(Target {
            kind: TargetKind::Standalone(info),
            shown,
        })
    }

    /// A Cluster from some of its nodes.
    pub fn cluster<I, T>(nodes: I) -> Result<Target>
    where
        I: IntoIterator<Item = T>,
        T: IntoConnectionInfo,
    {
        let nodes = nodes
            .into_iter()
            .map(|n| n.into_connection_info())
            .collect::<redis::RedisResult<Vec<_>>>()
            .map_err(ErrorKind::Client)?;
        if nodes.is_empty() {
            return Err(ErrorKind::InvalidUrl {
                url: String::new(),
                reason: "a cluster needs at least one node".into(),
            }
            .into());
        }
        let shown = format!(
            "redis+cluster://{}",
            nodes
                .iter()
                .map(|n| n.addr().to_string())
                .collect::<Vec<_>>()
                .join(",")
        );
        Ok(Target {
            kind: TargetKind::Cluster(nodes),
            shown,
        })
    }

    /// Whether this is a Redis Cluster.
    pub fn is_cluster(&self) -> bool {
        matches!(self.kind, TargetKind::Cluster(_))
    }

    pub(crate) fn kind(&self) -> &TargetKind {
        &self.kind
    }
}

impl FromStr for Target {
    type Err = Error;
    fn from_str(s: &str) -> Result<Target> {
        Target::parse(s)
    }
}

/// The URL with its password, if any, shown as `***`.
impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.shown)
    }
}

/// Splits `[userinfo@]hosts[/path]` of a cluster URL into node infos.
fn parse_cluster(rest: &str) -> std::result::Result<Vec<ConnectionInfo>, String> {
    let (authority, path) = match rest.find(['/', '?', '#']) {
        Some(i) => rest.split_at(i),
        None => (rest, ""),
    };
    if !matches!(path, "" | "/" | "/0") {
        return Err(format!(
            "{path:?} after the hosts: a cluster URL takes no database or options \
             (a Redis Cluster has only database 0)"
        ));
    }
    let (userinfo, hosts) = match authority.rfind('@') {
        Some(i) => (Some(&authority[..i]), &authority[i + 1..]),
        None => (None, authority),
    };
    let mut nodes = Vec::new();
    for host in hosts.split(',') {
        if host.is_empty() {
            return Err("empty host in the node list".into());
        }
        let has_port = match host.rfind(']') {
            Some(close) => host[close..].contains(':'),
            None => host.contains(':'),
        };
        let mut node = String::from("redis://");
        if let Some(u) = userinfo {
            node.push_str(u);
            node.push('@');
        }
        node.push_str(host);
        if !has_port {
            node.push_str(":6379");
        }
        let info = node
            .as_str()
            .into_connection_info()
            .map_err(|e| format!("node {host:?}: {e}"))?;
        nodes.push(info);
    }
    Ok(nodes)
}

/// Replaces the password of a URL's userinfo by `***`.
fn redact(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_string();
    };
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let authority = &rest[..end];
    let Some(at) = authority.rfind('@') else {
        return url.to_string();
    };
    let userinfo = &authority[..at];
    let user = match userinfo.split_once(':') {
        Some((user, _password)) => format!("{user}:***"),
        None => userinfo.to_string(),
    };
    format!("{scheme}://{user}{}", &rest[at..])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn standalone_urls() {
        for url in [
            "redis://127.0.0.1:6379",
            "redis://localhost",
            "redis://user:pw@host:1234/3",
            "redis+unix:///tmp/redis.sock",
        ] {
            let t = Target::parse(url).unwrap();
            assert!(!t.is_cluster(), "{url}");
        }
    }

    #[test]
    fn cluster_urls() {
        let t = Target::parse("redis+cluster://a:7000,b,[::1]:7002").unwrap();
        let TargetKind::Cluster(nodes) = t.kind() else {
            panic!("not a cluster")
        };
        let addrs: Vec<String> = nodes.iter().map(|n| n.addr().to_string()).collect();
        assert_eq!(addrs.len(), 3);
        assert!(
            addrs[0].contains("7000") && addrs[1].contains("6379"),
            "{addrs:?}"
        );
        let t = Target::parse("redis+cluster://u:p@h:1/").unwrap();
        let TargetKind::Cluster(nodes) = t.kind() else {
            panic!("not a cluster")
        };
        assert_eq!(nodes[0].redis_settings().password(), Some("p"));
        assert_eq!(nodes[0].redis_settings().username(), Some("u"));
    }

    #[test]
    fn bad_urls_are_errors_without_passwords() {
        for (url, needle) in [
            ("127.0.0.1:6379", "no scheme"),
            ("http://x", "unknown scheme"),
            ("rediss://x", "TLS"),
            ("redis+cluster://:hunter2@a:1,,b:2", "empty host"),
            ("redis+cluster://:hunter2@a:1/2", "database"),
            ("redis+cluster://:hunter2@a:notaport", "node"),
            ("redis://:hunter2@a:99999", "hunter"),
        ] {
            let e = Target::parse(url).unwrap_err();
            let msg = e.to_string();
            if needle == "hunter" {
                assert!(!msg.contains("hunter2"), "{url}: {msg}");
                continue;
            }
            assert!(msg.contains(needle), "{url}: {msg}");
            assert!(!msg.contains("hunter2"), "{url}: {msg}");
            assert!(matches!(e.kind(), ErrorKind::InvalidUrl { .. }));
        }
    }

    #[test]
    fn redaction() {
        assert_eq!(redact("redis://u:pw@h:1/0"), "redis://u:***@h:1/0");
        assert_eq!(redact("redis://:pw@h"), "redis://:***@h");
        assert_eq!(redact("redis://u@h"), "redis://u@h");
        assert_eq!(redact("redis://h:1"), "redis://h:1");
        assert_eq!(redact("no scheme"), "no scheme");
        assert_eq!(redact("redis://u:p@ss@h"), "redis://u:***@h");
    }
}
