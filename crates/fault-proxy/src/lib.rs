//! A loopback TCP proxy that drops the connections through it on demand or on a timer:
//! connection loss for the client's tests (against the real server) and for the
//! perftest's `--kill-connections`, written once.
//!
//! Clients connect to the proxy instead of the server; the proxy opens a connection to
//! the server for each and copies bytes both ways. To kill one, it drops both of its
//! sockets: the server sees its peer gone (as when a client's machine dies) and the client
//! sees its peer gone and reconnects, through the proxy again. Nothing in the server or
//! the client knows the proxy is there, so it works against any server, one started
//! elsewhere included.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> std::io::Result<()> {
//! use tokio::io::{AsyncReadExt, AsyncWriteExt};
//! use zerodispatch_fault_proxy::FaultProxy;
//!
//! // An upstream that says hello to each connection.
//! let upstream = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
//! let upstream_addr = upstream.local_addr()?;
//! tokio::spawn(async move {
//!     while let Ok((mut s, _)) = upstream.accept().await {
//!         tokio::spawn(async move {
//!             let _ = s.write_all(b"hello").await;
//!             let _ = s.read(&mut [0; 1]).await; // held open until the peer goes
//!         });
//!     }
//! });
//!
//! let proxy = FaultProxy::start(upstream_addr).await?;
//! let mut client = tokio::net::TcpStream::connect(proxy.addr()).await?;
//! let mut hello = [0; 5];
//! client.read_exact(&mut hello).await?;
//! assert_eq!(&hello, b"hello");
//! while proxy.live() == 0 {
//!     tokio::task::yield_now().await;
//! }
//! assert_eq!(proxy.kill_all(), 1);
//! assert_eq!(client.read(&mut hello).await?, 0, "the client sees the connection closed");
//! assert_eq!(proxy.killed(), 1);
//! # Ok(())
//! # }
//! ```

#![forbid(unsafe_code)]

use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::net::{TcpListener, TcpStream};
use tokio::runtime::Handle;
use tokio::task::{AbortHandle, JoinHandle};

/// The proxy: where the clients connect, the connections through it, and how many it has
/// killed. Dropping it stops it and drops every connection through it.
#[derive(Debug)]
pub struct FaultProxy {
    addr: SocketAddr,
    shared: Arc<Shared>,
    /// The runtime the proxy runs on, for the killer task of [`FaultProxy::kill_every`].
    runtime: Handle,
    accept: JoinHandle<()>,
    killer: Option<JoinHandle<()>>,
}

/// What the proxy's tasks and its owner share.
#[derive(Debug, Default)]
struct Shared {
    /// The connections through the proxy. Invariant: exactly the live ones, each with the
    /// handle that kills it: a connection's entry is pushed, under this lock, in the same
    /// critical section that spawns its task, and is removed by that task when the
    /// connection ends by itself (it takes the lock, so it cannot run before the push) or
    /// by the kill that aborts it.
    live: Mutex<Vec<(u64, AbortHandle)>>,
    /// Connections killed so far.
    killed: AtomicU64,
    /// The state of the xorshift that picks [`FaultProxy::kill_one`]'s victim.
    seed: AtomicU64,
}

impl Shared {
    fn live(&self) -> MutexGuard<'_, Vec<(u64, AbortHandle)>> {
        // A panic while holding it cannot leave the table half-written: every change is
        // one push or one removal.
        self.live.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Kills the connections `pick` chooses from the live ones; returns how many.
    fn kill(&self, pick: impl FnOnce(usize) -> std::ops::Range<usize>) -> usize {
        let victims: Vec<_> = {
            let mut live = self.live();
            let range = pick(live.len());
            live.drain(range).collect()
        };
        for (_, link) in &victims {
            link.abort();
        }
        self.killed
            .fetch_add(victims.len() as u64, Ordering::Relaxed);
        victims.len()
    }

    /// Kills one live connection, chosen at random; `false` if there was none.
    fn kill_one(&self) -> bool {
        self.kill(|n| match n {
            0 => 0..0,
            n => {
                let i = self.next_below(n);
                i..i + 1
            }
        }) == 1
    }

    /// The next index below `n` (not 0): spread over the connections, not cryptographic.
    fn next_below(&self, n: usize) -> usize {
        let mut x = self.seed.load(Ordering::Relaxed);
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        // Relaxed: one killer at a time in practice, and a lost update only repeats a
        // pick.
        self.seed.store(x, Ordering::Relaxed);
        (x % n as u64) as usize
    }
}

impl FaultProxy {
    /// Starts a proxy to `upstream` on a free loopback port, on the current tokio
    /// runtime.
    ///
    /// # Errors
    ///
    /// The loopback port cannot be bound.
    ///
    /// # Panics
    ///
    /// Outside a tokio runtime.
    pub async fn start(upstream: SocketAddr) -> io::Result<Self> {
        let listener = TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], 0))).await?;
        let addr = listener.local_addr()?;
        let shared = Arc::new(Shared {
            seed: AtomicU64::new(0x9E37_79B9_7F4A_7C15),
            ..Shared::default()
        });
        let accept = tokio::spawn(accept(listener, upstream, Arc::clone(&shared)));
        Ok(Self {
            addr,
            shared,
            runtime: Handle::current(),
            accept,
            killer: None,
        })
    }

    /// Where the clients connect.
    #[must_use]
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Connections through the proxy now.
    #[must_use]
    pub fn live(&self) -> usize {
        self.shared.live().len()
    }

    /// Connections killed so far, by every kind of kill.
    #[must_use]
    pub fn killed(&self) -> u64 {
        self.shared.killed.load(Ordering::Relaxed)
    }

    /// Drops every connection through the proxy now (both sides see it closed); returns
    /// how many.
    pub fn kill_all(&self) -> usize {
        self.shared.kill(|n| 0..n)
    }

    /// Drops one connection through the proxy, chosen at random; `false` if there was
    /// none.
    pub fn kill_one(&self) -> bool {
        self.shared.kill_one()
    }

    /// From now on, drops one connection chosen at random every `every` (the first after
    /// one interval), until [`stop_killing`](Self::stop_killing) or the proxy is dropped;
    /// replaces an earlier `kill_every`.
    pub fn kill_every(&mut self, every: Duration) {
        self.stop_killing();
        let shared = Arc::clone(&self.shared);
        self.killer = Some(self.runtime.spawn(async move {
            let mut tick = tokio::time::interval(every);
            tick.tick().await; // the first tick is immediate
            loop {
                tick.tick().await;
                shared.kill_one();
            }
        }));
    }

    /// Stops the killing of [`kill_every`](Self::kill_every); the connections alive stay
    /// up.
    pub fn stop_killing(&mut self) {
        if let Some(killer) = self.killer.take() {
            killer.abort();
        }
    }
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        self.stop_killing();
        self.accept.abort();
        for (_, link) in self.shared.live().drain(..) {
            link.abort();
        }
    }
}

/// Accepts clients, and links each to a new connection to `upstream`.
async fn accept(listener: TcpListener, upstream: SocketAddr, shared: Arc<Shared>) {
    let mut next = 0_u64;
    while let Ok((mut client, _)) = listener.accept().await {
        let Ok(mut server) = TcpStream::connect(upstream).await else {
            continue; // the client sees its connection close, and retries
        };
        let _ = (client.set_nodelay(true), server.set_nodelay(true));
        let id = next;
        next += 1;
        let mut live = shared.live();
        let ended = Arc::clone(&shared);
        let link = tokio::spawn(async move {
            let _ = tokio::io::copy_bidirectional(&mut client, &mut server).await;
            ended.live().retain(|(i, _)| *i != id);
            // Dropping both sockets ends the connection on both sides.
        });
        live.push((id, link.abort_handle()));
    }
}
