//! Starting and stopping the real `seen serve`, and a raw RESP client.

use std::ffi::OsString;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use bytes::BytesMut;
use seen_resp::{encode_request, parse_reply, Reply};

pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A running `seen serve`; killed on drop if still running.
pub struct Server {
    child: Option<Child>,
    pub port: u16,
    log: PathBuf,
}

impl Server {
    /// Starts `seen serve --dir DIR --port P extra...` and waits until it
    /// answers PING.
    pub fn start(dir: &Path, extra: &[&str]) -> Server {
        for _ in 0..5 {
            let port = free_port();
            let log = dir.with_extension(format!("{port}.log"));
            let mut args: Vec<OsString> = vec!["serve".into(), "--dir".into(), dir.into()];
            for a in ["--port", &port.to_string(), "--log", "info"]
                .iter()
                .chain(extra)
            {
                args.push(a.into());
            }
            if let Some(s) = Server::launch(&args, port, &log) {
                return s;
            }
        }
        panic!("seen serve did not start");
    }

    /// Runs `seen ARGS...`, which must serve on `port`, and waits until it
    /// answers PING; stderr goes to `log`. `None` when the port was taken
    /// meanwhile.
    pub fn launch(args: &[OsString], port: u16, log: &Path) -> Option<Server> {
        let child = Command::new(env!("CARGO_BIN_EXE_seen"))
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(log).unwrap())
            .spawn()
            .expect("start seen serve");
        let mut s = Server {
            child: Some(child),
            port,
            log: log.to_path_buf(),
        };
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline {
            if let Some(status) = s.child.as_mut().unwrap().try_wait().unwrap() {
                let log = s.log_text();
                if log.contains("Address already in use") {
                    return None;
                }
                panic!("seen serve exited with {status}: {log}");
            }
            if let Ok(mut c) = TcpStream::connect(("127.0.0.1", port)) {
                if c.write_all(b"PING\r\n").is_ok() {
                    let mut b = [0u8; 7];
                    if c.read_exact(&mut b).is_ok() && (&b == b"+PONG\r\n" || &b[..] == b"-NOAUTH")
                    {
                        return Some(s);
                    }
                }
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        panic!("seen serve did not answer: {}", s.log_text());
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    pub fn redis(&self) -> redis::Connection {
        redis::Client::open(self.url())
            .unwrap()
            .get_connection()
            .unwrap()
    }

    pub fn raw(&self) -> Raw {
        Raw::connect(self.port)
    }

    pub fn log_path(&self) -> PathBuf {
        self.log.clone()
    }

    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    pub fn pid(&self) -> i32 {
        self.child.as_ref().expect("running").id() as i32
    }

    /// Sends a signal and waits for the exit.
    pub fn signal_and_wait(mut self, sig: i32) -> ExitStatus {
        let mut child = self.child.take().expect("running");
        // SAFETY: kill(2) on our own child's pid.
        unsafe { libc::kill(child.id() as i32, sig) };
        wait_timeout(&mut child, Duration::from_secs(30))
    }

    /// Waits for the process to exit on its own (after `SHUTDOWN`).
    pub fn wait(mut self) -> ExitStatus {
        let mut child = self.child.take().expect("running");
        wait_timeout(&mut child, Duration::from_secs(30))
    }
}

fn wait_timeout(child: &mut Child, t: Duration) -> ExitStatus {
    let deadline = Instant::now() + t;
    loop {
        if let Some(s) = child.try_wait().unwrap() {
            return s;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("seen serve did not exit within {t:?}");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// A raw RESP connection: sends exact bytes, reads whole replies.
pub struct Raw {
    pub stream: TcpStream,
    buf: BytesMut,
}

impl Raw {
    pub fn connect(port: u16) -> Raw {
        let stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(30)))
            .unwrap();
        Raw {
            stream,
            buf: BytesMut::new(),
        }
    }

    pub fn send_raw(&mut self, bytes: &[u8]) {
        self.stream.write_all(bytes).unwrap();
    }

    pub fn send<A: AsRef<[u8]>>(&mut self, args: &[A]) {
        let mut out = BytesMut::new();
        encode_request(args, &mut out);
        self.send_raw(&out);
    }

    /// The exact bytes of the next reply (None if the server closed).
    pub fn read_reply_bytes(&mut self) -> Option<Vec<u8>> {
        loop {
            if let Some((_, n)) = parse_reply(&self.buf).expect("valid reply") {
                return Some(self.buf.split_to(n).to_vec());
            }
            let mut chunk = [0u8; 65536];
            match self.stream.read(&mut chunk) {
                Ok(0) => return None,
                Ok(n) => self.buf.extend_from_slice(&chunk[..n]),
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return None,
                Err(e) => panic!("read: {e}"),
            }
        }
    }

    pub fn read_reply(&mut self) -> Reply {
        let b = self.read_reply_bytes().expect("a reply");
        parse_reply(&b).unwrap().unwrap().0
    }

    pub fn cmd<A: AsRef<[u8]>>(&mut self, args: &[A]) -> Vec<u8> {
        self.send(args);
        self.read_reply_bytes().expect("a reply")
    }

    /// True once the server has closed the connection.
    pub fn is_closed(&mut self) -> bool {
        let mut b = [0u8; 1];
        matches!(self.stream.read(&mut b), Ok(0) | Err(_))
    }
}

pub fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// A number in `INFO <section>`.
pub fn info_field(c: &mut Raw, section: &str, field: &str) -> u64 {
    let info = text(&c.cmd(&["INFO", section]));
    info.lines()
        .find_map(|l| l.strip_prefix(&format!("{field}:")))
        .unwrap_or_else(|| panic!("no {field} in {info}"))
        .trim()
        .parse()
        .unwrap()
}

/// Runs a Python script (redis-py is installed by CI) that must print
/// `ok` and nothing else.
pub fn python_ok(script: &str) {
    let out = std::process::Command::new("python3")
        .args(["-c", script])
        .output()
        .unwrap();
    assert!(
        out.status.success() && text(&out.stdout).trim() == "ok",
        "{}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
}
