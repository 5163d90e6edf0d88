//! How a reliable producer came back from losing its connection ([`Recovery`]), and the
//! outage it measures that by ([`Outage`]).

use std::time::{Duration, Instant};

/// How the producer came back from losing its connection, handed to the handler set by
/// [`ReliableProducer::on_recovery`](crate::ReliableProducer::on_recovery).
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
pub(super) struct Outage {
    pub(super) lost_at: Instant,
    pub(super) attempts: u32,
    pub(super) reconnected_at: Option<Instant>,
}

impl Outage {
    /// The recovery this outage ends with, if a session has opened since the loss.
    pub(super) fn ended(&self, confirmed_at: Instant) -> Option<Recovery> {
        Some(Recovery {
            lost_at: self.lost_at,
            reconnected_at: self.reconnected_at?,
            confirmed_at,
            attempts: self.attempts,
        })
    }
}
