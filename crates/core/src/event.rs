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

/// An event for a client: what [`dispatch`](crate::DispatcherHandle::dispatch) sends to
/// the client a handle names.
///
/// A callback that the processor runs itself, bypassing the clients (after flushing them),
/// is not an event for a client: it goes to a processor, by
/// [`execute`](crate::DispatcherHandle::execute) (or an [`Executor`](crate::Executor),
/// [`call`](crate::DispatcherHandle::call), `execute_on_all`), so that no client handle is
/// given and then ignored:
///
/// ```compile_fail
/// # use zerodispatch_core::*;
/// let event = Event::<u64>::DispatcherCallback(Callback::new(|| ())); // no such event
/// ```
#[derive(Debug)]
pub enum Event<M> {
    /// A callback that goes through the client ([`Client::on_event`]) and puts the client on
    /// its processor's flush list.
    Callback(Callback),
    /// A typed message of the broker's own, through the client, like a callback.
    Message(M),
}

impl<M> Event<M> {
    /// The kind of event, for logs and errors.
    #[must_use]
    pub fn kind(&self) -> &'static str {
        match self {
            Event::Callback(_) => "callback",
            Event::Message(_) => "message",
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
        }
    }

    /// The event back out of an item made by [`Item::new`].
    pub(crate) fn into_event(self) -> Event<M> {
        match self {
            Item::Callback { callback, .. } => Event::Callback(callback),
            Item::Message { message, .. } => Event::Message(message),
            Item::DispatcherCallback(_)
            | Item::Probe(_)
            | Item::Register { .. }
            | Item::Unregister { .. } => {
                unreachable!("only items made from events are handed back as events")
            }
        }
    }

    /// The callback back out of a dispatcher callback item.
    pub(crate) fn into_dispatcher_callback(self) -> Callback {
        match self {
            Item::DispatcherCallback(callback) => callback,
            _ => unreachable!("only a dispatcher callback is handed back as one"),
        }
    }
}
