//! `INFO`, in Redis 7's sections and field names, so that tools written for
//! Redis (redis-cli, the Prometheus exporter for Redis) read it.

use std::fmt::Write as _;
use std::sync::atomic::Ordering;
use std::time::Duration;

use bytes::Bytes;
use seen_resp::Reply;
use seen_store::FsyncPolicy;

use super::context::Ctx;
use super::identity::{BF_MODULE_VERSION, REDIS_VERSION};
use crate::args::is;
use crate::health::{filter_health, FilterHealth};
use crate::state::Shared;

/// A section of `INFO`, in Redis 7's order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Section {
    Server,
    Clients,
    Memory,
    Persistence,
    Stats,
    Replication,
    Cpu,
    Modules,
    Commandstats,
    Errorstats,
    Latencystats,
    Cluster,
    Keyspace,
    /// seen's own: every filter's health.
    Seen,
}

impl Section {
    const ALL: [Section; 14] = [
        Section::Server,
        Section::Clients,
        Section::Memory,
        Section::Persistence,
        Section::Stats,
        Section::Replication,
        Section::Cpu,
        Section::Modules,
        Section::Commandstats,
        Section::Errorstats,
        Section::Latencystats,
        Section::Cluster,
        Section::Keyspace,
        Section::Seen,
    ];

    fn name(self) -> &'static str {
        match self {
            Section::Server => "server",
            Section::Clients => "clients",
            Section::Memory => "memory",
            Section::Persistence => "persistence",
            Section::Stats => "stats",
            Section::Replication => "replication",
            Section::Cpu => "cpu",
            Section::Modules => "modules",
            Section::Commandstats => "commandstats",
            Section::Errorstats => "errorstats",
            Section::Latencystats => "latencystats",
            Section::Cluster => "cluster",
            Section::Keyspace => "keyspace",
            Section::Seen => "seen",
        }
    }

    /// In a bare `INFO` (Redis leaves the per-command sections out).
    fn is_default(self) -> bool {
        !matches!(
            self,
            Section::Commandstats | Section::Latencystats | Section::Seen
        )
    }

    /// In `INFO all`: every section but seen's, which walks every filter's
    /// bits (the Prometheus exporter asks for `all` on every scrape).
    fn is_in_all(self) -> bool {
        self != Section::Seen
    }
}

/// The sections `INFO args...` asks for: none, `default`: the default
/// ones; `all`: all but `seen`; `everything`: every one; otherwise those
/// named.
fn wanted(args: &[Bytes]) -> Vec<Section> {
    let everything = args.iter().any(|a| is(a, "everything"));
    let all = args.iter().any(|a| is(a, "all"));
    let default = args.is_empty() || args.iter().any(|a| is(a, "default"));
    Section::ALL
        .into_iter()
        .filter(|s| {
            everything
                || (all && s.is_in_all())
                || (default && s.is_default())
                || args.iter().any(|a| is(a, s.name()))
        })
        .collect()
}

pub(crate) fn info(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Reply {
    let sh = ctx.shared;
    let mut out = String::new();
    for section in wanted(&args[1..]) {
        let title = match section {
            Section::Cpu => "CPU".to_string(),
            s => {
                let n = s.name();
                n[..1].to_uppercase() + &n[1..]
            }
        };
        let _ = write!(out, "# {title}\r\n");
        write_section(&mut out, sh, section);
        out.push_str("\r\n");
    }
    while out.ends_with("\r\n\r\n") {
        out.truncate(out.len() - 2);
    }
    Reply::verbatim_text(out)
}

fn write_section(out: &mut String, sh: &Shared, section: Section) {
    let c = &sh.config;
    let s = &sh.stats;
    let uptime = sh.started.elapsed().as_secs();
    let _ = match section {
        Section::Server => write!(
            out,
            "redis_version:{REDIS_VERSION}\r\nseen_version:{}\r\nredis_mode:standalone\r\nos:{}\r\narch_bits:64\r\nprocess_id:{}\r\ntcp_port:{}\r\nuptime_in_seconds:{uptime}\r\nuptime_in_days:{}\r\nexecutable:seen\r\nconfig_file:{}\r\n",
            env!("CARGO_PKG_VERSION"),
            std::env::consts::OS,
            std::process::id(),
            sh.port,
            uptime / 86400,
            c.config_file.as_ref().map_or(String::new(), |p| p.display().to_string()),
        ),
        Section::Clients => write!(
            out,
            "connected_clients:{}\r\nmaxclients:{}\r\nblocked_clients:0\r\n",
            sh.connected.load(Ordering::Relaxed),
            sh.runtime.maxclients()
        ),
        Section::Memory => {
            let used = sh.store.memory_bytes();
            write!(
                out,
                "used_memory:{used}\r\nused_memory_human:{}\r\nused_memory_rss:{}\r\nmaxmemory:{}\r\nmaxmemory_policy:noeviction\r\nmax_filter_bytes:{}\r\n",
                human(used),
                rss_bytes(),
                sh.store.max_memory(),
                c.max_filter_bytes,
            )
        }
        Section::Persistence => write!(
            out,
            "loading:0\r\nrdb_changes_since_last_save:{}\r\nrdb_bgsave_in_progress:{}\r\nrdb_last_save_time:{}\r\nrdb_last_bgsave_status:{}\r\naof_enabled:1\r\naof_rewrite_in_progress:0\r\naof_last_write_status:{}\r\nappendfsync:{}\r\nseen_log_bytes:{}\r\n{}dir:{}\r\n",
            sh.dirty.load(Ordering::Relaxed),
            u8::from(sh.bgsave_in_progress.load(Ordering::Relaxed)),
            sh.lastsave.load(Ordering::Relaxed),
            if sh.last_bgsave_ok.load(Ordering::Relaxed) { "ok" } else { "err" },
            if sh.store.log_failed() { "err" } else { "ok" },
            c.fsync.name(),
            sh.store.log_bytes(),
            // How far back a power loss now could reach: under `always`
            // nothing acknowledged, under `no` unknown (no field).
            match (c.fsync, sh.store.unsynced_for()) {
                (_, Some(d)) => format!("seen_unsynced_ms:{}\r\n", d.as_millis()),
                (FsyncPolicy::Always, None) => "seen_unsynced_ms:0\r\n".to_string(),
                _ => String::new(),
            },
            c.dir.display(),
        ),
        Section::Stats => write!(
            out,
            "total_connections_received:{}\r\ntotal_commands_processed:{}\r\ninstantaneous_ops_per_sec:{}\r\ntotal_net_input_bytes:{}\r\ntotal_net_output_bytes:{}\r\nrejected_connections:{}\r\nkeyspace_hits:{}\r\nkeyspace_misses:{}\r\ntotal_error_replies:{}\r\n",
            s.connections.load(Ordering::Relaxed),
            s.processed.load(Ordering::Relaxed),
            s.ops_per_sec(),
            s.net_input.load(Ordering::Relaxed),
            s.net_output.load(Ordering::Relaxed),
            s.rejected_connections.load(Ordering::Relaxed),
            s.hits.load(Ordering::Relaxed),
            s.misses.load(Ordering::Relaxed),
            s.error_replies.load(Ordering::Relaxed),
        ),
        Section::Replication => write!(out, "role:master\r\nconnected_slaves:0\r\n"),
        Section::Cpu => {
            let (sys, user) = cpu_seconds();
            write!(out, "used_cpu_sys:{sys:.6}\r\nused_cpu_user:{user:.6}\r\n")
        }
        Section::Modules => write!(
            out,
            "module:name=bf,ver={BF_MODULE_VERSION},api=1,filters=0,usedby=[],using=[],options=[]\r\n"
        ),
        Section::Commandstats => {
            for r in s.commands() {
                let usec = r.time.as_micros();
                let per_call = usec as f64 / r.calls.max(1) as f64;
                let _ = write!(
                    out,
                    "cmdstat_{}:calls={},usec={usec},usec_per_call={per_call:.2},rejected_calls={},failed_calls={}\r\n",
                    r.name, r.calls, r.rejected, r.failed
                );
            }
            Ok(())
        }
        Section::Errorstats => {
            for (prefix, count) in s.errors() {
                let _ = write!(out, "errorstat_{prefix}:count={count}\r\n");
            }
            Ok(())
        }
        Section::Latencystats => {
            for r in s.commands().iter().filter(|r| r.calls > 0) {
                let Some([p50, p99, p999]) = r.latency.quantiles([0.5, 0.99, 0.999]) else {
                    continue;
                };
                let us = |d: Duration| d.as_nanos() as f64 / 1000.0;
                let _ = write!(
                    out,
                    "latency_percentiles_usec_{}:p50={:.3},p99={:.3},p99.9={:.3}\r\n",
                    r.name,
                    us(p50),
                    us(p99),
                    us(p999)
                );
            }
            Ok(())
        }
        Section::Cluster => write!(out, "cluster_enabled:0\r\n"),
        Section::Seen => {
            write_health(out, sh);
            Ok(())
        }
        Section::Keyspace => {
            let names = sh.store.names();
            if !names.is_empty() {
                let expires = names
                    .iter()
                    .filter(|n| matches!(sh.store.expires_at(n), Ok(Some(Some(_)))))
                    .count();
                let _ = write!(
                    out,
                    "db0:keys={},expires={expires},avg_ttl=0\r\n",
                    names.len()
                );
            }
            Ok(())
        }
    };
}

/// Most filters `INFO seen` lists one by one (by name order); the totals
/// count them all.
const MAX_LISTED_FILTERS: usize = 100;

/// `INFO seen`: every filter's health, from one pass over its bits:
/// totals, then a line per filter.
fn write_health(out: &mut String, sh: &Shared) {
    let health = filter_health(&sh.store);
    let total = |f: fn(&FilterHealth) -> u64| health.iter().map(f).fold(0u64, u64::saturating_add);
    let listed = &health[..health.len().min(MAX_LISTED_FILTERS)];
    let _ = write!(
        out,
        "filters:{}\r\nfilters_over_capacity:{}\r\nitems:{}\r\nbits:{}\r\nbits_set:{}\r\nfilters_listed:{}\r\n",
        health.len(),
        total(|h| u64::from(h.over_capacity)),
        total(|h| h.stats.items),
        total(|h| h.stats.bits),
        total(|h| h.stats.bits_set),
        listed.len(),
    );
    for h in listed {
        let s = &h.stats;
        let _ = write!(
            out,
            "filter:name={},kind={},items={},capacity={},bits={},fill_ratio={:.6},estimated_items={:.0},error_rate={},error_rate_now={:.6e},over_capacity={}\r\n",
            escaped(&h.name),
            format!("{:?}", h.kind).to_lowercase(),
            s.items,
            s.capacity,
            s.bits,
            s.fill_ratio,
            s.estimated_items,
            s.error_rate,
            s.current_fpp,
            u8::from(h.over_capacity),
        );
    }
}

/// A filter name on one `INFO` line: printable ASCII as is, but for the
/// separators; those and every other byte as `\xHH`.
fn escaped(name: &[u8]) -> String {
    let mut s = String::new();
    for &b in name {
        if b.is_ascii_graphic() && !b",=:\\".contains(&b) {
            s.push(b as char);
        } else {
            let _ = write!(s, "\\x{b:02x}");
        }
    }
    s
}

/// The process's resident memory, from `/proc/self/statm` (0 elsewhere).
fn rss_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| s.split_whitespace().nth(1)?.parse::<u64>().ok())
        .map_or(0, |pages| pages * 4096)
}

/// CPU time the process has spent in the kernel and in user space, in
/// seconds.
fn cpu_seconds() -> (f64, f64) {
    // SAFETY: getrusage fills the struct it is given and reads nothing
    // else; a zeroed rusage is a valid value of the type.
    let usage = unsafe {
        let mut u: libc::rusage = std::mem::zeroed();
        if libc::getrusage(libc::RUSAGE_SELF, &mut u) != 0 {
            return (0.0, 0.0);
        }
        u
    };
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    (secs(usage.ru_stime), secs(usage.ru_utime))
}

/// Redis's `used_memory_human`: two decimals and a unit letter.
fn human(b: u64) -> String {
    const U: [&str; 5] = ["B", "K", "M", "G", "T"];
    let mut v = b as f64;
    let mut i = 0;
    while v >= 1024.0 && i < U.len() - 1 {
        v /= 1024.0;
        i += 1;
    }
    format!("{v:.2}{}", U[i])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sections_asked_for_as_redis_7_takes_them() {
        let b = |v: &[&str]| {
            v.iter()
                .map(|s| Bytes::from(s.to_string()))
                .collect::<Vec<_>>()
        };
        let default = wanted(&[]);
        assert!(default.contains(&Section::Errorstats));
        assert!(!default.contains(&Section::Commandstats));
        assert_eq!(wanted(&b(&["default"])), default);
        assert_eq!(wanted(&b(&["ALL"])).len(), Section::ALL.len() - 1);
        assert_eq!(wanted(&b(&["everything"])).len(), Section::ALL.len());
        assert_eq!(wanted(&b(&["seen"])), vec![Section::Seen]);
        assert_eq!(
            wanted(&b(&["keyspace", "Commandstats"])),
            vec![Section::Commandstats, Section::Keyspace]
        );
        assert!(wanted(&b(&["nonsense"])).is_empty());
    }

    #[test]
    fn filter_names_stay_on_their_line() {
        assert_eq!(escaped(b"urls:2026"), "urls\\x3a2026");
        assert_eq!(
            escaped(b"a b,c=d\r\n\xff"),
            "a\\x20b\\x2cc\\x3dd\\x0d\\x0a\\xff"
        );
        assert_eq!(escaped(b"plain-name_1"), "plain-name_1");
    }
}
