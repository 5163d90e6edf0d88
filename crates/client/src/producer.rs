//! A producer over the wire: the unconfirmed cap, the pending buffer that dynamic send
//! drains, and the outcomes.
//!
//! # A message's way
//!
//! 1. `send` (or `send_blocking`, `try_send`) takes the message under the producer's lock
//!    when it is under its cap: it gives it the next publish id (0, 1, 2, ...), notes when
//!    it was taken in the unconfirmed table, and copies the payload into the pending
//!    buffer. If the buffer was empty (dynamic send), or has just filled a frame (timer),
//!    it wakes the connection's I/O task.
//! 2. The I/O task swaps the pending buffer with an empty spare of its own when it is not
//!    writing (dynamic) or at a tick (timer), and encodes the batch into its write buffer:
//!    one `Publish` frame per `batch_size` messages. While that write is in flight, new
//!    messages accumulate in the pending buffer: the next write takes them all.
//! 3. The message leaves the unconfirmed table, exactly once, by the first of: the
//!    broker's confirm, the confirm timeout (`TimedOut`), the producer's close (what the
//!    broker has not confirmed by its echo of `CloseProducer` is `Closed`), or the end of
//!    the connection (`NotSent` if it was still pending, `Closed` otherwise). Whatever
//!    takes it out reports it; a later confirm finds nothing and is ignored.
//!
//! Every table is allocated when the producer opens, for its whole cap; the pending
//! buffer and its spare grow to the largest batch and are then reused: nothing is
//! allocated per message once warm.

use std::collections::{HashMap, TryReserveError, VecDeque};
use std::hash::{BuildHasherDefault, Hasher};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Instant;

use tokio::sync::{Notify, oneshot};
use zerodispatch_wire::{
    ConfirmStatus, EncodeError, MAX_FRAME_LEN, MAX_MESSAGES_PER_FRAME, MAX_PAYLOAD_LEN, ProducerId,
    PublishBuilder, PublishId, StoredWindow,
};

use crate::connection::{Command, Connection, lock};
use crate::error::{ClientError, TrySendError};
use crate::options::{Flush, ProducerOptions};

/// What became of one message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Outcome {
    /// The message's publish id, as `send` returned it.
    pub publish_id: PublishId,
    /// What became of it: the broker's status, or a local one ([`ConfirmStatus::TimedOut`]
    /// after the confirm timeout, [`ConfirmStatus::Closed`] when the producer or the
    /// connection closed first, [`ConfirmStatus::NotSent`] when the connection ended before
    /// the message was written to it).
    pub status: ConfirmStatus,
    /// When `send` took the message.
    pub taken_at: Instant,
    /// When the outcome came (the same for a whole batch of outcomes).
    pub settled_at: Instant,
}

/// A copy of a `ProducerOpened`'s stored window (see
/// [`StoredWindow`](zerodispatch_wire::StoredWindow)), kept for the producer's life.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct StoredIds {
    last: Option<u64>,
    known: u32,
    bits: Vec<u8>,
}

impl StoredIds {
    fn from_wire(stored: StoredWindow<'_>) -> Self {
        Self {
            last: stored.last_stored,
            known: stored.known,
            bits: stored.bits.to_vec(),
        }
    }

    /// As [`StoredWindow::stored`].
    pub(crate) fn stored(&self, id: u64) -> Option<bool> {
        StoredWindow {
            last_stored: self.last,
            known: self.known,
            bits: &self.bits,
        }
        .stored(id)
    }
}

/// What a producer's application is called with for each batch of outcomes, on the
/// connection's I/O task. It must not block (it holds up the connection): it may call
/// [`Producer::try_send`], not `send_blocking`. The batch's messages have left the cap
/// before it is called. A panic in it is caught and counted
/// ([`Producer::handler_panics`]); the batch is not reported again.
pub(crate) type ConfirmHandler = Box<dyn FnMut(&[Outcome]) + Send>;

/// Takes a message with `try_take`, waiting on `room` (notified whenever room frees or the
/// producer closes) while the producer is at its cap. Cancel-safe: dropped while waiting,
/// it took nothing. The waiter is enabled before each try, so a notification between the
/// try and the wait is not lost.
pub(crate) async fn take_when_room(
    room: &Notify,
    mut try_take: impl FnMut() -> Result<PublishId, TrySendError>,
) -> Result<PublishId, ClientError> {
    loop {
        let notified = room.notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        match try_take() {
            Ok(id) => return Ok(id),
            Err(TrySendError::Failed(error)) => return Err(error),
            Err(TrySendError::Full) => notified.await,
        }
    }
}

/// Bytes of a `Publish` frame before its entries: its producer and count.
const PUBLISH_PREFIX: usize = 8;
/// Bytes of a `Publish` entry besides its payload: its publish id and payload length.
const PUBLISH_ENTRY: usize = 12;

/// Messages taken and not yet encoded: their ids and lengths, and their payloads end to
/// end.
#[derive(Default)]
pub(crate) struct Pending {
    bytes: Vec<u8>,
    entries: Vec<(u64, u32)>,
}

impl Pending {
    /// A buffer with room for `messages` entries and 64 KiB of payloads.
    pub(crate) fn with_capacity(messages: usize) -> Result<Self, TryReserveError> {
        let mut pending = Self::default();
        pending.entries.try_reserve_exact(messages)?;
        pending.bytes.try_reserve_exact(64 * 1024)?;
        Ok(pending)
    }

    fn push(&mut self, id: u64, payload: &[u8]) {
        self.entries.push((id, payload.len() as u32));
        self.bytes.extend_from_slice(payload);
    }

    /// Whether the messages fill a `Publish` frame: the timer sends them without waiting
    /// for its tick.
    fn fills_frame(&self) -> bool {
        self.entries.len() >= MAX_MESSAGES_PER_FRAME as usize
            || PUBLISH_PREFIX + self.entries.len() * PUBLISH_ENTRY + self.bytes.len()
                >= MAX_FRAME_LEN as usize
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    fn clear(&mut self) {
        self.bytes.clear();
        self.entries.clear();
    }

    /// Appends the messages to `out` as `Publish` frames of `producer`, `batch_size`
    /// messages at most each (and within the protocol's limits), and empties itself.
    /// Returns the frames written.
    pub(crate) fn encode(
        &mut self,
        out: &mut Vec<u8>,
        producer: ProducerId,
        batch_size: u32,
    ) -> u32 {
        let mut frames = 0;
        let mut offset = 0;
        let mut next = 0;
        while next < self.entries.len() {
            let mut frame = PublishBuilder::begin(out, producer);
            while let Some(&(id, len)) = self.entries.get(next) {
                if frame.count() == batch_size {
                    break;
                }
                let payload = &self.bytes[offset..offset + len as usize];
                match frame.push(PublishId(id), payload) {
                    Ok(()) => {
                        offset += len as usize;
                        next += 1;
                    }
                    Err(EncodeError::BatchFull | EncodeError::FrameFull { .. }) => break,
                    Err(other) => {
                        // `take` refuses a payload over the limit; nothing else fails.
                        debug_assert!(false, "a pending message the codec refuses: {other}");
                        offset += len as usize;
                        next += 1;
                    }
                }
            }
            if frame.finish().is_ok() {
                frames += 1;
            }
        }
        self.clear();
        frames
    }
}

/// Hashes a publish id for the unconfirmed table: one multiplication (Fibonacci hashing),
/// which spreads consecutive ids over the table's buckets and control bits.
#[derive(Default)]
pub(crate) struct IdHasher(u64);

impl Hasher for IdHasher {
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(b)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0 ^ n).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

/// A producer's state, behind its lock.
pub(crate) struct ProducerState {
    /// The publish id of the next message taken.
    /// The publish id the next message takes; `None` once `u64::MAX` is taken.
    next_id: Option<u64>,
    /// Messages taken and not yet handed to the I/O task. Each is in `unconfirmed` too.
    pending: Pending,
    /// Messages taken and without an outcome, by publish id, with when they were taken;
    /// never more than `max_unconfirmed` (the cap is checked before an insert). Allocated
    /// at twice the cap: removals leave tombstones, which the table rehashes in place
    /// instead of growing.
    unconfirmed: HashMap<u64, Instant, BuildHasherDefault<IdHasher>>,
    /// With a confirm timeout: the messages in the order taken, with when. An entry leaves
    /// at expiry, or when the queue reaches twice the cap and is swept of messages with an
    /// outcome already (at most the cap stay): it never grows past its allocation.
    taken: VecDeque<(u64, Instant)>,
    /// Why the producer takes no more messages: closed, refused, or its connection ended.
    closed: Option<ClientError>,
    /// Threads waiting in `send_blocking` for room.
    blocked: usize,
}

/// A producer's shared part: its handle's and the I/O task's.
pub(crate) struct ProducerShared {
    pub(crate) id: ProducerId,
    pub(crate) options: ProducerOptions,
    state: Mutex<ProducerState>,
    /// Wakes `send_blocking` waiters when room frees or the producer closes.
    room: Condvar,
    /// Wakes `send` waiters when room frees or the producer closes.
    room_async: Notify,
    pub(crate) conn: Arc<Connection>,
    /// Handler panics caught, counted by the I/O task.
    panics: std::sync::atomic::AtomicU64,
    /// What the broker had stored of the producer's name's messages when it opened
    /// (`ProducerOpened`): written once, by the I/O task, before the open is answered.
    stored: std::sync::OnceLock<StoredIds>,
    /// `Publish` frames encoded, and the messages in them: the I/O task's count.
    sent_frames: std::sync::atomic::AtomicU64,
    sent_messages: std::sync::atomic::AtomicU64,
}

impl ProducerShared {
    /// A producer with its tables allocated for `options.max_unconfirmed` (checked).
    pub(crate) fn new(
        id: ProducerId,
        options: ProducerOptions,
        conn: Arc<Connection>,
    ) -> Result<Self, TryReserveError> {
        let cap = options.max_unconfirmed as usize;
        let mut unconfirmed = HashMap::default();
        unconfirmed.try_reserve(2 * cap)?;
        let mut taken = VecDeque::new();
        if options.confirm_timeout.is_some() {
            taken.try_reserve_exact(2 * cap)?;
        }
        Ok(Self {
            id,
            options,
            state: Mutex::new(ProducerState {
                next_id: Some(0),
                pending: Pending::with_capacity(cap.min(MAX_MESSAGES_PER_FRAME as usize))?,
                unconfirmed,
                taken,
                closed: None,
                blocked: 0,
            }),
            room: Condvar::new(),
            room_async: Notify::new(),
            conn,
            panics: std::sync::atomic::AtomicU64::new(0),
            stored: std::sync::OnceLock::new(),
            sent_frames: std::sync::atomic::AtomicU64::new(0),
            sent_messages: std::sync::atomic::AtomicU64::new(0),
        })
    }

    /// The I/O task's half of the producer: the spare pending buffer (the size of the
    /// producer's own) and the outcome list (room for the whole cap), allocated here,
    /// where an allocation the machine cannot provide is an error the opener sees.
    pub(crate) fn io_buffers(&self) -> Result<(Pending, Vec<Outcome>), TryReserveError> {
        let cap = self.cap();
        let spare = Pending::with_capacity(cap.min(MAX_MESSAGES_PER_FRAME as usize))?;
        let mut outcomes = Vec::new();
        outcomes.try_reserve_exact(cap)?;
        Ok((spare, outcomes))
    }

    fn lock(&self) -> MutexGuard<'_, ProducerState> {
        lock(&self.state)
    }

    fn cap(&self) -> usize {
        self.options.max_unconfirmed as usize
    }

    /// Takes a message if the producer is open and under its cap; then wakes the I/O task
    /// if it has to send.
    fn try_take(&self, payload: &[u8]) -> Result<PublishId, TrySendError> {
        self.try_take_as(None, payload)
    }

    /// [`try_take`](Self::try_take), with the publish id `id` when given instead of the
    /// producer's next one (a reliable producer numbers its messages itself, across
    /// connections).
    pub(crate) fn try_take_as(
        &self,
        id: Option<u64>,
        payload: &[u8],
    ) -> Result<PublishId, TrySendError> {
        let mut state = self.lock();
        if let Some(id) = id {
            state.next_id = Some(id);
        }
        let (id, wake) = self.take(&mut state, payload)?;
        drop(state);
        if wake {
            self.conn.wake.notify_one();
        }
        Ok(id)
    }

    /// Takes a message under the lock; says whether the I/O task must be woken.
    fn take(
        &self,
        state: &mut ProducerState,
        payload: &[u8],
    ) -> Result<(PublishId, bool), TrySendError> {
        if let Some(error) = &state.closed {
            return Err(TrySendError::Failed(error.clone()));
        }
        if state.unconfirmed.len() >= self.cap() {
            return Err(TrySendError::Full);
        }
        let Some(id) = state.next_id else {
            return Err(TrySendError::Failed(ClientError::IdsExhausted));
        };
        state.next_id = id.checked_add(1);
        let now = Instant::now();
        state.unconfirmed.insert(id, now);
        if self.options.confirm_timeout.is_some() {
            if state.taken.len() >= 2 * self.cap() {
                let unconfirmed = &state.unconfirmed;
                state.taken.retain(|(id, _)| unconfirmed.contains_key(id));
            }
            debug_assert!(state.taken.len() < 2 * self.cap());
            state.taken.push_back((id, now));
        }
        let was_empty = state.pending.is_empty();
        let filled_before = state.pending.fills_frame();
        state.pending.push(id, payload);
        let wake = match self.options.flush {
            Flush::Dynamic { .. } => was_empty,
            Flush::Timer(_) => !filled_before && state.pending.fills_frame(),
        };
        Ok((PublishId(id), wake))
    }

    /// Hands the pending messages to the I/O task: swaps them with `spare` (empty),
    /// if `when` says so of them.
    pub(crate) fn take_pending(&self, spare: &mut Pending, when: impl FnOnce(&Pending) -> bool) {
        debug_assert!(spare.is_empty());
        let mut state = self.lock();
        if !state.pending.is_empty() && when(&state.pending) {
            std::mem::swap(&mut state.pending, spare);
        }
    }

    /// Encodes `pending` (taken from this producer) into `out` as `Publish` frames, and
    /// counts them.
    pub(crate) fn encode(&self, pending: &mut Pending, out: &mut Vec<u8>) {
        use std::sync::atomic::Ordering::Relaxed;
        let messages = pending.entries.len() as u64;
        let frames = pending.encode(out, self.id, self.options.batch_size());
        self.sent_frames.fetch_add(u64::from(frames), Relaxed);
        self.sent_messages.fetch_add(messages, Relaxed);
    }

    /// Whether the pending messages fill a frame.
    pub(crate) fn fills_frame(pending: &Pending) -> bool {
        pending.fills_frame()
    }

    /// Settles the confirmed messages still unconfirmed, into `outcomes`; the others
    /// (timed out, or not ours) are ignored.
    pub(crate) fn confirm(
        &self,
        confirms: impl Iterator<Item = (PublishId, ConfirmStatus)>,
        now: Instant,
        outcomes: &mut Vec<Outcome>,
    ) {
        let mut state = self.lock();
        for (id, status) in confirms {
            if let Some(taken_at) = state.unconfirmed.remove(&id.0) {
                outcomes.push(Outcome {
                    publish_id: id,
                    status,
                    taken_at,
                    settled_at: now,
                });
            }
        }
    }

    /// When the oldest message without an outcome times out, if the producer has a
    /// confirm timeout and such a message.
    pub(crate) fn next_expiry(&self) -> Option<Instant> {
        let timeout = self.options.confirm_timeout?;
        let mut state = self.lock();
        // Messages settled otherwise leave the front here, so that the deadline is real.
        while let Some(&(id, at)) = state.taken.front() {
            if state.unconfirmed.contains_key(&id) {
                return Some(at + timeout);
            }
            state.taken.pop_front();
        }
        None
    }

    /// Settles `TimedOut` every message taken `confirm_timeout` or more before `now`.
    pub(crate) fn expire(&self, now: Instant, outcomes: &mut Vec<Outcome>) {
        let Some(timeout) = self.options.confirm_timeout else {
            return;
        };
        let mut state = self.lock();
        while let Some(&(id, at)) = state.taken.front() {
            if now.duration_since(at) < timeout {
                break;
            }
            state.taken.pop_front();
            if let Some(taken_at) = state.unconfirmed.remove(&id) {
                outcomes.push(Outcome {
                    publish_id: PublishId(id),
                    status: ConfirmStatus::TimedOut,
                    taken_at,
                    settled_at: now,
                });
            }
        }
    }

    /// Marks the producer closed with `error` (unless it is already), so that it takes
    /// nothing more, and wakes its waiting senders.
    pub(crate) fn close_with(&self, error: ClientError) {
        let mut state = self.lock();
        if state.closed.is_none() {
            state.closed = Some(error);
        }
        drop(state);
        self.wake_senders();
    }

    /// Closes the producer with `error` and settles every message without an outcome:
    /// `NotSent` those still pending if `pending_not_sent` (the connection ended before
    /// they were written), `Closed` the others.
    pub(crate) fn settle_all(
        &self,
        error: ClientError,
        pending_not_sent: bool,
        now: Instant,
        outcomes: &mut Vec<Outcome>,
    ) {
        let mut state = self.lock();
        if state.closed.is_none() {
            state.closed = Some(error);
        }
        let state = &mut *state;
        if pending_not_sent {
            for &(id, _) in &state.pending.entries {
                if let Some(taken_at) = state.unconfirmed.remove(&id) {
                    outcomes.push(Outcome {
                        publish_id: PublishId(id),
                        status: ConfirmStatus::NotSent,
                        taken_at,
                        settled_at: now,
                    });
                }
            }
        }
        state.pending.clear();
        for (id, taken_at) in state.unconfirmed.drain() {
            outcomes.push(Outcome {
                publish_id: PublishId(id),
                status: ConfirmStatus::Closed,
                taken_at,
                settled_at: now,
            });
        }
        state.taken.clear();
    }

    /// The broker opened the producer, and said what it had stored of its name's
    /// messages: a named producer numbers its messages on after the highest (an id the
    /// broker stored would be taken for a duplicate); after `u64::MAX` there is none.
    pub(crate) fn opened(&self, stored: StoredWindow<'_>) {
        // A producer is answered `ProducerOpened` once: a second answer is not taken.
        let _ = self.stored.set(StoredIds::from_wire(stored));
        if let Some(last) = stored.last_stored {
            let mut state = self.lock();
            state.next_id = state
                .next_id
                .and_then(|next| Some(next.max(last.checked_add(1)?)));
        }
    }

    /// Waits until the producer is closed (by its handle, a refusal or the end of its
    /// connection), and says why.
    pub(crate) async fn wait_closed(&self) -> ClientError {
        loop {
            let room = self.room_async.notified();
            tokio::pin!(room);
            room.as_mut().enable();
            if let Some(error) = self.lock().closed.clone() {
                return error;
            }
            room.await;
        }
    }

    /// Wakes every sender waiting for room (after outcomes freed some, or a close).
    pub(crate) fn wake_senders(&self) {
        let blocked = self.lock().blocked;
        if blocked > 0 {
            self.room.notify_all();
        }
        self.room_async.notify_waiters();
    }

    /// Hands `outcomes` to `handler` (catching a panic), then empties it.
    pub(crate) fn report(&self, handler: &mut ConfirmHandler, outcomes: &mut Vec<Outcome>) {
        if outcomes.is_empty() {
            return;
        }
        self.wake_senders();
        let batch = &*outcomes;
        if catch_unwind(AssertUnwindSafe(|| handler(batch))).is_err() {
            self.panics
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
        outcomes.clear();
    }
}

/// A producer on a connection, opened by [`Client::open_producer`](crate::Client::open_producer).
///
/// Its methods take `&self`: share it (in an `Arc`) between tasks and threads. Every
/// message taken gets exactly one [`Outcome`], reported to the producer's handler on the
/// connection's I/O task. Dropping the producer closes it as [`close`](Self::close) does,
/// without waiting.
pub struct Producer {
    shared: Arc<ProducerShared>,
}

impl Producer {
    pub(crate) fn new(shared: Arc<ProducerShared>) -> Self {
        Self { shared }
    }

    pub(crate) fn shared(&self) -> &Arc<ProducerShared> {
        &self.shared
    }

    /// The producer's id on its connection.
    pub fn id(&self) -> ProducerId {
        self.shared.id
    }

    /// For a named producer, the highest publish id the broker had stored for its name
    /// when it opened (its `ProducerOpened`), if any: the producer's publish ids go on
    /// from the next. `None` for an anonymous producer or a name with nothing stored. It
    /// says nothing of lower ids: ask [`stored_when_opened`](Self::stored_when_opened).
    pub fn last_stored(&self) -> Option<PublishId> {
        self.shared.stored.get().and_then(|s| s.last).map(PublishId)
    }

    /// For a named producer, whether the broker had stored message `id` of its name when
    /// the producer opened, as its `ProducerOpened` proved: `Some(true)` or `Some(false)`
    /// as a fact, `None` for an id older than the broker's deduplication window (it cannot
    /// tell; publishing it again gets `RejectedOutOfWindow`).
    pub fn stored_when_opened(&self, id: PublishId) -> Option<bool> {
        self.stored_when_opened_all().stored(id.0)
    }

    /// The whole of what `ProducerOpened` said (empty before it came).
    pub(crate) fn stored_when_opened_all(&self) -> &StoredIds {
        static NOTHING: StoredIds = StoredIds {
            last: None,
            known: 0,
            bits: Vec::new(),
        };
        self.shared.stored.get().unwrap_or(&NOTHING)
    }

    /// Takes a message if the producer is under its cap, and returns its publish id; the
    /// payload is copied. Never waits.
    ///
    /// # Errors
    ///
    /// [`TrySendError::Full`] at the cap (nothing taken: try again after outcomes);
    /// [`TrySendError::Failed`] with [`ClientError::PayloadTooLarge`], or with why the
    /// producer is closed.
    pub fn try_send(&self, payload: &[u8]) -> Result<PublishId, TrySendError> {
        check_payload(payload, self.shared.conn.limits.max_payload)?;
        self.shared.try_take(payload)
    }

    /// Takes a message, waiting (without blocking the thread) while the producer is at its
    /// cap, and returns its publish id. Cancel-safe: a `send` dropped while waiting took
    /// nothing.
    ///
    /// # Errors
    ///
    /// [`ClientError::PayloadTooLarge`], or why the producer is closed.
    pub async fn send(&self, payload: &[u8]) -> Result<PublishId, ClientError> {
        check_payload(payload, self.shared.conn.limits.max_payload)?;
        take_when_room(&self.shared.room_async, || self.shared.try_take(payload)).await
    }

    /// Takes a message, blocking the thread while the producer is at its cap, and returns
    /// its publish id. For threads outside the async runtime: never call it on the
    /// runtime's threads (nor from the confirm handler), which it would block.
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
        check_payload(payload, self.shared.conn.limits.max_payload)?;
        let shared = &*self.shared;
        let mut state = shared.lock();
        loop {
            match shared.take(&mut state, payload) {
                Ok((id, wake)) => {
                    drop(state);
                    if wake {
                        shared.conn.wake.notify_one();
                    }
                    return Ok(id);
                }
                Err(TrySendError::Failed(error)) => return Err(error),
                Err(TrySendError::Full) => {
                    state.blocked += 1;
                    state = shared
                        .room
                        .wait(state)
                        .unwrap_or_else(std::sync::PoisonError::into_inner);
                    state.blocked -= 1;
                }
            }
        }
    }

    /// The `Publish` frames this producer's messages went in so far, and the messages in
    /// them: `messages / frames` is the mean batch (what dynamic send is about).
    pub fn sent(&self) -> (u64, u64) {
        use std::sync::atomic::Ordering::Relaxed;
        (
            self.shared.sent_frames.load(Relaxed),
            self.shared.sent_messages.load(Relaxed),
        )
    }

    /// Messages taken and without an outcome yet.
    pub fn unconfirmed(&self) -> usize {
        self.shared.lock().unconfirmed.len()
    }

    /// Panics of the confirm handler caught so far.
    pub fn handler_panics(&self) -> u64 {
        self.shared
            .panics
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Closes the producer: it takes no more messages; what is pending is sent, then
    /// `CloseProducer`. The broker confirms every message it has not confirmed yet; once it
    /// echoes the close, whatever still has no outcome is reported `Closed`. Returns when
    /// every message taken has had its outcome reported.
    ///
    /// # Errors
    ///
    /// Why the connection ended, if it ended first (every message still got its outcome).
    pub async fn close(self) -> Result<(), ClientError> {
        let (reply, answer) = oneshot::channel();
        self.request_close(Some(reply));
        answer.await.unwrap_or(Err(ClientError::Closed))
    }

    fn request_close(&self, reply: Option<oneshot::Sender<Result<(), ClientError>>>) {
        self.shared.close_with(ClientError::Closed);
        let _ = self.shared.conn.command(Command::CloseProducer {
            producer: self.shared.id,
            reply,
        });
    }
}

impl Drop for Producer {
    fn drop(&mut self) {
        let closed = self.shared.lock().closed.is_some();
        if !closed {
            self.request_close(None);
        }
    }
}

impl std::fmt::Debug for Producer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Producer")
            .field("id", &self.shared.id)
            .field("options", &self.shared.options)
            .finish_non_exhaustive()
    }
}

/// Refuses a payload longer than `max` (the broker's `max_payload`, at most
/// `MAX_PAYLOAD_LEN`): it would be refused `TooLarge`, so it is not sent.
pub(crate) fn check_payload(payload: &[u8], max: u32) -> Result<(), ClientError> {
    let max = max.min(MAX_PAYLOAD_LEN);
    if payload.len() > max as usize {
        return Err(ClientError::PayloadTooLarge {
            len: payload.len(),
            max,
        });
    }
    Ok(())
}
