//! `--kill-connections <interval>`: the perftest's clients connect through the shared fault
//! proxy (`zerodispatch-fault-proxy`, the one the client's tests use too), which drops one
//! of the connections through it, chosen at random, every interval.
//!
//! To kill one, the proxy drops both of its sockets: the server sees its peer gone (as when
//! a client's machine dies), tears the connection's sessions down and redelivers what its
//! consumers held; the client sees its peer gone and reconnects, through the proxy again.
//! Nothing in the server or the client knows the proxy is there, so it works against a
//! server started elsewhere (`--connect`) too.

use std::net::SocketAddr;
use std::time::Duration;

use tokio::runtime::Runtime;
use zerodispatch_fault_proxy::FaultProxy;

/// The proxy of a run: where the clients connect, and how many connections it has killed.
pub struct Chaos {
    proxy: FaultProxy,
}

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
        let mut proxy = runtime.block_on(FaultProxy::start(upstream))?;
        proxy.kill_every(every);
        Ok(Self { proxy })
    }

    /// Where the clients connect.
    pub fn addr(&self) -> SocketAddr {
        self.proxy.addr()
    }

    /// Connections killed so far.
    pub fn killed(&self) -> u64 {
        self.proxy.killed()
    }

    /// Stops killing connections (those alive stay up until the proxy is dropped).
    pub fn stop_killing(&mut self) {
        self.proxy.stop_killing();
    }
}
