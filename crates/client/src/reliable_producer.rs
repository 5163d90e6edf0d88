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

use std::future::Future;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use tokio::net::ToSocketAddrs;
use tokio::sync::Notify;
use tokio::task::JoinHandle;
use zerodispatch_wire::{ConfirmStatus, ErrorCode, MAX_PAYLOAD_LEN, PublishId, QueueId};

use crate::backoff::Backoff;
use crate::client::Client;
use crate::error::{ClientError, TrySendError};
use crate::lock::lock;
use crate::options::{ClientOptions, ProducerOptions};
use crate::producer::{ConfirmHandler, Outcome, Producer, check_payload, take_when_room};
use crate::reconnect::{self, Supervised};
use crate::resend_ring::ResendRing;

/// How a reliable producer behaves.
#[derive(Clone, Debug, PartialEq)]
pub struct ReliableProducerOptions {
    /// The producer's name, under which the broker deduplicates its messages by publish id
    /// across connections (UTF-8, at most 255 bytes; not empty).
    pub name: String,
    /// The session producer's options. `max_unconfirmed` bounds the messages kept for
    /// resending, from the oldest without an outcome to the newest; `confirm_timeout`
    /// counts from `send`, across reconnects.
    pub producer: ProducerOptions,
    /// The connection's options.
    pub client: ClientOptions,
    /// The delays between attempts to reconnect.
    pub backoff: Backoff,
    /// Bytes of payload kept for resending, at most (allocated when the producer opens):
    /// `send` waits while a payload does not fit. At least [`MAX_PAYLOAD_LEN`]. Default
    /// 16 MiB.
    pub buffer_bytes: usize,
}

impl ReliableProducerOptions {
    /// The default options, with `name`.
    pub fn new(name: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            producer: ProducerOptions::default(),
            client: ClientOptions::default(),
            backoff: Backoff::default(),
            buffer_bytes: 16 << 20,
        }
    }

    fn check(&self) -> Result<(), ClientError> {
        self.producer.check()?;
        self.backoff.check()?;
        if self.name.is_empty() || self.name.len() > 255 {
            return Err(ClientError::InvalidOption {
                option: "name",
                expected: "1 to 255 bytes of UTF-8",
            });
        }
        if self.buffer_bytes < MAX_PAYLOAD_LEN as usize {
            return Err(ClientError::InvalidOption {
                option: "buffer_bytes",
                expected: "at least MAX_PAYLOAD_LEN (256 KiB)",
            });
        }
        Ok(())
    }
}

/// A reliable producer's counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReliableProducerStats {
    /// Connections lost and opened again.
    pub reconnects: u64,
    /// Messages handed to a new session again (written before on a lost one).
    pub resent: u64,
    /// Messages settled `Stored` at a re-open, without resending, because the broker's
    /// answer to the open proved them stored (its window of stored ids).
    pub stored_before: u64,
}

/// How the producer came back from losing its connection, handed to the handler set by
/// [`ReliableProducer::on_recovery`].
///
/// The times are the producer's own: when its supervisor saw the connection lost, when a
/// new session opened, and when the broker first answered on it (a confirm, or a
/// `last_stored` that settled a message). A producer with nothing to send after the
/// reconnect has its recovery reported with its next confirm.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Recovery {
    /// When the lost connection was seen (the first, if it was lost again before a
    /// confirm).
    pub lost_at: Instant,
    /// When the session that brought the first confirm opened.
    pub reconnected_at: Instant,
    /// When the broker's first answer on it came.
    pub confirmed_at: Instant,
    /// Attempts to connect since the loss, the successful one included.
    pub attempts: u32,
}

impl Recovery {
    /// From the loss to the new session.
    #[must_use]
    pub fn reconnect_time(&self) -> Duration {
        self.reconnected_at.duration_since(self.lost_at)
    }

    /// From the loss to the first confirm after it: how long the producer's messages
    /// waited for the broker because of the loss, at most.
    #[must_use]
    pub fn time_to_confirm(&self) -> Duration {
        self.confirmed_at.duration_since(self.lost_at)
    }
}

/// An outage not yet ended by a confirm.
#[derive(Clone, Copy)]
struct Outage {
    lost_at: Instant,
    attempts: u32,
    reconnected_at: Option<Instant>,
}

impl Outage {
    /// The recovery this outage ends with, if a session has opened since the loss.
    fn ended(&self, confirmed_at: Instant) -> Option<Recovery> {
        Some(Recovery {
            lost_at: self.lost_at,
            reconnected_at: self.reconnected_at?,
            confirmed_at,
            attempts: self.attempts,
        })
    }
}

/// The state behind the lock.
struct State {
    ring: ResendRing,
    /// The next message to hand to the session (its publish id).
    next_to_write: u64,
    /// The current session's producer.
    session: Option<Producer>,
    /// The number of the current (or last) session, from 1.
    generation: u64,
    /// Why the producer takes no more messages.
    closed: Option<ClientError>,
    /// Closing: a session's `Closed` and `NotSent` are outcomes now.
    closing: bool,
    /// Since a session was lost, until the broker's first answer on a later one.
    outage: Option<Outage>,
    stats: ReliableProducerStats,
}

impl State {
    /// The broker answered on the current session at `at`: the end of an outage, if one
    /// is on and a session has opened since.
    fn broker_answered(&mut self, at: Instant) -> Option<Recovery> {
        let recovery = self.outage?.ended(at)?;
        self.outage = None;
        Some(recovery)
    }
}

/// The application's handler and the outcomes to hand it, behind their own lock (taken
/// before the state's).
struct Reporter {
    handler: ConfirmHandler,
    outcomes: Vec<Outcome>,
    /// The recovery to report, and to whom.
    recovered: Option<Recovery>,
    on_recovery: Option<RecoveryHandler>,
}

/// The application's handler of recoveries.
type RecoveryHandler = Box<dyn FnMut(&Recovery) + Send>;

struct Shared {
    options: ReliableProducerOptions,
    queue: QueueId,
    state: Mutex<State>,
    reporter: Mutex<Reporter>,
    /// Wakes `send` waiters when room frees or the producer closes.
    room: Notify,
    /// Wakes `send_blocking` waiters, with the state's lock; `blocked` counts them.
    room_blocking: Condvar,
    blocked: AtomicUsize,
    /// Wakes the supervisor: a close, or a first message to time.
    wake: Notify,
    /// The longest payload the broker takes, from the last connection's `Welcome`: a
    /// longer one is refused by `send`, not kept for a refusal to come.
    max_payload: AtomicU32,
}

impl Shared {
    fn state(&self) -> MutexGuard<'_, State> {
        lock(&self.state)
    }

    /// Takes a message into the ring and hands it on to the session if it can.
    fn try_take(&self, payload: &[u8]) -> Result<PublishId, TrySendError> {
        let mut state = self.state();
        self.take(&mut state, payload)
    }

    /// Takes a message under the lock (see `try_take`).
    fn take(&self, state: &mut State, payload: &[u8]) -> Result<PublishId, TrySendError> {
        if let Some(error) = &state.closed {
            return Err(TrySendError::Failed(error.clone()));
        }
        if state.ring.next_id() == u64::MAX {
            // The ring numbers ids up to u64::MAX - 1 (its end, `next_id`, is a u64 too).
            return Err(TrySendError::Failed(ClientError::IdsExhausted));
        }
        let was_empty = state.ring.is_empty();
        let Some(id) = state.ring.push(payload, Instant::now()) else {
            return Err(TrySendError::Full);
        };
        Self::pump(state);
        if was_empty && self.options.producer.confirm_timeout.is_some() {
            self.wake.notify_one();
        }
        Ok(PublishId(id))
    }

    /// Hands the session every message from `next_to_write` on, in order, until it takes
    /// no more.
    fn pump(state: &mut State) {
        let Some(session) = &state.session else {
            return;
        };
        let shared = session.shared();
        while state.next_to_write < state.ring.next_id() {
            let id = state.next_to_write;
            let Some((slot, payload)) = state.ring.get(id) else {
                state.next_to_write = state.ring.first_id().max(id + 1);
                continue;
            };
            if !slot.settled {
                if shared.try_take_as(Some(id), payload).is_err() {
                    // At the session's cap (it still holds messages the ring timed out:
                    // their confirms or the session's own timeouts free it, and pump
                    // again), or the session is gone (the supervisor opens the next).
                    return;
                }
                if let Some(slot) = state.ring.get_mut(id) {
                    slot.written = true;
                }
            }
            state.next_to_write = id + 1;
        }
    }

    /// Settles message `id` with `status` into `outcomes`, if it has no outcome yet; says
    /// whether it did.
    fn settle(
        state: &mut State,
        id: u64,
        status: ConfirmStatus,
        now: Instant,
        outcomes: &mut Vec<Outcome>,
    ) -> bool {
        let Some(slot) = state.ring.get_mut(id).filter(|slot| !slot.settled) else {
            return false;
        };
        slot.settled = true;
        outcomes.push(Outcome {
            publish_id: PublishId(id),
            status,
            taken_at: slot.taken_at,
            settled_at: now,
        });
        true
    }

    /// Wakes the senders waiting for room: room freed, or the producer closed.
    fn wake_senders(&self) {
        self.room.notify_waiters();
        if self.blocked.load(Ordering::SeqCst) > 0 {
            // Under the lock, so that a sender between its check and its wait is not missed.
            let _state = self.state();
            self.room_blocking.notify_all();
        }
    }

    /// Hands the reporter's outcomes to the application, frees their room, and wakes the
    /// waiting senders.
    fn report(&self, reporter: &mut Reporter) {
        if let (Some(recovery), Some(on_recovery)) =
            (reporter.recovered.take(), &mut reporter.on_recovery)
        {
            // A panic in the handler is the application's, as the confirm handler's is.
            let _ = catch_unwind(AssertUnwindSafe(|| on_recovery(&recovery)));
        }
        if reporter.outcomes.is_empty() {
            return;
        }
        let Reporter {
            handler, outcomes, ..
        } = reporter;
        let batch = &*outcomes;
        // A panic in the handler is the application's; the outcomes were reported.
        let _ = catch_unwind(AssertUnwindSafe(|| handler(batch)));
        outcomes.clear();
        self.wake_senders();
    }

    /// Session `generation`'s outcomes: the broker's are the messages' own; a session's
    /// `Closed` and `NotSent` are outcomes only while closing, and of the current session
    /// (otherwise the messages go again).
    fn on_session_outcomes(&self, generation: u64, batch: &[Outcome]) {
        let mut reporter = lock(&self.reporter);
        let mut state = self.state();
        let outcomes = &mut reporter.outcomes;
        let current = state.generation == generation;
        let final_loss = state.closing && current;
        let mut answered = None;
        for outcome in batch {
            let lost = matches!(
                outcome.status,
                ConfirmStatus::Closed | ConfirmStatus::NotSent
            );
            if !lost || final_loss {
                let id = outcome.publish_id.0;
                Self::settle(&mut state, id, outcome.status, outcome.settled_at, outcomes);
            }
            // The session's own timeouts are no answer of the broker's.
            if !lost && outcome.status != ConfirmStatus::TimedOut && answered.is_none() {
                answered = Some(outcome.settled_at);
            }
        }
        if let (Some(at), true, None) = (answered, current, reporter.recovered) {
            reporter.recovered = state.broker_answered(at);
        }
        state.ring.pop_settled();
        // Room freed in the session too: what it refused at its cap goes now.
        Self::pump(&mut state);
        drop(state);
        self.report(&mut reporter);
    }

    /// Settles `TimedOut` the messages taken `confirm_timeout` or more before `now`;
    /// returns when the next one times out.
    fn expire(&self, now: Instant) -> Option<Instant> {
        let timeout = self.options.producer.confirm_timeout?;
        let mut reporter = lock(&self.reporter);
        let mut state = self.state();
        let mut next = None;
        for id in state.ring.ids() {
            let Some((slot, _)) = state.ring.get(id) else {
                break;
            };
            if slot.settled {
                continue;
            }
            if now.duration_since(slot.taken_at) < timeout {
                next = Some(slot.taken_at + timeout);
                break;
            }
            Self::settle(
                &mut state,
                id,
                ConfirmStatus::TimedOut,
                now,
                &mut reporter.outcomes,
            );
        }
        state.ring.pop_settled();
        drop(state);
        self.report(&mut reporter);
        next
    }

    /// Settles every message without an outcome (`Closed` if a session had it, `NotSent`
    /// otherwise) and closes the producer with `error`.
    fn settle_all(&self, error: ClientError) {
        let mut reporter = lock(&self.reporter);
        let mut state = self.state();
        if state.closed.is_none() {
            state.closed = Some(error);
        }
        state.closing = true;
        let now = Instant::now();
        for id in state.ring.ids() {
            let status = match state.ring.get(id) {
                Some((slot, _)) if slot.written => ConfirmStatus::Closed,
                _ => ConfirmStatus::NotSent,
            };
            Self::settle(&mut state, id, status, now, &mut reporter.outcomes);
        }
        state.ring.pop_settled();
        drop(state);
        self.report(&mut reporter);
        self.wake_senders();
    }

    /// Starts a session on a fresh session producer: settles what the broker stored
    /// already, and hands it the ring from its front.
    /// `attempts` is how many connects the reconnect took (`None` for the first session).
    fn begin_session(&self, session: Session, attempts: Option<u32>) {
        let Session {
            producer: session,
            generation,
        } = session;
        let last_stored = session.last_stored().map(|id| id.0);
        let mut reporter = lock(&self.reporter);
        let mut state = self.state();
        state.generation = generation;
        let now = Instant::now();
        let reconnect = attempts.is_some();
        if reconnect {
            state.stats.reconnects += 1;
        }
        if let (Some(attempts), Some(outage)) = (attempts, &mut state.outage) {
            outage.attempts = outage.attempts.saturating_add(attempts);
            outage.reconnected_at = Some(now);
        }
        if !reconnect {
            // The name's messages before this producer (an earlier run's): this one's ids
            // go on after them, or the broker would take them for duplicates. After
            // u64::MAX there is no id: the first send says so (`IdsExhausted`).
            if let Some(last) = last_stored {
                state.ring.start_at(last.saturating_add(1));
            }
        }
        let stored_before = state.stats.stored_before;
        if reconnect {
            // Settled `Stored` exactly the messages the broker proved stored, id by id
            // (its window: docs/protocol.md, "Named producers and deduplication"); every
            // other one goes again, and its confirm says what became of it (one older
            // than the window is answered `RejectedOutOfWindow`, never taken for stored).
            // Only what a session was handed: a claim that a message never sent is stored
            // proves nothing of it.
            let stored = session.stored_when_opened_all();
            for id in state.ring.ids() {
                let written = state.ring.get(id).is_some_and(|(slot, _)| slot.written);
                if !written || stored.stored(id) != Some(true) {
                    continue;
                }
                if Self::settle(
                    &mut state,
                    id,
                    ConfirmStatus::Stored,
                    now,
                    &mut reporter.outcomes,
                ) {
                    state.stats.stored_before += 1;
                }
            }
            if state.stats.stored_before > stored_before && reporter.recovered.is_none() {
                // The broker's answer at the open confirmed messages: its first answer.
                reporter.recovered = state.broker_answered(now);
            }
            state.ring.pop_settled();
        }
        let mut resent = 0;
        for id in state.ring.ids() {
            if state
                .ring
                .get(id)
                .is_some_and(|(s, _)| s.written && !s.settled)
            {
                resent += 1;
            }
        }
        state.stats.resent += resent;
        state.next_to_write = state.ring.first_id();
        state.session = Some(session);
        Self::pump(&mut state);
        drop(state);
        self.report(&mut reporter);
    }
}

/// A session's producer (which keeps what the broker said it had stored of the name's
/// messages when it opened), and its number.
struct Session {
    producer: Producer,
    generation: u64,
}

/// Opens the session producer under the producer's name; the broker says the highest
/// publish id it stored for the name.
async fn open_session(client: &Client, shared: &Arc<Shared>) -> Result<Session, ClientError> {
    let generation = shared.state().generation + 1;
    // The same cap as the ring's, announced to the broker (whose limits count it), and the
    // same confirm timeout: a message the ring timed out (it counts from `send`, so first)
    // leaves the session at the session's own timeout even if the broker never answers.
    let options = shared.options.producer;
    let handler = Arc::clone(shared);
    let producer = client
        .open_named_producer(shared.queue, &shared.options.name, options, move |batch| {
            handler.on_session_outcomes(generation, batch);
        })
        .await?;
    Ok(Session {
        producer,
        generation,
    })
}

/// Connects and opens a session.
async fn connect<A: ToSocketAddrs>(
    addr: A,
    shared: &Arc<Shared>,
) -> Result<(Client, Session), ClientError> {
    let client = Client::connect(addr, shared.options.client).await?;
    shared
        .max_payload
        .store(client.limits().max_payload, Ordering::Relaxed);
    let session = open_session(&client, shared).await?;
    Ok((client, session))
}

/// Whether an error at connecting or opening is worth another attempt: the connection's
/// failures and `NAME_IN_USE` are; the broker's other refusals and bad options are not.
fn retryable(error: &ClientError) -> bool {
    match error {
        // The name is open: the lost session's producer may still be closing.
        ClientError::Refused { code, .. } => *code == ErrorCode::NAME_IN_USE,
        ClientError::InvalidOption { .. }
        | ClientError::PayloadTooLarge { .. }
        | ClientError::OverLimit { .. }
        | ClientError::IdsExhausted => false,
        ClientError::Protocol { .. } => false,
        _ => true,
    }
}

impl Supervised for Shared {
    type Session = Session;

    fn backoff(&self) -> &Backoff {
        &self.options.backoff
    }

    fn unless_closing<F: Future + Send>(
        &self,
        work: F,
    ) -> impl Future<Output = Option<F::Output>> + Send {
        self.run_timeouts_until(work)
    }

    fn session_ended<'a>(
        &'a self,
        client: &'a Client,
    ) -> Option<impl Future<Output = ()> + Send + 'a> {
        let session = self
            .state()
            .session
            .as_ref()
            .map(|p| Arc::clone(p.shared()))?;
        Some(async move {
            tokio::select! {
                _ = client.closed() => {}
                _ = session.wait_closed() => {}
            }
        })
    }

    async fn close(&self, client: Client) {
        let producer = self.state().session.take();
        if let Some(producer) = producer {
            // Its outcomes are the messages' (closing is set).
            let _ = producer.close().await;
        }
        self.settle_all(ClientError::Closed);
        client.close().await;
    }

    fn session_lost(&self, client: Client) {
        let producer = self.state().session.take();
        drop(producer);
        drop(client);
        // An outage begins, unless one lost again before a confirm goes on.
        let mut state = self.state();
        let lost_at = Instant::now();
        state.outage.get_or_insert(Outage {
            lost_at,
            attempts: 0,
            reconnected_at: None,
        });
    }

    async fn connect_session<A: ToSocketAddrs + Send>(
        self: &Arc<Self>,
        addr: A,
    ) -> Result<(Client, Session), ClientError> {
        connect(addr, self).await
    }

    fn reconnected(&self, session: Session, attempts: u32) {
        self.begin_session(session, Some(attempts));
    }

    /// The connection's failures and `NAME_IN_USE` are; the broker's other refusals and
    /// bad options are not.
    fn retryable(error: &ClientError) -> bool {
        retryable(error)
    }

    /// Settles every message without an outcome, and closes the producer with `error`
    /// (`Closed` when closing).
    fn give_up(&self, error: Option<ClientError>) {
        self.settle_all(error.unwrap_or(ClientError::Closed));
    }
}

impl Shared {
    /// Runs `work` (a wait, an attempt to connect) while settling confirm timeouts as they
    /// come; `None` if the producer is closing first (`work` is dropped).
    async fn run_timeouts_until<F: Future>(&self, work: F) -> Option<F::Output> {
        tokio::pin!(work);
        loop {
            let woken = self.wake.notified();
            tokio::pin!(woken);
            woken.as_mut().enable();
            if self.state().closing {
                return None;
            }
            let next = self.expire(Instant::now());
            tokio::select! {
                output = &mut work => return Some(output),
                () = &mut woken => {}
                () = sleep_until(next) => {}
            }
        }
    }
}

/// Sleeps until `at`, or for ever.
async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at.into()).await,
        None => std::future::pending().await,
    }
}

/// A producer that survives losing its connection, opened by
/// [`ReliableProducer::connect`].
///
/// It has its own connection. On losing it, it reconnects with exponential backoff and
/// jitter ([`Backoff`]), re-opens under its name, and resends every message without an
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
    supervisor: Option<JoinHandle<()>>,
}

impl ReliableProducer {
    /// Connects to the broker at `addr` and opens the producer on `queue`; returns once
    /// the first session is open (a first connection that fails is an error, not retried).
    ///
    /// `addr` is a [`tokio::net::ToSocketAddrs`] as in [`Client::connect`] (resolved on the
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
        let (client, session) = connect(addr.clone(), &shared).await?;
        shared.begin_session(session, None);
        let supervisor = tokio::spawn(reconnect::supervise(Arc::clone(&shared), addr, client));
        Ok(Self {
            shared,
            supervisor: Some(supervisor),
        })
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
    pub async fn close(mut self) {
        self.request_close();
        if let Some(supervisor) = self.supervisor.take() {
            let _ = supervisor.await;
        }
    }

    fn request_close(&self) {
        let mut state = self.shared.state();
        state.closing = true;
        if state.closed.is_none() {
            state.closed = Some(ClientError::Closed);
        }
        drop(state);
        self.shared.wake.notify_one();
        self.shared.wake_senders();
    }
}

impl Drop for ReliableProducer {
    fn drop(&mut self) {
        if self.supervisor.is_some() {
            self.request_close();
        }
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
