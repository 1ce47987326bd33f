//! Listening, accepting, the checkpoint timer and graceful shutdown.

use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use seen_store::{Store, StoreOptions};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpListener;

use crate::config::Config;
use crate::state::Shared;

/// Why the server could not start or stop cleanly.
#[derive(Debug)]
pub enum ServerError {
    /// The data directory could not be opened (corrupt, locked, ...).
    Store(seen_store::Error),
    /// An address could not be bound.
    Bind(SocketAddr, std::io::Error),
    /// The runtime could not start.
    Runtime(std::io::Error),
}

impl std::fmt::Display for ServerError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ServerError::Store(e) => {
                write!(f, "data directory: {e}")?;
                if matches!(e.kind(), seen_store::ErrorKind::Corrupt { .. }) {
                    write!(
                        f,
                        " (start with --salvage to open it keeping what can be read, \
                         each loss logged)"
                    )?;
                }
                Ok(())
            }
            ServerError::Bind(a, e) => write!(f, "cannot listen on {a}: {e}"),
            ServerError::Runtime(e) => write!(f, "cannot start the runtime: {e}"),
        }
    }
}

impl std::error::Error for ServerError {}

/// A bound, running-ready server.
pub struct Server {
    shared: Arc<Shared>,
    listeners: Vec<TcpListener>,
    /// The Prometheus endpoint's listener, when `--metrics` is given.
    metrics: Option<TcpListener>,
}

/// Stops a running [`Server`] from another task or thread.
#[derive(Clone)]
pub struct ShutdownHandle(Arc<Shared>);

impl ShutdownHandle {
    /// Asks the server to stop: stop accepting, finish the commands in
    /// flight, checkpoint, return from [`Server::run`].
    pub fn shutdown(&self) {
        self.0.request_shutdown();
    }
}

impl Server {
    /// Opens the data directory (replaying its log) and binds the
    /// listeners.
    pub async fn bind(config: Config) -> Result<Server, ServerError> {
        let opts = StoreOptions {
            fsync: config.fsync,
            max_filter_bytes: config.max_filter_bytes,
            max_memory: config.maxmemory,
            salvage: config.salvage,
            ..StoreOptions::default()
        };
        let dir = config.dir.clone();
        let t = Instant::now();
        let store = tokio::task::spawn_blocking(move || Store::open(dir, opts))
            .await
            .map_err(|e| ServerError::Runtime(std::io::Error::other(e)))?
            .map_err(ServerError::Store)?;
        // Creating or growing a large filter, or waiting for an overdue
        // sync, must not hold a worker thread of the runtime: with none
        // left polling the sockets, every connection waited for it.
        store.set_blocking_hook(Box::new(|f| crate::blocking::blocking(f)));
        tracing::info!(
            dir = %config.dir.display(),
            filters = store.len(),
            elapsed_ms = t.elapsed().as_millis() as u64,
            "data directory open"
        );
        let mut listeners = Vec::new();
        let mut port = config.port;
        for ip in &config.bind {
            let addr = SocketAddr::new(*ip, port);
            let l = TcpListener::bind(addr)
                .await
                .map_err(|e| ServerError::Bind(addr, e))?;
            // With port 0, every address listens on the port the first got.
            port = l.local_addr().map(|a| a.port()).unwrap_or(port);
            listeners.push(l);
        }
        let metrics = match config.metrics {
            // A metrics address that cannot be bound fails the start, as
            // the server's own port does.
            Some(addr) => Some(
                TcpListener::bind(addr)
                    .await
                    .map_err(|e| ServerError::Bind(addr, e))?,
            ),
            None => None,
        };
        let shared = Shared::new(store, config, port, crate::cmd::command_names());
        Ok(Server {
            shared,
            listeners,
            metrics,
        })
    }

    /// The address of the first listener (its port when 0 was asked).
    pub fn local_addr(&self) -> Option<SocketAddr> {
        self.listeners.first().and_then(|l| l.local_addr().ok())
    }

    /// A handle that stops the server.
    pub fn shutdown_handle(&self) -> ShutdownHandle {
        ShutdownHandle(self.shared.clone())
    }

    /// Serves until shut down, then finishes in-flight commands,
    /// checkpoints and returns.
    pub async fn run(self) -> Result<(), ServerError> {
        let shared = self.shared;
        for l in &self.listeners {
            if let Ok(a) = l.local_addr() {
                tracing::info!(%a, fsync = ?shared.config.fsync, "listening");
            }
        }
        let mut tasks = Vec::new();
        for listener in self.listeners {
            tasks.push(tokio::spawn(accept_loop(shared.clone(), listener)));
        }
        if let Some(every) = shared.config.save_interval {
            tasks.push(tokio::spawn(checkpoint_timer(shared.clone(), every)));
        }
        if let Some(limit) = shared.config.save_log_size {
            tasks.push(tokio::spawn(log_size_watch(shared.clone(), limit)));
        }
        tasks.push(tokio::spawn(sample_ops(shared.clone())));
        if let Some(listener) = self.metrics {
            if let Ok(a) = listener.local_addr() {
                tracing::info!(%a, "metrics at http://{a}/metrics");
            }
            tasks.push(tokio::spawn(crate::metrics::serve(
                shared.clone(),
                listener,
            )));
        }
        let mut rx = shared.shutdown.subscribe();
        while !*rx.borrow() {
            if rx.changed().await.is_err() {
                break;
            }
        }
        tracing::info!("shutting down: no new connections, finishing commands in flight");
        for t in &tasks {
            t.abort();
        }
        // Connections see the signal between batches and close.
        let deadline = Instant::now() + Duration::from_secs(10);
        while shared.connected.load(Ordering::Acquire) > 0 && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let skip = shared.skip_final_checkpoint.load(Ordering::Relaxed);
        let s = shared.clone();
        tokio::task::spawn_blocking(move || {
            // The log is synced even when the checkpoint fails (a full
            // disk), so that the last second's adds under `everysec` are
            // not left to the kernel's writeback; with `SHUTDOWN NOSAVE`
            // there is no checkpoint at all (`Store::close` would make
            // one).
            let saved = if skip { Ok(()) } else { s.checkpoint() };
            let synced = s.store.sync();
            if let (Err(_), Err(e)) = (&saved, &synced) {
                tracing::error!("final log sync failed too: {e}");
            }
            saved.and(synced)
        })
        .await
        .map_err(|e| ServerError::Runtime(std::io::Error::other(e)))?
        .map_err(ServerError::Store)?;
        tracing::info!("shut down cleanly");
        Ok(())
    }
}

async fn accept_loop(shared: Arc<Shared>, listener: TcpListener) {
    loop {
        let (mut stream, peer) = match listener.accept().await {
            Ok(x) => x,
            Err(e) => {
                // EMFILE and friends: back off instead of spinning.
                tracing::warn!("accept failed: {e}");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        shared.stats.connections.fetch_add(1, Ordering::Relaxed);
        let n = shared.connected.fetch_add(1, Ordering::AcqRel);
        if n >= shared.runtime.maxclients() {
            shared.connected.fetch_sub(1, Ordering::AcqRel);
            shared
                .stats
                .rejected_connections
                .fetch_add(1, Ordering::Relaxed);
            tokio::spawn(async move {
                let _ = stream
                    .write_all(b"-ERR max number of clients reached\r\n")
                    .await;
            });
            continue;
        }
        let _ = stream.set_nodelay(true);
        let rx = shared.shutdown.subscribe();
        let counted = Counted(shared.clone());
        tokio::spawn(async move {
            crate::connection::serve(counted.0.clone(), stream, peer.to_string(), rx).await;
            drop(counted);
        });
    }
}

/// An open connection, counted in `connected` until this is dropped: when
/// its task ends, and also when a bug panics it (tokio then drops the
/// task). Otherwise each such panic would keep the count up for good:
/// past `maxclients` of them every new client would be refused, and a
/// shutdown would wait for its deadline.
struct Counted(Arc<Shared>);

impl Drop for Counted {
    fn drop(&mut self) {
        self.0.connected.fetch_sub(1, Ordering::AcqRel);
    }
}

async fn checkpoint_timer(shared: Arc<Shared>, every: Duration) {
    let mut tick = tokio::time::interval(every);
    tick.tick().await;
    loop {
        tick.tick().await;
        if shared.dirty.load(Ordering::Relaxed) == 0 {
            continue;
        }
        background_checkpoint(&shared).await;
    }
}

/// Samples the command rate ten times a second, for
/// `instantaneous_ops_per_sec` (as Redis's server cron does).
async fn sample_ops(shared: Arc<Shared>) {
    let mut tick = tokio::time::interval(Duration::from_millis(100));
    loop {
        tick.tick().await;
        shared.stats.sample_ops();
    }
}

/// Checkpoints whenever the log written since the last checkpoint passes
/// `limit` bytes (looked at once a second): between timed checkpoints a
/// busy server logs up to about 150 MB/s, which the default interval of
/// 300 s would let grow to tens of gigabytes, and a restart replay for
/// minutes.
async fn log_size_watch(shared: Arc<Shared>, limit: u64) {
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    loop {
        tick.tick().await;
        if shared.store.log_bytes() <= limit {
            continue;
        }
        tracing::info!(
            log_bytes = shared.store.log_bytes(),
            limit,
            "log past --save-log-size: checkpoint"
        );
        background_checkpoint(&shared).await;
    }
}

/// A checkpoint off the runtime's threads, unless one is running
/// (`BGSAVE`, the timer or the log watch).
async fn background_checkpoint(shared: &Arc<Shared>) {
    if shared.bgsave_in_progress.swap(true, Ordering::AcqRel) {
        return;
    }
    let s = shared.clone();
    let _ = tokio::task::spawn_blocking(move || {
        let ok = s.checkpoint().is_ok();
        s.last_bgsave_ok.store(ok, Ordering::Relaxed);
        s.bgsave_in_progress.store(false, Ordering::Release);
    })
    .await;
}

/// Runs a server until SIGINT, SIGTERM or `SHUTDOWN`, on a runtime with
/// `config.threads` workers. What `seen serve` calls.
pub fn run_blocking(config: Config) -> Result<(), ServerError> {
    crate::state::tune_allocator();
    let mut rt = tokio::runtime::Builder::new_multi_thread();
    if config.threads > 0 {
        rt.worker_threads(config.threads);
    }
    let rt = rt.enable_all().build().map_err(ServerError::Runtime)?;
    rt.block_on(async move {
        let server = Server::bind(config).await?;
        let handle = server.shutdown_handle();
        tokio::spawn(async move {
            use tokio::signal::unix::{signal, SignalKind};
            let (Ok(mut term), Ok(mut int)) = (
                signal(SignalKind::terminate()),
                signal(SignalKind::interrupt()),
            ) else {
                tracing::error!("cannot install signal handlers");
                return;
            };
            tokio::select! {
                _ = term.recv() => tracing::info!("SIGTERM received"),
                _ = int.recv() => tracing::info!("SIGINT received"),
            }
            handle.shutdown();
        });
        server.run().await
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_connection_whose_task_panics_is_no_longer_counted() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path(), StoreOptions::default()).unwrap();
        let shared = Shared::new(store, Config::default(), 0, crate::cmd::command_names());
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        rt.block_on(async {
            for panics in [false, true] {
                shared.connected.fetch_add(1, Ordering::AcqRel);
                let counted = Counted(shared.clone());
                let task = tokio::spawn(async move {
                    assert!(!panics, "a connection's task panics (test)");
                    drop(counted);
                });
                assert_eq!(task.await.is_err(), panics);
                assert_eq!(shared.connected.load(Ordering::Acquire), 0, "{panics}");
            }
        });
    }
}
