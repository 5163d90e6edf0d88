//! The names of things a dispatcher holds: client types, processors, and the handles and
//! keys that name clients. Plain `Copy` values that import nothing of the dispatcher.

use std::fmt;
use std::marker::PhantomData;

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
/// [`DispatcherHandle::register`](crate::DispatcherHandle::register), named by every event sent to the client.
///
/// A handle is typed by its client: `register` of a `Queue` returns a
/// `ClientHandle<Queue>`, and a callback on a `Queue` ([`Event::to_client`](crate::Event::to_client)) is accepted only
/// with a handle to a `Queue`, so a callback sent to a client of another type does not
/// compile:
///
/// ```compile_fail
/// # use zerodispatch_core::*;
/// struct Queue; impl Client<NoMessage> for Queue {}
/// struct Session; impl Client<NoMessage> for Session {}
/// let d = Dispatcher::<NoMessage>::builder().pool(ClientType::Queue, PoolConfig::new(1)).build().unwrap();
/// let session = d.register(ClientType::Queue, Session, Placement::LeastLoaded).unwrap();
/// // A callback on a Queue, sent to a Session: error[E0277], not a drop at run time.
/// d.dispatch(session, Event::to_client(|_queue: &mut Queue, _ctx| ())).unwrap();
/// ```
///
/// A table of clients of several types keeps [erased](ClientHandle::erase) handles,
/// `ClientHandle` (that is, `ClientHandle<AnyClient>`), which accept any [`Event`](crate::Event); a callback
/// on a `C` goes to one as an `Event` (`Event::from(Event::to_client(..))`), and its type is
/// checked on the processor: sent to a client of another type, it is not run (its captures
/// are dropped) and is counted as `wrong_client_type`.
///
/// A handle stays valid until the client is unregistered. Events sent with it afterwards
/// are dropped by the processor and counted as `stale` in its stats (the generation
/// number tells a reused table slot from the client that held it before).
pub struct ClientHandle<C = AnyClient> {
    /// The dispatcher that issued the handle: a handle is refused by every other
    /// dispatcher (`NoSuchProcessor`), even one with a processor of the same id. Checked on
    /// the producer's side; it does not travel in the queued event.
    pub(crate) dispatcher: u64,
    pub(crate) processor: ProcessorId,
    pub(crate) key: ClientKey,
    /// The client's type; a `fn` so that the handle is `Copy`, `Send` and `Sync` whatever
    /// `C` is.
    client: PhantomData<fn() -> C>,
}

/// The client type of an erased [`ClientHandle`]: any. No value of it exists.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AnyClient {}

impl<C> ClientHandle<C> {
    pub(crate) fn new(dispatcher: u64, processor: ProcessorId, key: ClientKey) -> Self {
        Self {
            dispatcher,
            processor,
            key,
            client: PhantomData,
        }
    }

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

    /// The same handle without its client's type, for a table of clients of several types.
    /// Events go through it as before; a callback on a client (`Event::from(Event::to_client(..))`)
    /// has its type checked on the processor instead of at compile time.
    #[must_use]
    pub fn erase(self) -> ClientHandle {
        ClientHandle::new(self.dispatcher, self.processor, self.key)
    }
}

impl<C> Clone for ClientHandle<C> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<C> Copy for ClientHandle<C> {}

/// Equal when they name the same client, typed or erased.
impl<C, D> PartialEq<ClientHandle<D>> for ClientHandle<C> {
    fn eq(&self, other: &ClientHandle<D>) -> bool {
        (self.dispatcher, self.processor, self.key)
            == (other.dispatcher, other.processor, other.key)
    }
}

impl<C> Eq for ClientHandle<C> {}

impl<C> std::hash::Hash for ClientHandle<C> {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        (self.dispatcher, self.processor, self.key).hash(state);
    }
}

impl<C> fmt::Debug for ClientHandle<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClientHandle")
            .field("dispatcher", &self.dispatcher)
            .field("processor", &self.processor)
            .field("key", &self.key)
            .finish()
    }
}

impl<C> From<ClientHandle<C>> for ProcessorId {
    fn from(handle: ClientHandle<C>) -> Self {
        handle.processor
    }
}

impl<C> fmt::Display for ClientHandle<C> {
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
///
/// Aligned to 4, so that in a queued item the key lies at offset 4, right before the event
/// at 8: a copy of an item that takes the tag and the key out as scalars then moves the
/// event in 16-byte pieces that start where the event does. At 2-byte alignment the key
/// sat at 2, the rest was copied from offset 6, and every 16-byte read of the callback
/// afterwards straddled two of those stores (a store-forwarding stall, a fifth of the
/// processor's time in the inline hop: `docs/benchmarks.md`, "The inline hop's copies").
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(align(4))]
pub(crate) struct ClientKey {
    /// Index in the processor's client table.
    pub(crate) slot: u16,
    /// Bumped each time the slot is freed, so a stale handle does not reach the slot's
    /// next client; never wraps (the slot is retired at `u16::MAX`).
    pub(crate) generation: u16,
}
