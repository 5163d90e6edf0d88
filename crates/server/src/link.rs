//! The sessions a connection opens on the broker, and what their callbacks do on the
//! broker's processor threads: turn outcomes and deliveries into [`OutItem`]s for the
//! connection, drop payload references, and say when the session is gone.

use std::sync::Arc;

use zerodispatch_broker::{Ack, AckStatus, Delivery};
use zerodispatch_wire::ConfirmStatus;

use crate::outbound::{OutItem, Outbound};
use crate::payloads::PayloadStore;

/// What a session's callback holds of its connection. Dropped with the session (after its
/// last call), it tells the connection that the session is gone: nothing of it follows.
pub(crate) struct SessionLink {
    pub(crate) outbound: Arc<Outbound>,
    pub(crate) store: Arc<PayloadStore>,
    /// The connection's index of the producer or consumer.
    pub(crate) slot: u16,
    /// Which session held that index.
    pub(crate) generation: u32,
    /// A producer's link, or a consumer's.
    pub(crate) producer: bool,
}

impl SessionLink {
    /// A producer's `on_ack`: each outcome drops the message's ACK reference (`Stored`), or
    /// all of them (the message was not stored), and goes to the connection with the
    /// publishing id the client gave it. Runs on a processor thread; never waits.
    pub(crate) fn on_ack(&self, acks: &[Ack]) {
        let mut pusher = self.outbound.pusher();
        for ack in acks {
            let handle = ack.payload.handle;
            let Some(publish_id) = self.store.publish_id(handle) else {
                // A stale handle (counted by the store): its references were dropped
                // already, and its publishing id is gone with them.
                continue;
            };
            if ack.status == AckStatus::Stored {
                self.store.release(handle, 1);
            } else {
                self.store.release_all(handle);
            }
            // Counted by the queue when full: the connection closes with INTERNAL.
            let _ = pusher.push(OutItem::Confirm {
                slot: self.slot,
                generation: self.generation,
                publish_id,
                status: wire_status(ack.status),
            });
        }
        drop(pusher);
        self.outbound.wake();
    }

    /// A consumer's `on_delivery`: each message goes to the connection, which writes it
    /// (its payload stays until the queue releases the message). Runs on a processor
    /// thread; never waits.
    pub(crate) fn on_delivery(&self, deliveries: &[Delivery]) {
        let mut pusher = self.outbound.pusher();
        for delivery in deliveries {
            let item = OutItem::Deliver {
                slot: self.slot,
                generation: self.generation,
                guid: delivery.guid,
                handle: delivery.payload.handle,
            };
            // Full: counted, and the connection closes (INTERNAL); the broker then
            // redelivers or drops the share, and releases the message in time.
            let _ = pusher.push(item);
        }
        drop(pusher);
        self.outbound.wake();
    }
}

impl Drop for SessionLink {
    fn drop(&mut self) {
        let (slot, generation) = (self.slot, self.generation);
        let gone = if self.producer {
            OutItem::ProducerGone { slot, generation }
        } else {
            OutItem::ConsumerGone { slot, generation }
        };
        let _ = self.outbound.push(gone);
        self.outbound.wake();
    }
}

/// The wire's status for the broker's outcome.
pub(crate) fn wire_status(status: AckStatus) -> ConfirmStatus {
    match status {
        AckStatus::Stored => ConfirmStatus::Stored,
        AckStatus::RejectedQueueFull => ConfirmStatus::RejectedQueueFull,
        AckStatus::RejectedProducerFull => ConfirmStatus::RejectedProducerFull,
        AckStatus::RejectedUnknownQueue => ConfirmStatus::RejectedUnknownQueue,
        AckStatus::Closed => ConfirmStatus::Closed,
        AckStatus::TimedOut => ConfirmStatus::TimedOut,
        AckStatus::NotSent => ConfirmStatus::NotSent,
        AckStatus::RejectedOutOfWindow => ConfirmStatus::RejectedOutOfWindow,
    }
}
