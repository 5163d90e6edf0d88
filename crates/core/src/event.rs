//! Events: what travels through a processor's queue. The errors that hand one back are in
//! `error.rs`.
//!
//! # Size
//!
//! A queued event ([`Item`]) is 56 bytes when the message type `M` is at most 48 bytes
//! (asserted in tests for a 24-byte confirm): a 48-byte [`Callback`], the 4-byte client
//! key and the enum's tag. With the 8-byte stamp of an `ArrayQueue` slot, one slot is one
//! 64-byte cache line. A larger `M` makes every slot larger: keep messages small (a handle
//! or an index rather than the payload).

use std::time::Instant;

use zerodispatch_callback::Callback;

use crate::client::{Client, ClientKey};

/// An event for a client or its processor.
#[derive(Debug)]
pub enum Event<M> {
    /// A callback that goes through the client ([`Client::on_event`]) and puts the client on
    /// its processor's flush list.
    Callback(Callback),
    /// A typed message of the broker's own, through the client, like a callback.
    Message(M),
    /// A callback the processor runs itself, bypassing the client, after flushing every
    /// client on its flush list.
    DispatcherCallback(Callback),
}

impl<M> Event<M> {
    /// The kind of event, for logs and errors.
    #[must_use]
    pub fn kind(&self) -> &'static str {
        match self {
            Event::Callback(_) => "callback",
            Event::Message(_) => "message",
            Event::DispatcherCallback(_) => "dispatcher callback",
        }
    }
}

/// What a processor's queue holds: an [`Event`] with its target flattened in, plus the
/// dispatcher's own control items.
pub(crate) enum Item<M> {
    Callback {
        key: ClientKey,
        callback: Callback,
    },
    Message {
        key: ClientKey,
        message: M,
    },
    DispatcherCallback(Callback),
    /// A monitor's probe: the time it was enqueued, to sample time in queue and detect a
    /// stuck processor.
    Probe(Instant),
    Register {
        key: ClientKey,
        client: Box<dyn Client<M>>,
    },
    Unregister {
        key: ClientKey,
    },
}

impl<M> Item<M> {
    #[inline]
    pub(crate) fn new(key: ClientKey, event: Event<M>) -> Self {
        match event {
            Event::Callback(callback) => Item::Callback { key, callback },
            Event::Message(message) => Item::Message { key, message },
            Event::DispatcherCallback(callback) => Item::DispatcherCallback(callback),
        }
    }

    /// The event back out of an item made by [`Item::new`].
    pub(crate) fn into_event(self) -> Event<M> {
        match self {
            Item::Callback { callback, .. } => Event::Callback(callback),
            Item::Message { message, .. } => Event::Message(message),
            Item::DispatcherCallback(callback) => Event::DispatcherCallback(callback),
            Item::Probe(_) | Item::Register { .. } | Item::Unregister { .. } => {
                unreachable!("control items are never handed back as events")
            }
        }
    }
}
