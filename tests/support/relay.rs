//! A TCP relay owned by a test, between a node and a service (PostgreSQL, Redis): it forwards
//! bytes both ways and can pause (accept connections and keep them open, forward nothing), add
//! latency to every chunk, or cut (close every connection, and new ones at once, until resumed) — a
//! network that stalls without closing, or one that goes away.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

/// What the relay does with bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Forwards them.
    Forward,
    /// Holds them (connections stay open, new ones are accepted and wait).
    Pause,
    /// Forwards each chunk after this delay.
    Latency(Duration),
    /// Closes every connection, and new ones at once.
    Cut,
}

#[derive(Debug, Clone, Copy)]
struct State {
    mode: Mode,
    /// How many cuts happened: a connection older than the last cut is closed.
    cuts: u64,
}

/// A relay listening on loopback, forwarding to `upstream`.
pub struct Relay {
    addr: SocketAddr,
    state: watch::Sender<State>,
    task: tokio::task::JoinHandle<()>,
    /// The local ports of the relay's connections to the upstream (PostgreSQL sees them as its
    /// clients' ports: `pg_stat_activity.client_port`).
    ports: Arc<Mutex<Vec<u16>>>,
}

impl Relay {
    /// Starts a relay to `upstream` on a free loopback port.
    pub async fn start(upstream: SocketAddr) -> Relay {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind relay");
        let addr = listener.local_addr().expect("relay address");
        let state = watch::Sender::new(State {
            mode: Mode::Forward,
            cuts: 0,
        });
        let ports = Arc::new(Mutex::new(Vec::new()));
        let task = tokio::spawn(accept_loop(
            listener,
            upstream,
            state.clone(),
            ports.clone(),
        ));
        Relay {
            addr,
            state,
            task,
            ports,
        }
    }

    /// The local ports of every connection the relay opened to the upstream.
    pub fn upstream_ports(&self) -> Vec<u16> {
        self.ports.lock().expect("ports").clone()
    }

    /// The relay's address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Holds every byte from now on; connections stay open.
    pub fn pause(&self) {
        self.state.send_modify(|s| s.mode = Mode::Pause);
    }

    /// Forwards again (what was held goes on).
    pub fn resume(&self) {
        self.state.send_modify(|s| s.mode = Mode::Forward);
    }

    /// Adds `delay` before each forwarded chunk.
    pub fn latency(&self, delay: Duration) {
        self.state.send_modify(|s| s.mode = Mode::Latency(delay));
    }

    /// Closes every connection; new ones are closed too until [`Relay::resume`].
    pub fn cut(&self) {
        self.state.send_modify(|s| {
            s.mode = Mode::Cut;
            s.cuts += 1;
        });
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        self.task.abort();
        self.state.send_modify(|s| {
            s.mode = Mode::Cut;
            s.cuts += 1;
        });
    }
}

async fn accept_loop(
    listener: TcpListener,
    upstream: SocketAddr,
    state: watch::Sender<State>,
    ports: Arc<Mutex<Vec<u16>>>,
) {
    loop {
        let Ok((client, _)) = listener.accept().await else {
            return;
        };
        let rx = state.subscribe();
        tokio::spawn(connection(client, upstream, rx, ports.clone()));
    }
}

/// Waits while paused; `false` when the connection must go (a cut since `born`).
async fn until_flowing(rx: &mut watch::Receiver<State>, born: u64) -> bool {
    loop {
        let state = *rx.borrow_and_update();
        if state.cuts != born || state.mode == Mode::Cut {
            return false;
        }
        if state.mode != Mode::Pause {
            return true;
        }
        if rx.changed().await.is_err() {
            return false;
        }
    }
}

async fn connection(
    client: TcpStream,
    upstream: SocketAddr,
    mut rx: watch::Receiver<State>,
    ports: Arc<Mutex<Vec<u16>>>,
) {
    let born = rx.borrow().cuts;
    if !until_flowing(&mut rx, born).await {
        return;
    }
    let Ok(server) = TcpStream::connect(upstream).await else {
        return;
    };
    if let Ok(local) = server.local_addr() {
        ports.lock().expect("ports").push(local.port());
    }
    let (client_read, client_write) = client.into_split();
    let (server_read, server_write) = server.into_split();
    let up = tokio::spawn(pump(client_read, server_write, rx.clone(), born));
    let down = tokio::spawn(pump(server_read, client_write, rx, born));
    let _ = tokio::join!(up, down);
}

/// Copies `from` to `to` chunk by chunk, as the relay's mode says.
async fn pump(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    mut rx: watch::Receiver<State>,
    born: u64,
) {
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        if !until_flowing(&mut rx, born).await {
            return;
        }
        let n = tokio::select! {
            read = from.read(&mut buf) => match read {
                Ok(0) | Err(_) => return,
                Ok(n) => n,
            },
            // Paused or cut meanwhile: look again (a read is cancel safe).
            changed = rx.changed() => {
                if changed.is_err() {
                    return;
                }
                continue;
            }
        };
        let delay = match rx.borrow().mode {
            Mode::Latency(delay) => delay,
            _ => Duration::ZERO,
        };
        if !delay.is_zero() {
            tokio::time::sleep(delay).await;
        }
        // A chunk read just before a pause is held until the relay forwards again.
        if !until_flowing(&mut rx, born).await {
            return;
        }
        if to.write_all(&buf[..n]).await.is_err() {
            return;
        }
    }
}

/// `url` (`scheme://user@host:port/db…`) with its host and port replaced by `addr`.
pub fn through(url: &str, addr: SocketAddr) -> String {
    let (scheme, rest) = url.split_once("://").expect("a url with a scheme");
    let (authority, path) = match rest.find('/') {
        Some(i) => rest.split_at(i),
        None => (rest, ""),
    };
    let user = authority
        .rsplit_once('@')
        .map(|(user, _)| format!("{user}@"))
        .unwrap_or_default();
    format!("{scheme}://{user}{addr}{path}")
}

/// The host and port a `scheme://user@host:port/…` url names (`port` when it names none).
pub fn address_of(url: &str, port: u16) -> SocketAddr {
    let rest = url.split_once("://").map_or(url, |(_, rest)| rest);
    let authority = rest.split('/').next().unwrap_or(rest);
    let host_port = authority.rsplit_once('@').map_or(authority, |(_, hp)| hp);
    let with_port = if host_port.contains(':') {
        host_port.to_owned()
    } else {
        format!("{host_port}:{port}")
    };
    use std::net::ToSocketAddrs;
    with_port
        .to_socket_addrs()
        .expect("resolvable address")
        .next()
        .expect("an address")
}
