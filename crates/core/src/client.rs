//! Clients: what a processor delivers events to, and the handles that name them.
//!
//! A client is registered once with the dispatcher, which moves it to one processor's
//! thread; from then on only that thread touches it, so it needs no lock. Events name
//! their client by a [`ClientHandle`], a small `Copy` value: the processor finds the
//! client in its own table by index, with no lock, no hash and no reference count per
//! event.

use std::fmt;

use zerodispatch_callback::Callback;

use crate::handle::DispatcherHandle;

/// The kinds of client, each with its own pool of processors (as in BlazingMQ).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ClientType {
    /// Client sessions: the connections of producers and consumers.
    Session = 0,
    /// Queues.
    Queue = 1,
    /// Cluster state and replication.
    Cluster = 2,
}

impl ClientType {
    /// Every client type, in index order.
    pub const ALL: [ClientType; 3] = [ClientType::Session, ClientType::Queue, ClientType::Cluster];

    /// The lower-case name used in thread names (`zd-queue-0`) and logs.
    #[must_use]
    pub const fn name(self) -> &'static str {
        match self {
            ClientType::Session => "session",
            ClientType::Queue => "queue",
            ClientType::Cluster => "cluster",
        }
    }

    pub(crate) const fn index(self) -> usize {
        self as usize
    }
}

impl fmt::Display for ClientType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Names one processor: its client type and its index in that type's pool.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ProcessorId {
    /// The pool.
    pub client_type: ClientType,
    /// The index in the pool.
    pub index: u16,
}

impl fmt::Display for ProcessorId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "zd-{}-{}", self.client_type, self.index)
    }
}

/// Where a client lives and which one it is: returned by
/// [`DispatcherHandle::register`], named by every event sent to the client.
///
/// A handle stays valid until the client is unregistered. Events sent with it afterwards
/// are dropped by the processor and counted as `stale` in its stats (the generation
/// number tells a reused table slot from the client that held it before).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ClientHandle {
    /// The dispatcher that issued the handle: a handle is refused by every other
    /// dispatcher (`NoSuchProcessor`), even one with a processor of the same id. Checked on
    /// the producer's side; it does not travel in the queued event.
    pub(crate) dispatcher: u64,
    pub(crate) processor: ProcessorId,
    pub(crate) key: ClientKey,
}

impl ClientHandle {
    /// The processor that owns the client.
    #[must_use]
    pub fn processor(&self) -> ProcessorId {
        self.processor
    }

    /// The client's type.
    #[must_use]
    pub fn client_type(&self) -> ClientType {
        self.processor.client_type
    }
}

impl From<ClientHandle> for ProcessorId {
    fn from(handle: ClientHandle) -> Self {
        handle.processor
    }
}

impl fmt::Display for ClientHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}/client-{}.{}",
            self.processor, self.key.slot, self.key.generation
        )
    }
}

/// A client's place in its processor's table: the part of a handle that travels in an
/// event (4 bytes).
///
/// A `(slot, generation)` pair is never issued twice by a processor: a slot whose
/// generation would wrap is retired instead of reused (see `SlotAllocator::release`), so
/// a stale handle can never reach a later client of its slot.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct ClientKey {
    /// Index in the processor's client table.
    pub(crate) slot: u16,
    /// Bumped each time the slot is freed, so a stale handle does not reach the slot's
    /// next client; never wraps (the slot is retired at `u16::MAX`).
    pub(crate) generation: u16,
}

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
    ///     fn on_message(&mut self, confirms: u64, _ctx: &mut Context<'_, u64>) {
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
    fn on_event(&mut self, event: ClientEvent<M>, ctx: &mut Context<'_, M>) {
        match event {
            ClientEvent::Callback(callback) => callback.call(),
            ClientEvent::Message(message) => self.on_message(message, ctx),
        }
    }

    /// Handles one typed message, when [`on_event`](Client::on_event) keeps its default.
    /// The default drops it.
    fn on_message(&mut self, message: M, ctx: &mut Context<'_, M>) {
        let _ = (message, ctx);
    }

    /// Sends what the events since the last flush produced. Runs on the client's
    /// processor thread. The default does nothing, for clients that do not batch.
    fn flush(&mut self, ctx: &mut Context<'_, M>) {
        let _ = ctx;
    }
}

/// What a client can reach while it handles an event or flushes: its own handle, and the
/// dispatcher, to send events to other clients (without allocating).
pub struct Context<'a, M: Send + 'static> {
    pub(crate) dispatcher: &'a DispatcherHandle<M>,
    pub(crate) me: ClientHandle,
    pub(crate) flags: &'a mut ClientFlags,
}

/// What a client asks of its processor through its [`Context`].
#[derive(Debug)]
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

impl<M: Send + 'static> Context<'_, M> {
    /// The dispatcher, to dispatch to other clients and processors.
    #[must_use]
    pub fn dispatcher(&self) -> &DispatcherHandle<M> {
        self.dispatcher
    }

    /// This client's handle.
    #[must_use]
    pub fn handle(&self) -> ClientHandle {
        self.me
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

impl<M: Send + 'static> fmt::Debug for Context<'_, M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Context")
            .field("me", &self.me)
            .finish_non_exhaustive()
    }
}
