//! The broker: configuration, start-up, and the calls an application (or a test, or the
//! perftest) makes: open producers and consumers, publish, close, inject replica confirms and receipts,
//! query the cluster, read stats, shut down.
//!
//! This file holds [`Broker`] itself, the errors its calls share, and the calls that read
//! or wait for the whole broker (statistics, `quiesce`, `execute`). The rest is in its
//! submodules, one concern each:
//!
//! * `config.rs`: [`BrokerConfig`], [`QueueConfig`], [`ConsumerOptions`];
//! * `lifecycle.rs`: `Broker::start` (the checks, the pools, the queues, the cluster) and
//!   `Broker::shutdown`;
//! * `producer.rs`: opening a producer, and [`Producer`]'s publishing calls; its close
//!   protocol in `producer/close.rs`, its ticker thread in `producer/ticker.rs`;
//! * `named.rs`: named producers, and what a queue has stored of a name;
//! * `consumer.rs`: [`Consumer`]: opening and closing one, confirms, credit;
//! * `replicas.rs`: the replicas' confirms and receipts, and the cluster's state.
//! * `stepped.rs`: the broker on a stepped dispatcher ([`Broker::start_stepped`]) and its
//!   seeded simulator ([`BrokerSimulator`]); what the waiting calls do there.
//!
//! # Calls made on a processor thread
//!
//! A processor never waits for a processor. The calls of this module and its submodules
//! may run on one (from `on_ack`, `on_delivery` or a dispatcher callback), so none of them
//! waits there: `send` at the cap hands the message back (`SendError::WouldBlock`), a
//! dispatch that finds the processor's outbox full comes back as `SendError::WouldBlock`
//! (the message handed back) or `BrokerError::OutboxFull`, `close` does not wait for
//! outcomes, and the calls that can only wait (`cluster_state`, `quiesce`) return
//! `BrokerError::OnProcessorThread` at once.

mod config;
mod consumer;
mod lifecycle;
mod named;
mod producer;
mod replicas;
mod stepped;

use std::fmt;
use std::sync::atomic::{AtomicU64, AtomicUsize};
use std::sync::{Arc, Mutex};

use crossbeam_utils::CachePadded;
use zerodispatch_callback::Callback;
use zerodispatch_core::{
    ClientHandle, ClientType, DispatchError, DispatcherHandle, ProcessorId, ProcessorSnapshot,
    SyncError,
};

use crate::credits::Credits;
use crate::dedup::StoredIds;
use crate::error::BrokerError;
use crate::names::Names;
use crate::protocol::BrokerMsg;
use crate::replication::Replication;
use crate::stats::{ClusterCounters, QueueCounters, QueueStats, SessionRegistry, SessionStats};

pub use config::{BrokerConfig, ConsumerOptions, QueueConfig};
pub use consumer::Consumer;
pub use producer::Producer;
pub use stepped::BrokerSimulator;

use stepped::Owner;

/// A broker's confirm path, in-process: queues on queue processors, sessions on session
/// processors, one cluster processor.
pub struct Broker {
    /// The handle of the dispatcher `owner` holds: every call of the broker goes through
    /// it, on threads and stepped alike.
    dispatcher: DispatcherHandle<BrokerMsg>,
    /// The dispatcher itself, with threads or stepped ([`Broker::start_stepped`]).
    owner: Owner,
    /// Whether `owner` is stepped: its processors run only when its simulator (or a call
    /// that runs them until idle) turns them, so no call of the broker may wait for them.
    stepped: bool,
    queues: Arc<[ClientHandle]>,
    queue_configs: Vec<QueueConfig>,
    queue_counters: Vec<Arc<CachePadded<QueueCounters>>>,
    sessions: Arc<SessionRegistry>,
    cluster: ClientHandle,
    cluster_counters: Arc<CachePadded<ClusterCounters>>,
    /// Replica confirms sent to the cluster and not yet routed, at most the cluster
    /// processor's event capacity (see `cluster.rs`, "Back-pressure").
    replica_credits: Arc<Credits>,
    /// Consumers' confirms sent to the cluster and not yet routed, at most the cluster
    /// processor's event capacity.
    consumer_credits: Arc<Credits>,
    max_batch: usize,
    event_capacity: usize,
    replication: Option<Replication>,
    /// Producer names and their ids: taken at open and close only.
    names: Arc<Mutex<Names>>,
    /// Each queue's highest publish id stored per named producer, by queue id.
    stored_ids: Vec<StoredIds>,
    /// [`BrokerConfig::dedup_window`]: a named producer's `max_unconfirmed` at most.
    dedup_window: usize,
    /// Anonymous producers opened so far: the next one's id and generation
    /// (`Broker::anonymous_id`).
    anonymous_producers: AtomicU64,
    /// [`BrokerConfig::max_producer_names`]: ids below it are names'.
    max_producer_names: u32,
    /// Consumers opened so far: the next one's id.
    consumers_opened: AtomicU64,
    /// Consumers open now (for the warning of an event capacity below what they may be
    /// sent).
    consumers_open: Arc<AtomicUsize>,
    /// Per session processor, its producers' tickers, running or reserved by a producer
    /// being opened ([`BrokerConfig::timed_producers`] at most).
    timed_producers: Vec<Arc<std::sync::atomic::AtomicUsize>>,
    timed_producers_limit: usize,
}

impl fmt::Debug for Broker {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Broker")
            .field("queues", &self.queues.len())
            .finish_non_exhaustive()
    }
}

impl Broker {
    /// The error for a dispatch of the broker's own that came back: `Full` only comes back
    /// on a processor thread whose outbox is full, where it cannot wait for room (elsewhere
    /// a dispatch waits), and `NoSuchProcessor` never does (the broker's handles are its
    /// dispatcher's own).
    fn refused<T>(&self, e: DispatchError<T>) -> BrokerError {
        match (e, self.dispatcher.current_processor()) {
            (DispatchError::Full(_), Some(p)) => BrokerError::OutboxFull(p),
            _ => BrokerError::ShutDown,
        }
    }

    /// `Err(OnProcessorThread)` on one of the broker's processor threads: for the calls that
    /// wait for a processor, which a processor must never do.
    fn off_processor_threads(&self) -> Result<(), BrokerError> {
        match self.dispatcher.current_processor() {
            Some(p) => Err(BrokerError::OnProcessorThread(p)),
            None => Ok(()),
        }
    }

    /// Each queue's statistics, by queue id.
    #[must_use]
    pub fn queue_stats(&self) -> Vec<QueueStats> {
        self.queue_counters.iter().map(|c| c.snapshot()).collect()
    }

    /// All sessions' statistics together, closed sessions' included.
    #[must_use]
    pub fn session_stats(&self) -> SessionStats {
        self.sessions.total()
    }

    /// Waits until every event in flight has been handled: synchronizes every processor
    /// (sessions, cluster, queues, round after round) until a full round finds
    /// no processor with work left and no counter moved. For application threads only.
    ///
    /// # Errors
    ///
    /// `ShutDown`; `OnProcessorThread` when called on one of the broker's processor threads
    /// (in `on_ack` or `on_delivery`, say), where it must not wait; `ProcessorDied` if a
    /// processor's thread is gone.
    pub fn quiesce(&self) -> Result<(), BrokerError> {
        self.off_processor_threads()?;
        let order = [ClientType::Session, ClientType::Cluster, ClientType::Queue];
        let mut last = None;
        loop {
            for t in order {
                for p in self.dispatcher.processors(t) {
                    self.dispatcher.synchronize(p).map_err(sync_refused)?;
                }
            }
            // Quiet when a full round moved none of the broker's counters and left no event
            // queued anywhere (the processors' own `processed` moves with every marker).
            let now = (self.queue_stats(), self.session_stats());
            let idle = self.dispatcher.stats().iter().all(|s| s.depth == 0);
            if idle && last.as_ref() == Some(&now) {
                return Ok(());
            }
            last = Some(now);
        }
    }

    /// The broker's processors of `client_type` (sessions, queues, or the cluster), in
    /// order: to name one to [`execute`](Self::execute) on, or to find one in
    /// [`processor_stats`](Self::processor_stats) or in an error.
    #[must_use]
    pub fn processors(&self, client_type: ClientType) -> Vec<ProcessorId> {
        self.dispatcher.processors(client_type)
    }

    /// Each processor's statistics (enqueued, processed, depth, flushes, panics, stale
    /// events, time in queue...), read without stopping it.
    #[must_use]
    pub fn processor_stats(&self) -> Vec<ProcessorSnapshot> {
        self.dispatcher.stats()
    }

    /// Runs `callback` on `processor` as a dispatcher callback: after the processor has
    /// flushed its clients, and after every event enqueued to it before this call. Waits
    /// while the processor's queue is full (on a processor thread, the callback waits in
    /// that processor's outbox instead). The callback sees no client of the broker: it is
    /// for work of the application's own that must run on that thread.
    ///
    /// # Errors
    ///
    /// As the core's [`DispatcherHandle::execute`]: `ShutDown`, `NoSuchProcessor`, or
    /// `Full` on a processor thread whose outbox is full, with the callback handed back.
    pub fn execute(
        &self,
        processor: ProcessorId,
        callback: Callback,
    ) -> Result<(), DispatchError<Callback>> {
        self.dispatcher.execute(processor, callback)
    }
}

/// The error for a call into a processor (`synchronize`, `call`) that came back.
fn sync_refused(e: SyncError) -> BrokerError {
    match e {
        SyncError::OnProcessorThread(p) => BrokerError::OnProcessorThread(p),
        SyncError::ShutDown => BrokerError::ShutDown,
        other => BrokerError::ProcessorDied(other),
    }
}
