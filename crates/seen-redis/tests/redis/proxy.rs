//! A TCP proxy in front of Redis that drops connections after passing a
//! request on, before its reply comes back: the one fault whose outcome a
//! client cannot know. Shared by the seen-redis tests and the CLI's.

#![allow(dead_code)] // each includer uses a part of it

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::Duration;

/// When the proxy drops a connection.
#[derive(Clone, Copy)]
pub enum Cut {
    /// After passing on the next request once [`Proxy::cut_next`] is set.
    OnDemand,
    /// After passing every `n`th request on (and Redis running it), before
    /// its reply: the fault whose outcome a client cannot know.
    EveryNth(usize),
    /// After passing the `n`th request on, and from then on every new
    /// connection at once: Redis gone, as far as the client can tell.
    GoneAfter(usize),
}

/// A TCP proxy in front of Redis that drops connections as told.
pub struct Proxy {
    pub port: u16,
    /// Connections dropped so far.
    pub drops: Arc<AtomicUsize>,
    /// With [`Cut::OnDemand`]: drop after the next request.
    pub cut_next: Arc<AtomicBool>,
}

impl Proxy {
    pub fn start(upstream: u16, when: Cut) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let drops = Arc::new(AtomicUsize::new(0));
        let requests = Arc::new(AtomicUsize::new(0));
        let gone = Arc::new(AtomicBool::new(false));
        let cut_next = Arc::new(AtomicBool::new(false));
        let count = drops.clone();
        let on_demand = cut_next.clone();
        thread::spawn(move || {
            for client in listener.incoming() {
                let Ok(client) = client else { return };
                if gone.load(Ordering::SeqCst) {
                    let _ = client.shutdown(Shutdown::Both);
                    continue;
                }
                let Ok(server) = TcpStream::connect(("127.0.0.1", upstream)) else {
                    return;
                };
                let hold = Arc::new(AtomicBool::new(false));
                {
                    // Replies, until a drop is under way.
                    let (mut from, mut to) =
                        (server.try_clone().unwrap(), client.try_clone().unwrap());
                    let hold = hold.clone();
                    thread::spawn(move || {
                        let mut buf = [0u8; 65536];
                        while let Ok(n @ 1..) = from.read(&mut buf) {
                            if hold.load(Ordering::SeqCst) || to.write_all(&buf[..n]).is_err() {
                                break;
                            }
                        }
                    });
                }
                let (requests, gone, count) = (requests.clone(), gone.clone(), count.clone());
                let on_demand = on_demand.clone();
                thread::spawn(move || {
                    let (mut from, mut to) = (client, server);
                    let mut buf = [0u8; 65536];
                    while let Ok(n @ 1..) = from.read(&mut buf) {
                        let i = requests.fetch_add(1, Ordering::SeqCst) + 1;
                        let dropping = match when {
                            Cut::OnDemand => on_demand.swap(false, Ordering::SeqCst),
                            Cut::EveryNth(n) => i % n == 0,
                            Cut::GoneAfter(n) => i == n,
                        };
                        if dropping {
                            hold.store(true, Ordering::SeqCst);
                            if matches!(when, Cut::GoneAfter(_)) {
                                gone.store(true, Ordering::SeqCst);
                            }
                        }
                        if to.write_all(&buf[..n]).is_err() {
                            break;
                        }
                        if dropping {
                            // Let Redis run the request, then drop both sides.
                            thread::sleep(Duration::from_millis(50));
                            count.fetch_add(1, Ordering::SeqCst);
                            let _ = from.shutdown(Shutdown::Both);
                            let _ = to.shutdown(Shutdown::Both);
                            break;
                        }
                    }
                });
            }
        });
        Proxy {
            port,
            drops,
            cut_next,
        }
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }
}
