//! Events: what travels through a processor's queue. The errors that hand one back are in
//! `error.rs`.
//!
//! # Size
//!
//! A queued event ([`Item`]) is 56 bytes when the message type `M` is at most 48 bytes
//! (asserted in tests for a 24-byte confirm): a 48-byte [`Callback`], the 4-byte client
//! key and the enum's tag (asserted in `tests/dispatch.rs`, `event_sizes`). With the 8-byte
//! stamp of an `ArrayQueue` slot, one slot is 64 bytes: a cache line's size, though one line
//! only when the queue's buffer is 64-aligned, which `ArrayQueue` does not ask for (it
//! aligns its buffer to 8, so a slot usually straddles two lines). A larger `M` makes every
//! slot larger: keep messages small (a handle or an index rather than the payload).
//!
//! For the same reason every callback a dispatcher queues (client callbacks, callbacks
//! handed their client, dispatcher callbacks) is stored in the default space, and no
//! dispatcher takes a larger one: an `ArrayQueue` slot is as large as the largest item
//! it can hold, so one 64-byte space would make every event of every client pay for 64
//! bytes more (a 96-byte slot, which spans two or three lines, for every event). A closure that does not fit has three
//! ways in, each visible: capture an index into state its client already owns (what
//! [`Event::to_client`] is for: the client is handed to the callback), carry the data in
//! the message type `M`, or [`Callback::spill`] it (one allocation, counted as `spilled`
//! in the processor's stats).

use std::fmt;
use std::marker::PhantomData;
use std::time::Instant;

use zerodispatch_callback::Callback;

use crate::client::{Client, ClientCallback, ClientEvent, Context, Delivery};
use crate::ids::ClientKey;

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
    /// A callback handed the client itself, in its concrete type, and the context (made
    /// by [`Event::to_client`]); it bypasses [`Client::on_event`] and puts the client on
    /// its processor's flush list.
    ClientCallback(ClientCallback<M>),
}

impl<M: Send + 'static> Event<M> {
    /// An event that runs `f` on the client it is dispatched to, handed the client as its
    /// concrete type `C` and the [`Context`]: `Event::to_client(move |queue: &mut Queue,
    /// ctx| queue.confirm(guid))`. Stored inline, never allocates; a closure that does not
    /// fit the default space is a compile error ([at `cargo build`, not at `cargo
    /// check`](zerodispatch_callback#when-the-size-check-runs)).
    ///
    /// It is typed by its client: a dispatch accepts it only with a
    /// [`ClientHandle<C>`](crate::ClientHandle) of the same `C`, so a callback on a `Queue`
    /// sent to a `Session` does not compile. For an [erased](crate::ClientHandle::erase)
    /// handle, make it an `Event` (`Event::from`), whose client type is checked on the
    /// processor (see [`ClientCallback`]).
    #[inline]
    pub fn to_client<C, F>(f: F) -> ToClient<M, C>
    where
        C: Client<M>,
        F: FnOnce(&mut C, &mut Context<M>) + Send + 'static,
    {
        ToClient {
            callback: ClientCallback::new(f),
            client: PhantomData,
        }
    }
}

/// A callback on a client of type `C`, made by [`Event::to_client`]: an event that a
/// dispatch accepts only with a [`ClientHandle<C>`](crate::ClientHandle).
pub struct ToClient<M, C> {
    callback: ClientCallback<M>,
    client: PhantomData<fn() -> C>,
}

impl<M, C> From<ToClient<M, C>> for Event<M> {
    /// The callback as an event for any client (an erased handle's), its client type
    /// checked on the processor.
    #[inline]
    fn from(to_client: ToClient<M, C>) -> Self {
        Event::ClientCallback(to_client.callback)
    }
}

impl<M, C> fmt::Debug for ToClient<M, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ToClient").finish_non_exhaustive()
    }
}

/// What a dispatch to a [`ClientHandle<C>`](crate::ClientHandle) accepts: any [`Event`], or
/// a callback on a `C` ([`ToClient<M, C>`], from [`Event::to_client`]). Sealed.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be dispatched to a `ClientHandle<{C}>`",
    note = "a callback made by `Event::to_client` goes only to a handle of the client type it takes; for an erased handle, pass `Event::from(..)`"
)]
pub trait EventFor<M, C>: sealed::Sealed {
    /// The event, as it is queued.
    fn into_event(self) -> Event<M>;
}

impl<M, C> EventFor<M, C> for Event<M> {
    #[inline]
    fn into_event(self) -> Event<M> {
        self
    }
}

impl<M, C> EventFor<M, C> for ToClient<M, C> {
    #[inline]
    fn into_event(self) -> Event<M> {
        Event::ClientCallback(self.callback)
    }
}

mod sealed {
    pub trait Sealed {}
    impl<M> Sealed for super::Event<M> {}
    impl<M, C> Sealed for super::ToClient<M, C> {}
}

impl<M> Event<M> {
    /// The kind of event, for logs and errors.
    #[must_use]
    pub fn kind(&self) -> &'static str {
        match self {
            Event::Callback(_) => "callback",
            Event::Message(_) => "message",
            Event::ClientCallback(_) => "client callback",
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
    ClientCallback {
        key: ClientKey,
        callback: ClientCallback<M>,
    },
    /// A monitor's probe: the time it was enqueued, to sample time in queue and detect a
    /// stuck processor.
    Probe(Instant),
    Unregister {
        key: ClientKey,
    },
    /// Up to [`PACK`](crate::pack::PACK) events of one blocking batch for one client, in
    /// order, in one slot (`pack.rs`). Never handed back: a pack is pushed under an entry
    /// that waits for room.
    Pack {
        key: ClientKey,
        events: Vec<crate::client::Delivery<M>>,
    },
}

impl<M> Item<M> {
    #[inline]
    pub(crate) fn new(key: ClientKey, event: Event<M>) -> Self {
        match event {
            Event::Callback(callback) => Item::Callback { key, callback },
            Event::Message(message) => Item::Message { key, message },
            Event::ClientCallback(callback) => Item::ClientCallback { key, callback },
        }
    }

    /// The event back out of an item made by [`Item::new`].
    pub(crate) fn into_event(self) -> Event<M> {
        match self {
            Item::Callback { callback, .. } => Event::Callback(callback),
            Item::Message { message, .. } => Event::Message(message),
            Item::ClientCallback { callback, .. } => Event::ClientCallback(callback),
            Item::DispatcherCallback(_)
            | Item::Probe(_)
            | Item::Unregister { .. }
            | Item::Pack { .. } => {
                unreachable!("only items made from one event are handed back as events")
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

impl<M> Delivery<M> {
    /// The event it was made from.
    pub(crate) fn into_event(self) -> Event<M> {
        match self {
            Delivery::Event(ClientEvent::Callback(callback)) => Event::Callback(callback),
            Delivery::Event(ClientEvent::Message(message)) => Event::Message(message),
            Delivery::Call(callback) => Event::ClientCallback(callback),
        }
    }
}

impl<M> From<Event<M>> for Delivery<M> {
    #[inline]
    fn from(event: Event<M>) -> Self {
        match event {
            Event::Callback(callback) => Delivery::Event(ClientEvent::Callback(callback)),
            Event::Message(message) => Delivery::Event(ClientEvent::Message(message)),
            Event::ClientCallback(callback) => Delivery::Call(callback),
        }
    }
}
