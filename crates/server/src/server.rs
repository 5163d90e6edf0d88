//! [`Server`]: the listener, its tokio runtime, and a graceful shutdown; [`ServerBuilder`]
//! to configure one.

use std::fmt;
use std::net::{SocketAddr, TcpListener as StdListener};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};
use tokio::runtime::Runtime;
use tokio::sync::watch;
use tokio::task::{JoinHandle, JoinSet};
use zerodispatch_broker::{Broker, BrokerConfig, BrokerError, OnRelease, Payload, QueueMode};
use zerodispatch_wire::{ErrorCode, ErrorFrame, Frame};

use crate::config::{Limits, LimitsError};
use crate::connection::{self, Shared};
use crate::payloads::PayloadStore;

/// How long [`Server::shutdown`] waits for the connections to close their sessions.
const SHUTDOWN_WAIT: Duration = Duration::from_secs(5);

/// Why a server could not start.
#[derive(Debug)]
#[non_exhaustive]
pub enum ServerError {
    /// A limit out of range.
    Limits(LimitsError),
    /// The broker could not start.
    Broker(BrokerError),
    /// The payload store cannot be allocated.
    Store(crate::payloads::StoreTooLarge),
    /// No broker was given: call [`ServerBuilder::broker_config`] or
    /// [`ServerBuilder::broker`].
    NoBroker,
    /// The listening socket or the runtime could not be set up.
    Io(std::io::Error),
}

impl fmt::Display for ServerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Limits(e) => write!(f, "{e}"),
            Self::Broker(e) => write!(f, "the broker could not start: {e}"),
            Self::Store(e) => write!(f, "{e}; lower store_slots or slot_size"),
            Self::NoBroker => write!(
                f,
                "no broker: give the server a broker configuration or a running broker"
            ),
            Self::Io(e) => write!(f, "cannot listen: {e}"),
        }
    }
}

impl std::error::Error for ServerError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Limits(e) => Some(e),
            Self::Broker(e) => Some(e),
            Self::Store(e) => Some(e),
            Self::Io(e) => Some(e),
            Self::NoBroker => None,
        }
    }
}

/// The server's statistics.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ServerStats {
    /// Connections open now.
    pub connections: usize,
    /// Payload slots free now.
    pub free_slots: usize,
    /// Payload slots in all.
    pub slots: usize,
    /// Uses of a payload handle refused because its message was no longer held (reads,
    /// releases): never expected, a sign of a reference dropped twice.
    pub stale_handles: u64,
    /// Connections closed with `INTERNAL`, whatever the cause: an outbound queue that
    /// overflowed (also counted in [`outbound_overflows`](Self::outbound_overflows)), a
    /// session that could not be opened, a broker queue that did not answer. Never
    /// expected: each is a defect of the server or of the broker it serves.
    pub internal_closes: u64,
    /// Connections closed (with `INTERNAL`) because their outbound queue overflowed: never
    /// expected, since each connection sizes its queue for what can be in flight to it; a
    /// sign of a defect of that sizing.
    pub outbound_overflows: u64,
    /// Connections refused with `TOO_MANY_CONNECTIONS` because
    /// [`Limits::max_connections`] were open.
    pub refused_connections: u64,
}

enum BrokerSource {
    Start(BrokerConfig),
    Running(Arc<Broker>, Vec<QueueMode>, Arc<PayloadStore>),
}

/// Configures and starts a [`Server`].
///
/// ```
/// use zerodispatch_broker::{BrokerConfig, QueueConfig, QueueMode};
/// use zerodispatch_server::{Limits, Server};
///
/// let server = Server::builder()
///     .listen("127.0.0.1:0".parse()?)
///     .broker_config(BrokerConfig {
///         queues: vec![QueueConfig::new(QueueMode::Priority)],
///         ..BrokerConfig::default()
///     })
///     .limits(Limits { store_slots: 1024, ..Limits::default() })
///     .start()?;
/// assert_ne!(server.local_addr().port(), 0);
/// assert_eq!(server.stats().free_slots, 1024);
/// server.shutdown();
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[must_use = "a builder starts nothing until `start()`"]
pub struct ServerBuilder {
    listen: SocketAddr,
    broker: Option<BrokerSource>,
    limits: Limits,
    worker_threads: usize,
}

impl fmt::Debug for ServerBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ServerBuilder")
            .field("listen", &self.listen)
            .field("limits", &self.limits)
            .field("worker_threads", &self.worker_threads)
            .finish_non_exhaustive()
    }
}

impl Default for ServerBuilder {
    fn default() -> Self {
        Self {
            listen: SocketAddr::from(([127, 0, 0, 1], 7878)),
            broker: None,
            limits: Limits::default(),
            worker_threads: 2,
        }
    }
}

impl ServerBuilder {
    /// The address to listen on; default `127.0.0.1:7878`. Port 0 picks a free port
    /// ([`Server::local_addr`] says which).
    pub fn listen(mut self, addr: SocketAddr) -> Self {
        self.listen = addr;
        self
    }

    /// Starts a broker of this configuration with the server, and shuts it down with it.
    pub fn broker_config(mut self, config: BrokerConfig) -> Self {
        self.broker = Some(BrokerSource::Start(config));
        self
    }

    /// Serves a running broker, whose queues have these modes in queue-id order, and
    /// windows no larger than [`Limits::consumer_window`] (what a connection preallocates
    /// for each consumer), with `store` as the payload store: the broker must have been
    /// started with `on_release: Some(store.on_release())`, which frees a payload's slot
    /// when its queue releases the message. The broker is not shut down with the server;
    /// the limits' `store_slots` and `slot_size` are the store's own.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use zerodispatch_broker::{Broker, BrokerConfig, QueueConfig, QueueMode};
    /// use zerodispatch_server::{PayloadStore, Server};
    ///
    /// let store = Arc::new(PayloadStore::try_new(1024, 4096)?);
    /// let broker = Arc::new(Broker::start(BrokerConfig {
    ///     queues: vec![QueueConfig::new(QueueMode::Priority)],
    ///     on_release: Some(store.on_release()),
    ///     ..BrokerConfig::default()
    /// })?);
    /// let server = Server::builder()
    ///     .listen("127.0.0.1:0".parse()?)
    ///     .broker(broker.clone(), vec![QueueMode::Priority], store)
    ///     .start()?;
    /// server.shutdown();
    /// assert!(broker.quiesce().is_ok(), "still running");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn broker(
        mut self,
        broker: Arc<Broker>,
        queues: Vec<QueueMode>,
        store: Arc<PayloadStore>,
    ) -> Self {
        self.broker = Some(BrokerSource::Running(broker, queues, store));
        self
    }

    /// The server's limits.
    pub fn limits(mut self, limits: Limits) -> Self {
        self.limits = limits;
        self
    }

    /// The tokio runtime's worker threads (the connections' I/O; the broker's processors
    /// are threads of their own). Default 2; at least 1.
    pub fn worker_threads(mut self, threads: usize) -> Self {
        self.worker_threads = threads.max(1);
        self
    }

    /// Starts the broker (if configured), binds the listening socket and starts accepting
    /// connections on a runtime of its own.
    ///
    /// # Errors
    ///
    /// A limit out of range (a queue's window above [`Limits::consumer_window`] included),
    /// no broker, a broker that cannot start, a payload store the machine cannot hold, an
    /// address that cannot be bound.
    pub fn start(self) -> Result<Server, ServerError> {
        self.limits.check().map_err(ServerError::Limits)?;
        let (broker, queues, store, owned) = match self.broker.ok_or(ServerError::NoBroker)? {
            BrokerSource::Start(mut config) => {
                if config
                    .queues
                    .iter()
                    .any(|q| q.window > self.limits.consumer_window)
                {
                    return Err(ServerError::Limits(LimitsError {
                        field: "consumer_window",
                        problem: "must be at least every queue's window (what a closing consumer may be handed at once)",
                    }));
                }
                // One part of the store per queue: no queue can take the slots another
                // needs (a full part refuses its queue's publishes `RejectedStoreFull`).
                let store = Arc::new(
                    PayloadStore::try_split(
                        self.limits.store_slots,
                        config.queues.len(),
                        self.limits.slot_size,
                    )
                    .map_err(ServerError::Store)?,
                );
                // The store's hook, after the application's own if it has one.
                let ours = store.on_release();
                config.on_release = Some(match config.on_release.take() {
                    None => ours,
                    Some(theirs) => OnRelease::new(move |released: &[Payload]| {
                        theirs.call(released);
                        ours.call(released);
                    }),
                });
                let queues = config.queues.iter().map(|q| q.mode).collect();
                let broker = Broker::start(config).map_err(ServerError::Broker)?;
                (Arc::new(broker), queues, store, true)
            }
            BrokerSource::Running(broker, queues, store) => (broker, queues, store, false),
        };
        let listener = StdListener::bind(self.listen).map_err(ServerError::Io)?;
        listener.set_nonblocking(true).map_err(ServerError::Io)?;
        let local_addr = listener.local_addr().map_err(ServerError::Io)?;
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(self.worker_threads)
            .thread_name("zd-server-io")
            .enable_io()
            .enable_time()
            .build()
            .map_err(ServerError::Io)?;
        let told = crate::advertised::server_limits(&self.limits, &store, &broker);
        let shared = Arc::new(Shared {
            broker,
            queues: queues.into(),
            store,
            limits: self.limits,
            told,
            connections: AtomicUsize::new(0),
            internal_closes: AtomicU64::new(0),
            outbound_overflows: AtomicU64::new(0),
            refused_connections: AtomicU64::new(0),
        });
        let (stop, stopped) = watch::channel(false);
        let listener = {
            let _guard = runtime.enter();
            TcpListener::from_std(listener).map_err(ServerError::Io)?
        };
        let accept = runtime.spawn(accept(listener, shared.clone(), stopped));
        Ok(Server {
            runtime: Some(runtime),
            accept: Some(accept),
            local_addr,
            stop,
            shared: Some(shared),
            owned,
        })
    }
}

/// Accepts connections until shutdown, then waits for them to close.
///
/// The cap counts connections being served (`Shared::connections`), not the tasks of the
/// set: a refusal is a task too, and a flood of refused connections must not take the
/// places of served ones.
async fn accept(listener: TcpListener, shared: Arc<Shared>, mut stopped: watch::Receiver<bool>) {
    let mut connections = JoinSet::new();
    loop {
        tokio::select! {
            _ = stopped.changed() => break,
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
            accepted = listener.accept() => {
                let Ok((stream, _)) = accepted else {
                    // Out of descriptors, most likely: give the connections a moment to
                    // close some, rather than spin on the error.
                    tokio::time::sleep(ACCEPT_BACKOFF).await;
                    continue;
                };
                // Only this task increments it, so the check and the increment below
                // cannot race past the cap.
                if shared.connections.load(Ordering::Relaxed) >= shared.limits.max_connections {
                    shared.refused_connections.fetch_add(1, Ordering::Relaxed);
                    connections.spawn(refuse(stream, shared.limits.max_connections));
                    continue;
                }
                let place = connection::Place::take(&shared);
                connections.spawn(connection::serve(stream, place, stopped.clone()));
            }
        }
    }
    drop(listener);
    while connections.join_next().await.is_some() {}
}

/// How long the listener waits after a failed accept (out of file descriptors, most
/// often) before it tries again: 10 ms, a pause that costs a flood nothing and keeps the
/// accept loop from spinning on the error.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(10);

/// How long a refused connection is given to take its `TOO_MANY_CONNECTIONS`.
const REFUSAL_WAIT: Duration = Duration::from_secs(1);

/// Tells a connection past `max_connections` so (`TOO_MANY_CONNECTIONS`), and closes it;
/// within [`REFUSAL_WAIT`], whatever the client does.
async fn refuse(mut stream: TcpStream, max_connections: usize) {
    let _ = tokio::time::timeout(REFUSAL_WAIT, async {
        let mut out = Vec::new();
        let message =
            format!("the server has its {max_connections} connections open (max_connections)");
        let _ = Frame::Error(ErrorFrame {
            code: ErrorCode::TOO_MANY_CONNECTIONS,
            refused: None,
            subject: 0,
            message: &message,
        })
        .encode(&mut out);
        let _ = stream.write_all(&out).await;
        let _ = stream.shutdown().await;
    })
    .await;
}

/// The broker over TCP: accepts connections and binds each producer and consumer a client
/// opens to a session of the broker (see the crate's documentation).
pub struct Server {
    runtime: Option<Runtime>,
    accept: Option<JoinHandle<()>>,
    local_addr: SocketAddr,
    stop: watch::Sender<bool>,
    /// Until the server has stopped.
    shared: Option<Arc<Shared>>,
    /// The broker was started with the server, and is shut down with it.
    owned: bool,
}

impl fmt::Debug for Server {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Server")
            .field("local_addr", &self.local_addr)
            .field("stats", &self.stats())
            .finish_non_exhaustive()
    }
}

impl Server {
    /// A builder with the defaults.
    pub fn builder() -> ServerBuilder {
        ServerBuilder::default()
    }

    /// The address the server listens on.
    #[must_use]
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// The broker the server serves.
    #[must_use]
    pub fn broker(&self) -> &Arc<Broker> {
        &self.shared().broker
    }

    fn shared(&self) -> &Shared {
        self.shared
            .as_ref()
            .expect("a server not shut down has its state")
    }

    /// The server's statistics.
    #[must_use]
    pub fn stats(&self) -> ServerStats {
        let shared = self.shared();
        let store = &shared.store;
        ServerStats {
            connections: shared.connections.load(Ordering::Relaxed),
            free_slots: store.free_slots(),
            slots: store.slots(),
            stale_handles: store.stale_handles(),
            internal_closes: shared.internal_closes.load(Ordering::Relaxed),
            outbound_overflows: shared.outbound_overflows.load(Ordering::Relaxed),
            refused_connections: shared.refused_connections.load(Ordering::Relaxed),
        }
    }

    /// Serves until the process ends (for the server binary).
    ///
    /// # Panics
    ///
    /// If called from inside an async runtime (it waits for the server's own).
    pub fn run(mut self) {
        if let (Some(runtime), Some(accept)) = (&self.runtime, self.accept.take()) {
            let _ = runtime.block_on(accept);
        }
    }

    /// Shuts down gracefully: stops accepting; on each connection, closes its consumers,
    /// writes the outcomes of the messages it had handed the broker (for up to 2 s), tells
    /// the client `SHUTTING_DOWN` and closes its sessions (waiting up to 5 s in all for
    /// every connection); then stops the runtime, and shuts the broker down if the server
    /// started it.
    ///
    /// # Panics
    ///
    /// If called from inside an async runtime (it waits for the server's own).
    pub fn shutdown(mut self) {
        self.stop_now();
    }

    fn stop_now(&mut self) {
        let _ = self.stop.send(true);
        let Some(runtime) = self.runtime.take() else {
            return;
        };
        if let Some(accept) = self.accept.take() {
            let _ = runtime.block_on(async { tokio::time::timeout(SHUTDOWN_WAIT, accept).await });
        }
        runtime.shutdown_timeout(Duration::from_secs(1));
        // The broker's last reference, once every connection and blocking close has ended.
        let shared = self
            .shared
            .take()
            .and_then(|shared| Arc::try_unwrap(shared).ok());
        if let Some(shared) = shared.filter(|_| self.owned)
            && let Ok(broker) = Arc::try_unwrap(shared.broker)
        {
            broker.shutdown();
        }
    }
}

/// Shuts the server down as [`Server::shutdown`] does. Not from inside an async runtime:
/// it waits for the server's own.
impl Drop for Server {
    fn drop(&mut self) {
        self.stop_now();
    }
}
