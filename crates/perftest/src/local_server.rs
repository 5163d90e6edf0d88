//! The perftest's own server: a broker, its payload store and the server in front of them,
//! on a loopback port.
//!
//! With `--kill-server <interval>`, the server (the network layer: its listener, every
//! connection and the sessions on them) is shut down and started again on the same port
//! every interval, while the broker and its queues run on. Each shutdown tells every client
//! `SHUTTING_DOWN` and closes its sessions, as a server process restarting in front of a
//! surviving broker would: the producers' unconfirmed messages go again (deduplicated by
//! name), the consumers' deliveries go back to the queue, and the clients reconnect by
//! their backoff, refused until the new listener is up.

use std::error::Error;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex};
use std::thread::{self, JoinHandle};
use std::time::Duration;

use zerodispatch_broker::{Broker, QueueMode};
use zerodispatch_server::{Limits, PayloadStore, Server, ServerError};

use crate::scenario::{Scenario, WINDOW};
use crate::stamp::STAMP_LEN;

/// The broker and the server serving it, restarted on a schedule or not.
pub struct LocalServer {
    broker: Arc<Broker>,
    addr: SocketAddr,
    server: Arc<Mutex<Option<Server>>>,
    restarts: Arc<AtomicU64>,
    /// Dropping the sender stops the restarts.
    restarter: Option<(Sender<()>, JoinHandle<()>)>,
}

/// What a server needs to start (again) in front of the broker.
#[derive(Clone)]
struct Recipe {
    broker: Arc<Broker>,
    queues: Vec<QueueMode>,
    store: Arc<PayloadStore>,
    limits: Limits,
    io_threads: usize,
}

impl Recipe {
    fn start(&self, addr: SocketAddr) -> Result<Server, ServerError> {
        Server::builder()
            .listen(addr)
            .broker(self.broker.clone(), self.queues.clone(), self.store.clone())
            .limits(self.limits)
            .worker_threads(self.io_threads)
            .start()
    }
}

impl LocalServer {
    /// Starts the broker of `scenario` with a payload store and limits sized for every
    /// producer's cap and every consumer's window, and a server on a loopback port;
    /// restarting the server every `scenario.restart_every`, if set.
    ///
    /// # Errors
    ///
    /// The broker, the store or the server cannot start.
    pub fn start(scenario: &Scenario) -> Result<Self, Box<dyn Error>> {
        let mut config = scenario.broker_config();
        let queue_capacity: usize = config.queues.iter().map(|q| q.capacity).sum();
        let consumers = scenario.consumers as usize * scenario.apps() as usize;
        let in_flight = scenario.publishers as usize * scenario.max_unconfirmed as usize;
        let limits = Limits {
            store_slots: (queue_capacity.max(in_flight) + consumers * WINDOW as usize)
                .next_power_of_two(),
            slot_size: (scenario.size as usize).max(STAMP_LEN),
            max_unconfirmed_per_connection: scenario.max_unconfirmed,
            consumer_window: WINDOW,
            ..Limits::default()
        };
        let store = Arc::new(PayloadStore::try_new(limits.store_slots, limits.slot_size)?);
        config.on_release = Some(store.on_release());
        let queues = config.queues.iter().map(|q| q.mode).collect();
        let broker = Arc::new(Broker::start(config)?);
        let recipe = Recipe {
            broker: broker.clone(),
            queues,
            store,
            limits,
            io_threads: scenario.io_threads,
        };
        let server = recipe.start(SocketAddr::from(([127, 0, 0, 1], 0)))?;
        let addr = server.local_addr();
        let server = Arc::new(Mutex::new(Some(server)));
        let restarts = Arc::new(AtomicU64::new(0));
        let restarter = scenario
            .restart_every
            .map(|every| {
                let (stop, stopped) = mpsc::channel::<()>();
                let (server, restarts) = (server.clone(), restarts.clone());
                let thread = thread::Builder::new()
                    .name("perftest-restart".into())
                    .spawn(move || {
                        // Until the sender is dropped: shut down, start again, count.
                        while stopped.recv_timeout(every) == Err(RecvTimeoutError::Timeout) {
                            let old = lock(&server).take();
                            drop(old); // a graceful shutdown, as `Server::shutdown`
                            let new = start_again(&recipe, addr, &stopped);
                            let started = new.is_some();
                            *lock(&server) = new;
                            if !started {
                                return;
                            }
                            restarts.fetch_add(1, Ordering::Relaxed);
                        }
                    })?;
                Ok::<_, std::io::Error>((stop, thread))
            })
            .transpose()?;
        Ok(Self {
            broker,
            addr,
            server,
            restarts,
            restarter,
        })
    }

    /// Where the clients connect.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The broker (it outlives the restarts).
    pub fn broker(&self) -> &Broker {
        &self.broker
    }

    /// Times the server was shut down and started again.
    pub fn restarts(&self) -> u64 {
        self.restarts.load(Ordering::Relaxed)
    }

    /// Stops the restarts; the server runs on.
    pub fn stop_restarting(&mut self) {
        if let Some((stop, thread)) = self.restarter.take() {
            drop(stop);
            let _ = thread.join();
        }
    }

    /// Stops the restarts, shuts the server down, then the broker.
    pub fn shutdown(mut self) {
        self.stop_restarting();
        drop(lock(&self.server).take());
        if let Ok(broker) = Arc::try_unwrap(self.broker) {
            broker.shutdown();
        }
    }
}

/// Starts the server on `addr` again, retrying while the port is not free yet, until it
/// starts or the restarts are stopped.
fn start_again(recipe: &Recipe, addr: SocketAddr, stopped: &mpsc::Receiver<()>) -> Option<Server> {
    loop {
        match recipe.start(addr) {
            Ok(server) => return Some(server),
            Err(error) => {
                eprintln!("perftest: restarting the server on {addr}: {error}; retrying");
                if stopped.recv_timeout(Duration::from_millis(10)) != Err(RecvTimeoutError::Timeout)
                {
                    return None;
                }
            }
        }
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}
