//! The broker's configuration: its queues, processors, replication, deduplication
//! ([`BrokerConfig`], [`QueueConfig`]), and how a consumer confirms and is paced
//! ([`ConsumerOptions`]).

use zerodispatch_core::WaitStrategy;

use crate::message::{ConfirmMode, ConfirmRoute, Confirms};
use crate::queue::QueueMode;
use crate::release::OnRelease;
use crate::replication::Replication;

// Named in the docs only.
#[cfg(doc)]
use super::Broker;
#[cfg(doc)]
use crate::error::BrokerError;
#[cfg(doc)]
use crate::limits::{MAX_DEDUP_WINDOW, MAX_PRODUCER_NAMES, MAX_QUEUE_CAPACITY, MIN_DEDUP_WINDOW};

/// One queue of the broker.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QueueConfig {
    /// Priority or fanout.
    pub mode: QueueMode,
    /// Messages the queue holds at most (its table is allocated at start): 1 to
    /// [`MAX_QUEUE_CAPACITY`].
    pub capacity: usize,
    /// Unconfirmed shares a consumer may hold.
    pub window: u32,
}

impl QueueConfig {
    /// A queue of `mode` holding 16,384 messages, each consumer holding up to 1,024
    /// unconfirmed.
    #[must_use]
    pub fn new(mode: QueueMode) -> Self {
        Self {
            mode,
            capacity: 1 << 14,
            window: 1 << 10,
        }
    }
}

/// The broker's configuration.
#[derive(Clone, Debug)]
pub struct BrokerConfig {
    /// The queues, in queue-id order.
    pub queues: Vec<QueueConfig>,
    /// Session processors (producers' and consumers' sessions).
    pub session_processors: usize,
    /// Queue processors; 0: the queues run on the session processors (each queue where
    /// the fewest clients are when the broker starts), so that a PUT, its ACK and a
    /// delivery to a consumer on the same processor are handled in the processor's turn
    /// without waking another thread: fewer wake-ups per message at low rates, at the cost
    /// of the parallelism of separate queue processors under load.
    pub queue_processors: usize,
    /// Each processor's queue capacity, and its outbox's (the events its clients dispatch
    /// to full queues, handed on as room appears: a processor never waits for another).
    /// Session processors receive a queue's PUSHes (at most consumers x window) and ACKs
    /// (at most the queues' capacity): sized above their sum, events rarely wait in an
    /// outbox; sized below, they do, which costs latency but never stalls the broker.
    pub event_capacity: usize,
    /// Each processor's `max_batch`.
    pub max_batch: usize,
    /// How every processor waits for work.
    pub wait: WaitStrategy,
    /// Whether the processors are driven by the threads that publish and confirm
    /// ([`PoolConfig::driven`](zerodispatch_core::PoolConfig::driven)): a publish or a
    /// confirm from an application thread (a server's I/O thread) that finds its processor
    /// parked runs the processor's turn itself instead of waking it, which saves a thread
    /// wake-up on each message's path at low rates. Those threads must then hold no lock
    /// the broker's callbacks take. `false` by default.
    pub driven: bool,
    /// Cores to pin the processors to, dealt out in turn across all pools (sessions first,
    /// then queues, then the cluster), wrapping around; empty for none.
    pub cores: Vec<usize>,
    /// Replication of every queue's messages: with it a message is ACKed once `quorum`
    /// replicas have sent their receipt ([`Broker::replica_receipt`]); without it (the
    /// default), as soon as its queue stores it.
    pub replication: Option<Replication>,
    /// The application's hook for the payloads its queues release (every share confirmed
    /// or dropped, and the ACK gone): from then on the broker never reads or hands out
    /// that payload again, and its bytes may be freed. `None` (the default): not told.
    pub on_release: Option<OnRelease>,
    /// Producer names the broker remembers, at most (0 to [`MAX_PRODUCER_NAMES`]): named
    /// producers ([`Broker::open_named_producer`]) take ids `0..max_producer_names`,
    /// anonymous ones the ids above. Each queue keeps `16 + dedup_window / 8` bytes per
    /// name (2,064 with the default window), allocated at start, for deduplication. Once
    /// this many names are known, a new one takes the place of the name closed least
    /// recently (forgetting what was stored of it), and is refused
    /// ([`BrokerError::TooManyNames`]) only while open producers hold them all. 1,024 by
    /// default.
    pub max_producer_names: usize,
    /// Publish ids each queue remembers exactly, per producer name, for deduplication
    /// (`dedup.rs`): for each of the last `dedup_window` ids below the highest it stored
    /// for a name, whether it stored it. A power of two from [`MIN_DEDUP_WINDOW`] to
    /// [`MAX_DEDUP_WINDOW`]; a named producer's `max_unconfirmed` may not exceed it, so that
    /// every message it resends after a lost connection is inside the window. Each queue
    /// keeps `16 + dedup_window / 8` bytes per name, allocated at start (16,384 by default:
    /// 2,064 bytes per name and queue).
    pub dedup_window: usize,
    /// Producers with a ticker (a timer flush, or a confirm timeout) each session
    /// processor runs at once: each ticks on one of its processor's timers, preallocated
    /// at start (about 90 bytes each). One more is refused
    /// ([`BrokerError::TooManyTimedProducers`]). 4,096 by default; at most
    /// [`MAX_CAPACITY`](zerodispatch_core::MAX_CAPACITY).
    pub timed_producers: usize,
}

impl Default for BrokerConfig {
    fn default() -> Self {
        Self {
            queues: Vec::new(),
            session_processors: 1,
            queue_processors: 1,
            event_capacity: 1 << 16,
            max_batch: 256,
            wait: WaitStrategy::default(),
            driven: false,
            cores: Vec::new(),
            replication: None,
            on_release: None,
            max_producer_names: 1 << 10,
            dedup_window: 1 << 14,
            timed_producers: 1 << 12,
        }
    }
}

/// How a consumer confirms, and how it is paced.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ConsumerOptions {
    /// Inline functor, typed message or boxed functor.
    pub mode: ConfirmMode,
    /// Straight to the queue, or through the cluster processor.
    pub route: ConfirmRoute,
    /// When `on_return` returns (the default), or when the application calls
    /// [`Broker::confirm`].
    pub confirms: Confirms,
    /// How many deliveries `on_delivery` may be handed before the application gives more
    /// with [`Broker::add_credit`]; `Some(0)` starts paused. `None` (the default): no limit
    /// but the queue's window. Deliveries waiting for credit stay in the session, at most
    /// the window, and the queue sends no more than that.
    pub credit: Option<u32>,
}
