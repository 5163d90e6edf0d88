//! What a producer reports: each message's [`Outcome`], the handler it goes to, and what
//! the broker said it had stored of the producer's name when it opened ([`StoredIds`]).

use std::time::Instant;

use zerodispatch_wire::{ConfirmStatus, PublishId, StoredWindow};

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
    pub(super) last: Option<u64>,
    pub(super) known: u32,
    pub(super) bits: Vec<u8>,
}

impl StoredIds {
    pub(super) fn from_wire(stored: StoredWindow<'_>) -> Self {
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
/// [`Producer::try_send`](crate::Producer::try_send), not `send_blocking`. The batch's messages have left the cap
/// before it is called. A panic in it is caught and counted
/// ([`Producer::handler_panics`](crate::Producer::handler_panics)); the batch is not reported again.
pub(crate) type ConfirmHandler = Box<dyn FnMut(&[Outcome]) + Send>;
