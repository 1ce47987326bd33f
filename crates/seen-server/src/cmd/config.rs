//! `CONFIG`: `GET` the settings as Redis and RedisBloom name them, `SET`
//! those that can change while the server runs, `REWRITE` them into the
//! configuration file, `RESETSTAT` the counters.

use bytes::Bytes;
use seen_resp::Reply;

use super::context::Ctx;
use super::replies::wrong_arity;
use crate::args::is;
use crate::bf_config::BfSetting;
use crate::blocking::blocking;
use crate::config_file::rewrite_config_file;
use crate::glob;
use crate::runtime::ServerSetting;

/// The settings `CONFIG GET` reports, as Redis and RedisBloom name them.
fn config_values(ctx: &Ctx<'_>) -> Vec<(&'static str, String)> {
    let c = &ctx.shared.config;
    let rt = &ctx.shared.runtime;
    let bf = ctx.shared.bf_defaults();
    vec![
        (
            "bind",
            c.bind
                .iter()
                .map(|a| a.to_string())
                .collect::<Vec<_>>()
                .join(" "),
        ),
        ("port", ctx.shared.port.to_string()),
        ("dir", c.dir.display().to_string()),
        ("databases", "1".into()),
        ("appendonly", "yes".into()),
        ("appendfsync", c.fsync.name().into()),
        ("save", "".into()),
        ("maxclients", rt.maxclients().to_string()),
        (
            "maxmemory",
            match ctx.shared.store.max_memory() {
                u64::MAX => "0".to_string(),
                limit => limit.to_string(),
            },
        ),
        ("maxmemory-policy", "noeviction".into()),
        ("proto-max-bulk-len", c.proto_max_bulk_len.to_string()),
        (
            "client-query-buffer-limit",
            c.client_query_buffer_limit.to_string(),
        ),
        (
            "timeout",
            rt.timeout().map_or(0, |t| t.as_secs()).to_string(),
        ),
        ("requirepass", c.requirepass.clone().unwrap_or_default()),
        ("protected-mode", "no".into()),
        ("cluster-enabled", "no".into()),
        // seen's own flags, by their names.
        ("max-filter-bytes", c.max_filter_bytes.to_string()),
        (
            "save-interval",
            c.save_interval.map_or(0, |t| t.as_secs()).to_string(),
        ),
        ("save-log-size", c.save_log_size.unwrap_or(0).to_string()),
        ("salvage", if c.salvage { "yes" } else { "no" }.into()),
        ("threads", c.threads.to_string()),
        (
            "slowlog-log-slower-than",
            ctx.shared.slowlog.slower_than_us().to_string(),
        ),
        ("slowlog-max-len", ctx.shared.slowlog.max_len().to_string()),
        (
            "metrics",
            c.metrics.map_or(String::new(), |a| a.to_string()),
        ),
        ("metrics-max-filters", c.metrics_max_filters.to_string()),
    ]
    .into_iter()
    .chain(BfSetting::ALL.map(|s| (s.name(), bf.text(s).to_string())))
    .collect()
}

/// A change `CONFIG SET` asks for, checked.
enum Change {
    /// A `bf-*` setting (applied with the others in one step).
    Bf,
    Server(ServerSetting, i64),
}

/// `CONFIG SET name value [name value ...]`: the `bf-*` settings,
/// `maxclients`, `timeout`, `maxmemory` and the slow log's two, all or none
/// (Redis's rule); every other setting is seen's flag, fixed while it
/// runs.
fn config_set(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Reply {
    if args.len() < 4 || !args.len().is_multiple_of(2) {
        return wrong_arity("config|set");
    }
    let failed = |name: &[u8], why: &str| {
        Reply::error(format!(
            "ERR CONFIG SET failed (possibly related to argument '{}') - {why}",
            String::from_utf8_lossy(name)
        ))
    };
    let known: Vec<&str> = config_values(ctx).into_iter().map(|(n, _)| n).collect();
    let mut bf = ctx.shared.bf.lock().unwrap_or_else(|e| e.into_inner());
    let mut next_bf = bf.clone();
    let mut changes: Vec<(&'static str, Change)> = Vec::new();
    let mut seen_names: Vec<&[u8]> = Vec::new();
    for pair in args[2..].chunks(2) {
        let (name, value) = (&pair[0][..], &pair[1][..]);
        if seen_names.iter().any(|n| n.eq_ignore_ascii_case(name)) {
            return failed(name, "duplicate parameter");
        }
        seen_names.push(name);
        if let Some(which) = BfSetting::named(name) {
            if let Err(why) = next_bf.set(which, value) {
                return failed(which.name().as_bytes(), &why);
            }
            changes.push((which.name(), Change::Bf));
        } else if let Some(which) = ServerSetting::named(name) {
            match which.parse(value) {
                Ok(v) => changes.push((which.name(), Change::Server(which, v))),
                Err(why) => return failed(which.name().as_bytes(), &why),
            }
        } else if known
            .iter()
            .any(|k| k.as_bytes().eq_ignore_ascii_case(name))
        {
            return failed(
                name,
                "seen cannot change it while running: restart `seen serve` with its flag",
            );
        } else {
            return Reply::error(format!(
                "ERR Unknown option or number of arguments for CONFIG SET - '{}'",
                String::from_utf8_lossy(name)
            ));
        }
    }
    let shared = ctx.shared;
    for (name, change) in changes {
        match change {
            Change::Bf => {}
            // 0: no limit, as in Redis.
            Change::Server(ServerSetting::MaxMemory, 0) => shared.store.set_max_memory(u64::MAX),
            Change::Server(ServerSetting::MaxMemory, v) => shared
                .store
                .set_max_memory(u64::try_from(v).unwrap_or(u64::MAX)),
            Change::Server(ServerSetting::SlowlogLogSlowerThan, v) => {
                shared.slowlog.set_slower_than_us(v)
            }
            Change::Server(ServerSetting::SlowlogMaxLen, v) => shared
                .slowlog
                .set_max_len(usize::try_from(v).unwrap_or(usize::MAX)),
            Change::Server(ServerSetting::Timeout, v) => {
                shared.runtime.set(ServerSetting::Timeout, v);
                // Clients waiting for input look at the new timeout now.
                shared.clients.all().iter().for_each(|c| c.wake());
            }
            Change::Server(which, v) => shared.runtime.set(which, v),
        }
        shared.runtime.mark_changed(name);
    }
    *bf = next_bf;
    Reply::ok()
}

/// `CONFIG REWRITE`: the settings `CONFIG SET` changed since start, written
/// into the `--config` file with their values now (the file's comments
/// and other keys kept).
fn config_rewrite(ctx: &mut Ctx<'_>) -> Reply {
    let Some(path) = ctx.shared.config.config_file.clone() else {
        return Reply::error("ERR The server is running without a config file");
    };
    let changed = ctx.shared.runtime.changed();
    let values: Vec<(&str, String)> = config_values(ctx)
        .into_iter()
        .filter(|(name, _)| changed.contains(name))
        .collect();
    match blocking(|| rewrite_config_file(&path, &values)) {
        Ok(()) => {
            tracing::info!(file = %path.display(), "CONFIG REWRITE wrote {} setting(s)", values.len());
            Reply::ok()
        }
        Err(e) => {
            let cause = std::error::Error::source(&e).map_or(String::new(), |s| format!(": {s}"));
            tracing::warn!("CONFIG REWRITE failed: {e}{cause}");
            Reply::error(format!("ERR Rewriting config file: {e}{cause}"))
        }
    }
}

pub(crate) fn config(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Reply {
    let sub = &args[1];
    if is(sub, "get") {
        if args.len() < 3 {
            return wrong_arity("config|get");
        }
        let values = config_values(ctx);
        let mut out = Vec::new();
        for (name, value) in values {
            if args[2..]
                .iter()
                .any(|p| glob::matches(p, name.as_bytes(), true))
            {
                out.push((Reply::bulk(name), Reply::bulk(value)));
            }
        }
        Reply::Map(out)
    } else if is(sub, "resetstat") {
        ctx.shared.stats.reset();
        Reply::ok()
    } else if is(sub, "set") {
        config_set(ctx, args)
    } else if is(sub, "rewrite") {
        config_rewrite(ctx)
    } else {
        Reply::error(format!(
            "ERR unknown subcommand '{}'. Try CONFIG HELP.",
            String::from_utf8_lossy(sub)
        ))
    }
}
