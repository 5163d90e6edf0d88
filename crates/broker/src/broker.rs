//! The broker: configuration, start-up, and the calls an application (or a test, or the
//! perftest) makes: open producers and consumers, publish, close, inject replica confirms and receipts,
//! query the cluster, read stats, shut down.
//!
//! # Closing a producer, and the calls that race it
//!
//! Closing unregisters the producer's session, which frees its client slot and its tables:
//! a message that reached the session after that would be lost. So the unregistration is
//! ordered after every publish that passed the closed check, with `Producer::state`, one
//! word that holds two flags and the count of calls inside `Producer::enqueue`:
//!
//! 1. A publishing call enters by a compare-and-swap that adds one to the count only while
//!    `CLOSED` is clear (so no call enters once it is set), dispatches its message, and
//!    leaves by subtracting one.
//! 2. `close` sets `CLOSED` (later calls are refused with `Closed`), gives the messages in flight
//!    their wait, sends the session `Close` (everything still without an outcome is
//!    reported then), and sets `RETIRED`.
//! 3. The session is retired (sent `Retire`) by whoever brings the word to
//!    `CLOSED | RETIRED` with a count of zero: `close`, if no call was inside when it set
//!    `RETIRED`, or else the last call to leave. Exactly one of them sees that transition,
//!    since every change of the word is a read-modify-write. The session unregisters
//!    itself once the ACKs of every PUT it sent have come (counted `late_acks`).
//!
//! A call inside when `CLOSED` was set may reach the session after its `Close`: the session
//! reports such a message `Closed`, and the message still reaches it before the
//! unregistration. Neither side ever waits for the other.
//!
//! # Calls made on a processor thread
//!
//! A processor never waits for a processor. The calls below may run on one (from
//! `on_ack`, `on_delivery` or a dispatcher callback), so none of them waits there: `send`
//! at the cap hands the message back (`SendError::WouldBlock`), a dispatch that finds the
//! processor's outbox full comes back as `SendError::WouldBlock` (the message handed back)
//! or `BrokerError::OutboxFull`, `close` does not wait for outcomes, and the calls that can
//! only wait (`cluster_state`, `quiesce`) return `BrokerError::OnProcessorThread` at once.

use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use crossbeam_utils::CachePadded;
use zerodispatch_callback::Callback;
use zerodispatch_core::{
    ClientHandle, ClientType, ConfigError, DispatchError, Dispatcher, DispatcherHandle, Event,
    Placement, PoolConfig, Problem, ProcessorId, ProcessorSnapshot, SyncError, WaitStrategy,
};

use crate::cluster::ClusterClient;
use crate::credits::Credits;
use crate::dedup::{MAX_DEDUP_WINDOW, MIN_DEDUP_WINDOW, StoredIds, StoredWindow};
use crate::error::{BrokerError, SendError};
use crate::ids::{AppId, ConsumerId, Guid, Payload, ProducerId, QueueId};
use crate::message::{Ack, BrokerMsg, Confirm, ConfirmMode, ConfirmRoute, Confirms, Delivery};
use crate::names::{MAX_PRODUCER_NAMES, Names};
use crate::queue::{MAX_APPS, MAX_QUEUE_CAPACITY, QueueClient, QueueEngine, QueueMode};
use crate::release::OnRelease;
use crate::replication::{Receipt, Replication};
use crate::session::{
    AckHandler, ConsumerSession, FRAME_OVERHEAD, FlushStrategy, MAX_UNCONFIRMED, Pacing,
    ProducerConfig, ProducerSession,
};
use crate::stats::{
    ClusterCounters, ClusterState, QueueCounters, QueueStats, SessionRegistry, SessionStats,
};

/// One queue of the broker.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QueueConfig {
    /// Priority or fanout.
    pub mode: QueueMode,
    /// Messages the queue holds at most (its table is allocated at start): 1 to
    /// [`MAX_QUEUE_CAPACITY`].
    pub capacity: usize,
    /// Unconfirmed shares a consumer may hold.
    pub window: u32,
}

impl QueueConfig {
    /// A queue of `mode` holding 16,384 messages, each consumer holding up to 1,024
    /// unconfirmed.
    #[must_use]
    pub fn new(mode: QueueMode) -> Self {
        Self {
            mode,
            capacity: 1 << 14,
            window: 1 << 10,
        }
    }
}

/// The broker's configuration.
#[derive(Clone, Debug)]
pub struct BrokerConfig {
    /// The queues, in queue-id order.
    pub queues: Vec<QueueConfig>,
    /// Session processors (producers' and consumers' sessions).
    pub session_processors: usize,
    /// Queue processors.
    pub queue_processors: usize,
    /// Each processor's queue capacity, and its outbox's (the events its clients dispatch
    /// to full queues, handed on as room appears: a processor never waits for another).
    /// Session processors receive a queue's PUSHes (at most consumers x window) and ACKs
    /// (at most the queues' capacity): sized above their sum, events rarely wait in an
    /// outbox; sized below, they do, which costs latency but never stalls the broker.
    pub event_capacity: usize,
    /// Each processor's `max_batch`.
    pub max_batch: usize,
    /// How every processor waits for work.
    pub wait: WaitStrategy,
    /// Cores to pin the processors to, dealt out in turn across all pools (sessions first,
    /// then queues, then the cluster), wrapping around; empty for none.
    pub cores: Vec<usize>,
    /// Replication of every queue's messages: with it a message is ACKed once `quorum`
    /// replicas have sent their receipt ([`Broker::replica_receipt`]); without it (the
    /// default), as soon as its queue stores it.
    pub replication: Option<Replication>,
    /// The application's hook for the payloads its queues release (every share confirmed
    /// or dropped, and the ACK gone): from then on the broker never reads or hands out
    /// that payload again, and its bytes may be freed. `None` (the default): not told.
    pub on_release: Option<OnRelease>,
    /// Producer names the broker remembers, at most (0 to [`MAX_PRODUCER_NAMES`]): named
    /// producers ([`Broker::open_named_producer`]) take ids `0..max_producer_names`,
    /// anonymous ones the ids above. Each queue keeps 8 bytes per name, allocated at start,
    /// for deduplication. A name is never forgotten while the broker runs; once this many
    /// have been opened, a new one is refused ([`BrokerError::TooManyNames`]). 1,024 by
    /// default.
    pub max_producer_names: usize,
    /// Publish ids each queue remembers exactly, per producer name, for deduplication
    /// (`dedup.rs`): for each of the last `dedup_window` ids below the highest it stored
    /// for a name, whether it stored it. A power of two from [`MIN_DEDUP_WINDOW`] to
    /// [`MAX_DEDUP_WINDOW`]; a named producer's `max_unconfirmed` may not exceed it, so that
    /// every message it resends after a lost connection is inside the window. Each queue
    /// keeps `8 + dedup_window / 8` bytes per name, allocated at start (16,384 by default:
    /// 2,056 bytes per name and queue).
    pub dedup_window: usize,
}

impl Default for BrokerConfig {
    fn default() -> Self {
        Self {
            queues: Vec::new(),
            session_processors: 1,
            queue_processors: 1,
            event_capacity: 1 << 16,
            max_batch: 256,
            wait: WaitStrategy::default(),
            cores: Vec::new(),
            replication: None,
            on_release: None,
            max_producer_names: 1 << 10,
            dedup_window: 1 << 14,
        }
    }
}

/// How a consumer confirms, and how it is paced.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ConsumerOptions {
    /// Inline functor, typed message or boxed functor.
    pub mode: ConfirmMode,
    /// Straight to the queue, or through the cluster processor.
    pub route: ConfirmRoute,
    /// When `on_return` returns (the default), or when the application calls
    /// [`Broker::confirm`].
    pub confirms: Confirms,
    /// How many deliveries `on_delivery` may be handed before the application gives more
    /// with [`Broker::add_credit`]; `Some(0)` starts paused. `None` (the default): no limit
    /// but the queue's window. Deliveries waiting for credit stay in the session, at most
    /// the window, and the queue sends no more than that.
    pub credit: Option<u32>,
}

/// A producer: publishes from any thread of the application. Dropping it closes it
/// (waiting up to 1 s for the outcomes of what is in flight, or not at all on a processor
/// thread). A message that races a close from another thread is either refused, and handed
/// back, or gets its outcome: never lost.
#[derive(Debug)]
pub struct Producer {
    id: ProducerId,
    session: ClientHandle,
    next_seq: AtomicU64,
    dispatcher: DispatcherHandle<BrokerMsg>,
    config: ProducerConfig,
    credits: Arc<Credits>,
    /// `CLOSED`, `RETIRED`, and the count of calls inside `enqueue` (the bits below
    /// `RETIRED`): the protocol in the module's doc.
    state: AtomicUsize,
    /// The thread that sends `Tick`s (timer aggregation, confirm timeouts), if any.
    ticker: Mutex<Option<(Arc<AtomicBool>, JoinHandle<()>)>>,
    /// A named producer's table of names, where `close` frees its name; `None` for an
    /// anonymous producer.
    names: Option<Arc<Mutex<Names>>>,
}

/// `Producer::state`: closed; no call enters `enqueue` any more.
const CLOSED: usize = 1 << (usize::BITS - 1);
/// `Producer::state`: `close` has sent the session `Close`; the session may go once no call
/// is inside `enqueue`.
const RETIRED: usize = 1 << (usize::BITS - 2);
/// `Producer::state`: the bits that count the calls inside `enqueue`.
const INSIDE: usize = RETIRED - 1;

impl Producer {
    /// This producer's id.
    #[must_use]
    pub fn id(&self) -> ProducerId {
        self.id
    }

    /// Publishes a message to `queue` without taking a credit: no back-pressure beyond the
    /// session's table, which rejects past `max_unconfirmed` (`RejectedProducerFull`). Its
    /// outcome comes to the producer's `on_ack`, exactly once. Waits while the session
    /// processor's queue is full. Allocates nothing.
    ///
    /// On a processor thread of the broker (in `on_ack`, say) it never waits: a full
    /// queue is waited for in the processor's outbox, and only when that is full too is the
    /// message handed back (`WouldBlock`).
    ///
    /// # Errors
    ///
    /// The message was not published, and comes back in the error:
    /// `TooLarge` for a message that cannot fit a frame; `Closed` after
    /// [`close`](Self::close); `ShutDown` once the broker is shutting down; `WouldBlock` on
    /// a processor thread whose outbox is full.
    pub fn publish(&self, queue: QueueId, payload: Payload) -> Result<Guid, SendError> {
        self.check(payload, None)?;
        self.enqueue(queue, payload, false, None)
    }

    /// As [`publish`](Self::publish), numbered by the caller: the message's GUID is
    /// `Guid::new(self.id(), publish_id)`. The form a named producer
    /// ([`Broker::open_named_producer`]) publishes with, so that a message published again
    /// with its id after a lost connection is known for a duplicate by its queue: ACKed
    /// again, not stored or delivered twice (`QueueStats::deduplicated`).
    ///
    /// Ids must increase along a named producer's stream, across its reopenings under the
    /// same name; a message whose outcome was not `Acked` is published again with its id
    /// before any later message is stored, or with a new, higher id (one published with
    /// its old id after a later one was stored is taken for a duplicate). `u64::MAX` is
    /// never deduplicated. An anonymous producer may use it too (never deduplicated): its
    /// ids must then not repeat a GUID in flight, nor mix with [`publish`](Self::publish)'s
    /// numbering.
    ///
    /// ```
    /// use std::sync::{Arc, Mutex};
    /// use zerodispatch_broker::*;
    ///
    /// let broker = Broker::start(BrokerConfig {
    ///     queues: vec![QueueConfig::new(QueueMode::Priority)],
    ///     ..BrokerConfig::default()
    /// })?;
    /// let acks = Arc::new(Mutex::new(Vec::new()));
    /// let sink = acks.clone();
    /// let on_ack = move |b: &[Ack]| sink.lock().unwrap().extend(b.iter().map(|a| a.status));
    /// let producer = broker.open_named_producer("orders", ProducerConfig::default(), on_ack)?;
    /// let payload = Payload { handle: 1, len: 8 };
    /// producer.publish_with_id(QueueId(0), payload, 7)?;
    /// broker.quiesce()?; // stored and ACKed; say the ACK was lost
    /// producer.publish_with_id(QueueId(0), payload, 7)?; // the same message again
    /// broker.quiesce()?;
    /// assert_eq!(*acks.lock().unwrap(), [AckStatus::Acked, AckStatus::Acked]);
    /// assert_eq!(broker.queue_stats()[0].stored, 1);
    /// assert_eq!(broker.queue_stats()[0].deduplicated, 1);
    /// assert_eq!(broker.last_stored("orders", QueueId(0))?, Some(7));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    ///
    /// As [`publish`](Self::publish).
    pub fn publish_with_id(
        &self,
        queue: QueueId,
        payload: Payload,
        publish_id: u64,
    ) -> Result<Guid, SendError> {
        self.check(payload, Some(publish_id))?;
        self.enqueue(queue, payload, false, Some(publish_id))
    }

    /// As [`publish`](Self::publish), for a producer on an async runtime: where `publish`
    /// would wait for room in the session processor's queue, this future waits (the core's
    /// [async door](zerodispatch_core::DispatcherHandle::dispatch_async)), so that no
    /// runtime thread blocks or spins. Allocates nothing.
    ///
    /// Cancel-safe: dropped before it resolves, the message was not published and gets no
    /// outcome; resolved, it was published (and gets exactly one) or comes back in the
    /// error.
    ///
    /// # Errors
    ///
    /// As [`publish`](Self::publish).
    pub async fn publish_async(&self, queue: QueueId, payload: Payload) -> Result<Guid, SendError> {
        self.publish_numbered_async(queue, payload, None).await
    }

    /// As [`publish_with_id`](Self::publish_with_id), waiting for room as a future, as
    /// [`publish_async`](Self::publish_async) does. Cancel-safe as that.
    ///
    /// # Errors
    ///
    /// As [`publish`](Self::publish).
    pub async fn publish_with_id_async(
        &self,
        queue: QueueId,
        payload: Payload,
        publish_id: u64,
    ) -> Result<Guid, SendError> {
        self.publish_numbered_async(queue, payload, Some(publish_id))
            .await
    }

    async fn publish_numbered_async(
        &self,
        queue: QueueId,
        payload: Payload,
        publish_id: Option<u64>,
    ) -> Result<Guid, SendError> {
        self.check(payload, publish_id)?;
        let Some(inside) = Inside::enter(self) else {
            return Err(SendError::Closed(payload));
        };
        let (guid, publish) = self.message(queue, payload, false, publish_id);
        // If this future is dropped before the dispatch resolves, `inside` is dropped with
        // it: it takes the acceptance back (the event is dropped unsent) and leaves.
        let sent = self.dispatcher.dispatch_async(self.session, publish).await;
        inside.finish(sent.is_ok());
        sent.map(|()| guid).map_err(|e| publish_refused(e, payload))
    }

    /// Checks a message before it is taken: `publish_id` is the caller's number, if any
    /// (a named producer's messages must have one).
    fn check(&self, payload: Payload, publish_id: Option<u64>) -> Result<(), SendError> {
        if self.names.is_some() && publish_id.is_none() {
            return Err(SendError::NeedsPublishId(payload));
        }
        // An early answer only, so that `send` does not wait for a credit when closed:
        // `enqueue` checks again as it enters. Relaxed: only the flag is read.
        if self.state.load(Ordering::Relaxed) & CLOSED != 0 {
            return Err(SendError::Closed(payload));
        }
        let needs = payload.len as usize + FRAME_OVERHEAD;
        if needs > self.config.max_frame_bytes {
            return Err(SendError::TooLarge {
                payload,
                needs,
                max_frame_bytes: self.config.max_frame_bytes,
            });
        }
        Ok(())
    }

    /// Hands a message to the session, inside the close protocol (step 1); a credited
    /// message's credit is given back if it is not handed over.
    fn enqueue(
        &self,
        queue: QueueId,
        payload: Payload,
        credited: bool,
        publish_id: Option<u64>,
    ) -> Result<Guid, SendError> {
        let Some(inside) = Inside::enter(self) else {
            if credited {
                self.credits.give_back(1);
            }
            return Err(SendError::Closed(payload));
        };
        let (guid, publish) = self.message(queue, payload, credited, publish_id);
        let sent = self.dispatcher.dispatch(self.session, publish);
        if sent.is_err() && credited {
            self.credits.give_back(1);
        }
        inside.finish(sent.is_ok());
        sent.map(|()| guid).map_err(|e| publish_refused(e, payload))
    }

    /// Numbers a message (with `publish_id`, or the producer's own next number) and counts
    /// it accepted: its outcome is now owed (or, if it is not handed over, taken back by
    /// `Inside`).
    fn message(
        &self,
        queue: QueueId,
        payload: Payload,
        credited: bool,
        publish_id: Option<u64>,
    ) -> (Guid, Event<BrokerMsg>) {
        let seq = publish_id.unwrap_or_else(|| self.next_seq.fetch_add(1, Ordering::Relaxed));
        let guid = Guid::new(self.id, seq);
        self.credits.accept();
        let publish = BrokerMsg::Publish {
            queue,
            guid,
            payload,
            credited,
        };
        (guid, Event::Message(publish))
    }

    /// Leaves `enqueue` (step 1), unregistering the session if this is the last call out
    /// after `close` has finished (step 3).
    fn leave(&self) {
        // AcqRel: release, so that this call's dispatch happens before the unregistration
        // by whoever does it; acquire, so that if it is this call, `close`'s `Close`
        // happens before it.
        let before = self.state.fetch_sub(1, Ordering::AcqRel);
        if before == CLOSED | RETIRED | 1 {
            self.unregister();
        }
    }

    /// Step 3: tells the session that no publish comes any more (`Retire`, behind every
    /// publish dispatched). It unregisters itself once the ACKs of all the PUTs it sent have
    /// come, so that those arriving after the close are counted (`late_acks`), not dropped
    /// unseen by the dispatcher.
    fn unregister(&self) {
        if let Err(e) = self
            .dispatcher
            .dispatch(self.session, Event::Message(BrokerMsg::Retire))
        {
            tracing::debug!(
                producer = self.id.0,
                ?e,
                "the session was not retired (shutting down: the dispatcher drops it)"
            );
        }
    }

    /// Sends a message to `queue`, waiting while `max_unconfirmed` messages are without an
    /// outcome. The outcome (confirmed, timed out, rejected, not sent or closed) comes to
    /// `on_ack`, exactly once. Allocates nothing.
    ///
    /// On a processor thread of the broker (in `on_ack`, `on_delivery`, a dispatcher
    /// callback) it never waits: the credits of the batch `on_ack` is called with are free
    /// already, so sending from `on_ack` works at any cap, but at the cap it hands the
    /// message back (`WouldBlock`) rather than wait for a processor to free a credit.
    ///
    /// # Errors
    ///
    /// The message was not sent, and comes back in the error: `TooLarge` for a message
    /// that cannot fit a frame; `Closed` after [`close`](Self::close); `ShutDown` once the
    /// broker is shutting down; `WouldBlock` on a processor thread at the cap or with its
    /// outbox full.
    pub fn send(&self, queue: QueueId, payload: Payload) -> Result<Guid, SendError> {
        self.check(payload, None)?;
        if !self.credits.try_take() {
            if self.on_processor_thread() {
                return Err(SendError::WouldBlock(payload));
            }
            self.credits.take();
        }
        self.enqueue(queue, payload, true, None)
    }

    /// Sends a message to `queue` if the cap allows, and hands it back otherwise.
    ///
    /// # Errors
    ///
    /// `Full` at the cap (on a processor thread too), and as [`send`](Self::send).
    pub fn try_send(&self, queue: QueueId, payload: Payload) -> Result<Guid, SendError> {
        self.check(payload, None)?;
        if !self.credits.try_take() {
            return Err(SendError::Full(payload));
        }
        self.enqueue(queue, payload, true, None)
    }

    /// Messages sent with `send` or `try_send` and without an outcome yet.
    #[must_use]
    pub fn unconfirmed(&self) -> usize {
        self.credits.in_flight()
    }

    /// Closes the producer; it is the one way to close one, and dropping it calls it with
    /// a wait of 1 s. Every message taken by `send`, `try_send` or `publish` before this
    /// call gets exactly one outcome in `on_ack`, which is one of:
    ///
    /// * its real one (`Acked`, a rejection, `TimedOut`) if that comes within `wait`: the
    ///   close first sends the session's batch to its queue (a timer producer's too,
    ///   without waiting for its tick), so every message published before it goes;
    /// * `NotSent` if it could not be sent to its queue before the close: with a zero
    ///   `wait` (or on a processor thread), what was still in the session's batch; else
    ///   what a full outbox kept back for all of `wait`;
    /// * `Closed` if it was sent and had no outcome when `wait` ran out (an outcome that
    ///   comes later is dropped).
    ///
    /// A message that races this call from another thread is refused
    /// ([`SendError::Closed`], handed back) or, taken, gets its outcome as above (`Closed`
    /// if it reaches the session after the close). Later calls to `send`, `try_send` and
    /// `publish` are refused with `Closed`, and closing again does nothing and returns
    /// `true`.
    ///
    /// Returns whether every message in flight had its outcome reported (`on_ack`
    /// returned) within `wait`. If the broker is shutting down, its session reports what
    /// it holds `Closed` as it is dropped, and the wait sees those outcomes too.
    ///
    /// The session then frees its tables and stays only to count the ACKs still to come
    /// for the messages it sent ([`SessionStats::late_acks`]); once the last has come, it
    /// unregisters itself and its client slot is free. Its counters stay in
    /// [`Broker::session_stats`].
    ///
    /// A named producer's name is free again when this call returns (the next
    /// [`Broker::open_named_producer`] of it succeeds); until then it is refused with
    /// `NameInUse`. Its messages still on their way to their queues are deduplicated
    /// against the next producer's as ever.
    ///
    /// On one of the broker's processor threads (in `on_ack` or `on_delivery`, or a
    /// dispatcher callback) it does not wait at all, whatever `wait` says: that thread
    /// may be the one the outcomes must come through. What is in flight is reported
    /// `Closed` at once.
    ///
    /// "Not sent yet", at a close without a wait, means still in the session's batch: with
    /// timer aggregation, the messages waiting for the tick; with dynamic send, only those
    /// that reach the session in the same instant as the close (the session sends its
    /// batch as soon as its queue drains).
    pub fn close(&self, wait: Duration) -> bool {
        // Step 2 of the protocol. A swap of the flag (`fetch_or`), not a compare-and-swap:
        // the count may change under it. Relaxed, as entering (see `enqueue`).
        if self.state.fetch_or(CLOSED, Ordering::Relaxed) & CLOSED != 0 {
            return true;
        }
        let on_processor = self.on_processor_thread();
        let drained = if wait.is_zero() || on_processor {
            // No wait: the `Close` below drains as well.
            self.credits.unreported() == 0
        } else {
            // Refused only when the broker is shutting down: the session then reports what
            // it holds as the dispatcher drops it, which the wait sees as well.
            let _ = self
                .dispatcher
                .dispatch(self.session, Event::Message(BrokerMsg::Drain));
            self.credits.wait_reported(wait)
        };
        let told = self
            .dispatcher
            .dispatch(self.session, Event::Message(BrokerMsg::Close));
        if let Some((stop, ticker)) = self.ticker.lock().unwrap_or_else(|e| e.into_inner()).take() {
            stop.store(true, Ordering::Release);
            ticker.thread().unpark();
            // On a processor thread, not joined: the ticker may be waiting to dispatch to
            // this very thread's full queue. It sees `stop` and ends by itself.
            if !on_processor {
                let _ = ticker.join();
            }
        }
        // Step 3. AcqRel: release, so that the `Close` above happens before the
        // unregistration if the last call to leave does it (its `fetch_sub` acquires);
        // acquire, so that the dispatches of the calls that left (each `fetch_sub` releases)
        // happen before it if this call does it.
        if self.state.fetch_or(RETIRED, Ordering::AcqRel) & INSIDE == 0 {
            self.unregister();
        }
        match told {
            // Shutting down: the session reports what it holds `Closed` as the dispatcher
            // drops it.
            Ok(()) | Err(DispatchError::ShutDown(_)) => {}
            Err(e) => {
                // On a processor thread whose outbox is full: the session reports
                // everything `Closed` as it is dropped at the unregistration (or at
                // shutdown, if that too found the outbox full).
                tracing::warn!(
                    producer = self.id.0,
                    ?e,
                    "Close not delivered to the session"
                );
            }
        }
        if let Some(names) = &self.names {
            names
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .close(self.id);
        }
        drained
    }

    /// Whether the calling thread is one of the broker's processor threads, where nothing
    /// may wait for a processor. A thread-local read.
    fn on_processor_thread(&self) -> bool {
        self.dispatcher.current_processor().is_some()
    }
}

impl Drop for Producer {
    fn drop(&mut self) {
        self.close(Duration::from_secs(1));
    }
}

/// What [`Broker::stored_window`] finds before it asks a queue.
enum Known {
    /// A name opened once: the queue's processor answers for it.
    Name(ProcessorId, StoredIds, ProducerId),
    /// A name never opened: nothing of it is stored.
    Never(StoredWindow),
}

/// The error for a call into a processor (`synchronize`, `call`) that came back.
fn sync_refused(e: SyncError) -> BrokerError {
    match e {
        SyncError::OnProcessorThread(p) => BrokerError::OnProcessorThread(p),
        SyncError::ShutDown => BrokerError::ShutDown,
        other => BrokerError::ProcessorDied(other),
    }
}

/// An application's confirm of `guid`, for `consumer`'s session.
fn app_confirm(consumer: &Consumer, guid: Guid) -> Event<BrokerMsg> {
    Event::Message(BrokerMsg::AppConfirm {
        consumer: consumer.id,
        guid,
    })
}

/// More credit for `consumer`'s session.
fn credit_event(consumer: &Consumer, credit: u32) -> Event<BrokerMsg> {
    Event::Message(BrokerMsg::Credit {
        consumer: consumer.id,
        credit,
    })
}

/// The error for a publish the dispatcher handed back.
fn publish_refused(e: DispatchError<Event<BrokerMsg>>, payload: Payload) -> SendError {
    match e {
        // Only on a processor thread whose outbox is full: nothing is closed.
        DispatchError::Full(_) => SendError::WouldBlock(payload),
        // Shut down. `NoSuchProcessor` never comes back (the session's handle is the
        // dispatcher's own, and it is unregistered only once no call is inside), nor does
        // `Timeout` (only the `dispatch_timeout` family gives it).
        _ => SendError::ShutDown(payload),
    }
}

/// A call inside `Producer::enqueue`'s close protocol across an await (step 1 of the
/// protocol in the module's doc): it leaves when dropped, so a future dropped mid-dispatch
/// leaves too, and takes back the acceptance of a message it did not hand over.
struct Inside<'a> {
    producer: &'a Producer,
    /// Whether the message was handed to the session (or, false, is to be taken back).
    handed: bool,
}

impl<'a> Inside<'a> {
    /// Enters, unless the producer is closed.
    fn enter(producer: &'a Producer) -> Option<Self> {
        // As in `enqueue`: a compare-and-swap, relaxed.
        let mut now = producer.state.load(Ordering::Relaxed);
        loop {
            if now & CLOSED != 0 {
                return None;
            }
            match producer.state.compare_exchange_weak(
                now,
                now + 1,
                Ordering::Relaxed,
                Ordering::Relaxed,
            ) {
                Ok(_) => {
                    return Some(Self {
                        producer,
                        handed: false,
                    });
                }
                Err(seen) => now = seen,
            }
        }
    }

    /// Leaves, the message handed over or not.
    fn finish(mut self, handed: bool) {
        self.handed = handed;
    }
}

impl Drop for Inside<'_> {
    fn drop(&mut self) {
        if !self.handed {
            self.producer.credits.reported(1);
        }
        self.producer.leave();
    }
}

/// Starts a thread that sends `Tick` to `session` every `every`, until `stop`.
fn start_ticker(
    dispatcher: DispatcherHandle<BrokerMsg>,
    session: ClientHandle,
    every: Duration,
) -> (Arc<AtomicBool>, JoinHandle<()>) {
    let stop = Arc::new(AtomicBool::new(false));
    let flag = stop.clone();
    let ticker = thread::Builder::new()
        .name("zd-producer-ticker".into())
        .spawn(move || {
            let mut next = Instant::now() + every;
            while !flag.load(Ordering::Acquire) {
                // Free-running: ticks fall every `every` whatever the load, as the old
                // clients' aggregation timer did.
                let left = next.saturating_duration_since(Instant::now());
                if !left.is_zero() {
                    thread::park_timeout(left);
                    continue;
                }
                next += every;
                if dispatcher
                    .dispatch(session, Event::Message(BrokerMsg::Tick))
                    .is_err()
                {
                    break;
                }
            }
        })
        .expect("cannot spawn a producer's ticker thread");
    (stop, ticker)
}

/// A consumer, as its application holds it.
#[derive(Debug, Clone, Copy)]
pub struct Consumer {
    id: ConsumerId,
    queue: QueueId,
    session: ClientHandle,
}

impl Consumer {
    /// This consumer's id.
    #[must_use]
    pub fn id(&self) -> ConsumerId {
        self.id
    }

    /// The queue it consumes from.
    #[must_use]
    pub fn queue(&self) -> QueueId {
        self.queue
    }
}

/// A broker's confirm path, in-process: queues on queue processors, sessions on session
/// processors, one cluster processor.
pub struct Broker {
    dispatcher: Dispatcher<BrokerMsg>,
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
    next_producer: AtomicU32,
    next_consumer: AtomicU32,
}

impl fmt::Debug for Broker {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Broker")
            .field("queues", &self.queues.len())
            .finish_non_exhaustive()
    }
}

impl Broker {
    /// Starts the dispatcher and creates the queues and the cluster client.
    ///
    /// # Errors
    ///
    /// An invalid dispatcher or queue configuration (a capacity above
    /// [`MAX_QUEUE_CAPACITY`] included), or a queue whose tables cannot be allocated: an
    /// error, never an abort.
    pub fn start(config: BrokerConfig) -> Result<Self, BrokerError> {
        for (i, q) in config.queues.iter().enumerate() {
            let id = QueueId(i as u32);
            if q.capacity == 0 || q.capacity > MAX_QUEUE_CAPACITY {
                return Err(BrokerError::QueueCapacityOutOfRange {
                    queue: id,
                    capacity: q.capacity,
                });
            }
            if q.mode.apps() == 0 || q.mode.apps() > MAX_APPS {
                return Err(BrokerError::AppsOutOfRange {
                    queue: id,
                    apps: q.mode.apps(),
                });
            }
            if q.window == 0 {
                return Err(BrokerError::ZeroWindow { queue: id });
            }
        }
        if config.max_producer_names > MAX_PRODUCER_NAMES {
            return Err(BrokerError::ProducerNamesOutOfRange {
                max_producer_names: config.max_producer_names,
            });
        }
        if !config.dedup_window.is_power_of_two()
            || !(MIN_DEDUP_WINDOW..=MAX_DEDUP_WINDOW).contains(&config.dedup_window)
        {
            return Err(BrokerError::DedupWindowOutOfRange {
                dedup_window: config.dedup_window,
            });
        }
        let names = Names::new(config.max_producer_names).map_err(|_| {
            BrokerError::ProducerNamesOutOfRange {
                max_producer_names: config.max_producer_names,
            }
        })?;
        if let Some(r) = config.replication.filter(|r| !r.is_valid()) {
            return Err(BrokerError::ReplicationOutOfRange {
                replicas: r.replicas,
                quorum: r.quorum,
            });
        }
        // One list of cores for all pools, dealt out in turn: the session processors take
        // the first, the queue processors the next, the cluster processor the one after.
        let cores_from = |first: usize| -> Vec<usize> {
            let n = config.cores.len();
            (0..n)
                .map(|i| config.cores[(first + i) % n.max(1)])
                .collect()
        };
        let pool = |n, first_core| {
            PoolConfig::new(n)
                .capacity(config.event_capacity)
                .max_batch(config.max_batch)
                .wait(config.wait)
                .pin_to(cores_from(first_core))
        };
        let dispatcher = Dispatcher::<BrokerMsg>::builder()
            .pool(ClientType::Session, pool(config.session_processors, 0))
            .pool(
                ClientType::Queue,
                pool(config.queue_processors, config.session_processors),
            )
            .pool(
                ClientType::Cluster,
                pool(1, config.session_processors + config.queue_processors),
            )
            .build()?;
        let mut handles = Vec::with_capacity(config.queues.len());
        let mut queue_counters = Vec::with_capacity(config.queues.len());
        let mut stored_ids = Vec::with_capacity(config.queues.len());
        for (i, q) in config.queues.iter().enumerate() {
            let counters = Arc::new(CachePadded::new(QueueCounters::default()));
            let id = QueueId(i as u32);
            let too_large = |_| BrokerError::QueueTablesTooLarge {
                queue: id,
                capacity: q.capacity,
            };
            let ids = StoredIds::new(config.max_producer_names, config.dedup_window)
                .map_err(too_large)?;
            let engine = QueueEngine::new(
                id,
                q.mode,
                (q.capacity, q.window),
                config.replication,
                (config.on_release.clone(), ids.clone()),
                counters.clone(),
            )
            .map_err(too_large)?;
            stored_ids.push(ids);
            handles.push(dispatcher.register(
                ClientType::Queue,
                QueueClient::new(engine),
                Placement::LeastLoaded,
            )?);
            queue_counters.push(counters);
        }
        let queues: Arc<[ClientHandle]> = handles.into();
        let cluster_counters = Arc::new(CachePadded::new(ClusterCounters::default()));
        // Confirms sent to the cluster and not yet routed, at most: the cluster processor's
        // event capacity from replicas, as many from consumers.
        let replica_credits = Arc::new(Credits::new(config.event_capacity));
        let consumer_credits = Arc::new(Credits::new(config.event_capacity));
        let cluster = dispatcher.register(
            ClientType::Cluster,
            ClusterClient::new(
                queues.clone(),
                cluster_counters.clone(),
                (replica_credits.clone(), consumer_credits.clone()),
            )
            .map_err(|_| {
                BrokerError::Config(ConfigError {
                    client_type: Some(ClientType::Cluster),
                    problem: Problem::CapacityTooLarge(config.event_capacity),
                })
            })?,
            Placement::LeastLoaded,
        )?;
        Ok(Self {
            dispatcher,
            queues,
            queue_configs: config.queues,
            queue_counters,
            sessions: Arc::default(),
            cluster,
            cluster_counters,
            replica_credits,
            consumer_credits,
            max_batch: config.max_batch,
            event_capacity: config.event_capacity,
            replication: config.replication,
            names: Arc::new(Mutex::new(names)),
            stored_ids,
            dedup_window: config.dedup_window,
            // Below `MAX_PRODUCER_NAMES`, checked above: fits a `u32`.
            next_producer: AtomicU32::new(config.max_producer_names as u32),
            next_consumer: AtomicU32::new(0),
        })
    }

    /// Opens a producer whose session (on the least-loaded session processor) keeps up to
    /// `max_unconfirmed` messages without an outcome (see
    /// [`ProducerConfig::max_unconfirmed`]; the other settings are the defaults), and
    /// reports outcomes in batches to `on_ack`. Close it with [`Producer::close`], or by
    /// dropping it.
    ///
    /// # Errors
    ///
    /// `MaxUnconfirmedOutOfRange` unless `max_unconfirmed` is 1 to [`MAX_UNCONFIRMED`], and
    /// as [`open_producer_with`](Self::open_producer_with).
    pub fn open_producer(
        &self,
        max_unconfirmed: usize,
        on_ack: impl FnMut(&[Ack]) + Send + 'static,
    ) -> Result<Producer, BrokerError> {
        let config = ProducerConfig {
            max_unconfirmed,
            ..ProducerConfig::default()
        };
        self.open_producer_with(config, on_ack)
    }

    /// Opens a producer with a full configuration: flush strategy, caps, confirm timeout.
    /// Close it with [`Producer::close`], or by dropping it.
    ///
    /// # Errors
    ///
    /// For an invalid configuration, `MaxUnconfirmedOutOfRange`, `ZeroBatchSize`,
    /// `FrameTooSmall`, `ZeroTimerInterval` or `ZeroConfirmTimeout`;
    /// `ProducerTablesTooLarge` if the machine cannot allocate the session's tables;
    /// `ShutDown`; or `Register` if the dispatcher cannot take the session.
    pub fn open_producer_with(
        &self,
        config: ProducerConfig,
        on_ack: impl FnMut(&[Ack]) + Send + 'static,
    ) -> Result<Producer, BrokerError> {
        Self::check_producer(config)?;
        let id = ProducerId(self.next_producer.fetch_add(1, Ordering::Relaxed));
        self.open_session(id, config, Box::new(on_ack), None)
    }

    /// Opens a producer under `name`, configured as
    /// [`open_producer_with`](Self::open_producer_with), whose messages are deduplicated:
    /// its id is the name's, the same each time the name is opened, and it publishes with
    /// [`Producer::publish_with_id`] (or its async form) only, numbering its messages
    /// itself in increasing order. Each queue remembers the highest id it has stored for the
    /// name, and a message published again with an id at or below it (after a lost
    /// connection, say) is ACKed `Acked` again but not stored or delivered twice. Ask
    /// [`last_stored`](Self::last_stored) where to resume.
    ///
    /// A name is held by one producer at a time, and free again once that one's
    /// [`close`](Producer::close) returns. Names are never forgotten while the broker runs
    /// (so that a later producer of the name is deduplicated against the earlier ones'
    /// messages): the table holds [`BrokerConfig::max_producer_names`], and once that many
    /// names have been opened, a new one is refused. The name is looked up under a mutex
    /// here, at close and in `last_stored`, never on the message path.
    ///
    /// ```
    /// use zerodispatch_broker::*;
    ///
    /// let broker = Broker::start(BrokerConfig {
    ///     queues: vec![QueueConfig::new(QueueMode::Priority)],
    ///     ..BrokerConfig::default()
    /// })?;
    /// let first = broker.open_named_producer("orders", ProducerConfig::default(), |_: &[Ack]| {})?;
    /// let again = broker.open_named_producer("orders", ProducerConfig::default(), |_: &[Ack]| {});
    /// assert!(matches!(again, Err(BrokerError::NameInUse(_))));
    /// let id = first.id();
    /// first.close(std::time::Duration::from_secs(1));
    /// let second = broker.open_named_producer("orders", ProducerConfig::default(), |_: &[Ack]| {})?;
    /// assert_eq!(second.id(), id);
    /// # Ok::<(), BrokerError>(())
    /// ```
    ///
    /// # Errors
    ///
    /// `NameInUse` while another producer holds `name`; `TooManyNames` for a new name
    /// once the table is full; and as [`open_producer_with`](Self::open_producer_with).
    pub fn open_named_producer(
        &self,
        name: &str,
        config: ProducerConfig,
        on_ack: impl FnMut(&[Ack]) + Send + 'static,
    ) -> Result<Producer, BrokerError> {
        Self::check_producer(config)?;
        if config.max_unconfirmed > self.dedup_window {
            return Err(BrokerError::WindowBelowUnconfirmed {
                max_unconfirmed: config.max_unconfirmed,
                dedup_window: self.dedup_window,
            });
        }
        let id = self.lock_names().open(name)?;
        self.open_session(id, config, Box::new(on_ack), Some(self.names.clone()))
            .inspect_err(|_| self.lock_names().close(id))
    }

    /// [`BrokerConfig::dedup_window`]: a named producer's `max_unconfirmed` at most.
    #[must_use]
    pub fn dedup_window(&self) -> usize {
        self.dedup_window
    }

    /// The highest publish id `queue` has stored for the producers named `name`
    /// ([`open_named_producer`](Self::open_named_producer)), counting every message sent to
    /// it before this call; `None` if it has stored none of theirs (or the name was never
    /// opened). A producer of the name that starts afresh numbers its messages after it.
    /// It says nothing of lower ids: ask [`stored_window`](Self::stored_window) which of
    /// those are stored. For application threads only.
    ///
    /// # Errors
    ///
    /// As [`stored_window`](Self::stored_window).
    pub fn last_stored(&self, name: &str, queue: QueueId) -> Result<Option<u64>, BrokerError> {
        Ok(self.stored_window(name, queue)?.highest())
    }

    /// As [`last_stored`](Self::last_stored), for a task on an async runtime. Cancel-safe.
    ///
    /// # Errors
    ///
    /// As [`stored_window`](Self::stored_window).
    pub async fn last_stored_async(
        &self,
        name: &str,
        queue: QueueId,
    ) -> Result<Option<u64>, BrokerError> {
        Ok(self.stored_window_async(name, queue).await?.highest())
    }

    /// What `queue` has stored of the producers named `name`, id by id: the highest publish
    /// id stored and, for each id of the window below it
    /// ([`BrokerConfig::dedup_window`]), whether it is stored, counting every message sent
    /// to the queue before this call. A reconnecting producer settles as stored exactly the
    /// ids it says are, and publishes the others again. Answered by a dispatcher callback
    /// on the queue's processor (the answer is allocated there: a re-open's cost, never a
    /// message's); for application threads only.
    ///
    /// # Errors
    ///
    /// `UnknownQueue`; `ShutDown`; `OnProcessorThread` on one of the broker's processor
    /// threads; `ProcessorDied` if the queue's processor is gone.
    pub fn stored_window(&self, name: &str, queue: QueueId) -> Result<StoredWindow, BrokerError> {
        let (processor, ids, id) = match self.stored_ids_of(name, queue)? {
            Known::Name(processor, ids, id) => (processor, ids, id),
            Known::Never(window) => return Ok(window),
        };
        self.dispatcher
            .call(processor, move || Box::new(ids.snapshot(id)))
            .map(|window| *window)
            .map_err(sync_refused)
    }

    /// As [`stored_window`](Self::stored_window), for a task on an async runtime: waits
    /// for the queue's processor as a future. Cancel-safe.
    ///
    /// # Errors
    ///
    /// As [`stored_window`](Self::stored_window).
    pub async fn stored_window_async(
        &self,
        name: &str,
        queue: QueueId,
    ) -> Result<StoredWindow, BrokerError> {
        let (processor, ids, id) = match self.stored_ids_of(name, queue)? {
            Known::Name(processor, ids, id) => (processor, ids, id),
            Known::Never(window) => return Ok(window),
        };
        self.dispatcher
            .call_async(processor, move || Box::new(ids.snapshot(id)))
            .await
            .map(|window| *window)
            .map_err(sync_refused)
    }

    /// Where `stored_window` asks: the queue's processor, its record, and the name's id;
    /// for a name never opened, the empty answer at once.
    fn stored_ids_of(&self, name: &str, queue: QueueId) -> Result<Known, BrokerError> {
        let ids = self
            .stored_ids
            .get(queue.0 as usize)
            .ok_or(BrokerError::UnknownQueue(queue))?;
        let Some(id) = self.lock_names().find(name) else {
            return Ok(Known::Never(ids.nothing_stored()));
        };
        Ok(Known::Name(
            self.queues[queue.0 as usize].processor(),
            ids.clone(),
            id,
        ))
    }

    fn lock_names(&self) -> std::sync::MutexGuard<'_, Names> {
        self.names.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Checks a producer's configuration.
    fn check_producer(config: ProducerConfig) -> Result<(), BrokerError> {
        if config.max_unconfirmed == 0 || config.max_unconfirmed > MAX_UNCONFIRMED {
            return Err(BrokerError::MaxUnconfirmedOutOfRange {
                max_unconfirmed: config.max_unconfirmed,
            });
        }
        if config.batch_size == 0 {
            return Err(BrokerError::ZeroBatchSize);
        }
        if config.max_frame_bytes <= FRAME_OVERHEAD {
            return Err(BrokerError::FrameTooSmall {
                max_frame_bytes: config.max_frame_bytes,
            });
        }
        if matches!(config.flush, FlushStrategy::Timer(d) if d.is_zero()) {
            return Err(BrokerError::ZeroTimerInterval);
        }
        if config.confirm_timeout.is_some_and(|d| d.is_zero()) {
            return Err(BrokerError::ZeroConfirmTimeout);
        }
        Ok(())
    }

    /// Opens producer `id`'s session (its configuration checked).
    fn open_session(
        &self,
        id: ProducerId,
        config: ProducerConfig,
        on_ack: AckHandler,
        names: Option<Arc<Mutex<Names>>>,
    ) -> Result<Producer, BrokerError> {
        let credits = Arc::new(Credits::new(config.max_unconfirmed));
        let session = ProducerSession::new(
            id,
            self.queues.clone(),
            config,
            credits.clone(),
            (on_ack, self.max_batch),
            self.sessions.open(),
        )
        .map_err(|_| BrokerError::ProducerTablesTooLarge {
            max_unconfirmed: config.max_unconfirmed,
        })?;
        let session =
            self.dispatcher
                .register(ClientType::Session, session, Placement::LeastLoaded)?;
        // Ticks: the timer's interval, and a quarter of the confirm timeout (so that a
        // timeout is reported at most a quarter late), whichever is shorter.
        let timer = match config.flush {
            FlushStrategy::Timer(d) => Some(d),
            FlushStrategy::Dynamic => None,
        };
        let expiry = config
            .confirm_timeout
            .map(|t| (t / 4).max(Duration::from_micros(100)));
        let tick = match (timer, expiry) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        let ticker = tick.map(|every| start_ticker(self.dispatcher.handle(), session, every));
        Ok(Producer {
            id,
            session,
            next_seq: AtomicU64::new(0),
            dispatcher: self.dispatcher.handle(),
            config,
            credits,
            state: AtomicUsize::new(0),
            ticker: Mutex::new(ticker),
            names,
        })
    }

    /// Opens a consumer of `app` on `queue` (app 0 for a priority queue); `on_delivery` is
    /// called with each batch of messages, on the consumer's session processor, and each is
    /// confirmed when it returns.
    ///
    /// # Errors
    ///
    /// `UnknownQueue`, `UnknownApp`; `ConsumerBatchTooLarge` if the machine cannot allocate
    /// the consumer's batch; `ShutDown`; `Register` if the dispatcher cannot take the
    /// session; `OutboxFull` on a processor thread whose outbox is full (the consumer is
    /// not opened).
    pub fn open_consumer(
        &self,
        queue: QueueId,
        app: AppId,
        options: ConsumerOptions,
        on_delivery: impl FnMut(&[Delivery]) + Send + 'static,
    ) -> Result<Consumer, BrokerError> {
        let &queue_handle = self
            .queues
            .get(queue.0 as usize)
            .ok_or(BrokerError::UnknownQueue(queue))?;
        if app.0 >= self.queue_configs[queue.0 as usize].mode.apps() {
            return Err(BrokerError::UnknownApp(queue, app));
        }
        let id = ConsumerId(self.next_consumer.fetch_add(1, Ordering::Relaxed));
        let config = &self.queue_configs[queue.0 as usize];
        // What the consumer can hold unconfirmed, at most, and receive between two flushes.
        let window = (config.window as usize).min(config.capacity);
        let batch = self.max_batch.min(window);
        let pacing = Pacing {
            confirms: options.confirms,
            credit: options.credit,
            batch,
            window,
        };
        let session = ConsumerSession::new(
            id,
            app,
            (queue, queue_handle),
            (options.route == ConfirmRoute::ViaCluster)
                .then(|| (self.cluster, self.consumer_credits.clone())),
            options.mode,
            pacing,
            Box::new(on_delivery),
            self.sessions.open(),
        )
        .map_err(|_| BrokerError::ConsumerBatchTooLarge { queue, window })?;
        // From an application thread the opener attaches the consumer itself: its `Attach`
        // is in the queue's FIFO before this returns, so before anything the caller does
        // next (a publish, a close and its detach). On a processor thread that dispatch
        // could wait in the thread's outbox, and a close made meanwhile from another
        // thread could detach the consumer before it is attached: the session attaches
        // itself then, at its first flush, before its own detach can go.
        let on_processor = self.dispatcher.current_processor().is_some();
        let mut session = session;
        session.attached = !on_processor;
        let session =
            self.dispatcher
                .register(ClientType::Session, session, Placement::LeastLoaded)?;
        self.warn_if_undersized(id);
        let first = if on_processor {
            (session, Event::Message(BrokerMsg::Open { consumer: id }))
        } else {
            let attach = BrokerMsg::Attach {
                consumer: id,
                app,
                session,
            };
            (queue_handle, Event::Message(attach))
        };
        if let Err(e) = self.dispatcher.dispatch(first.0, first.1) {
            // Not attached: the session goes again (if that too finds the outbox full, it
            // stays registered, idle, until shutdown).
            let _ = self.dispatcher.unregister(session);
            return Err(self.refused(e));
        }
        Ok(Consumer { id, queue, session })
    }

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

    /// Warns when the session processors' event capacity is below what the queues may send
    /// them (every consumer's window of PUSHes and every held message's ACK): past it,
    /// events wait in the queue processors' outboxes, and a full outbox makes the queues
    /// keep PUSHes and ACKs for a later flush. Nothing stalls, but latency grows.
    fn warn_if_undersized(&self, newest: ConsumerId) {
        let consumers = newest.0 as usize + 1;
        let window = self
            .queue_configs
            .iter()
            .map(|q| q.window as usize)
            .max()
            .unwrap_or(0);
        let held: usize = self.queue_configs.iter().map(|q| q.capacity).sum();
        let need = consumers * window + held;
        if need > self.event_capacity {
            tracing::warn!(
                consumers,
                window,
                held,
                event_capacity = self.event_capacity,
                "event capacity below consumers x window + queue capacity: events will wait in outboxes"
            );
        }
    }

    /// Closes a consumer, in order behind what was dispatched to it before: the confirms
    /// made before the close (by [`confirm`](Self::confirm), or on return from the
    /// handler, even one still running) release their messages; then its session detaches
    /// it from the queue, and what it was handed and did not confirm becomes deliverable to
    /// the other consumers of a priority queue (in a fanout queue its share of it is
    /// dropped). So a close waits, asynchronously, for a handler of its session's
    /// processor that is running; it never redelivers a confirmed message. The session
    /// then unregisters itself (its client slot freed; its counters stay in
    /// [`session_stats`](Self::session_stats)): PUSHes that reach it afterwards are dropped,
    /// counted `pushes_to_closed` while it is still registered and `stale` (in the
    /// processor's stats) after. Closing it again does nothing more.
    ///
    /// # Errors
    ///
    /// `ShutDown`; `OutboxFull` on a processor thread whose outbox is full (nothing was
    /// done: call it again).
    pub fn close_consumer(&self, consumer: &Consumer) -> Result<(), BrokerError> {
        // At the flush the `Close` brings, the session sends its kept confirms, then the
        // queue's detach, then unregisters itself. A detach sent from here could overtake
        // those confirms, and the queue would take confirmed messages back for the others.
        self.dispatcher
            .dispatch(consumer.session, Event::Message(BrokerMsg::Close))
            .map_err(|e| self.refused(e))
    }

    /// Confirms a message delivered to a consumer opened with [`Confirms::Explicit`]: its
    /// session sends the confirm to the queue, which releases the consumer's share. A GUID
    /// the consumer was not handed (or has confirmed already) is counted
    /// ([`SessionStats::unknown_confirms`]) and dropped; a confirm for a closed consumer is
    /// dropped. Waits while the session processor's queue is full (on a processor thread, in
    /// its outbox). Allocates nothing.
    ///
    /// # Errors
    ///
    /// `ShutDown`; `OutboxFull` on a processor thread whose outbox is full.
    pub fn confirm(&self, consumer: &Consumer, guid: Guid) -> Result<(), BrokerError> {
        self.dispatcher
            .dispatch(consumer.session, app_confirm(consumer, guid))
            .map_err(|e| self.refused(e))
    }

    /// As [`confirm`](Self::confirm), for an application on an async runtime: waits for
    /// room as a future (the core's async door). Cancel-safe: dropped before it resolves,
    /// the confirm was not sent.
    ///
    /// # Errors
    ///
    /// As [`confirm`](Self::confirm).
    pub async fn confirm_async(&self, consumer: &Consumer, guid: Guid) -> Result<(), BrokerError> {
        self.dispatcher
            .dispatch_async(consumer.session, app_confirm(consumer, guid))
            .await
            .map_err(|e| self.refused(e))
    }

    /// Confirms many messages of one consumer, in order, in batch dispatches (as
    /// [`confirm_async`](Self::confirm_async) each). Cancel-safe: dropped before it
    /// resolves, the GUIDs not yet taken from `guids` were not confirmed.
    ///
    /// # Errors
    ///
    /// As [`confirm`](Self::confirm); the confirms before the refused one were sent.
    pub async fn confirm_batch_async(
        &self,
        consumer: &Consumer,
        guids: impl IntoIterator<Item = Guid>,
    ) -> Result<(), BrokerError> {
        let mut events = guids.into_iter().map(|guid| app_confirm(consumer, guid));
        self.dispatcher
            .dispatch_batch_async(consumer.session, &mut events)
            .await
            .map(drop)
            .map_err(|e| self.refused(e.error))
    }

    /// Lets the session of a consumer opened with a credit
    /// ([`ConsumerOptions::credit`]) hand `credit` more deliveries to `on_delivery`
    /// (saturating). Does nothing for a consumer without credit pacing. Waits as
    /// [`confirm`](Self::confirm).
    ///
    /// # Errors
    ///
    /// As [`confirm`](Self::confirm).
    pub fn add_credit(&self, consumer: &Consumer, credit: u32) -> Result<(), BrokerError> {
        self.dispatcher
            .dispatch(consumer.session, credit_event(consumer, credit))
            .map_err(|e| self.refused(e))
    }

    /// As [`add_credit`](Self::add_credit), waiting for room as a future. Cancel-safe:
    /// dropped before it resolves, the credit was not given.
    ///
    /// # Errors
    ///
    /// As [`confirm`](Self::confirm).
    pub async fn add_credit_async(
        &self,
        consumer: &Consumer,
        credit: u32,
    ) -> Result<(), BrokerError> {
        self.dispatcher
            .dispatch_async(consumer.session, credit_event(consumer, credit))
            .await
            .map_err(|e| self.refused(e))
    }

    /// A confirm from a replica node, routed by the cluster processor to its queue in
    /// `mode`. Call it from the threads that model the replicas. Waits while the cluster
    /// has as many replica confirms not yet routed as its processor's event capacity
    /// (back-pressure to the replica threads, so that a flood of them cannot grow the
    /// cluster's tables). Allocates nothing.
    ///
    /// # Errors
    ///
    /// `ShutDown`; on one of the broker's processor threads, `OnProcessorThread` when it
    /// would have to wait for a credit, `OutboxFull` when the processor's outbox is full.
    pub fn replica_confirm(&self, confirm: Confirm, mode: ConfirmMode) -> Result<(), BrokerError> {
        if !self.replica_credits.try_take() {
            self.off_processor_threads()?;
            self.replica_credits.take();
        }
        self.dispatcher
            .dispatch(
                self.cluster,
                Event::Message(BrokerMsg::Replica(confirm, mode)),
            )
            .map_err(|e| {
                self.replica_credits.give_back(1);
                self.refused(e)
            })
    }

    /// A replica's receipt: `receipt.replica` has stored message `receipt.guid`. Routed by
    /// the cluster processor to its queue as an inline functor; the receipt that makes the
    /// [`Replication`] quorum sends the message's ACK. A receipt for a message the queue
    /// does not hold (never stored, or released already), or a second one from the same
    /// replica, is counted in [`QueueStats`] and ignored. Waits, as
    /// [`replica_confirm`](Self::replica_confirm) does and from the same pool of credits,
    /// while the cluster is behind. Allocates nothing.
    ///
    /// ```
    /// use std::sync::{Arc, Mutex};
    /// use zerodispatch_broker::*;
    ///
    /// let broker = Broker::start(BrokerConfig {
    ///     queues: vec![QueueConfig::new(QueueMode::Priority)],
    ///     replication: Some(Replication { replicas: 2, quorum: 1 }),
    ///     ..BrokerConfig::default()
    /// })?;
    /// let acks = Arc::new(Mutex::new(Vec::new()));
    /// let sink = acks.clone();
    /// let producer = broker.open_producer(16, move |b: &[Ack]| sink.lock().unwrap().extend_from_slice(b))?;
    /// let guid = producer.publish(QueueId(0), Payload { handle: 1, len: 8 })?;
    /// broker.quiesce()?;
    /// assert!(acks.lock().unwrap().is_empty()); // stored, but no replica has it yet
    /// broker.replica_receipt(Receipt { queue: QueueId(0), guid, replica: ReplicaId(1) })?;
    /// broker.quiesce()?;
    /// assert_eq!(acks.lock().unwrap()[0].status, AckStatus::Acked);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    ///
    /// `UnknownQueue`; `UnknownReplica` for a replica the broker's [`Replication`] does not
    /// have (any, without replication); `ShutDown`; on one of the broker's processor
    /// threads, `OnProcessorThread` when it would have to wait for a credit, `OutboxFull`
    /// when the processor's outbox is full.
    pub fn replica_receipt(&self, receipt: Receipt) -> Result<(), BrokerError> {
        if receipt.queue.0 as usize >= self.queues.len() {
            return Err(BrokerError::UnknownQueue(receipt.queue));
        }
        let replicas = self.replication.map_or(0, |r| r.replicas);
        if receipt.replica.0 >= replicas {
            return Err(BrokerError::UnknownReplica {
                replica: receipt.replica,
                replicas,
            });
        }
        if !self.replica_credits.try_take() {
            self.off_processor_threads()?;
            self.replica_credits.take();
        }
        self.dispatcher
            .dispatch(self.cluster, Event::Message(BrokerMsg::Receipt(receipt)))
            .map_err(|e| {
                self.replica_credits.give_back(1);
                self.refused(e)
            })
    }

    /// The cluster's state, answered by a dispatcher callback on the cluster processor (so
    /// after every confirm enqueued to it before this call was routed). Waits for the
    /// cluster processor: for application threads only.
    ///
    /// # Errors
    ///
    /// `ShutDown`; `OnProcessorThread` when called on one of the broker's processor threads
    /// (the cluster processor's own would wait for itself forever, and no processor may
    /// wait for another); `ProcessorDied` if the cluster processor's thread died before it
    /// answered (the query is the core's `call`, whose request answers even when dropped
    /// unrun, so this never waits forever).
    pub fn cluster_state(&self) -> Result<ClusterState, BrokerError> {
        let (counters, queues) = (self.cluster_counters.clone(), self.queues.len());
        self.dispatcher
            .call(self.cluster.processor(), move || ClusterState {
                routed: counters.routed.get(),
                receipts_routed: counters.receipts_routed.get(),
                unknown_queue: counters.unknown_queue.get(),
                queues,
            })
            .map_err(sync_refused)
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

    /// Shuts the broker down: queues drain first, then sessions (each producer session
    /// reports its messages without an outcome `Closed`), then the cluster.
    pub fn shutdown(mut self) {
        self.dispatcher.shutdown();
    }
}
