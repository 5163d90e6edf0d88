//! What a consumer's handler is handed: one `Deliver` frame's messages ([`Deliveries`]),
//! borrowed from the connection's receive buffer.

use std::panic::{AssertUnwindSafe, catch_unwind};

use zerodispatch_wire::{DeliverFrame, DeliveredMessages, DeliveryToken, Guid};

use super::shared::ConsumerShared;

/// A delivered message, borrowed from the connection's receive buffer for the duration of
/// the handler's call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Message<'a> {
    /// The message's GUID.
    pub guid: Guid,
    /// This delivery's token, chosen by the broker: confirm the message with its GUID and
    /// this token ([`Deliveries::confirm`], [`Consumer::confirm`](crate::Consumer::confirm)).
    /// Opaque; good only for this delivery on this consumer's connection (a message
    /// delivered again comes with a token of its own).
    pub token: DeliveryToken,
    /// Its payload.
    pub payload: &'a [u8],
}

/// One `Deliver` frame's messages, as the consumer's handler sees them. They borrow the
/// connection's receive buffer: copy what must outlive the call.
pub struct Deliveries<'a> {
    pub(crate) frame: DeliverFrame<'a>,
    pub(crate) consumer: &'a ConsumerShared,
    /// The frame's messages left out (a reliable consumer's duplicates), by index; empty
    /// for none.
    pub(crate) skip: &'a [bool],
    /// The messages not left out.
    pub(crate) len: usize,
    /// Told of each confirm made through these deliveries (a reliable consumer's window);
    /// returns the token to confirm with instead, if it knows one of the current
    /// session's for the GUID.
    pub(crate) on_confirm: Option<&'a (dyn Fn(Guid) -> Option<DeliveryToken> + Sync)>,
}

impl<'a> Deliveries<'a> {
    /// A frame's messages, all of them.
    pub(crate) fn whole(frame: DeliverFrame<'a>, consumer: &'a ConsumerShared) -> Self {
        Self {
            frame,
            consumer,
            skip: &[],
            len: frame.count() as usize,
            on_confirm: None,
        }
    }

    /// The messages, in the order delivered.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = Message<'a>> + use<'a> {
        MessageIter {
            messages: self.frame.messages(),
            skip: self.skip,
            index: 0,
            left: self.len,
        }
    }

    /// How many messages.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether there are none (never, for a valid frame).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Confirms one message (of this batch or an earlier one) by its GUID and the token it
    /// was delivered with ([`Message::guid`], [`Message::token`]), as
    /// [`Consumer::confirm`](crate::Consumer::confirm) does.
    pub fn confirm(&self, guid: Guid, token: DeliveryToken) {
        let token = self.on_confirm.and_then(|f| f(guid)).unwrap_or(token);
        self.consumer.confirm(guid, token);
    }

    /// Confirms every message of the batch, each with its own token.
    pub fn confirm_all(&self) {
        if let Some(on_confirm) = self.on_confirm {
            self.iter().for_each(|m| {
                on_confirm(m.guid);
            });
        }
        self.consumer
            .confirm_many(self.iter().map(|m| (m.guid, m.token)));
    }
}

impl std::fmt::Debug for Deliveries<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Deliveries")
            .field("consumer", &self.consumer.id)
            .field("len", &self.len())
            .finish()
    }
}

struct MessageIter<'a> {
    pub(super) messages: DeliveredMessages<'a>,
    pub(super) skip: &'a [bool],
    pub(super) index: usize,
    pub(super) left: usize,
}

impl<'a> Iterator for MessageIter<'a> {
    type Item = Message<'a>;

    fn next(&mut self) -> Option<Message<'a>> {
        loop {
            let (guid, token, payload) = self.messages.next()?;
            let index = self.index;
            self.index += 1;
            if self.skip.get(index) != Some(&true) {
                self.left = self.left.saturating_sub(1);
                return Some(Message {
                    guid,
                    token,
                    payload,
                });
            }
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.left, Some(self.left))
    }
}

impl ExactSizeIterator for MessageIter<'_> {}

/// What a consumer's application is called with for each batch of deliveries, on the
/// connection's I/O task. It must not block. A panic in it is caught and counted
/// ([`Consumer::handler_panics`](crate::Consumer::handler_panics)); the batch is not delivered again, and its messages stay
/// unconfirmed unless it confirmed them.
pub(crate) type DeliveryHandler = Box<dyn FnMut(&Deliveries<'_>) + Send>;

impl<'a> Deliveries<'a> {
    /// Hands a frame's messages, all of them, to `handler`, catching a panic (counted on
    /// `consumer`).
    pub(crate) fn hand_over(
        frame: DeliverFrame<'a>,
        consumer: &'a ConsumerShared,
        handler: &mut DeliveryHandler,
    ) {
        let deliveries = Self::whole(frame, consumer);
        if catch_unwind(AssertUnwindSafe(|| handler(&deliveries))).is_err() {
            consumer.handler_panicked();
        }
    }
}
