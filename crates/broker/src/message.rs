//! The broker's typed messages: what travels between its clients through the dispatcher.
//!
//! `BrokerMsg` is the dispatcher's message type `M`. It is 48 bytes, so that a queued event
//! stays 56 bytes and an `ArrayQueue` slot 64 bytes, a cache line's size (the message's and
//! the queued item's sizes are asserted in the tests; the slot is one line only where the
//! queue's buffer is 64-aligned, which `ArrayQueue`, aligning it to 8, does not ask for).

use zerodispatch_core::ClientHandle;

use crate::ids::{AppId, ConsumerId, Guid, Payload, QueueId};
use crate::queue::QueueEngine;
use crate::replication::Receipt;

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

/// The broker's typed events. Each variant's fields are named after what they carry: the
/// message's `guid`, its `queue` and `payload`, the `consumer` and its `app`, and the
/// client handles of the sessions involved.
///
/// Internal to the crate: an application that could send these could forge a confirm or an
/// ACK. It reaches the broker through `Producer` and `Broker` only.
/// A confirm functor in a `Box`, handed the queue's table: the boxed baseline of the
/// inline confirm (one allocation per confirm).
pub(crate) struct BoxedConfirm(pub(crate) Box<dyn FnOnce(&mut QueueEngine) + Send>);

impl std::fmt::Debug for BoxedConfirm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("BoxedConfirm")
    }
}

#[derive(Debug)]
pub(crate) enum BrokerMsg {
    /// Application -> producer session: publish this message.
    Publish {
        /// The target queue.
        queue: QueueId,
        /// The message.
        guid: Guid,
        /// Its payload.
        payload: Payload,
        /// Whether it holds one of the producer's credits (sent with `send`).
        credited: bool,
    },
    /// Ticker -> producer session: time to send (timer aggregation) and to check timeouts.
    Tick,
    /// Application -> producer session (a close with a wait): accept no more publishes,
    /// send the batch now, and keep waiting for the outcomes of what is in flight.
    Drain,
    /// Producer session -> queue: store this message.
    Put {
        /// The producer's session, to ACK.
        producer: ClientHandle,
        /// The message.
        guid: Guid,
        /// Its payload.
        payload: Payload,
    },
    /// Queue -> consumer session: deliver this message.
    Push {
        /// The consumer it is pushed to.
        consumer: ConsumerId,
        /// Its queue.
        queue: QueueId,
        /// The message.
        guid: Guid,
        /// Its payload.
        payload: Payload,
    },
    /// Consumer session or cluster -> queue: a typed confirm.
    Confirm(Confirm),
    /// Consumer session or cluster -> queue: a boxed confirm functor handed the queue's
    /// table (the baseline the inline functor is measured against).
    BoxedConfirm(BoxedConfirm),
    /// Consumer session -> cluster: a confirm to route to its queue, in the given mode.
    Route(Confirm, ConfirmMode),
    /// Replica node (`Broker::replica_confirm`) -> cluster: a confirm to route to its
    /// queue, in the given mode, holding one of the replica credits until it is routed.
    Replica(Confirm, ConfirmMode),
    /// Replica node (`Broker::replica_receipt`) -> cluster: a receipt to route to its
    /// queue, holding one of the replica credits until it is routed.
    Receipt(Receipt),
    /// Queue -> producer session: the outcome of a message.
    Ack {
        /// The message.
        guid: Guid,
        /// Its outcome.
        status: AckStatus,
    },
    /// Application -> consumer session: it has processed this delivery (`Confirms::Explicit`).
    AppConfirm {
        /// The consumer it was delivered to.
        consumer: ConsumerId,
        /// The message.
        guid: Guid,
    },
    /// Application -> consumer session: it may hand over `credit` more deliveries.
    Credit {
        /// The consumer.
        consumer: ConsumerId,
        /// How many more.
        credit: u32,
    },
    /// Broker -> consumer session: the session is open; its first flush (this event's, or
    /// an earlier one's) attaches it to its queue.
    Open {
        /// The consumer.
        consumer: ConsumerId,
    },
    /// Consumer session -> queue: attach the consumer (sent by the session itself, before
    /// anything else it sends its queue).
    Attach {
        /// The consumer.
        consumer: ConsumerId,
        /// Its app.
        app: AppId,
        /// Its session.
        session: ClientHandle,
    },
    /// Consumer session (closing) -> queue: detach the consumer. Sent by the session
    /// behind its confirms, on their path, so that it never overtakes one.
    Detach {
        /// The consumer.
        consumer: ConsumerId,
    },
    /// Consumer session (closing) -> cluster: route a `Detach` to `queue`, behind the
    /// consumer's confirms routed before it.
    RouteDetach {
        /// The consumer's queue.
        queue: QueueId,
        /// The consumer.
        consumer: ConsumerId,
    },
    /// Broker -> session: close it.
    Close,
    /// Broker -> producer session: no publish comes after this one (the close protocol's
    /// step 3 in `broker/producer/close.rs`): once the ACK of every PUT it sent has come,
    /// the session unregisters itself.
    Retire,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_broker_message_keeps_a_queued_event_in_one_cache_line() {
        assert_eq!(std::mem::size_of::<BrokerMsg>(), 48);
        assert_eq!(zerodispatch_core::__private::item_size::<BrokerMsg>(), 56);
    }
}
