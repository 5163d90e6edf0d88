//! Events: what travels through a processor's queue, and the errors that hand one back.
//!
//! # Size
//!
//! A queued event ([`Item`]) is 56 bytes when the message type `M` is at most 48 bytes
//! (asserted in tests for a 24-byte confirm): a 48-byte [`Callback`], the 4-byte client
//! key and the enum's tag. With the 8-byte stamp of an `ArrayQueue` slot, one slot is one
//! 64-byte cache line. A larger `M` makes every slot larger: keep messages small (a handle
//! or an index rather than the payload).
//!
//! For the same reason every callback a dispatcher queues (client callbacks, callbacks
//! handed their client, dispatcher callbacks) is stored in the default space, and no
//! dispatcher takes a larger one: an `ArrayQueue` slot is as large as the largest item
//! it can hold, so one 64-byte space would make every event of every client pay for 64
//! bytes, and push each slot over a cache line. A closure that does not fit has three
//! ways in, each visible: capture an index into state its client already owns (what
//! [`Event::to_client`] is for: the client is handed to the callback), carry the data in
//! the message type `M`, or [`Callback::spill`] it (one allocation, counted as `spilled`
//! in the processor's stats).

use std::fmt;
use std::time::Instant;

use zerodispatch_callback::Callback;

use crate::client::{Client, ClientCallback, ClientKey, Context, Registered};

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
    /// A callback handed the client itself, in its concrete type, and the context (made
    /// by [`Event::to_client`]); it bypasses [`Client::on_event`] and puts the client on
    /// its processor's flush list.
    ClientCallback(ClientCallback<M>),
}

impl<M: Send + 'static> Event<M> {
    /// An event that runs `f` on the client it is dispatched to, handed the client as its
    /// concrete type `C` and the [`Context`]: `Event::to_client(move |queue: &mut Queue,
    /// ctx| queue.confirm(guid))`. Stored inline, never allocates; a closure that does not
    /// fit the default space is a compile error. See [`ClientCallback`] (what happens when
    /// the client is not a `C`).
    #[inline]
    pub fn to_client<C, F>(f: F) -> Self
    where
        C: Client<M>,
        F: FnOnce(&mut C, &mut Context<M>) + Send + 'static,
    {
        Event::ClientCallback(ClientCallback::new(f))
    }
}

impl<M> Event<M> {
    /// The kind of event, for logs and errors.
    #[must_use]
    pub fn kind(&self) -> &'static str {
        match self {
            Event::Callback(_) => "callback",
            Event::Message(_) => "message",
            Event::DispatcherCallback(_) => "dispatcher callback",
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
    Register {
        key: ClientKey,
        client: Box<dyn Registered<M>>,
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
            Event::ClientCallback(callback) => Item::ClientCallback { key, callback },
        }
    }

    /// The event back out of an item made by [`Item::new`].
    pub(crate) fn into_event(self) -> Event<M> {
        match self {
            Item::Callback { callback, .. } => Event::Callback(callback),
            Item::Message { message, .. } => Event::Message(message),
            Item::DispatcherCallback(callback) => Event::DispatcherCallback(callback),
            Item::ClientCallback { callback, .. } => Event::ClientCallback(callback),
            Item::Probe(_) | Item::Register { .. } | Item::Unregister { .. } => {
                unreachable!("control items are never handed back as events")
            }
        }
    }
}

/// Why a dispatch did not enqueue its event; the event comes back in the error, so
/// nothing is lost.
#[derive(PartialEq, Eq)]
pub enum DispatchError<T> {
    /// The processor's queue is full (from `try_dispatch`; `dispatch` waits instead, except
    /// on the target's own processor thread, where waiting could never end).
    Full(T),
    /// Shutdown has started: the processor accepts no more events.
    ShutDown(T),
    /// The handle or processor id names no processor of this dispatcher (it came from
    /// another dispatcher, or was made up).
    NoSuchProcessor(T),
}

impl<T> DispatchError<T> {
    /// Whether the queue (and, on a processor thread, the outbox) was full: retry later.
    ///
    /// ```
    /// use zerodispatch_core::DispatchError;
    /// let e = DispatchError::Full(7_u64);
    /// assert!(e.is_full() && !e.is_shut_down());
    /// assert_eq!(e.into_inner(), 7);
    /// ```
    #[must_use]
    pub fn is_full(&self) -> bool {
        matches!(self, DispatchError::Full(_))
    }

    /// Whether the dispatcher is shutting down: retrying will not help.
    #[must_use]
    pub fn is_shut_down(&self) -> bool {
        matches!(self, DispatchError::ShutDown(_))
    }

    /// Whether the target names no processor of this dispatcher.
    #[must_use]
    pub fn is_no_such_processor(&self) -> bool {
        matches!(self, DispatchError::NoSuchProcessor(_))
    }

    /// What was handed back: the event, callback or handle the call was given.
    pub fn into_inner(self) -> T {
        match self {
            DispatchError::Full(t)
            | DispatchError::ShutDown(t)
            | DispatchError::NoSuchProcessor(t) => t,
        }
    }

    pub(crate) fn map<U>(self, f: impl FnOnce(T) -> U) -> DispatchError<U> {
        match self {
            DispatchError::Full(t) => DispatchError::Full(f(t)),
            DispatchError::ShutDown(t) => DispatchError::ShutDown(f(t)),
            DispatchError::NoSuchProcessor(t) => DispatchError::NoSuchProcessor(f(t)),
        }
    }
}

impl<T> fmt::Debug for DispatchError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DispatchError::Full(_) => f.write_str("Full(..)"),
            DispatchError::ShutDown(_) => f.write_str("ShutDown(..)"),
            DispatchError::NoSuchProcessor(_) => f.write_str("NoSuchProcessor(..)"),
        }
    }
}

impl<T> fmt::Display for DispatchError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DispatchError::Full(_) => f.write_str(
                "the processor's queue is full (on a processor thread, its outbox too); what was sent is handed back",
            ),
            DispatchError::ShutDown(_) => {
                f.write_str("the dispatcher is shutting down; what was sent is handed back")
            }
            DispatchError::NoSuchProcessor(_) => f.write_str(
                "no processor of this dispatcher has that id (a handle of another dispatcher?); what was sent is handed back",
            ),
        }
    }
}

impl<T> std::error::Error for DispatchError<T> {}

/// Why a batch call ([`try_dispatch_batch`](crate::DispatcherHandle::try_dispatch_batch),
/// [`dispatch_batch`](crate::DispatcherHandle::dispatch_batch)) stopped before its last
/// event: how many it enqueued, and the error of the next one, which comes back in it; the
/// events after that one are still in the caller's iterator. It is an error type of its
/// own, so that `?` carries it into `Box<dyn Error>`.
///
/// ```
/// use zerodispatch_core::{BatchError, DispatchError};
/// let e = BatchError { enqueued: 3, error: DispatchError::Full(4_u64) };
/// assert_eq!(e.to_string(), format!("3 enqueued, then: {}", e.error));
/// let boxed: Box<dyn std::error::Error> = Box::new(e);
/// assert!(boxed.source().is_some());
/// ```
pub struct BatchError<T> {
    /// Events enqueued before the one that was refused.
    pub enqueued: usize,
    /// Why the next was refused; it carries that event back.
    pub error: DispatchError<T>,
}

impl<T> BatchError<T> {
    /// The refused event handed back.
    pub fn into_inner(self) -> T {
        self.error.into_inner()
    }
}

impl<T> fmt::Debug for BatchError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BatchError")
            .field("enqueued", &self.enqueued)
            .field("error", &self.error)
            .finish()
    }
}

impl<T> fmt::Display for BatchError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} enqueued, then: {}", self.enqueued, self.error)
    }
}

impl<T: 'static> std::error::Error for BatchError<T> {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.error)
    }
}
