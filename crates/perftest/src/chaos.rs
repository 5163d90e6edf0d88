//! `--kill-connections <interval>`: a TCP proxy between the perftest's clients and the
//! server that drops one of the connections through it, chosen at random, every interval.
//!
//! The clients connect to the proxy instead of the server; the proxy opens a connection to
//! the server for each and copies bytes both ways. To kill one, it drops both of its sockets:
//! the server sees its peer gone (as when a client's machine dies), tears the connection's
//! sessions down and redelivers what its consumers held; the client sees its peer gone and
//! reconnects, through the proxy again. Nothing in the server or the client knows the proxy
//! is there, so it works against a server started elsewhere (`--connect`) too.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::net::{TcpListener, TcpStream};
use tokio::runtime::Runtime;
use tokio::sync::Notify;
use tokio::task::JoinHandle;

/// The proxy: where the clients connect, and how many connections it has killed.
pub struct Chaos {
    addr: SocketAddr,
    killed: Arc<AtomicU64>,
    tasks: Vec<JoinHandle<()>>,
}

/// The connections through the proxy, each with the signal that kills it.
type Live = Arc<Mutex<Vec<(u64, Arc<Notify>)>>>;

impl Chaos {
    /// Starts a proxy to `upstream` on a loopback port, on `runtime`, killing a random
    /// connection every `every`.
    ///
    /// # Errors
    ///
    /// The loopback port cannot be bound.
    pub fn start(
        runtime: &Runtime,
        upstream: SocketAddr,
        every: Duration,
    ) -> std::io::Result<Self> {
        let listener =
            runtime.block_on(TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], 0))))?;
        let addr = listener.local_addr()?;
        let live: Live = Arc::new(Mutex::new(Vec::new()));
        let killed = Arc::new(AtomicU64::new(0));
        let accept = runtime.spawn(accept(listener, upstream, live.clone()));
        let killer = runtime.spawn(kill_every(every, live, killed.clone()));
        Ok(Self {
            addr,
            killed,
            tasks: vec![accept, killer],
        })
    }

    /// Where the clients connect.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Connections killed so far.
    pub fn killed(&self) -> u64 {
        self.killed.load(Ordering::Relaxed)
    }

    /// Stops killing connections (those alive stay up until the proxy is dropped).
    pub fn stop_killing(&mut self) {
        if self.tasks.len() > 1 {
            self.tasks.pop().expect("the killer task").abort();
        }
    }
}

impl Drop for Chaos {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}

async fn accept(listener: TcpListener, upstream: SocketAddr, live: Live) {
    let mut next = 0_u64;
    while let Ok((client, _)) = listener.accept().await {
        let Ok(server) = TcpStream::connect(upstream).await else {
            continue; // the client sees its connection close, and retries
        };
        let _ = (client.set_nodelay(true), server.set_nodelay(true));
        let kill = Arc::new(Notify::new());
        let id = next;
        next += 1;
        live.lock()
            .unwrap_or_else(|e| e.into_inner())
            .push((id, kill.clone()));
        let live = live.clone();
        tokio::spawn(async move {
            let (mut client, mut server) = (client, server);
            tokio::select! {
                _ = tokio::io::copy_bidirectional(&mut client, &mut server) => {}
                () = kill.notified() => {}
            }
            live.lock()
                .unwrap_or_else(|e| e.into_inner())
                .retain(|(i, _)| *i != id);
            // Dropping both sockets ends the connection on both sides.
        });
    }
}

async fn kill_every(every: Duration, live: Live, killed: Arc<AtomicU64>) {
    // xorshift: which connection dies need not be cryptographic, only spread.
    let mut seed = 0x9E37_79B9_7F4A_7C15_u64;
    let mut tick = tokio::time::interval(every);
    tick.tick().await; // the first tick is immediate
    loop {
        tick.tick().await;
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        let victim = {
            let live = live.lock().unwrap_or_else(|e| e.into_inner());
            (!live.is_empty()).then(|| live[(seed % live.len() as u64) as usize].1.clone())
        };
        if let Some(kill) = victim {
            kill.notify_one();
            killed.fetch_add(1, Ordering::Relaxed);
        }
    }
}
