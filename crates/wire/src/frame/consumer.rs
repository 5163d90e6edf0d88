//! A consumer's frames of fixed layout: `OpenConsumer`, `CloseConsumer` and `Credit`.

use super::{Invalid, nonzero, read_exact};
use crate::error::DecodeError;
use crate::ids::{AppId, ConsumerId, QueueId};
use crate::kind::FrameKind;

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

impl OpenConsumer {
    pub(crate) const LEN: usize = 14;

    pub(crate) fn read(body: &[u8]) -> Result<Self, DecodeError> {
        read_exact(FrameKind::OpenConsumer, body, |r| {
            Some(Self {
                consumer: ConsumerId(r.u32()?),
                queue: QueueId(r.u32()?),
                app: AppId(r.u16()?),
                credit: r.u32()?,
            })
        })
    }

    pub(crate) fn write(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.consumer.0.to_le_bytes());
        out.extend_from_slice(&self.queue.0.to_le_bytes());
        out.extend_from_slice(&self.app.0.to_le_bytes());
        out.extend_from_slice(&self.credit.to_le_bytes());
    }
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

impl CloseConsumer {
    pub(crate) const LEN: usize = 4;

    pub(crate) fn read(body: &[u8]) -> Result<Self, DecodeError> {
        read_exact(FrameKind::CloseConsumer, body, |r| {
            Some(Self {
                consumer: ConsumerId(r.u32()?),
            })
        })
    }

    pub(crate) fn write(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.consumer.0.to_le_bytes());
    }
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

impl Credit {
    pub(crate) const LEN: usize = 8;

    pub(crate) fn check(&self) -> Result<(), Invalid> {
        nonzero(self.credit, FrameKind::Credit, "credit")
    }

    pub(crate) fn read(body: &[u8]) -> Result<Self, DecodeError> {
        let credit = read_exact(FrameKind::Credit, body, |r| {
            Some(Self {
                consumer: ConsumerId(r.u32()?),
                credit: r.u32()?,
            })
        })?;
        credit.check()?;
        Ok(credit)
    }

    pub(crate) fn write(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.consumer.0.to_le_bytes());
        out.extend_from_slice(&self.credit.to_le_bytes());
    }
}
