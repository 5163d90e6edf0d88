//! A queue: its message table and the client that owns it on a queue processor.
//!
//! # The path of one message through a queue
//!
//! * PUT: the message is stored in a free slot of a table preallocated at the queue's
//!   capacity (with replication, also in the index of messages awaiting their quorum,
//!   preallocated likewise), with one pending share per app
//!   (one for a priority queue, one per app for fanout), and its ACK (`Stored`) is
//!   queued for the producer's session, sent on flush. With a replication quorum the ACK
//!   waits instead for `quorum` replicas' receipts (see `replication.rs`). A full table
//!   rejects the PUT with an ACK `RejectedQueueFull`: never a lost or overwritten message.
//!   A named producer's PUT whose publish id the queue has stored already is a duplicate:
//!   ACKed again, never stored or delivered twice (see `dedup.rs`).
//! * On flush, every undelivered share is PUSHed to a consumer of its app that has room in
//!   its window (round-robin among the app's consumers); a share with no consumer waits.
//! * Each PUSH carries the message's slot, its delivery token; a CONFIRM names it, and the
//!   queue applies it only if that slot is live and holds the confirm's GUID.
//! * CONFIRM releases a share; when none remain (and the ACK has gone), the message is
//!   released: its slot is free again. The producer hears nothing of it.
//!
//! # How confirms reach the table
//!
//! The table is owned by the queue's client on its processor. A confirm functor built in
//! place by a consumer session (the inline mode, like BlazingMQ's `ConfirmFunctor`) is a
//! callback handed that client when the processor runs it (`Event::to_client`), so it
//! reaches the table directly, exactly as a typed confirm does; the boxed baseline is the
//! same closure in a `Box`.

// The table, and what each event does to it (its flush in `engine/delivery.rs`).
mod engine;
pub(crate) use engine::{BoxedConfirm, QueueEngine};
// The client that owns the table on its processor, and how confirms and receipts reach it.
mod client;
pub(crate) use client::{QueueClient, send_confirm, send_receipt};

#[cfg(test)]
mod tests;

/// How a queue hands out its messages.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QueueMode {
    /// Each message goes to one consumer (round-robin among those with room).
    Priority,
    /// Each message goes to every app `0..apps` (one consumer of each app).
    Fanout {
        /// Apps (sub-queues), 1 to [`MAX_APPS`](crate::MAX_APPS).
        apps: u16,
    },
}

impl QueueMode {
    /// Apps per message: 1 for a priority queue, the fanout's apps otherwise.
    pub(crate) fn apps(self) -> u16 {
        match self {
            QueueMode::Priority => 1,
            QueueMode::Fanout { apps } => apps,
        }
    }
}
