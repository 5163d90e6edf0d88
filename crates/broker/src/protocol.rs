//! The broker's typed messages: what travels between its clients through the dispatcher.
//!
//! `BrokerMsg` is the dispatcher's message type `M`. It is 48 bytes, so that a queued event
//! stays 56 bytes and an `ArrayQueue` slot 64 bytes, a cache line's size (the message's and
//! the queued item's sizes are asserted in the tests; the slot is one line only where the
//! queue's buffer is 64-aligned, which `ArrayQueue`, aligning it to 8, does not ask for).

use zerodispatch_core::ClientHandle;

use crate::ids::{AppId, ConsumerId, Guid, Payload, QueueId};
use crate::message::{AckStatus, Confirm, ConfirmMode, DeliveryToken};
use crate::queue::BoxedConfirm;
use crate::replication::Receipt;

/// The broker's typed events. Each variant's fields are named after what they carry: the
/// message's `guid`, its `queue` and `payload`, the `consumer` and its `app`, and the
/// client handles of the sessions involved.
///
/// Internal to the crate: an application that could send these could forge a confirm or an
/// ACK. It reaches the broker through `Producer` and `Broker` only.
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
        /// Numbered by the caller (`publish_with_id`): its GUID may repeat one in flight,
        /// which the session checks. The session's own numbering never repeats one.
        numbered: bool,
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
        /// Its payload, and its slot in the producer session's table, which the queue
        /// echoes in its ACK.
        body: PutBody,
    },
    /// Queue -> consumer session: deliver this message. (No queue id: the session is its
    /// consumer's, of one queue, and knows it; the slot takes its place, so that the
    /// message stays 48 bytes.)
    Push {
        /// The consumer it is pushed to.
        consumer: ConsumerId,
        /// The slot of the queue's table that holds it: the delivery's token.
        slot: DeliveryToken,
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
        /// Its slot in the session's table, as its latest PUT from the session named it:
        /// the session finds the message there, checked by its GUID.
        slot: u32,
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

/// A PUT's payload and the slot of the message in its producer session's table, in 16
/// bytes: a [`Payload`] (a `u64` and a `u32`, 16 bytes with its padding) and a `u32` side
/// by side would take 24, and make `BrokerMsg` 56 bytes. A queue keeps it as it came, in
/// its slot, to ACK the PUT with the session's slot.
#[derive(Clone, Copy, Debug)]
pub(crate) struct PutBody {
    /// [`Payload::handle`].
    handle: u64,
    /// [`Payload::len`].
    len: u32,
    /// The message's slot in the session's table of unacknowledged messages.
    pub(crate) slot: u32,
}

impl PutBody {
    pub(crate) fn new(payload: Payload, slot: u32) -> Self {
        Self {
            handle: payload.handle,
            len: payload.len,
            slot,
        }
    }

    pub(crate) fn payload(self) -> Payload {
        Payload {
            handle: self.handle,
            len: self.len,
        }
    }
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
