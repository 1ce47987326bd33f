//! One client connection: read what has arrived, run every complete
//! request in it, wait once for the durability all their replies need,
//! write the replies, repeat.
//!
//! Memory per client is bounded: unparsed input by the parser's limits and
//! `client-query-buffer-limit`; output by one batch of replies, because
//! nothing more is read until they are written (a slow reader stalls only
//! itself, through TCP flow control).

use std::sync::atomic::Ordering;
use std::sync::Arc;

use bytes::BytesMut;
use seen_resp::{Limits, Reply, Request, RequestParser};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::watch;

use crate::clients::ClientHandle;
use crate::cmd::{self, Client};
use crate::monitor::Watcher;
use crate::state::Shared;

/// Most requests run before their replies are written.
const MAX_BATCH: usize = 1024;
/// Write replies once this many bytes are waiting.
const MAX_OUTPUT: usize = 1 << 20;

/// Runs a batch of requests, appending their replies to `out`. Replies that
/// depend on mutations are released only once those are as durable as the
/// fsync policy promises: the batch waits once for all of them (sharing a
/// sync with every other connection waiting then), without holding up the
/// runtime's thread; if that fails, every reply of the batch becomes an
/// error (nothing unsafe is acknowledged).
async fn run_batch(
    shared: &Arc<Shared>,
    client: &mut Client,
    reqs: &[Request],
    out: &mut BytesMut,
) {
    let start = out.len();
    let mut answered = 0;
    let mut i = 0;
    while i < reqs.len() {
        let n = cmd::fusable_len(client, &reqs[i..]);
        if n >= 2 {
            let replies = cmd::execute_fused(shared, client, &reqs[i..i + n]);
            for r in &replies {
                r.encode(client.proto, out);
            }
            answered += replies.len();
            i += replies.len();
            continue;
        }
        let reply = cmd::execute(shared, client, &reqs[i]);
        i += 1;
        if client.no_reply {
            client.no_reply = false;
        } else {
            reply.encode(client.proto, out);
            answered += 1;
        }
        if client.close {
            break;
        }
    }
    let pending = std::mem::take(&mut client.pending);
    let (tx, rx) = tokio::sync::oneshot::channel();
    shared.store.when_durable(pending, move |r| {
        let _ = tx.send(r);
    });
    let durable = rx
        .await
        .unwrap_or_else(|_| Err(seen_store::ErrorKind::Poisoned("the store closed".into()).into()));
    if let Err(e) = durable {
        tracing::error!("log sync failed, failing {answered} replies: {e}");
        out.truncate(start);
        let r = Reply::error(format!(
            "ERR persistence error, the command may not be durable: {e}"
        ));
        for _ in 0..answered {
            r.encode(client.proto, out);
        }
    }
}

pub(crate) async fn serve(
    shared: Arc<Shared>,
    mut stream: TcpStream,
    addr: String,
    mut shutdown: watch::Receiver<bool>,
) {
    let id = shared.next_client_id.fetch_add(1, Ordering::Relaxed);
    let laddr = stream
        .local_addr()
        .map_or_else(|_| String::new(), |a| a.to_string());
    let handle = shared.clients.register(id, addr, laddr);
    let registered = Registered(&shared, id);
    let mut client = Client::new(handle.clone(), shared.config.requirepass.is_none());
    let limits = Limits {
        max_bulk_len: shared.config.proto_max_bulk_len,
        ..Limits::default()
    };
    let mut parser = RequestParser::new(limits);
    let mut input = BytesMut::with_capacity(16 * 1024);
    let mut output = BytesMut::with_capacity(16 * 1024);
    let mut reqs: Vec<Request> = Vec::new();
    tracing::debug!(id, addr = %handle.addr, "client connected");
    'conn: loop {
        if *shutdown.borrow() {
            break;
        }
        // CONFIG SET timeout applies to clients connected already, idle
        // ones included, as in Redis: it wakes the wait (`woken`), and the
        // timeout counts from the client's last command. A MONITOR
        // client, which only reads, has none.
        let timeout = match client.monitor {
            Some(_) => None,
            None => shared.runtime.timeout(),
        };
        let idle = async {
            match timeout {
                Some(t) => tokio::time::sleep(t.saturating_sub(handle.idle())).await,
                None => std::future::pending().await,
            }
        };
        let n = tokio::select! {
            r = stream.read_buf(&mut input) => match r {
                Ok(n) => n,
                Err(e) => {
                    tracing::debug!(id, "read error: {e}");
                    break;
                }
            },
            _ = shutdown.changed() => break,
            _ = handle.woken() => {
                if handle.is_killed() {
                    break;
                }
                continue;
            }
            line = next_monitor_line(&mut client.monitor) => {
                if !write_unless_stopped(&mut stream, &line, &handle, &mut shutdown).await {
                    break;
                }
                (shared.stats.net_output).fetch_add(line.len() as u64, Ordering::Relaxed);
                continue;
            }
            _ = idle => {
                tracing::debug!(id, "idle timeout");
                break;
            }
        };
        if n == 0 {
            break;
        }
        (shared.stats.net_input).fetch_add(n as u64, Ordering::Relaxed);
        loop {
            let mut fatal = None;
            while reqs.len() < MAX_BATCH {
                match parser.next(&mut input) {
                    Ok(Some(r)) => reqs.push(r),
                    Ok(None) => break,
                    Err(e) => {
                        fatal = Some(e);
                        break;
                    }
                }
            }
            if !reqs.is_empty() {
                run_batch(&shared, &mut client, &reqs, &mut output).await;
            }
            let full = reqs.len() == MAX_BATCH;
            reqs.clear();
            if let Some(e) = &fatal {
                if !client.close {
                    tracing::debug!(id, "protocol error: {e}");
                    e.to_reply().encode(client.proto, &mut output);
                    client.close = true;
                }
            }
            if output.len() >= MAX_OUTPUT || !full || client.close {
                if !write_unless_stopped(&mut stream, &output, &handle, &mut shutdown).await {
                    break 'conn;
                }
                (shared.stats.net_output).fetch_add(output.len() as u64, Ordering::Relaxed);
                output.clear();
                if output.capacity() > 4 * MAX_OUTPUT {
                    output = BytesMut::with_capacity(16 * 1024);
                }
            }
            if client.close || handle.is_killed() {
                break 'conn;
            }
            if !full {
                break;
            }
        }
        if input.len() > shared.config.client_query_buffer_limit {
            tracing::warn!(
                id,
                bytes = input.len(),
                "client-query-buffer-limit exceeded, closing"
            );
            break;
        }
        if input.is_empty() && input.capacity() > 1 << 20 {
            input = BytesMut::with_capacity(16 * 1024);
        }
    }
    // Out of the registry before the client sees the end: once it has,
    // CLIENT LIST no longer shows it.
    drop(registered);
    let _ = stream.shutdown().await;
    tracing::debug!(id, "client disconnected");
}

/// Writes `bytes` to the client: false when that failed, or when the
/// connection was killed or the server began to stop first (a client that
/// reads nothing must not hold up `CLIENT KILL` or a shutdown).
async fn write_unless_stopped(
    stream: &mut TcpStream,
    bytes: &[u8],
    handle: &ClientHandle,
    shutdown: &mut watch::Receiver<bool>,
) -> bool {
    tokio::select! {
        r = stream.write_all(bytes) => r.is_ok(),
        _ = handle.killed() => false,
        _ = shutdown.changed() => false,
    }
}

/// The next line of the command stream for a `MONITOR` client; never, for
/// any other.
async fn next_monitor_line(watcher: &mut Option<Watcher>) -> bytes::Bytes {
    match watcher {
        Some(w) => w.next().await,
        None => std::future::pending().await,
    }
}

/// Takes a connection out of the registry when it ends, however it ends.
struct Registered<'a>(&'a Shared, u64);

impl Drop for Registered<'_> {
    fn drop(&mut self) {
        self.0.clients.remove(self.1);
    }
}
