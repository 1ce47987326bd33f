//! Real `redis-server` processes for the tests: free loopback ports, a
//! temporary directory each, stopped by process id when dropped. Nothing
//! is skipped: without `redis-server` the tests fail and say what to
//! install.

#![allow(dead_code)] // shared with the benchmark, which uses a part of it

use std::net::TcpListener;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

/// The `redis-server` binary, or a panic saying how to get it.
fn server_binary() -> &'static str {
    let found = Command::new("redis-server")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    assert!(
        found,
        "redis-server is not installed: these tests start their own Redis and do not skip. \
         Run the tests with scripts/test, which installs it."
    );
    "redis-server"
}

/// A port on 127.0.0.1 nobody listens on now (and, for Cluster nodes, whose
/// cluster bus port `port + 10000` is free too).
pub fn free_port(cluster: bool) -> u16 {
    for _ in 0..200 {
        let l = TcpListener::bind("127.0.0.1:0").expect("bind a loopback port");
        let port = l.local_addr().expect("local addr").port();
        if !cluster {
            return port;
        }
        if port < 55_000 && TcpListener::bind(("127.0.0.1", port + 10_000)).is_ok() {
            return port;
        }
    }
    panic!("no free port pair found on 127.0.0.1");
}

/// One `redis-server` process.
pub struct RedisServer {
    child: Option<Child>,
    pub port: u16,
    dir: tempfile::TempDir,
    args: Vec<String>,
}

impl RedisServer {
    /// A standalone server without persistence.
    pub fn start() -> RedisServer {
        Self::start_with(&["--save", "", "--appendonly", "no"], false)
    }

    /// A standalone server that syncs its append-only file on every write:
    /// what it acknowledged survives a `kill -9`.
    pub fn start_aof_always() -> RedisServer {
        Self::start_with(
            &[
                "--save",
                "",
                "--appendonly",
                "yes",
                "--appendfsync",
                "always",
            ],
            false,
        )
    }

    /// A server with extra configuration arguments (`--name value` pairs).
    pub fn start_with(args: &[&str], cluster: bool) -> RedisServer {
        let bin = server_binary();
        let mut last = String::new();
        for _ in 0..5 {
            let port = free_port(cluster);
            let mut s = RedisServer {
                child: None,
                port,
                dir: tempfile::tempdir().expect("temp dir"),
                args: args.iter().map(|a| a.to_string()).collect(),
            };
            match s.spawn(bin) {
                Ok(()) => return s,
                Err(e) => last = e,
            }
        }
        panic!("redis-server did not start: {last}");
    }

    fn spawn(&mut self, bin: &str) -> Result<(), String> {
        let log = self.dir.path().join("redis.log");
        let child = Command::new(bin)
            .current_dir(self.dir.path())
            .arg("--port")
            .arg(self.port.to_string())
            .arg("--bind")
            .arg("127.0.0.1")
            .arg("--dir")
            .arg(self.dir.path())
            .arg("--logfile")
            .arg(&log)
            .arg("--daemonize")
            .arg("no")
            .args(&self.args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("spawn {bin}: {e}"))?;
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Some(status) = self
                .child
                .as_mut()
                .and_then(|c| c.try_wait().ok().flatten())
            {
                self.child = None;
                let log = std::fs::read_to_string(&log).unwrap_or_default();
                return Err(format!("exited with {status}: {log}"));
            }
            if self.ping() {
                return Ok(());
            }
            if Instant::now() > deadline {
                self.kill9();
                return Err("did not answer PING within 20 s".into());
            }
            thread::sleep(Duration::from_millis(20));
        }
    }

    /// Whether the server answers PING (a loaded one: not LOADING).
    pub fn ping(&self) -> bool {
        let Ok(client) = redis::Client::open(self.url()) else {
            return false;
        };
        let Ok(mut c) = client.get_connection_with_timeout(Duration::from_millis(500)) else {
            return false;
        };
        redis::cmd("PING").query::<String>(&mut c).is_ok()
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(|c| c.id())
    }

    /// A plain connection for checking what the filter wrote.
    pub fn conn(&self) -> redis::Connection {
        redis::Client::open(self.url())
            .expect("client")
            .get_connection_with_timeout(Duration::from_secs(5))
            .expect("connect to the test server")
    }

    /// SIGKILL, then reap.
    pub fn kill9(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill(); // SIGKILL on Unix
            let _ = c.wait();
        }
    }

    /// Starts the server again on the same port, directory and arguments
    /// (after [`kill9`](Self::kill9)).
    pub fn restart(&mut self) {
        assert!(self.child.is_none(), "restart a running server");
        let mut last = String::new();
        // The port may linger for a moment after the kill.
        for _ in 0..50 {
            match self.spawn(server_binary()) {
                Ok(()) => return,
                Err(e) => last = e,
            }
            thread::sleep(Duration::from_millis(100));
        }
        panic!("redis-server did not restart on port {}: {last}", self.port);
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("redis.log")).unwrap_or_default()
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.kill9();
    }
}

/// A Redis Cluster on loopback, made by `redis-cli --cluster create`.
pub struct Cluster {
    /// The masters first, then their replicas.
    pub nodes: Vec<RedisServer>,
}

impl Cluster {
    /// `n` masters without replicas.
    pub fn start(n: usize) -> Cluster {
        Self::start_replicated(n, 0, 3000)
    }

    /// `masters` masters with `replicas` replicas each; a node not heard
    /// from for `node_timeout_ms` is failed over.
    pub fn start_replicated(masters: usize, replicas: usize, node_timeout_ms: u64) -> Cluster {
        let timeout = node_timeout_ms.to_string();
        let nodes: Vec<RedisServer> = (0..masters * (1 + replicas))
            .map(|_| {
                RedisServer::start_with(
                    &[
                        "--save",
                        "",
                        "--appendonly",
                        "no",
                        "--cluster-enabled",
                        "yes",
                        "--cluster-config-file",
                        "nodes.conf",
                        "--cluster-node-timeout",
                        &timeout,
                        // A replica may take over however long ago it
                        // last heard from its master.
                        "--cluster-replica-validity-factor",
                        "0",
                    ],
                    true,
                )
            })
            .collect();
        let addrs: Vec<String> = nodes
            .iter()
            .map(|s| format!("127.0.0.1:{}", s.port))
            .collect();
        let out = Command::new("redis-cli")
            .arg("--cluster")
            .arg("create")
            .args(&addrs)
            .args(["--cluster-replicas", &replicas.to_string(), "--cluster-yes"])
            .stdin(Stdio::null())
            .output()
            .expect("run redis-cli (Debian package redis-tools: apt-get install -y redis-tools)");
        assert!(
            out.status.success(),
            "redis-cli --cluster create failed: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        let cluster = Cluster { nodes };
        cluster.wait_ok();
        cluster.wait_replicas_synced();
        cluster
    }

    /// Waits until every replica's link to its master is up.
    pub fn wait_replicas_synced(&self) {
        let deadline = Instant::now() + Duration::from_secs(30);
        for n in &self.nodes {
            loop {
                let info: String = redis::cmd("INFO")
                    .arg("replication")
                    .query(&mut n.conn())
                    .unwrap_or_default();
                if info.contains("role:master") || info.contains("master_link_status:up") {
                    break;
                }
                assert!(Instant::now() < deadline, "a replica never synced: {info}");
                thread::sleep(Duration::from_millis(50));
            }
        }
    }

    /// Waits until every node says `cluster_state:ok` and knows all slots.
    pub fn wait_ok(&self) {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let ok = self.nodes.iter().all(|n| {
                let Ok(info) = redis::cmd("CLUSTER")
                    .arg("INFO")
                    .query::<String>(&mut n.conn())
                else {
                    return false;
                };
                info.contains("cluster_state:ok")
                    && info.contains("cluster_slots_ok:16384")
                    && info.contains(&format!("cluster_known_nodes:{}", self.nodes.len()))
            });
            if ok {
                return;
            }
            assert!(Instant::now() < deadline, "cluster did not become ok");
            thread::sleep(Duration::from_millis(100));
        }
    }

    pub fn url(&self) -> String {
        format!(
            "redis+cluster://{}",
            self.nodes
                .iter()
                .map(|n| format!("127.0.0.1:{}", n.port))
                .collect::<Vec<_>>()
                .join(",")
        )
    }
}
