//! Commands that run the server: `CONFIG`, `MODULE`, `SAVE`, `BGSAVE`,
//! `LASTSAVE`, `SHUTDOWN`.

use std::sync::atomic::Ordering;

use bytes::Bytes;
use seen_resp::Reply;
use seen_store::FsyncPolicy;

use super::context::Ctx;
use super::identity::bf_module;
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
        ctx.shared.stats.reset();
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
