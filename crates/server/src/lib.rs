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
//! - Every connection's memory is bounded by the server's [`Limits`] and taken as its
//!   traffic needs it (a silent connection holds about 10 KiB); a message through the
//!   server allocates nothing once the connection is warm.
//! - Each queue has a part of the payload store of its own, and every problem with one
//!   message is that message's confirm (`TooLarge`, `RejectedStoreFull`, ...): a publish
//!   never waits inside its connection's task, so no client can stall another, or itself.
//! - The server tells its limits in `Welcome`, closes idle connections, refuses one past
//!   its cap with `TOO_MANY_CONNECTIONS`, and drains on shutdown (`zd-server`: SIGTERM or
//!   SIGINT): `docs/protocol.md`.
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
//! room). What the processors hand a connection waits in a queue that grows, as the
//! connection opens producers and consumers, to exactly what they can have in flight.
//! Closing a producer waits for the outcome of every message it published (an ACK means
//! stored, or a replication quorum: promptly).

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
