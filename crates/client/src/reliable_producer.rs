//! A producer that survives losing its connection: it reconnects with backoff, re-opens
//! under its name, and resends every message without an outcome with its original publish
//! id, in order, before anything new.
//!
//! # How
//!
//! The reliable producer owns its connection. Its messages go first into its
//! [`ResendRing`] (their payloads copied there, numbered 0, 1, 2, ... across connections),
//! then to the producer of the current connection (a *session*) with those ids. A task
//! (the supervisor) opens sessions: on a lost connection (or a session closed under it) it
//! waits by its [`Backoff`], connects, re-opens the producer under the same name, settles
//! `Stored` what the broker says it stored already (`last_stored`), and hands the session
//! the ring again from its front: every message without an outcome, in order, before the
//! ones taken since. The broker's deduplication by (name, publish id) confirms a resent
//! message it stored already without storing it twice.
//!
//! A message leaves the ring with its one outcome: the broker's confirm (from any session),
//! the confirm timeout (which counts from `send`, across reconnects), or the close. A
//! session's own `Closed` or `NotSent` for a message, when its connection ends, is no
//! outcome: the message stays for the next session.
//!
//! An outage runs from the moment the supervisor sees a session lost to the broker's first
//! answer on a later session (a confirm, or `last_stored` covering a message); a session
//! lost again before that answer extends the same outage. Its end is reported as a
//! [`Recovery`].

use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};

use tokio::net::ToSocketAddrs;
use tokio::sync::Notify;
use zerodispatch_wire::{MAX_PAYLOAD_LEN, PublishId, QueueId};

use crate::error::{ClientError, TrySendError};
use crate::lock::lock;
use crate::producer::{Outcome, check_payload, take_when_room};
use crate::reconnect::{self, SupervisorTask};
use crate::resend_ring::ResendRing;

// What the application sets and reads back: the options, the counters, the recoveries.
mod options;
mod recovery;
pub use options::{ReliableProducerOptions, ReliableProducerStats};
pub use recovery::Recovery;

// What the handle, the sessions' confirm handlers and the supervisor share; taking a
// message into it.
mod shared;
use shared::{Reporter, Shared, State};

// Each message's one outcome, and handing the outcomes to the application.
mod outcomes;

// A new session handed the ring again from its front.
mod resend;

// Opening a session, and what the reconnect supervisor does with this producer.
mod session;

/// A producer that survives losing its connection, opened by
/// [`ReliableProducer::connect`].
///
/// It has its own connection. On losing it, it reconnects with exponential backoff and
/// jitter ([`Backoff`](crate::Backoff)), re-opens under its name, and resends every message without an
/// outcome with its original publish id, in order, before anything new; the broker
/// deduplicates by (name, publish id), so a message it had stored is confirmed again, not
/// stored twice. While it reconnects, [`send`](Self::send) takes messages within the cap
/// (and waits at it) and [`try_send`](Self::try_send) hands back at it; confirm timeouts
/// keep running. Every message gets exactly one [`Outcome`]: the broker's confirm, the
/// confirm timeout, or at [`close`](Self::close) `Closed` (`NotSent` if no connection ever
/// had it).
///
/// The payloads of messages without an outcome are kept in a ring allocated when it opens
/// (`max_unconfirmed` messages, `buffer_bytes` bytes): nothing is allocated per message.
/// The cap counts from the oldest message without an outcome to the newest.
///
/// ```no_run
/// use zerodispatch_client::{ReliableProducer, ReliableProducerOptions};
/// use zerodispatch_wire::QueueId;
///
/// # async fn run() -> Result<(), zerodispatch_client::ClientError> {
/// let options = ReliableProducerOptions::new("orders");
/// let producer = ReliableProducer::connect("127.0.0.1:7878", QueueId(0), options, |outcomes| {
///     for outcome in outcomes {
///         println!("{}: {:?}", outcome.publish_id.0, outcome.status);
///     }
/// })
/// .await?;
/// producer.send(b"hello").await?;
/// producer.close().await; // every message has had its outcome
/// # Ok(())
/// # }
/// ```
pub struct ReliableProducer {
    shared: Arc<Shared>,
    supervisor: SupervisorTask<Shared>,
}

impl ReliableProducer {
    /// Connects to the broker at `addr` and opens the producer on `queue`; returns once
    /// the first session is open (a first connection that fails is an error, not retried).
    ///
    /// `addr` is a [`tokio::net::ToSocketAddrs`] as in [`Client::connect`](crate::Client::connect) (resolved on the
    /// runtime, without blocking it), kept (`Clone`) to connect again after a loss.
    ///
    /// `on_confirm` is called with each batch of outcomes, exactly one per message, on the
    /// connection's I/O task or the producer's own task. It must not block; it may call
    /// [`try_send`](Self::try_send). A panic in it is caught.
    ///
    /// # Errors
    ///
    /// An option out of range, the ring too large to allocate, the broker's refusal, or
    /// why the connection failed.
    pub async fn connect<A>(
        addr: A,
        queue: QueueId,
        options: ReliableProducerOptions,
        on_confirm: impl FnMut(&[Outcome]) + Send + 'static,
    ) -> Result<Self, ClientError>
    where
        A: ToSocketAddrs + Clone + Send + Sync + 'static,
    {
        options.check()?;
        let cap = options.producer.max_unconfirmed as usize;
        let too_large = |_| ClientError::InvalidOption {
            option: "max_unconfirmed, buffer_bytes",
            expected: "a ring that fits in memory",
        };
        let ring = ResendRing::new(cap, options.buffer_bytes).map_err(too_large)?;
        let mut outcomes = Vec::new();
        outcomes.try_reserve_exact(cap).map_err(too_large)?;
        let shared = Arc::new(Shared {
            options,
            queue,
            state: Mutex::new(State {
                ring,
                next_to_write: 0,
                session: None,
                generation: 0,
                closed: None,
                closing: false,
                outage: None,
                stats: ReliableProducerStats::default(),
            }),
            reporter: Mutex::new(Reporter {
                handler: Box::new(on_confirm),
                outcomes,
                recovered: None,
                on_recovery: None,
            }),
            room: Notify::new(),
            room_blocking: Condvar::new(),
            blocked: AtomicUsize::new(0),
            wake: Notify::new(),
            max_payload: AtomicU32::new(MAX_PAYLOAD_LEN),
        });
        let (client, session) = reconnect::connect(&shared, addr.clone()).await?;
        shared.begin_session(session, None);
        let supervisor = SupervisorTask::spawn(&shared, addr, client);
        Ok(Self { shared, supervisor })
    }

    /// Takes a message if the producer is under its cap (and its payload fits the ring),
    /// and returns its publish id; connected or not. Never waits.
    ///
    /// # Errors
    ///
    /// [`TrySendError::Full`] at the cap (nothing taken); [`TrySendError::Failed`] with
    /// [`ClientError::PayloadTooLarge`], or with why the producer is closed.
    pub fn try_send(&self, payload: &[u8]) -> Result<PublishId, TrySendError> {
        check_payload(payload, self.shared.max_payload.load(Ordering::Relaxed))?;
        self.shared.try_take(payload)
    }

    /// Takes a message, waiting while the producer is at its cap (connected or not), and
    /// returns its publish id. Cancel-safe: a `send` dropped while waiting took nothing.
    ///
    /// # Errors
    ///
    /// [`ClientError::PayloadTooLarge`], or why the producer is closed.
    pub async fn send(&self, payload: &[u8]) -> Result<PublishId, ClientError> {
        check_payload(payload, self.shared.max_payload.load(Ordering::Relaxed))?;
        take_when_room(&self.shared.room, || self.shared.try_take(payload)).await
    }

    /// Takes a message, blocking the thread while the producer is at its cap (connected or
    /// not), and returns its publish id. For threads outside the async runtime: never call
    /// it on the runtime's threads, nor from the confirm handler.
    ///
    /// # Panics
    ///
    /// On a tokio runtime's worker thread, naming [`send`](Self::send) (`blocking.rs`).
    ///
    /// # Errors
    ///
    /// [`ClientError::PayloadTooLarge`], or why the producer is closed.
    pub fn send_blocking(&self, payload: &[u8]) -> Result<PublishId, ClientError> {
        crate::blocking::refuse_on_runtime("send_blocking", "send");
        check_payload(payload, self.shared.max_payload.load(Ordering::Relaxed))?;
        let shared = &*self.shared;
        let mut state = shared.state();
        loop {
            match shared.take(&mut state, payload) {
                Ok(id) => return Ok(id),
                Err(TrySendError::Failed(error)) => return Err(error),
                Err(TrySendError::Full) => {
                    shared.blocked.fetch_add(1, Ordering::SeqCst);
                    state = shared
                        .room_blocking
                        .wait(state)
                        .unwrap_or_else(std::sync::PoisonError::into_inner);
                    shared.blocked.fetch_sub(1, Ordering::SeqCst);
                }
            }
        }
    }

    /// Messages taken and without an outcome yet.
    pub fn unconfirmed(&self) -> usize {
        let state = self.shared.state();
        state
            .ring
            .ids()
            .filter(|&id| state.ring.get(id).is_some_and(|(s, _)| !s.settled))
            .count()
    }

    /// Whether a session is open now (false while reconnecting).
    pub fn is_connected(&self) -> bool {
        self.shared.state().session.is_some()
    }

    /// The counters: reconnects, messages resent.
    pub fn stats(&self) -> ReliableProducerStats {
        self.shared.state().stats
    }

    /// Sets the handler told of each recovery from a lost connection, when the broker
    /// first answers after it (see [`Recovery`]); it replaces the one set before.
    /// Recoveries before it is set are not reported.
    ///
    /// It is called on the connection's I/O task or the producer's own task, before the
    /// confirm handler with the same answer. It must not block. A panic in it is caught.
    pub fn on_recovery(&self, handler: impl FnMut(&Recovery) + Send + 'static) {
        lock(&self.shared.reporter).on_recovery = Some(Box::new(handler));
    }

    /// Closes the producer: it takes no more messages; with a session open, the session
    /// sends what it holds and closes, the broker confirming each of its messages (`Closed`
    /// for what it did not store); while reconnecting, it stops. What no session has had is
    /// `NotSent`, what a lost one had and no later one confirmed `Closed`. Returns when
    /// every message taken has had its one outcome.
    pub async fn close(self) {
        self.supervisor.close().await;
    }
}

impl std::fmt::Debug for ReliableProducer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReliableProducer")
            .field("name", &self.shared.options.name)
            .field("queue", &self.shared.queue)
            .field("stats", &self.stats())
            .finish_non_exhaustive()
    }
}
