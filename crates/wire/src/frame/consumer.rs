//! A consumer's frames of fixed layout: `OpenConsumer`, `CloseConsumer` and `Credit`.

use super::{Field, Invalid, fixed_layout, nonzero, read_exact};
use crate::error::DecodeError;
use crate::ids::{AppId, ConsumerId, QueueId};
use crate::kind::FrameKind;
use crate::reader::Reader;

/// `OpenConsumer` (client -> broker): open consumer `consumer` of `app` on `queue`, with
/// `credit` messages it may be delivered before it gives more. The broker answers with the
/// same frame once it is open, or with an error frame that refuses it.
///
/// Body, 14 bytes: `consumer: u32`, `queue: u32`, `app: u16`, `credit: u32`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OpenConsumer {
    /// The consumer's id on the connection, chosen by the client.
    pub consumer: ConsumerId,
    /// The queue.
    pub queue: QueueId,
    /// The app (sub-queue); 0 in a priority queue.
    pub app: AppId,
    /// Messages the broker may deliver before the consumer sends a `Credit`; 0 to start
    /// paused.
    pub credit: u32,
}

fixed_layout! {
    frame OpenConsumer(OpenConsumer), 14 bytes:
    consumer: ConsumerId,
    queue: QueueId,
    app: AppId,
    credit: u32,
}

/// `CloseConsumer` (client -> broker): close consumer `consumer`. The broker delivers it
/// nothing more and echoes the frame; what it delivered and was not confirmed goes to the
/// queue's other consumers. After the echo the id may be opened again.
///
/// Body, 4 bytes: `consumer: u32`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CloseConsumer {
    /// The consumer.
    pub consumer: ConsumerId,
}

fixed_layout! {
    frame CloseConsumer(CloseConsumer), 4 bytes:
    consumer: ConsumerId,
}

/// `Credit` (client -> broker): consumer `consumer` may be delivered `credit` more
/// messages. Each delivered message takes one; the broker adds credits up to `u32::MAX`
/// (saturating).
///
/// Body, 8 bytes: `consumer: u32`, `credit: u32` (at least 1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Credit {
    /// The consumer.
    pub consumer: ConsumerId,
    /// The messages added; at least 1.
    pub credit: u32,
}

fixed_layout! {
    frame Credit(Credit) checked, 8 bytes:
    consumer: ConsumerId,
    credit: u32,
}

impl Credit {
    pub(crate) fn check(&self) -> Result<(), Invalid> {
        nonzero(self.credit, FrameKind::Credit, "credit")
    }
}
