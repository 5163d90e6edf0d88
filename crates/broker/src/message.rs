//! What an application and the broker say about a message: its outcome at the producer
//! ([`Ack`], [`AckStatus`]), its delivery to a consumer ([`Delivery`]), its confirm
//! ([`Confirm`]), and how confirms are made and travel ([`Confirms`], [`ConfirmMode`],
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

/// A message delivered to a consumer's application.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Delivery {
    /// The message.
    pub guid: Guid,
    /// Its queue.
    pub queue: QueueId,
    /// The app (sub-queue) it was delivered for.
    pub app: AppId,
    /// Its payload, as published.
    pub payload: Payload,
}

/// A confirm: consumer `consumer` of `app` has processed message `guid` of `queue`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Confirm {
    /// The queue.
    pub queue: QueueId,
    /// The message.
    pub guid: Guid,
    /// The confirming consumer.
    pub consumer: ConsumerId,
    /// Its app.
    pub app: AppId,
}
