//! A consumer over the wire: deliveries handed to the application, its confirms batched
//! by dynamic send, and its credit.
//!
//! Deliveries are handed to the consumer's handler on the connection's I/O task, one call
//! per `Deliver` frame, as [`Deliveries`] that borrow the receive buffer (no copy). The
//! application confirms each message by its GUID and the delivery token it came with, in
//! the handler or later from any thread ([`Consumer::confirm`]); confirms are collected and sent the way a dynamic producer
//! sends: at once when the connection is not writing, all together in `ConsumerConfirm`
//! frames when it was. With `auto_credit`, each confirm gives the broker one credit back,
//! in a `Credit` frame behind the confirms.

pub(crate) mod deliveries;
pub(crate) mod shared;

use std::sync::Arc;

use tokio::sync::oneshot;
use zerodispatch_wire::{ConsumerId, DeliveryToken, Guid};

use crate::command::Command;
use crate::connection::Connection;
use crate::error::ClientError;

// What the handler is handed.
pub(crate) use deliveries::DeliveryHandler;
pub use deliveries::{Deliveries, Message};
// The state the handle and the I/O task share.
pub(crate) use shared::ConsumerShared;

/// A consumer on a connection, opened by [`Client::open_consumer`](crate::Client::open_consumer).
///
/// Its methods take `&self`: share it between tasks and threads to confirm from them.
/// Dropping it closes it as [`close`](Self::close) does, without waiting.
pub struct Consumer {
    shared: Arc<ConsumerShared>,
    /// The connection, to send its close.
    conn: Arc<Connection>,
}

impl Consumer {
    pub(crate) fn new(shared: Arc<ConsumerShared>, conn: Arc<Connection>) -> Self {
        Self { shared, conn }
    }

    /// The consumer's id on its connection.
    pub fn id(&self) -> ConsumerId {
        self.shared.id
    }

    /// Confirms a delivered message by its GUID and the token of its delivery
    /// ([`Message::guid`](crate::Message::guid), [`Message::token`](crate::Message::token)):
    /// the confirm goes in the next write of the connection (with one credit back, with
    /// `auto_credit`). The broker confirms only the delivery the pair names: a pair it does
    /// not hold (a token of another delivery, or of another GUID) confirms nothing, and is
    /// refused ([`take_refusal`](Self::take_refusal)).
    ///
    /// # Errors
    ///
    /// Why the consumer is closed.
    pub fn confirm(&self, guid: Guid, token: DeliveryToken) -> Result<(), ClientError> {
        if let Some(error) = self.closed() {
            return Err(error);
        }
        self.shared.confirm(guid, token);
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
            self.shared.io_wake.notify_one();
        }
        Ok(())
    }

    /// The last refusal of one of the consumer's frames since the last call (the broker
    /// refuses a confirm of a delivery, GUID and token, the consumer does not hold, and
    /// confirms the others).
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
        let _ = self.conn.command(Command::CloseConsumer {
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
