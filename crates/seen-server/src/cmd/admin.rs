//! Commands that run the server: `CONFIG`, `INFO`, `MODULE`, `SAVE`,
//! `BGSAVE`, `LASTSAVE`, `SHUTDOWN`.

use std::fmt::Write as _;
use std::sync::atomic::Ordering;

use bytes::Bytes;
use seen_resp::Reply;
use seen_store::FsyncPolicy;

use super::context::Ctx;
use super::identity::{bf_module, REDIS_VERSION};
use super::replies::{store_error, syntax_error, wrong_arity};
use crate::args::is;
use crate::bf_config::BfSetting;
use crate::blocking::blocking;
use crate::glob;

/// The settings `CONFIG GET` reports, as Redis and RedisBloom name them.
fn config_values(ctx: &Ctx<'_>) -> Vec<(&'static str, String)> {
    let c = &ctx.shared.config;
    let bf = ctx.shared.bf_defaults();
    let fsync = match c.fsync {
        FsyncPolicy::Always => "always",
        FsyncPolicy::EverySec => "everysec",
        FsyncPolicy::No => "no",
    };
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
        ("appendfsync", fsync.into()),
        ("save", "".into()),
        ("maxclients", c.maxclients.to_string()),
        ("maxmemory", c.maxmemory.to_string()),
        ("maxmemory-policy", "noeviction".into()),
        ("proto-max-bulk-len", c.proto_max_bulk_len.to_string()),
        (
            "client-query-buffer-limit",
            c.client_query_buffer_limit.to_string(),
        ),
        ("timeout", c.timeout.map_or(0, |t| t.as_secs()).to_string()),
        ("requirepass", c.requirepass.clone().unwrap_or_default()),
        ("protected-mode", "no".into()),
        ("cluster-enabled", "no".into()),
    ]
    .into_iter()
    .chain(BfSetting::ALL.map(|s| (s.name(), bf.text(s).to_string())))
    .collect()
}

/// `CONFIG SET name value [name value ...]`: the `bf-*` settings, all or
/// none (Redis's rule); every other setting is seen's flag, fixed while
/// it runs.
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
    let mut now = ctx.shared.bf.lock().unwrap_or_else(|e| e.into_inner());
    let mut next = now.clone();
    let mut seen_names: Vec<&[u8]> = Vec::new();
    for pair in args[2..].chunks(2) {
        let (name, value) = (&pair[0][..], &pair[1][..]);
        if seen_names.iter().any(|n| n.eq_ignore_ascii_case(name)) {
            return failed(name, "duplicate parameter");
        }
        seen_names.push(name);
        match BfSetting::named(name) {
            Some(which) => {
                if let Err(why) = next.set(which, value) {
                    return failed(which.name().as_bytes(), &why);
                }
            }
            None if known
                .iter()
                .any(|k| k.as_bytes().eq_ignore_ascii_case(name)) =>
            {
                return failed(
                    name,
                    "seen cannot change it while running: restart `seen serve` with its flag",
                );
            }
            None => {
                return Reply::error(format!(
                    "ERR Unknown option or number of arguments for CONFIG SET - '{}'",
                    String::from_utf8_lossy(name)
                ))
            }
        }
    }
    *now = next;
    Reply::ok()
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
        let s = &ctx.shared.stats;
        for c in [
            &s.commands,
            &s.connections,
            &s.rejected,
            &s.errors,
            &s.hits,
            &s.misses,
        ] {
            c.store(0, Ordering::Relaxed);
        }
        Reply::ok()
    } else if is(sub, "set") {
        config_set(ctx, args)
    } else {
        Reply::error(format!(
            "ERR unknown subcommand '{}'. Try CONFIG HELP.",
            String::from_utf8_lossy(sub)
        ))
    }
}

pub(crate) fn module(_ctx: &mut Ctx<'_>, args: &[Bytes]) -> Reply {
    if is(&args[1], "list") {
        Reply::Array(vec![bf_module()])
    } else {
        Reply::error(format!(
            "ERR unknown subcommand '{}'. Try MODULE HELP.",
            String::from_utf8_lossy(&args[1])
        ))
    }
}

fn rss_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| s.split_whitespace().nth(1)?.parse::<u64>().ok())
        .map_or(0, |pages| pages * 4096)
}

pub(crate) fn info(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Reply {
    let all = args.len() == 1
        || args[1..]
            .iter()
            .any(|a| is(a, "all") || is(a, "everything") || is(a, "default"));
    let want = |s: &str| all || args[1..].iter().any(|a| is(a, s));
    let sh = ctx.shared;
    let c = &sh.config;
    let mut out = String::new();
    if want("server") {
        let _ = write!(
            out,
            "# Server\r\nredis_version:{}\r\nseen_version:{}\r\nredis_mode:standalone\r\nos:{}\r\narch_bits:64\r\nprocess_id:{}\r\ntcp_port:{}\r\nuptime_in_seconds:{}\r\nuptime_in_days:{}\r\nexecutable:seen\r\nconfig_file:\r\n\r\n",
            REDIS_VERSION,
            env!("CARGO_PKG_VERSION"),
            std::env::consts::OS,
            std::process::id(),
            sh.port,
            sh.started.elapsed().as_secs(),
            sh.started.elapsed().as_secs() / 86400,
        );
    }
    if want("clients") {
        let _ = write!(
            out,
            "# Clients\r\nconnected_clients:{}\r\nmaxclients:{}\r\nblocked_clients:0\r\n\r\n",
            sh.connected.load(Ordering::Relaxed),
            c.maxclients
        );
    }
    if want("memory") {
        let used = sh.store.memory_bytes();
        let _ = write!(
            out,
            "# Memory\r\nused_memory:{used}\r\nused_memory_human:{}\r\nused_memory_rss:{}\r\nmaxmemory:{}\r\nmaxmemory_policy:noeviction\r\nmax_filter_bytes:{}\r\n\r\n",
            human(used),
            rss_bytes(),
            c.maxmemory,
            c.max_filter_bytes,
        );
    }
    if want("persistence") {
        let _ = write!(
            out,
            "# Persistence\r\nloading:0\r\nrdb_changes_since_last_save:{}\r\nrdb_bgsave_in_progress:{}\r\nrdb_last_save_time:{}\r\nrdb_last_bgsave_status:{}\r\naof_enabled:1\r\naof_rewrite_in_progress:0\r\naof_last_write_status:{}\r\nappendfsync:{}\r\nseen_log_bytes:{}\r\n{}dir:{}\r\n\r\n",
            sh.dirty.load(Ordering::Relaxed),
            u8::from(sh.bgsave_in_progress.load(Ordering::Relaxed)),
            sh.lastsave.load(Ordering::Relaxed),
            if sh.last_bgsave_ok.load(Ordering::Relaxed) { "ok" } else { "err" },
            if sh.store.log_failed() { "err" } else { "ok" },
            match c.fsync {
                FsyncPolicy::Always => "always",
                FsyncPolicy::EverySec => "everysec",
                FsyncPolicy::No => "no",
            },
            sh.store.log_bytes(),
            // How far back a power loss now could reach: under `always`
            // nothing acknowledged, under `no` unknown (no field).
            match (c.fsync, sh.store.unsynced_for()) {
                (_, Some(d)) => format!("seen_unsynced_ms:{}\r\n", d.as_millis()),
                (FsyncPolicy::Always, None) => "seen_unsynced_ms:0\r\n".to_string(),
                _ => String::new(),
            },
            c.dir.display(),
        );
    }
    if want("stats") {
        let s = &sh.stats;
        let _ = write!(
            out,
            "# Stats\r\ntotal_connections_received:{}\r\ntotal_commands_processed:{}\r\nrejected_connections:{}\r\ntotal_error_replies:{}\r\nkeyspace_hits:{}\r\nkeyspace_misses:{}\r\n\r\n",
            s.connections.load(Ordering::Relaxed),
            s.commands.load(Ordering::Relaxed),
            s.rejected.load(Ordering::Relaxed),
            s.errors.load(Ordering::Relaxed),
            s.hits.load(Ordering::Relaxed),
            s.misses.load(Ordering::Relaxed),
        );
    }
    if want("keyspace") {
        let names = sh.store.names();
        let expires = names
            .iter()
            .filter(|n| matches!(sh.store.expires_at(n), Ok(Some(Some(_)))))
            .count();
        out.push_str("# Keyspace\r\n");
        if !names.is_empty() {
            let _ = write!(
                out,
                "db0:keys={},expires={expires},avg_ttl=0\r\n",
                names.len()
            );
        }
        out.push_str("\r\n");
    }
    while out.ends_with("\r\n\r\n") {
        out.truncate(out.len() - 2);
    }
    Reply::verbatim_text(out)
}

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

pub(crate) fn save(ctx: &mut Ctx<'_>, _args: &[Bytes]) -> Reply {
    if ctx.shared.bgsave_in_progress.load(Ordering::Acquire) {
        return Reply::error("ERR Background save already in progress");
    }
    // A checkpoint blocks: run it where blocking is allowed.
    let shared = ctx.shared;
    let r = blocking(|| shared.checkpoint());
    match r {
        Ok(()) => Reply::ok(),
        Err(e) => store_error(&e),
    }
}

pub(crate) fn bgsave(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Reply {
    if args.len() > 2 || (args.len() == 2 && !is(&args[1], "schedule")) {
        return syntax_error();
    }
    if ctx.shared.bgsave_in_progress.swap(true, Ordering::AcqRel) {
        return Reply::error("ERR Background save already in progress");
    }
    let shared = ctx.shared.clone();
    let spawned = std::thread::Builder::new()
        .name("seen-bgsave".into())
        .spawn(move || {
            // A panic (a bug) counts as a failed save, and ends it: left
            // in progress, it would refuse every BGSAVE and SAVE after.
            let save = std::panic::AssertUnwindSafe(|| shared.checkpoint());
            let ok = std::panic::catch_unwind(save).is_ok_and(|r| r.is_ok());
            shared.last_bgsave_ok.store(ok, Ordering::Relaxed);
            shared.bgsave_in_progress.store(false, Ordering::Release);
        });
    match spawned {
        Ok(_) => Reply::simple("Background saving started"),
        Err(e) => {
            ctx.shared
                .bgsave_in_progress
                .store(false, Ordering::Release);
            Reply::error(format!("ERR could not start the background save: {e}"))
        }
    }
}

pub(crate) fn lastsave(ctx: &mut Ctx<'_>, _args: &[Bytes]) -> Reply {
    Reply::Integer(ctx.shared.lastsave.load(Ordering::Relaxed))
}

pub(crate) fn shutdown(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Reply {
    let mut nosave = false;
    for a in &args[1..] {
        if is(a, "nosave") {
            nosave = true;
        } else if is(a, "save") || is(a, "now") || is(a, "force") {
        } else if is(a, "abort") {
            return Reply::error("ERR No shutdown in progress.");
        } else {
            return syntax_error();
        }
    }
    tracing::info!(client = %ctx.client.addr, nosave, "SHUTDOWN requested");
    if nosave {
        ctx.shared
            .skip_final_checkpoint
            .store(true, Ordering::Relaxed);
    }
    ctx.shared.request_shutdown();
    ctx.client.close = true;
    ctx.client.no_reply = true;
    Reply::ok()
}
