//! The zerodispatch broker over TCP: a [`Server`] that accepts connections speaking the
//! wire protocol (`docs/protocol.md`, the codec `zerodispatch-wire`) and binds each
//! producer and consumer a client opens to a session of the broker.
//!
//! - I/O runs on a tokio runtime, one task per connection; the broker's processors stay
//!   its pinned threads, joined through the async door: a task waits for room in a
//!   processor's queue as a future, never blocking a runtime thread, and no lock is taken
//!   on a message's path.
//! - Payload bytes live in a preallocated [`PayloadStore`] while the broker carries their
//!   handles; each slot is freed once the message's outcome has gone to its producer and
//!   its queue has released it (the broker's release hook, `BrokerConfig::on_release`).
//! - Every connection's memory is bounded and preallocated from the server's [`Limits`];
//!   a message through the server allocates nothing once the connection is warm.
//!
//! ```no_run
//! use zerodispatch_broker::{BrokerConfig, QueueConfig, QueueMode};
//! use zerodispatch_server::Server;
//!
//! let server = Server::builder()
//!     .listen("127.0.0.1:7878".parse()?)
//!     .broker_config(BrokerConfig {
//!         queues: vec![QueueConfig::new(QueueMode::Priority)],
//!         ..BrokerConfig::default()
//!     })
//!     .start()?;
//! println!("listening on {}", server.local_addr());
//! server.run();
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

//! # What a connection may hold
//!
//! A producer at most its `max_unconfirmed` messages without an outcome, and a
//! connection's producers together at most [`Limits::max_unconfirmed_per_connection`]; a
//! consumer at most [`Limits::consumer_window`] messages delivered and not confirmed,
//! whatever credit it gave (the server hands the broker credit only as far as that leaves
//! room). What the processors hand a connection waits in a queue sized for exactly that.
//!
//! # Known limits
//!
//! - A publish that finds the store full waits and reads nothing more from its
//!   connection: a connection whose own consumers must confirm to free the slots waits
//!   for ever. Size the store above what consumers hold, or consume on other connections.
//! - Closing a producer waits for the outcome of every message it published (an ACK
//!   means stored, or a replication quorum).

#![forbid(unsafe_code)]

mod advertised;
mod config;
mod connection;
mod link;
mod outbound;
mod payloads;
mod server;

pub use config::{Limits, LimitsError, MAX_CONSUMER_WINDOW};
pub use payloads::{PayloadStore, StoreTooLarge, TooLarge};
pub use server::{Server, ServerBuilder, ServerError, ServerStats};
