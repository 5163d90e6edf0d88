//! Clients: what a processor delivers events to, and the handles that name them.
//!
//! A client is registered once with the dispatcher, which moves it to one processor's
//! thread; from then on only that thread touches it, so it needs no lock. Events name
//! their client by a [`ClientHandle`], a small `Copy` value: the processor finds the
//! client in its own table by index, with no lock, no hash and no reference count per
//! event.

use std::fmt;

use std::any::{Any, TypeId};

use zerodispatch_callback::{Callback, InlineCallbackWith};

use crate::counter::Counter;
use crate::handle::DispatcherHandle;
use crate::ids::ClientHandle;

/// What a processor delivers to a client.
#[derive(Debug)]
pub enum ClientEvent<M> {
    /// A callback dispatched to this client; the client decides how to run it (usually
    /// `callback.call()`), typically buffering output until [`Client::flush`].
    Callback(Callback),
    /// A typed message of the broker's own.
    Message(M),
}

/// An object owned by one processor thread that receives events and is flushed.
///
/// # The flush contract
///
/// A client that received an event (either kind of [`ClientEvent`]) is put on its
/// processor's flush list, once however many events it receives. The processor calls
/// [`flush`](Client::flush) on every client of the list, in the order they joined it:
///
/// 1. when its queue is drained (no event is waiting),
/// 2. before it runs a dispatcher callback (which bypasses clients and may depend on their
///    output having been sent),
/// 3. after at most `max_batch` events since the last flush, so that a queue that never
///    drains still flushes (this is where zerodispatch departs from BlazingMQ, whose
///    flush waits for the queue to drain),
/// 4. before the client is unregistered, and at shutdown.
///
/// So a client batches on the event path and sends on flush: at low rates every event is
/// flushed at once (the queue drains after each), and under load batches grow up to
/// `max_batch` by themselves. A client may turn flushing off for itself with
/// [`Context::set_flush_enabled`].
///
/// A panic in `on_event` or `flush` is caught, counted in the processor's stats and
/// logged; the processor goes on with the next event.
///
/// Not to be confused with `zerodispatch::client::Client` (feature `client`), a TCP
/// connection to a broker: the facade's module path tells the two apart.
pub trait Client<M: Send + 'static>: Send + 'static {
    /// Handles one event. Runs on the client's processor thread. The default runs a
    /// callback and hands a message to [`on_message`](Client::on_message): a client that
    /// only handles messages writes only that.
    ///
    /// ```
    /// use zerodispatch_core::*;
    ///
    /// /// Sums the confirms it receives; callbacks sent to it just run.
    /// struct Sum(u64);
    /// impl Client<u64> for Sum {
    ///     fn on_message(&mut self, confirms: u64, _ctx: &mut Context<u64>) {
    ///         self.0 += confirms;
    ///     }
    /// }
    ///
    /// let d = Dispatcher::<u64>::builder().pool(ClientType::Queue, PoolConfig::new(1)).build()?;
    /// let sum = d.register(ClientType::Queue, Sum(0), Placement::LeastLoaded)?;
    /// d.dispatch(sum, Event::Message(2))?;
    /// let (tx, rx) = std::sync::mpsc::channel();
    /// d.dispatch_callback(sum, move || tx.send("ran").unwrap())?;
    /// assert_eq!(rx.recv()?, "ran");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    fn on_event(&mut self, event: ClientEvent<M>, ctx: &mut Context<M>) {
        match event {
            ClientEvent::Callback(callback) => callback.call(),
            ClientEvent::Message(message) => self.on_message(message, ctx),
        }
    }

    /// Handles one typed message, when [`on_event`](Client::on_event) keeps its default.
    /// The default drops it.
    fn on_message(&mut self, message: M, ctx: &mut Context<M>) {
        let _ = (message, ctx);
    }

    /// Sends what the events since the last flush produced. Runs on the client's
    /// processor thread. The default does nothing, for clients that do not batch.
    fn flush(&mut self, ctx: &mut Context<M>) {
        let _ = ctx;
    }
}

/// What a client can reach while it handles an event or flushes: its own handle, and the
/// dispatcher, to send events to other clients (without allocating).
///
/// Each processor owns one `Context` and lends it to every call it makes into a client,
/// setting what names the client before each call: making one costs nothing per event.
pub struct Context<M> {
    pub(crate) dispatcher: DispatcherHandle<M>,
    pub(crate) me: ClientHandle,
    pub(crate) flags: ClientFlags,
    /// Counted by each [`ClientCallback`] that found a client of another type than its
    /// own: the processor adds it to its stats after each delivery and clears it.
    pub(crate) wrong_type: u32,
    /// The type of the client in each slot of the processor's table (`None` for a slot
    /// never filled), written when a client is installed, read only by
    /// [`Context::own_handle`]: so the event path sets nothing more than `me`'s key.
    pub(crate) kinds: Vec<Option<ClientKind>>,
}

/// A client's concrete type, as [`Context::own_handle`] checks it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ClientKind {
    pub(crate) id: TypeId,
    pub(crate) name: &'static str,
}

impl ClientKind {
    pub(crate) fn of<C: 'static>() -> Self {
        Self {
            id: TypeId::of::<C>(),
            name: std::any::type_name::<C>(),
        }
    }
}

/// What a client asks of its processor through its [`Context`].
#[derive(Clone, Copy, Debug)]
pub(crate) struct ClientFlags {
    /// The flush gate: while `false`, events do not put the client on the flush list.
    pub(crate) flush_enabled: bool,
    /// Set by [`Context::flush_again`]: flush the client at the next loop turn even if no
    /// event arrives. Cleared by the processor when it reads it.
    pub(crate) flush_again: bool,
}

impl Default for ClientFlags {
    fn default() -> Self {
        Self {
            flush_enabled: true,
            flush_again: false,
        }
    }
}

impl<M: Send + 'static> Context<M> {
    /// The dispatcher, to dispatch to other clients and processors.
    #[must_use]
    pub fn dispatcher(&self) -> &DispatcherHandle<M> {
        &self.dispatcher
    }

    /// This client's handle, erased: it names the client but not its type, so a callback on
    /// the client sent with it has its type checked on the processor. For a handle typed by
    /// the client, on which such a callback is checked at compile time, see
    /// [`own_handle`](Self::own_handle).
    #[must_use]
    pub fn handle(&self) -> ClientHandle {
        self.me
    }

    /// This client's handle, typed by its client `C`, as
    /// [`register`](DispatcherHandle::register) returned it: a callback on the client sent
    /// with it ([`Event::to_client`](crate::Event::to_client)) is checked against `C` at
    /// compile time, the wrong type a compile error instead of a callback dropped on the
    /// processor. In a client's own code, `ctx.own_handle::<Self>()`. A read of the
    /// processor's table and a type comparison: no allocation.
    ///
    /// ```
    /// use zerodispatch_core::*;
    ///
    /// /// Counts down by sending itself a callback on itself until it reaches zero.
    /// struct Countdown { left: u32, done: std::sync::mpsc::Sender<()> }
    /// impl Client<u32> for Countdown {
    ///     fn on_message(&mut self, from: u32, ctx: &mut Context<u32>) {
    ///         self.left = from;
    ///         let me: ClientHandle<Countdown> = ctx.own_handle::<Self>();
    ///         let tick = Event::to_client(|c: &mut Countdown, ctx| c.on_message(c.left - 1, ctx));
    ///         if from > 0 {
    ///             ctx.dispatcher().dispatch(me, tick).unwrap();
    ///         } else {
    ///             self.done.send(()).unwrap();
    ///         }
    ///     }
    /// }
    ///
    /// let d = Dispatcher::<u32>::builder().pool(ClientType::Queue, PoolConfig::new(1)).build()?;
    /// let (done, ended) = std::sync::mpsc::channel();
    /// let countdown = d.register(ClientType::Queue, Countdown { left: 0, done }, Placement::LeastLoaded)?;
    /// d.dispatch(countdown, Event::Message(3))?;
    /// ended.recv()?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Panics
    ///
    /// If `C` is not the type of the client this context is lent to (a client that hands
    /// its context to another client object it holds, and that one asks for its own type),
    /// with a message naming both types; the processor catches and counts the panic as any
    /// other of a client's. [`handle`](Self::handle) is the erased handle, for any type.
    #[must_use]
    #[track_caller]
    pub fn own_handle<C: Client<M>>(&self) -> ClientHandle<C> {
        let kind = self
            .kinds
            .get(usize::from(self.me.key.slot))
            .copied()
            .flatten();
        match kind {
            Some(kind) if kind.id == TypeId::of::<C>() => {
                ClientHandle::new(self.me.dispatcher, self.me.processor, self.me.key)
            }
            _ => wrong_own_type(
                std::any::type_name::<C>(),
                kind.map_or("(no client)", |k| k.name),
                self.me,
            ),
        }
    }

    /// Turns flushing of this client on or off. While off, events to the client do not
    /// put it on the flush list (BlazingMQ's flush gate).
    pub fn set_flush_enabled(&mut self, enabled: bool) {
        self.flags.flush_enabled = enabled;
    }

    /// Asks to be flushed again at the processor's next loop turn, even if no event
    /// arrives meanwhile: for a client whose flush could not hand everything on because a
    /// dispatch came back [`Full`](crate::DispatchError::Full) (its processor's outbox was
    /// full). The processor first retries its outbox, then flushes the client; while such
    /// a request is pending it does not park for longer than a millisecond, and it does not
    /// exit at shutdown. Ask only when there is something left to hand on: a client that
    /// asks on every flush keeps its processor awake.
    pub fn flush_again(&mut self) {
        self.flags.flush_again = true;
    }
}

/// The panic of [`Context::own_handle`] asked for a type that is not its client's.
#[cold]
#[track_caller]
fn wrong_own_type(asked: &str, actual: &str, me: ClientHandle) -> ! {
    panic!(
        "zerodispatch: `Context::own_handle::<{asked}>()` on the context of client {me}, \
         which is a `{actual}`, not a `{asked}`: a handle is typed by the client it names. \
         Ask for `ClientHandle<{actual}>` (`ctx.own_handle::<Self>()` in that client's own \
         code), or take the erased `Context::handle()`"
    )
}

impl<M: Send + 'static> fmt::Debug for Context<M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Context")
            .field("me", &self.me)
            .finish_non_exhaustive()
    }
}

/// What a processor hands a client: an event through [`Client::on_event`], or a callback
/// that takes the client itself. A pack (`pack.rs`) holds its events in this form, made
/// by the producer, so that the processor hands each over as it lies in the pack.
pub(crate) enum Delivery<M> {
    Event(ClientEvent<M>),
    Call(ClientCallback<M>),
}

impl<M> Delivery<M> {
    /// What the call into user code is, for the panic log.
    pub(crate) fn what(&self) -> &'static str {
        match self {
            Delivery::Event(ClientEvent::Callback(_)) => "client callback",
            Delivery::Event(ClientEvent::Message(_)) => "client message",
            Delivery::Call(_) => "callback on the client",
        }
    }
}

impl<M> From<ClientEvent<M>> for Delivery<M> {
    #[inline]
    fn from(event: ClientEvent<M>) -> Self {
        Delivery::Event(event)
    }
}

/// A registered client as its processor keeps it: a [`Client`] that can also be lent as
/// `&mut dyn Any`, so that a [`ClientCallback`] can reach its concrete type.
pub(crate) trait Registered<M: Send + 'static>: Client<M> {
    /// The client, for a downcast to its own type.
    fn as_any_mut(&mut self) -> &mut dyn Any;

    /// The client's type, for reports that name it.
    fn type_name(&self) -> &'static str;

    /// The client's type, for [`Context::own_handle`]'s check.
    fn kind(&self) -> ClientKind;

    /// Hands the client the next `limit` events of a pack (`pack.rs`), in order: one
    /// dynamic call for the run, the loop compiled for the client's own type. Counts each
    /// event in `processed` once handled (as one event at a time does, so that the
    /// monitor sees a long pack make progress) and the spilled callbacks in `spilled`,
    /// and sets `flush` if the client's flush gate was open after any of them (as one
    /// event at a time puts it on the flush list). A panic leaves the events after the
    /// one that panicked in `events`.
    fn on_run(
        &mut self,
        events: &mut std::vec::Drain<'_, Delivery<M>>,
        run: Run<'_>,
        ctx: &mut Context<M>,
    );
}

impl<M: Send + 'static, C: Client<M>> Registered<M> for C {
    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }

    fn type_name(&self) -> &'static str {
        std::any::type_name::<C>()
    }

    fn kind(&self) -> ClientKind {
        ClientKind::of::<C>()
    }

    #[inline]
    fn on_run(
        &mut self,
        events: &mut std::vec::Drain<'_, Delivery<M>>,
        run: Run<'_>,
        ctx: &mut Context<M>,
    ) {
        let Run {
            limit,
            processed,
            spilled,
            flush,
        } = run;
        for delivery in events.by_ref().take(limit) {
            match delivery {
                Delivery::Event(ClientEvent::Callback(callback)) => {
                    if !callback.is_inline() {
                        spilled.add(1);
                    }
                    self.on_event(ClientEvent::Callback(callback), ctx);
                }
                Delivery::Event(event) => self.on_event(event, ctx),
                Delivery::Call(callback) => callback.call(self, ctx),
            }
            *flush |= ctx.flags.flush_enabled;
            // Release, as for one event: a snapshot's `enqueued` stays a lower bound.
            processed.add_release(1);
        }
    }
}

/// What [`Registered::on_run`] counts a run of a pack's events in.
pub(crate) struct Run<'a> {
    /// Events to hand over, at most.
    pub(crate) limit: usize,
    /// The processor's count of events handled.
    pub(crate) processed: &'a Counter,
    /// The processor's count of spilled callbacks.
    pub(crate) spilled: &'a Counter,
    /// Set if the client's flush gate was open after an event.
    pub(crate) flush: &'a mut bool,
}

/// A callback that runs on the client it is sent to, handed the client itself (`&mut C`,
/// its concrete type) and the [`Context`]: BlazingMQ's confirm functor that calls
/// `queue->confirmMessage(guid)` on the queue's thread, without a registry to find the
/// queue.
///
/// Stored inline like a [`Callback`] (the same 48 bytes, the same compile error for a
/// closure that does not fit the default space, [at `cargo build`](zerodispatch_callback#when-the-size-check-runs), no
/// allocation), sent as
/// [`Event::ClientCallback`](crate::Event::ClientCallback), usually through
/// [`Event::to_client`](crate::Event::to_client). It goes to the client directly, not
/// through [`Client::on_event`], and puts the client on the flush list like any event.
///
/// The client's type is checked on the processor: a callback sent to a client of another
/// type than `C` is not run (its captures are dropped), is counted as `wrong_client_type`
/// in the processor's stats and logged.
///
/// # Examples
///
/// ```
/// use zerodispatch_core::{
///     Client, ClientType, Dispatcher, Event, NoMessage, Placement, PoolConfig,
/// };
///
/// #[derive(Default)]
/// struct Queue { confirmed: u64 }
/// impl Client<NoMessage> for Queue {}
///
/// let mut dispatcher = Dispatcher::<NoMessage>::builder()
///     .pool(ClientType::Queue, PoolConfig::new(1))
///     .build()
///     .unwrap();
/// let queue = dispatcher
///     .register(ClientType::Queue, Queue::default(), Placement::LeastLoaded)
///     .unwrap();
/// let guid = [7_u8; 16];
/// dispatcher
///     .dispatch(queue, Event::to_client(move |q: &mut Queue, _ctx| {
///         assert_eq!(guid[0], 7);
///         q.confirmed += 1;
///     }))
///     .unwrap();
/// dispatcher.synchronize(queue).unwrap();
/// dispatcher.shutdown();
/// ```
pub struct ClientCallback<M> {
    callback: InlineCallbackWith<dyn Any, Context<M>>,
}

impl<M: Send + 'static> ClientCallback<M> {
    /// Stores `f`, to run on a client of type `C`. Never allocates.
    ///
    /// # Compile errors
    ///
    /// As [`Callback::new`]: fails to compile if `f` does not fit the default space (at
    /// `cargo build`, not at `cargo check`: [why](zerodispatch_callback#when-the-size-check-runs)).
    #[inline]
    pub fn new<C, F>(f: F) -> Self
    where
        C: Client<M>,
        F: FnOnce(&mut C, &mut Context<M>) + Send + 'static,
    {
        Self {
            callback: InlineCallbackWith::new(move |client: &mut dyn Any, ctx: &mut Context<M>| {
                match client.downcast_mut::<C>() {
                    Some(client) => f(client, ctx),
                    None => ctx.wrong_type += 1,
                }
            }),
        }
    }

    /// Runs the callback on `client`; counts itself in `ctx.wrong_type` (and drops the
    /// closure unrun) if the client is not of the callback's type.
    #[inline]
    pub(crate) fn call(self, client: &mut dyn Registered<M>, ctx: &mut Context<M>) {
        self.callback.call(client.as_any_mut(), ctx);
    }

    /// Always `true`: a client callback is never spilled to the heap.
    #[inline]
    #[must_use]
    pub fn is_inline(&self) -> bool {
        self.callback.is_inline()
    }
}

impl<M> fmt::Debug for ClientCallback<M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClientCallback").finish_non_exhaustive()
    }
}
