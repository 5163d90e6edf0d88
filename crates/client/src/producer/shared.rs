//! A producer's shared part ([`ProducerShared`]): the state its handle and the
//! connection's I/O task both reach, behind one lock: the unconfirmed table, the pending
//! buffer, the confirm timeouts, and the waiters for room.

use std::collections::{HashMap, TryReserveError, VecDeque};
use std::hash::BuildHasherDefault;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Instant;

use tokio::sync::Notify;
use zerodispatch_wire::{
    ConfirmStatus, MAX_MESSAGES_PER_FRAME, ProducerId, PublishId, StoredWindow,
};

use crate::error::{ClientError, TrySendError};
use crate::lock::lock;
use crate::options::{Flush, ProducerOptions};

use super::outcome::{ConfirmHandler, Outcome, StoredIds};
use super::pending::{IdHasher, Pending};

/// A producer's state, behind its lock.
pub(crate) struct ProducerState {
    /// The publish id of the next message taken.
    /// The publish id the next message takes; `None` once `u64::MAX` is taken.
    pub(super) next_id: Option<u64>,
    /// Messages taken and not yet handed to the I/O task. Each is in `unconfirmed` too.
    pub(super) pending: Pending,
    /// Messages taken and without an outcome, by publish id, with when they were taken;
    /// never more than `max_unconfirmed` (the cap is checked before an insert). Allocated
    /// at twice the cap: removals leave tombstones, which the table rehashes in place
    /// instead of growing.
    pub(super) unconfirmed: HashMap<u64, Instant, BuildHasherDefault<IdHasher>>,
    /// With a confirm timeout: the messages in the order taken, with when. An entry leaves
    /// at expiry, or when the queue reaches twice the cap and is swept of messages with an
    /// outcome already (at most the cap stay): it never grows past its allocation.
    pub(super) taken: VecDeque<(u64, Instant)>,
    /// Why the producer takes no more messages: closed, refused, or its connection ended.
    pub(super) closed: Option<ClientError>,
    /// Threads waiting in `send_blocking` for room.
    pub(super) blocked: usize,
}

/// A producer's shared part: its handle's and the I/O task's.
pub(crate) struct ProducerShared {
    pub(crate) id: ProducerId,
    pub(crate) options: ProducerOptions,
    pub(super) state: Mutex<ProducerState>,
    /// Wakes `send_blocking` waiters when room frees or the producer closes.
    pub(super) room: Condvar,
    /// Wakes `send` waiters when room frees or the producer closes.
    pub(super) room_async: Notify,
    /// Wakes the connection's I/O task: the producer has something to send.
    pub(crate) io_wake: Arc<Notify>,
    /// Handler panics caught, counted by the I/O task.
    pub(super) panics: std::sync::atomic::AtomicU64,
    /// What the broker had stored of the producer's name's messages when it opened
    /// (`ProducerOpened`): written once, by the I/O task, before the open is answered.
    pub(super) stored: std::sync::OnceLock<StoredIds>,
    /// `Publish` frames encoded, and the messages in them: the I/O task's count.
    pub(super) sent_frames: std::sync::atomic::AtomicU64,
    pub(super) sent_messages: std::sync::atomic::AtomicU64,
}

impl ProducerShared {
    /// A producer with its tables allocated for `options.max_unconfirmed` (checked).
    pub(crate) fn new(
        id: ProducerId,
        options: ProducerOptions,
        io_wake: Arc<Notify>,
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
            io_wake,
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

    pub(super) fn lock(&self) -> MutexGuard<'_, ProducerState> {
        lock(&self.state)
    }

    pub(super) fn cap(&self) -> usize {
        self.options.max_unconfirmed as usize
    }

    /// Takes a message if the producer is open and under its cap; then wakes the I/O task
    /// if it has to send.
    pub(super) fn try_take(&self, payload: &[u8]) -> Result<PublishId, TrySendError> {
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
            self.io_wake.notify_one();
        }
        Ok(id)
    }

    /// Takes a message under the lock; says whether the I/O task must be woken.
    pub(super) fn take(
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
