//! The confirm path of a message broker, built on the zerodispatch dispatcher: the first
//! real user of `zerodispatch-core`, a reference to copy from, and the workload of the
//! perftest and the confirm benches. In-process, no network: the application's threads
//! publish and consume, and replica nodes are threads that call
//! [`Broker::replica_receipt`] and [`Broker::replica_confirm`].
//!
//! # The path of one message, thread by thread
//!
//! ```text
//! app thread        session proc          queue proc             session proc        app
//! publish ------->  ProducerSession
//!                   (flush) PUT ------->  QueueClient: store
//!                                         (flush) ACK, PUSH ---> ConsumerSession
//!                   ProducerSession <---                        (flush) on_delivery --> handles
//!                   (flush) on_ack --> app
//!                                         QueueClient  <------- CONFIRM (inline functor,
//!                                         (or via the cluster      typed, or boxed)
//!                                          processor)
//!                                         release (the producer hears nothing of it)
//! ```
//!
//! The ACK ([`AckStatus::Stored`]) means stored: the queue sends it when it stores the
//! message, whether or not a consumer is attached. With a [`Replication`] quorum it waits
//! instead for `quorum` replicas' receipts ([`Broker::replica_receipt`], routed through the
//! cluster processor as inline functors). Consumers' confirms release the message: its
//! slot in the queue's table is free again. So publish -> ACK and publish -> consume are
//! two latencies, and the perftest reports both.
//!
//! Every table (messages, GUID indexes, outboxes) is allocated when a queue or session is
//! created: a message allocates nothing on its way (proved by `tests/zero_alloc.rs`),
//! except in the `Boxed` confirm mode, the baseline.
//!
//! ```
//! use std::sync::{Arc, Mutex};
//! use zerodispatch_broker::*;
//!
//! let broker = Broker::start(BrokerConfig {
//!     queues: vec![QueueConfig::new(QueueMode::Fanout { apps: 2 })],
//!     ..BrokerConfig::default()
//! })?;
//! let acks = Arc::new(Mutex::new(Vec::new()));
//! let sink = acks.clone();
//! let producer = broker.open_producer(1024, move |batch: &[Ack]| sink.lock().unwrap().extend_from_slice(batch))?;
//! // A consumer is closed when dropped: keep them.
//! let consumers = (0..2)
//!     .map(|app| broker.open_consumer(QueueId(0), AppId(app), ConsumerOptions::default(), |_: &[Delivery]| {}))
//!     .collect::<Result<Vec<_>, _>>()?;
//! let guid = producer.publish(QueueId(0), Payload { handle: 7, len: 100 })?;
//! broker.quiesce()?;
//! assert_eq!(acks.lock().unwrap()[0].guid, guid);
//! assert_eq!(acks.lock().unwrap()[0].status, AckStatus::Stored);
//! # drop(consumers);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # What an application can reach
//!
//! The calls above, the statistics, and [`Broker::execute`] to run work of its own on a
//! processor. The messages the broker's clients exchange (PUT, PUSH, CONFIRM, ACK, attach,
//! close...) and its dispatcher are its own: an application cannot forge an ACK or a
//! confirm, nor register a client that would receive them. Neither compiles:
//!
//! ```compile_fail,E0432
//! use zerodispatch_broker::BrokerMsg;
//! ```
//!
//! ```compile_fail,E0599
//! fn forge(broker: &zerodispatch_broker::Broker) {
//!     let _ = broker.dispatcher();
//! }
//! ```
//!
//! A replica's confirm goes through [`Broker::replica_confirm`], and its receipt through
//! [`Broker::replica_receipt`], which the cluster routes like any other.

#![forbid(unsafe_code)]

mod broker;
mod cluster;
mod credits;
mod dedup;
mod error;
mod ids;
mod limits;
mod message;
#[cfg(feature = "metrics")]
pub mod metrics;
mod names;
mod parse;
mod protocol;
mod queue;
mod release;
mod replication;
mod session;
mod stats;
mod tables;

pub use broker::{
    Broker, BrokerConfig, BrokerSimulator, Consumer, ConsumerOptions, Producer, QueueConfig,
};
pub use dedup::StoredWindow;
pub use error::{BrokerError, SendError};
pub use ids::{AppId, ConsumerId, Guid, Payload, ProducerId, QueueId};
pub use limits::{
    FRAME_OVERHEAD, MAX_APPS, MAX_DEDUP_WINDOW, MAX_PRODUCER_NAMES, MAX_QUEUE_CAPACITY,
    MAX_REPLICAS, MAX_UNCONFIRMED, MIN_DEDUP_WINDOW,
};
pub use message::{
    Ack, AckStatus, Confirm, ConfirmMode, ConfirmRoute, Confirms, Delivery, DeliveryToken,
};
pub use parse::{
    ParseConfirmModeError, ParseDurationError, ParseFlushStrategyError, parse_duration,
};
pub use queue::QueueMode;
pub use release::OnRelease;
pub use replication::{Receipt, ReplicaId, Replication};
pub use session::{AckHandler, DeliveryHandler, FlushStrategy, ProducerConfig};
pub use stats::{ClusterState, QueueStats, SessionStats};
// The core's types that the broker's own API names.
pub use zerodispatch_core::{
    Callback, ClientType, ConfigError, DispatchError, ParseWaitStrategyError, ProcessorId,
    ProcessorSnapshot, RegisterError, RegisterRefusal, SyncError, WaitStrategy,
};
