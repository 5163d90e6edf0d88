//! What an application and the broker say about a message: its outcome at the producer
//! ([`Ack`], [`AckStatus`]), its delivery to a consumer ([`Delivery`]), its confirm
//! ([`Confirm`]) and the token that names the delivery in it ([`DeliveryToken`]), and how
//! confirms are made and travel ([`Confirms`], [`ConfirmMode`],
//! [`ConfirmRoute`]). The messages the broker's clients exchange carry these:
//! `protocol.rs`.

use crate::ids::{AppId, ConsumerId, Guid, Payload, QueueId};

/// How a consumer's confirm travels to its queue. The three give identical results; they
/// differ in what the event carries, which is what the benches compare.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum ConfirmMode {
    /// A callback built in place (BlazingMQ's `ConfirmFunctor`): queue id, GUID, app and
    /// consumer in 28 bytes, stored inline and handed the queue's client by the queue's
    /// processor (`Event::to_client`). The default.
    #[default]
    Inline,
    /// A typed `BrokerMsg::Confirm`: plain data, no callback at all.
    Typed,
    /// The same functor in a `Box<dyn FnOnce>`: one allocation per confirm. The baseline.
    Boxed,
}

/// Whether a consumer's confirms go straight to the queue's processor or through the
/// cluster processor (as confirms from replicas reach a primary).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum ConfirmRoute {
    /// Session processor -> queue processor.
    #[default]
    Direct,
    /// Session processor -> cluster processor -> queue processor.
    ViaCluster,
}

/// When a consumer's deliveries are confirmed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Confirms {
    /// When `on_delivery` returns (or panics): the session confirms the whole batch.
    #[default]
    OnReturn,
    /// When the application says so, message by message, with
    /// [`Broker::confirm`](crate::Broker::confirm) or its async forms: for an application
    /// that hands its deliveries on (a network front end, a worker pool) and confirms them
    /// later. The session remembers what it delivered and not yet confirmed (at most the
    /// queue's window); a confirm of anything else is counted
    /// ([`SessionStats::unknown_confirms`](crate::SessionStats::unknown_confirms)) and
    /// dropped.
    Explicit,
}

/// The outcome of a published message, reported to its producer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AckStatus {
    /// Stored: the queue holds the message (and, with a replication quorum, enough
    /// replicas have sent their receipt). Consumers' confirms come later, if at all, and
    /// the producer does not hear of them: an ACK means stored, not consumed.
    Stored,
    /// The queue's message table was full: the message was not stored. Publish it again.
    RejectedQueueFull,
    /// The producer already had `max_unconfirmed` messages without an outcome (`send`
    /// waits below the cap, `publish` does not): the message was not sent.
    RejectedProducerFull,
    /// The queue does not exist.
    RejectedUnknownQueue,
    /// The producer was closed before the message was acknowledged.
    Closed,
    /// No outcome came within the producer's confirm timeout; a late one is counted and
    /// not reported.
    TimedOut,
    /// The producer was closed before the message was sent to its queue; or its publish id
    /// ([`Producer::publish_with_id`](crate::Producer::publish_with_id)) was that of a
    /// message of the producer still without an outcome, and it was not sent (publish it
    /// again once that one has its outcome).
    NotSent,
    /// A named producer's publish id older than its queue's deduplication window
    /// ([`BrokerConfig::dedup_window`](crate::BrokerConfig::dedup_window)): the queue
    /// cannot tell whether it stored the message before, so it did not store it now and
    /// does not say it is stored. Whether an earlier copy was stored is unknown.
    RejectedOutOfWindow,
}

/// An acknowledgement, as a producer's application sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ack {
    /// The message.
    pub guid: Guid,
    /// Its queue.
    pub queue: QueueId,
    /// Its payload, as published.
    pub payload: Payload,
    /// What became of it.
    pub status: AckStatus,
}

/// A delivery's token, as an AMQP delivery tag: the slot of its queue's table (the ring
/// of messages the queue holds) that holds the delivered message. A confirm names it
/// ([`Confirm::token`]) so that the queue finds the message by indexing its table, with no
/// GUID index whose cost grows with the messages in flight.
///
/// A token is only a hint, checked before it is used: the queue applies a confirm only if
/// the token's index is inside its table, the slot is live (holds a message), and the
/// slot's message has the confirm's GUID. A stale token (its message released and the slot
/// reused by another), a token of a free slot, or a forged one is counted
/// ([`QueueStats::unknown_guid`](crate::QueueStats::unknown_guid)) and releases nothing:
/// refused, never misapplied to another message.
///
/// Valid from the delivery until the message is released (every share confirmed): a slot
/// is reused only after that, and the GUID check then refuses the old token.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct DeliveryToken(pub u32);

/// A message delivered to a consumer's application.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Delivery {
    /// The message.
    pub guid: Guid,
    /// Where its queue holds it: what a confirm of it names
    /// ([`Confirm::token`]).
    pub token: DeliveryToken,
    /// Its queue.
    pub queue: QueueId,
    /// The app (sub-queue) it was delivered for.
    pub app: AppId,
    /// Its payload, as published.
    pub payload: Payload,
}

/// A confirm: consumer `consumer` of `app` has processed message `guid` of `queue`,
/// delivered with `token`.
///
/// 32 bytes, so that the confirm functor that captures it fits the callback's inline space.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Confirm {
    /// The queue.
    pub queue: QueueId,
    /// The message.
    pub guid: Guid,
    /// The delivery's token ([`Delivery::token`]): the queue finds the message by it, and
    /// applies the confirm only if that slot holds `guid`.
    pub token: DeliveryToken,
    /// The confirming consumer.
    pub consumer: ConsumerId,
    /// Its app.
    pub app: AppId,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_confirm_fits_the_inline_functor_space() {
        // The inline confirm functor captures a `Confirm` and nothing else
        // (`queue/client.rs`): it must fit the callback's default 32-byte space.
        assert_eq!(std::mem::size_of::<Confirm>(), 32);
    }
}
