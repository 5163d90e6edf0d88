//! The broker's two error types: [`BrokerError`], why the broker could not start or a call
//! failed, and [`SendError`], why a message was not taken (it comes back in the error).
//!
//! Each variant names one thing that happened, with typed fields, and its text says what to
//! do about it. Where a call of the dispatcher core failed,
//! [`source`](std::error::Error::source) returns the core's error.

use std::error::Error;
use std::fmt;

use zerodispatch_core::{
    ConfigError, DispatchError, ProcessorId, RegisterError, RegisterRefusal, SyncError,
};

use crate::ids::{AppId, Payload, QueueId};
use crate::limits::{
    FRAME_OVERHEAD, MAX_APPS, MAX_DEDUP_WINDOW, MAX_PRODUCER_NAMES, MAX_QUEUE_CAPACITY,
    MAX_REPLICAS, MAX_UNCONFIRMED, MIN_DEDUP_WINDOW,
};
use crate::replication::ReplicaId;

/// Why the broker could not start or a call failed.
///
/// ```
/// use std::error::Error;
/// use zerodispatch_broker::*;
///
/// let err = Broker::start(BrokerConfig {
///     session_processors: 0,
///     queues: vec![QueueConfig::new(QueueMode::Priority)],
///     ..BrokerConfig::default()
/// })
/// .unwrap_err();
/// assert!(matches!(err, BrokerError::Config(_)));
/// // The core's own error, with what to change, is the source.
/// assert!(err.source().is_some());
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum BrokerError {
    /// The dispatcher refused the configuration the broker built from [`BrokerConfig`]
    /// (processor counts, `event_capacity`, `max_batch`, `cores`). The source is the core's
    /// error, which names the pool and the problem.
    ///
    /// [`BrokerConfig`]: crate::BrokerConfig
    Config(ConfigError),
    /// A queue's `capacity` is 0 or above [`MAX_QUEUE_CAPACITY`].
    QueueCapacityOutOfRange {
        /// The queue.
        queue: QueueId,
        /// The capacity asked for.
        capacity: usize,
    },
    /// A fanout queue's number of apps is 0 or above [`MAX_APPS`].
    AppsOutOfRange {
        /// The queue.
        queue: QueueId,
        /// The number of apps asked for.
        apps: u16,
    },
    /// A queue's consumer `window` is 0: no consumer could ever receive a message.
    ZeroWindow {
        /// The queue.
        queue: QueueId,
    },
    /// [`Replication`](crate::Replication)'s `replicas` is 0 or above [`MAX_REPLICAS`], or
    /// its `quorum` is 0 or above `replicas`.
    ReplicationOutOfRange {
        /// The replicas asked for.
        replicas: u8,
        /// The quorum asked for.
        quorum: u8,
    },
    /// A receipt names a replica the broker does not have: its
    /// [`Replication`](crate::Replication) has `replicas` of them (0 without replication).
    UnknownReplica {
        /// The replica named.
        replica: ReplicaId,
        /// The replicas configured.
        replicas: u8,
    },
    /// The machine could not provide a queue's tables for its capacity.
    QueueTablesTooLarge {
        /// The queue.
        queue: QueueId,
        /// Its capacity.
        capacity: usize,
    },
    /// The machine could not provide a consumer's delivery batch for its queue's window.
    ConsumerBatchTooLarge {
        /// The queue.
        queue: QueueId,
        /// The messages a consumer of it may hold unconfirmed.
        window: usize,
    },
    /// A producer's `max_unconfirmed` is 0 or above [`MAX_UNCONFIRMED`].
    MaxUnconfirmedOutOfRange {
        /// The cap asked for.
        max_unconfirmed: usize,
    },
    /// A producer's `batch_size` is 0.
    ZeroBatchSize,
    /// A producer's `max_frame_bytes` leaves no room for a payload: it must be above
    /// [`FRAME_OVERHEAD`].
    FrameTooSmall {
        /// The frame size asked for.
        max_frame_bytes: usize,
    },
    /// A producer's `FlushStrategy::Timer` interval is zero.
    ZeroTimerInterval,
    /// A producer's `confirm_timeout` is zero.
    ZeroConfirmTimeout,
    /// The session processor the producer was placed on already runs its limit of
    /// producers with a ticker (a timer flush or a confirm timeout).
    TooManyTimedProducers {
        /// The session processor.
        processor: ProcessorId,
        /// Its limit ([`BrokerConfig::timed_producers`](crate::BrokerConfig::timed_producers)).
        limit: usize,
    },
    /// The machine could not provide a producer session's tables for its
    /// `max_unconfirmed`.
    ProducerTablesTooLarge {
        /// The producer's cap.
        max_unconfirmed: usize,
    },
    /// The dispatcher could not register a session or a queue, for a reason other than
    /// shutdown. The source is the core's error.
    Register(RegisterRefusal),
    /// No queue has this id.
    UnknownQueue(QueueId),
    /// The queue has no such app (a priority queue has app 0 only).
    UnknownApp(QueueId, AppId),
    /// The broker is shutting down: nothing new is accepted.
    ShutDown,
    /// Called on the named processor thread of the broker's dispatcher where the call
    /// would have to wait for a processor (`cluster_state`, `quiesce`, a `replica_confirm`
    /// with no credit free): a processor never waits for a processor.
    OnProcessorThread(ProcessorId),
    /// Called on the named processor thread, the call's event found the target's queue and
    /// this processor's outbox full, and a processor never waits for room. The source is the
    /// core's [`DispatchError::Full`].
    OutboxFull(ProcessorId),
    /// A processor dropped a request to wait for it unrun: its thread died (a defect of the
    /// dispatcher). The source is the core's error.
    ProcessorDied(SyncError),
    /// [`BrokerConfig::max_producer_names`](crate::BrokerConfig::max_producer_names) is
    /// above [`MAX_PRODUCER_NAMES`], or the machine cannot allocate its table.
    ProducerNamesOutOfRange {
        /// The names asked for.
        max_producer_names: usize,
    },
    /// A producer holds this name now: one producer per name at a time. The name is free
    /// again once that producer's `close` returns.
    NameInUse(Box<str>),
    /// The broker's table of producer names is full and an open producer holds every name
    /// in it (a closed name gives up its place to a new one). Names in it may still be
    /// opened.
    TooManyNames {
        /// Its size ([`BrokerConfig::max_producer_names`](crate::BrokerConfig::max_producer_names)).
        max_producer_names: usize,
    },
    /// Every id an anonymous producer can have has been given, in every generation (after
    /// about 2^52 opens): ids are never given twice.
    ProducerIdsExhausted,
    /// Every consumer id has been given (after `u32::MAX` opens): ids are never given twice.
    ConsumerIdsExhausted,
    /// [`BrokerConfig::dedup_window`](crate::BrokerConfig::dedup_window) is not a power of
    /// two from [`MIN_DEDUP_WINDOW`](crate::MIN_DEDUP_WINDOW) to
    /// [`MAX_DEDUP_WINDOW`](crate::MAX_DEDUP_WINDOW).
    DedupWindowOutOfRange {
        /// The window asked for.
        dedup_window: usize,
    },
    /// A named producer asked for more messages in flight than its queues' deduplication
    /// window covers: a message resent after a lost connection could then be older than the
    /// window, and its queue could no longer tell whether it stored it.
    WindowBelowUnconfirmed {
        /// The producer's `max_unconfirmed`.
        max_unconfirmed: usize,
        /// The broker's [`dedup_window`](crate::BrokerConfig::dedup_window).
        dedup_window: usize,
    },
}

impl fmt::Display for BrokerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BrokerError::Config(e) => write!(
                f,
                "the dispatcher refused the broker's configuration ({e}); fix BrokerConfig"
            ),
            BrokerError::QueueCapacityOutOfRange { queue, capacity } => write!(
                f,
                "queue {}: capacity {capacity} is out of range; give 1 to MAX_QUEUE_CAPACITY ({MAX_QUEUE_CAPACITY})",
                queue.0
            ),
            BrokerError::AppsOutOfRange { queue, apps } => write!(
                f,
                "queue {}: {apps} fanout apps is out of range; give 1 to MAX_APPS ({MAX_APPS})",
                queue.0
            ),
            BrokerError::ZeroWindow { queue } => write!(
                f,
                "queue {}: a consumer window of 0 would never deliver; give at least 1",
                queue.0
            ),
            BrokerError::ReplicationOutOfRange { replicas, quorum } => write!(
                f,
                "replication of {replicas} replicas with a quorum of {quorum} is out of range; give 1 to MAX_REPLICAS ({MAX_REPLICAS}) replicas and a quorum of 1 to replicas"
            ),
            BrokerError::UnknownReplica { replica, replicas } => write!(
                f,
                "no replica {}: the broker has {replicas} (BrokerConfig::replication), numbered from 0",
                replica.0
            ),
            BrokerError::QueueTablesTooLarge { queue, capacity } => write!(
                f,
                "queue {}: this machine cannot allocate tables for {capacity} messages; lower its capacity",
                queue.0
            ),
            BrokerError::ConsumerBatchTooLarge { queue, window } => write!(
                f,
                "queue {}: this machine cannot allocate a consumer's batch for a window of {window}; lower the queue's window",
                queue.0
            ),
            BrokerError::MaxUnconfirmedOutOfRange { max_unconfirmed } => write!(
                f,
                "max_unconfirmed {max_unconfirmed} is out of range; give 1 to MAX_UNCONFIRMED ({MAX_UNCONFIRMED})"
            ),
            BrokerError::ZeroBatchSize => {
                write!(
                    f,
                    "a producer's batch_size of 0 would never send; give at least 1"
                )
            }
            BrokerError::FrameTooSmall { max_frame_bytes } => write!(
                f,
                "max_frame_bytes {max_frame_bytes} leaves no room for a payload; give more than FRAME_OVERHEAD ({FRAME_OVERHEAD})"
            ),
            BrokerError::ZeroTimerInterval => write!(
                f,
                "a timer flush interval of zero would tick without end; give a positive interval, or FlushStrategy::Dynamic"
            ),
            BrokerError::ZeroConfirmTimeout => write!(
                f,
                "a confirm timeout of zero would time out every message; give a positive timeout, or None"
            ),
            BrokerError::TooManyTimedProducers { processor, limit } => write!(
                f,
                "session processor {processor} already runs its {limit} producers with a ticker (a timer flush or a confirm timeout); raise BrokerConfig::timed_producers, or add session processors"
            ),
            BrokerError::ProducerTablesTooLarge { max_unconfirmed } => write!(
                f,
                "this machine cannot allocate a producer session's tables for max_unconfirmed {max_unconfirmed}; lower it"
            ),
            BrokerError::Register(e) => write!(
                f,
                "the dispatcher could not register a client ({e}); give the broker more processors, or fewer clients"
            ),
            BrokerError::UnknownQueue(q) => write!(
                f,
                "no queue {}; queues are numbered from 0 in BrokerConfig::queues order",
                q.0
            ),
            BrokerError::UnknownApp(q, a) => write!(
                f,
                "queue {} has no app {}; a fanout queue's apps are numbered from 0, a priority queue has app 0 only",
                q.0, a.0
            ),
            BrokerError::ShutDown => write!(
                f,
                "the broker is shutting down and accepts nothing new; start another to go on"
            ),
            BrokerError::OnProcessorThread(p) => write!(
                f,
                "called on processor thread {p}, where this call would wait for a processor, which a processor must never do; call it from an application thread"
            ),
            BrokerError::OutboxFull(p) => write!(
                f,
                "called on processor thread {p} with its outbox full, and a processor never waits for room; call it again later, or from an application thread"
            ),
            BrokerError::ProcessorDied(e) => write!(
                f,
                "a processor of the broker is gone ({e}); shut the broker down and report the defect"
            ),
            BrokerError::ProducerNamesOutOfRange { max_producer_names } => write!(
                f,
                "max_producer_names {max_producer_names} is out of range or cannot be allocated; give 0 to MAX_PRODUCER_NAMES ({MAX_PRODUCER_NAMES})"
            ),
            BrokerError::NameInUse(name) => write!(
                f,
                "a producer named {name:?} is open; close it first (a reconnecting producer tries again shortly: the old one's close may still be under way)"
            ),
            BrokerError::TooManyNames { max_producer_names } => write!(
                f,
                "the broker's {max_producer_names} producer names are all held by open producers; close one, reuse a name, or raise BrokerConfig::max_producer_names"
            ),
            BrokerError::ConsumerIdsExhausted => {
                write!(f, "every consumer id has been given; restart the broker")
            }
            BrokerError::ProducerIdsExhausted => write!(
                f,
                "every anonymous producer id has been given in every generation; restart the broker"
            ),
            BrokerError::DedupWindowOutOfRange { dedup_window } => write!(
                f,
                "dedup_window {dedup_window} must be a power of two from MIN_DEDUP_WINDOW ({MIN_DEDUP_WINDOW}) to MAX_DEDUP_WINDOW ({MAX_DEDUP_WINDOW})"
            ),
            BrokerError::WindowBelowUnconfirmed {
                max_unconfirmed,
                dedup_window,
            } => write!(
                f,
                "a named producer's max_unconfirmed ({max_unconfirmed}) may not exceed the deduplication window ({dedup_window}): lower it, or raise BrokerConfig::dedup_window"
            ),
        }
    }
}

/// The core's refusal behind [`BrokerError::OutboxFull`].
const OUTBOX_FULL: &DispatchError<()> = &DispatchError::Full(());

impl Error for BrokerError {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        match self {
            BrokerError::Config(e) => Some(e),
            BrokerError::Register(e) => Some(e),
            BrokerError::ProcessorDied(e) => Some(e),
            // What the dispatch handed back (a message of the broker's own) is not the
            // caller's: the cause is the refusal itself, which holds nothing else.
            BrokerError::OutboxFull(_) => Some(OUTBOX_FULL),
            _ => None,
        }
    }
}

impl From<ConfigError> for BrokerError {
    fn from(e: ConfigError) -> Self {
        BrokerError::Config(e)
    }
}

impl BrokerError {
    /// A refused registration of one of the broker's own clients (a session, a queue):
    /// the reason; the client, handed back, is dropped. Not a `From`, so that no `?` drops
    /// a client silently.
    pub(crate) fn refused_register<C>(e: RegisterError<C>) -> Self {
        match e.reason {
            RegisterRefusal::ShutDown => BrokerError::ShutDown,
            other => BrokerError::Register(other),
        }
    }
}

/// Why `send`, `try_send` or `publish` did not take a message. The payload always comes
/// back ([`into_payload`](Self::into_payload)): nothing refused is lost.
///
/// ```
/// use zerodispatch_broker::*;
///
/// let broker = Broker::start(BrokerConfig {
///     queues: vec![QueueConfig::new(QueueMode::Priority)],
///     ..BrokerConfig::default()
/// })?;
/// let producer = broker.open_producer(16, |_: &[Ack]| {})?;
/// producer.close(std::time::Duration::ZERO);
/// let payload = Payload { handle: 7, len: 100 };
/// let err = producer.publish(QueueId(0), payload).unwrap_err();
/// assert_eq!(err, SendError::Closed(payload));
/// assert_eq!(err.into_payload(), payload);
/// # Ok::<(), BrokerError>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum SendError {
    /// The unconfirmed-message cap is reached (from `try_send`).
    Full(Payload),
    /// The message would not fit `max_frame_bytes` even alone.
    TooLarge {
        /// The message.
        payload: Payload,
        /// Bytes it needs (payload plus [`FRAME_OVERHEAD`]).
        needs: usize,
        /// The producer's `max_frame_bytes`.
        max_frame_bytes: usize,
    },
    /// The producer is closed.
    Closed(Payload),
    /// The broker is shutting down.
    ShutDown(Payload),
    /// Called on one of the broker's processor threads (in `on_ack`, `on_delivery`, a
    /// dispatcher callback), where the call cannot wait: at the unconfirmed-message cap
    /// (`send`: waiting would block a thread that gives credits back, perhaps this very
    /// one), or with the processor's outbox full (`send`, `try_send`, `publish`).
    WouldBlock(Payload),
    /// A named producer's message without a publish id (`send`, `try_send`, `publish`): a
    /// named producer numbers its messages itself, with
    /// [`Producer::publish_with_id`](crate::Producer::publish_with_id).
    NeedsPublishId(Payload),
}

impl SendError {
    /// The message's payload, handed back.
    #[must_use]
    pub fn into_payload(self) -> Payload {
        match self {
            SendError::Full(p)
            | SendError::TooLarge { payload: p, .. }
            | SendError::Closed(p)
            | SendError::ShutDown(p)
            | SendError::WouldBlock(p)
            | SendError::NeedsPublishId(p) => p,
        }
    }
}

impl fmt::Display for SendError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SendError::Full(_) => write!(
                f,
                "the producer's unconfirmed-message cap is reached; the message is handed back: send it again once outcomes come in, or use send, which waits"
            ),
            SendError::TooLarge {
                needs,
                max_frame_bytes,
                ..
            } => write!(
                f,
                "the message needs {needs} bytes, more than a frame's {max_frame_bytes}; the message is handed back: split it, or raise max_frame_bytes"
            ),
            SendError::Closed(_) => write!(
                f,
                "the producer is closed; the message is handed back: open another producer to send it"
            ),
            SendError::ShutDown(_) => write!(
                f,
                "the broker is shutting down; the message is handed back: it cannot be sent to this broker"
            ),
            SendError::WouldBlock(_) => write!(
                f,
                "called on a processor thread at the unconfirmed-message cap or with its outbox full, where waiting could block the thread that frees room; the message is handed back: send it later, or from an application thread"
            ),
            SendError::NeedsPublishId(_) => write!(
                f,
                "a named producer numbers its messages itself; the message is handed back: publish it with publish_with_id"
            ),
        }
    }
}

impl Error for SendError {}
