//! Replication receipts: what a replica node says when it has stored a message, and the
//! quorum of them a queue waits for before it acknowledges the message to its producer.
//!
//! # What an ACK means
//!
//! A queue ACKs a message ([`AckStatus::Stored`](crate::AckStatus::Stored)) when the message
//! is stored: at once without replication, or, with a [`Replication`] quorum, when
//! `quorum` replicas have sent a [`Receipt`] for it (as a BlazingMQ primary acknowledges a
//! message once enough replicas acknowledged its replication). Consumers' confirms do not
//! take part: they release the message (free its slot in the queue's table), which the
//! producer does not hear of.
//!
//! # The path of a receipt
//!
//! A replica node (in-process: a thread of the application) calls
//! [`Broker::replica_receipt`](crate::Broker::replica_receipt); the receipt goes to the
//! cluster processor, holding one of the replica credits (as a replica's confirm does), and
//! the cluster routes it to the queue's processor as an inline functor handed the queue's
//! table. There it counts once per replica; the receipt that reaches the quorum queues the
//! ACK, sent on the queue's next flush. A receipt for a message the queue does not hold
//! (not stored yet, never stored, or already released) is counted and ignored, as is a
//! second receipt from the same replica: a replica sends its receipt for a message it got
//! from the primary, so after the primary stored it.
//!
//! # A quorum that never comes
//!
//! Nothing waits for it: the queue keeps the message (delivery to consumers does not wait
//! for the quorum) until both the quorum is reached and every consumer has confirmed, so a
//! message whose receipts never come stays held and counts against the queue's capacity.
//! Its producer learns of it by its confirm timeout
//! ([`ProducerConfig::confirm_timeout`](crate::ProducerConfig::confirm_timeout):
//! `TimedOut`), by closing (`Closed`), or at shutdown (`Closed`, reported by its session as
//! the broker stops), exactly once, as for any message without an outcome.

use crate::ids::{Guid, QueueId};
use crate::limits::MAX_REPLICAS;

/// A replica node's id: 0 to the configured number of replicas, exclusive.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ReplicaId(pub u8);

/// Replication of every queue's messages to replica nodes, and the quorum of receipts a
/// queue waits for before it ACKs a message.
///
/// ```
/// use zerodispatch_broker::*;
///
/// // Three replicas; a message is ACKed once two of them have stored it.
/// let replication = Replication { replicas: 3, quorum: 2 };
/// let broker = Broker::start(BrokerConfig {
///     queues: vec![QueueConfig::new(QueueMode::Priority)],
///     replication: Some(replication),
///     ..BrokerConfig::default()
/// })?;
/// # broker.shutdown();
/// # Ok::<(), BrokerError>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Replication {
    /// Replica nodes, 1 to [`MAX_REPLICAS`]: receipts come from [`ReplicaId`]s
    /// `0..replicas`.
    pub replicas: u8,
    /// Receipts (from distinct replicas) before the ACK: 1 to `replicas`.
    pub quorum: u8,
}

impl Replication {
    /// Whether `replicas` and `quorum` are in range.
    pub(crate) fn is_valid(self) -> bool {
        (1..=MAX_REPLICAS).contains(&self.replicas) && (1..=self.replicas).contains(&self.quorum)
    }
}

/// A replica's receipt: replica `replica` has stored message `guid` of `queue`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Receipt {
    /// The queue.
    pub queue: QueueId,
    /// The message.
    pub guid: Guid,
    /// The replica that stored it.
    pub replica: ReplicaId,
}
