//! A consumer over the wire: deliveries handed to the application, its confirms batched
//! by dynamic send, and its credit.
//!
//! Deliveries are handed to the consumer's handler on the connection's I/O task, one call
//! per `Deliver` frame, as [`Deliveries`] that borrow the receive buffer (no copy). The
//! application confirms each message by its GUID, in the handler or later from any thread
//! ([`Consumer::confirm`]); confirms are collected and sent the way a dynamic producer
//! sends: at once when the connection is not writing, all together in `ConsumerConfirm`
//! frames when it was. With `auto_credit`, each confirm gives the broker one credit back,
//! in a `Credit` frame behind the confirms.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::oneshot;
use zerodispatch_wire::{
    ConsumerConfirmBuilder, ConsumerId, Credit, DeliverFrame, DeliveredMessages, Frame, Guid,
};

use crate::connection::{Command, Connection, lock};
use crate::error::ClientError;
use crate::options::ConsumerOptions;

/// A delivered message, borrowed from the connection's receive buffer for the duration of
/// the handler's call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Message<'a> {
    /// The message's GUID, to confirm it by.
    pub guid: Guid,
    /// Its payload.
    pub payload: &'a [u8],
}

/// One `Deliver` frame's messages, as the consumer's handler sees them. They borrow the
/// connection's receive buffer: copy what must outlive the call.
pub struct Deliveries<'a> {
    pub(crate) frame: DeliverFrame<'a>,
    pub(crate) consumer: &'a ConsumerShared,
    /// The frame's messages left out (a reliable consumer's duplicates), by index; empty
    /// for none.
    pub(crate) skip: &'a [bool],
    /// The messages not left out.
    pub(crate) len: usize,
    /// Told of each confirm made through these deliveries (a reliable consumer's window).
    pub(crate) on_confirm: Option<&'a (dyn Fn(Guid) + Sync)>,
}

impl<'a> Deliveries<'a> {
    /// A frame's messages, all of them.
    pub(crate) fn whole(frame: DeliverFrame<'a>, consumer: &'a ConsumerShared) -> Self {
        Self {
            frame,
            consumer,
            skip: &[],
            len: frame.count() as usize,
            on_confirm: None,
        }
    }

    /// The messages, in the order delivered.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = Message<'a>> + use<'a> {
        MessageIter {
            messages: self.frame.messages(),
            skip: self.skip,
            index: 0,
            left: self.len,
        }
    }

    /// How many messages.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether there are none (never, for a valid frame).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Confirms one message (of this batch or an earlier one), as
    /// [`Consumer::confirm`] does.
    pub fn confirm(&self, guid: Guid) {
        if let Some(on_confirm) = self.on_confirm {
            on_confirm(guid);
        }
        self.consumer.confirm(guid);
    }

    /// Confirms every message of the batch.
    pub fn confirm_all(&self) {
        if let Some(on_confirm) = self.on_confirm {
            self.iter().for_each(|m| on_confirm(m.guid));
        }
        self.consumer.confirm_many(self.iter().map(|m| m.guid));
    }
}

impl std::fmt::Debug for Deliveries<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Deliveries")
            .field("consumer", &self.consumer.id)
            .field("len", &self.len())
            .finish()
    }
}

struct MessageIter<'a> {
    messages: DeliveredMessages<'a>,
    skip: &'a [bool],
    index: usize,
    left: usize,
}

impl<'a> Iterator for MessageIter<'a> {
    type Item = Message<'a>;

    fn next(&mut self) -> Option<Message<'a>> {
        loop {
            let (guid, payload) = self.messages.next()?;
            let index = self.index;
            self.index += 1;
            if self.skip.get(index) != Some(&true) {
                self.left = self.left.saturating_sub(1);
                return Some(Message { guid, payload });
            }
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.left, Some(self.left))
    }
}

impl ExactSizeIterator for MessageIter<'_> {}

/// What a consumer's application is called with for each batch of deliveries, on the
/// connection's I/O task. It must not block. A panic in it is caught and counted
/// ([`Consumer::handler_panics`]); the batch is not delivered again, and its messages stay
/// unconfirmed unless it confirmed them.
pub(crate) type DeliveryHandler = Box<dyn FnMut(&Deliveries<'_>) + Send>;

/// A consumer's state, behind its lock.
struct ConsumerState {
    /// GUIDs confirmed and not yet handed to the I/O task.
    confirms: Vec<Guid>,
    /// Credit to give the broker, besides the confirms' with `auto_credit`.
    credit: u32,
    /// Why the consumer is closed, if it is.
    closed: Option<ClientError>,
    /// The last refusal of one of its frames (a confirm of a GUID it does not hold).
    refusal: Option<ClientError>,
}

/// A consumer's shared part: its handle's and the I/O task's.
pub(crate) struct ConsumerShared {
    pub(crate) id: ConsumerId,
    pub(crate) options: ConsumerOptions,
    state: Mutex<ConsumerState>,
    conn: Arc<Connection>,
    panics: std::sync::atomic::AtomicU64,
}

impl ConsumerShared {
    pub(crate) fn new(id: ConsumerId, options: ConsumerOptions, conn: Arc<Connection>) -> Self {
        Self {
            id,
            options,
            state: Mutex::new(ConsumerState {
                confirms: Vec::with_capacity((options.credit as usize).clamp(64, 4096)),
                credit: 0,
                closed: None,
                refusal: None,
            }),
            conn,
            panics: std::sync::atomic::AtomicU64::new(0),
        }
    }

    fn lock(&self) -> MutexGuard<'_, ConsumerState> {
        lock(&self.state)
    }

    pub(crate) fn confirm(&self, guid: Guid) {
        self.confirm_many(std::iter::once(guid));
    }

    fn confirm_many(&self, guids: impl Iterator<Item = Guid>) {
        let mut state = self.lock();
        if state.closed.is_some() {
            return;
        }
        let was_idle = state.confirms.is_empty() && state.credit == 0;
        state.confirms.extend(guids);
        let wake = was_idle && !state.confirms.is_empty();
        drop(state);
        if wake {
            self.conn.wake.notify_one();
        }
    }

    /// Appends the confirms collected to `out` (`ConsumerConfirm` frames), then the credit
    /// to give (a `Credit` frame), using `spare` (empty) to take the confirms out of the
    /// lock. Returns the confirms written.
    pub(crate) fn encode(&self, out: &mut Vec<u8>, spare: &mut Vec<Guid>) -> usize {
        debug_assert!(spare.is_empty());
        let mut state = self.lock();
        if state.confirms.is_empty() && state.credit == 0 {
            return 0;
        }
        std::mem::swap(&mut state.confirms, spare);
        let mut credit = std::mem::take(&mut state.credit);
        drop(state);
        for chunk in spare.chunks(zerodispatch_wire::MAX_MESSAGES_PER_FRAME as usize) {
            let mut frame = ConsumerConfirmBuilder::begin(out, self.id);
            for &guid in chunk {
                // A chunk fits a frame: 4096 GUIDs are 64 KiB.
                let _ = frame.push(guid);
            }
            let _ = frame.finish();
        }
        if self.options.auto_credit {
            credit = credit.saturating_add(u32::try_from(spare.len()).unwrap_or(u32::MAX));
        }
        if credit > 0 {
            let _ = Frame::Credit(Credit {
                consumer: self.id,
                credit,
            })
            .encode(out);
        }
        let written = spare.len();
        spare.clear();
        written
    }

    /// Hands a delivered batch to `handler`, catching a panic.
    pub(crate) fn deliver(&self, handler: &mut DeliveryHandler, frame: DeliverFrame<'_>) {
        let deliveries = Deliveries::whole(frame, self);
        if catch_unwind(AssertUnwindSafe(|| handler(&deliveries))).is_err() {
            self.panics
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
    }

    /// Closes the consumer with `error`, unless it is closed already.
    pub(crate) fn close_with(&self, error: ClientError) {
        let mut state = self.lock();
        if state.closed.is_none() {
            state.closed = Some(error);
        }
    }

    /// Records a refusal of one of the consumer's frames.
    pub(crate) fn refused(&self, error: ClientError) {
        self.lock().refusal = Some(error);
    }
}

/// A consumer on a connection, opened by [`Client::open_consumer`](crate::Client::open_consumer).
///
/// Its methods take `&self`: share it between tasks and threads to confirm from them.
/// Dropping it closes it as [`close`](Self::close) does, without waiting.
pub struct Consumer {
    shared: Arc<ConsumerShared>,
}

impl Consumer {
    pub(crate) fn new(shared: Arc<ConsumerShared>) -> Self {
        Self { shared }
    }

    /// The consumer's id on its connection.
    pub fn id(&self) -> ConsumerId {
        self.shared.id
    }

    /// Confirms a delivered message: the confirm goes in the next write of the connection
    /// (with one credit back, with `auto_credit`).
    ///
    /// # Errors
    ///
    /// Why the consumer is closed.
    pub fn confirm(&self, guid: Guid) -> Result<(), ClientError> {
        if let Some(error) = self.closed() {
            return Err(error);
        }
        self.shared.confirm(guid);
        Ok(())
    }

    /// Gives the broker `credit` more messages to deliver (saturating at `u32::MAX`); 0
    /// does nothing.
    ///
    /// # Errors
    ///
    /// Why the consumer is closed.
    pub fn add_credit(&self, credit: u32) -> Result<(), ClientError> {
        let mut state = self.shared.lock();
        if let Some(error) = &state.closed {
            return Err(error.clone());
        }
        let was_idle = state.confirms.is_empty() && state.credit == 0;
        state.credit = state.credit.saturating_add(credit);
        let wake = was_idle && state.credit > 0;
        drop(state);
        if wake {
            self.shared.conn.wake.notify_one();
        }
        Ok(())
    }

    /// The last refusal of one of the consumer's frames since the last call (the broker
    /// refuses a confirm of a GUID the consumer does not hold, and confirms the others).
    pub fn take_refusal(&self) -> Option<ClientError> {
        self.shared.lock().refusal.take()
    }

    /// Panics of the delivery handler caught so far.
    pub fn handler_panics(&self) -> u64 {
        self.shared
            .panics
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    fn closed(&self) -> Option<ClientError> {
        self.shared.lock().closed.clone()
    }

    /// Closes the consumer: its confirms are sent, then `CloseConsumer`; returns at the
    /// broker's echo, after which the handler is called no more. What was delivered and
    /// not confirmed goes back to the queue's other consumers.
    ///
    /// # Errors
    ///
    /// Why the connection ended, if it ended first.
    pub async fn close(self) -> Result<(), ClientError> {
        let (reply, answer) = oneshot::channel();
        self.request_close(Some(reply));
        answer.await.unwrap_or(Err(ClientError::Closed))
    }

    fn request_close(&self, reply: Option<oneshot::Sender<Result<(), ClientError>>>) {
        let _ = self.shared.conn.command(Command::CloseConsumer {
            consumer: self.shared.id,
            reply,
        });
    }
}

impl Drop for Consumer {
    fn drop(&mut self) {
        if self.closed().is_none() {
            self.request_close(None);
        }
    }
}

impl std::fmt::Debug for Consumer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Consumer")
            .field("id", &self.shared.id)
            .field("options", &self.shared.options)
            .finish_non_exhaustive()
    }
}
