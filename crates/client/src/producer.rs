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

pub(crate) mod outcome;
pub(crate) mod pending;
pub(crate) mod shared;

use std::sync::Arc;

use tokio::sync::{Notify, oneshot};
use zerodispatch_wire::{MAX_PAYLOAD_LEN, ProducerId, PublishId};

use crate::command::Command;
use crate::connection::Connection;
use crate::error::{ClientError, TrySendError};

// What each message gets, reported to the producer's handler.
pub use outcome::Outcome;
pub(crate) use outcome::{ConfirmHandler, StoredIds};
// Messages taken and not yet encoded.
pub(crate) use pending::Pending;
// The state the handle and the I/O task share.
pub(crate) use shared::ProducerShared;

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

/// A producer on a connection, opened by [`Client::open_producer`](crate::Client::open_producer).
///
/// Its methods take `&self`: share it (in an `Arc`) between tasks and threads. Every
/// message taken gets exactly one [`Outcome`], reported to the producer's handler on the
/// connection's I/O task. Dropping the producer closes it as [`close`](Self::close) does,
/// without waiting.
pub struct Producer {
    shared: Arc<ProducerShared>,
    /// The connection, to send its close.
    conn: Arc<Connection>,
}

impl Producer {
    pub(crate) fn new(shared: Arc<ProducerShared>, conn: Arc<Connection>) -> Self {
        Self { shared, conn }
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
        check_payload(payload, self.conn.limits.max_payload)?;
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
        check_payload(payload, self.conn.limits.max_payload)?;
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
        check_payload(payload, self.conn.limits.max_payload)?;
        let shared = &*self.shared;
        let mut state = shared.lock();
        loop {
            match shared.take(&mut state, payload) {
                Ok((id, wake)) => {
                    drop(state);
                    if wake {
                        shared.io_wake.notify_one();
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
        let _ = self.conn.command(Command::CloseProducer {
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
