//! A client of the zerodispatch broker's wire protocol (`docs/protocol.md`) over TCP, on
//! tokio: producers with dynamic send and an unconfirmed cap, consumers with explicit
//! confirms and credit-based flow control.
//!
//! One [`Client`] is one connection and one I/O task. [`Client::open_producer`] and
//! [`Client::open_consumer`] open producers and consumers on it.
//!
//! - A [`Producer`] takes messages with [`send`](Producer::send) (waits at its cap),
//!   [`send_blocking`](Producer::send_blocking) (for plain threads) or
//!   [`try_send`](Producer::try_send) (hands back at its cap), copies them into a pending
//!   buffer, and the I/O task sends them by its [`Flush`]: dynamic send (whatever is pending
//!   when the connection is not writing, in one write) or a timer. Every message gets
//!   exactly one [`Outcome`], reported to the producer's handler.
//! - A [`Consumer`] hands each delivered batch to its handler as [`Deliveries`], and
//!   confirms messages by GUID and delivery token ([`Message::token`]); confirms are
//!   batched like dynamic sends, with one credit back per confirm if asked.
//! - A [`ReliableProducer`] and a [`ReliableConsumer`] have a connection of their own and
//!   survive losing it: they reconnect by a [`Backoff`] (exponential, with jitter,
//!   bounded); the producer re-opens under its name and resends every message without an
//!   outcome with its original publish id, in order, from a ring allocated when it opens;
//!   the consumer filters by GUID what it already handed the application.
//!
//! ```no_run
//! use zerodispatch_client::{Client, ClientOptions, ProducerOptions};
//! use zerodispatch_wire::{ConfirmStatus, QueueId};
//!
//! # async fn run() -> Result<(), zerodispatch_client::ClientError> {
//! let client = Client::connect("127.0.0.1:7878", ClientOptions::default()).await?;
//! let producer = client
//!     .open_producer(QueueId(0), ProducerOptions::default(), |outcomes| {
//!         for outcome in outcomes {
//!             assert_eq!(outcome.status, ConfirmStatus::Stored);
//!         }
//!     })
//!     .await?;
//! producer.send(b"hello").await?;
//! producer.close().await?; // every message has had its outcome
//! client.close().await;
//! # Ok(())
//! # }
//! ```

#![forbid(unsafe_code)]

mod backoff;
mod blocking;
mod client;
mod command;
mod connection;
mod consumer;
mod error;
mod io;
mod lock;
mod options;
mod producer;
mod reconnect;
mod reliable_consumer;
mod reliable_producer;
mod resend_ring;

pub use backoff::Backoff;
pub use client::Client;
pub use consumer::{Consumer, Deliveries, Message};
pub use error::{ClientError, TrySendError};
pub use options::{ClientOptions, ConsumerOptions, Flush, MAX_UNCONFIRMED, ProducerOptions};
pub use producer::{Outcome, Producer};
pub use reliable_consumer::{ReliableConsumer, ReliableConsumerOptions, ReliableConsumerStats};
pub use reliable_producer::{
    Recovery, ReliableProducer, ReliableProducerOptions, ReliableProducerStats,
};
pub use zerodispatch_wire::{
    AppId, ConfirmStatus, ConsumerId, DeliveryToken, Guid, ProducerId, PublishId, QueueId,
    ServerLimits, Stored,
};
