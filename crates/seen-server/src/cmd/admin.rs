//! Commands that run the server: `MODULE`, `SAVE`, `BGSAVE`, `LASTSAVE`,
//! `SHUTDOWN`.

use std::sync::atomic::Ordering;

use bytes::Bytes;
use seen_resp::Reply;

use super::context::Ctx;
use super::identity::bf_module;
use super::replies::{store_error, syntax_error};
use crate::args::is;
use crate::blocking::blocking;

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
    tracing::info!(client = %ctx.client.handle.addr, nosave, "SHUTDOWN requested");
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
