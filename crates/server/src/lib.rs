//! The zerodispatch broker over TCP: a [`Server`] that accepts connections speaking the
//! wire protocol (`docs/protocol.md`, the codec `zerodispatch-wire`) and binds each
//! producer and consumer a client opens to a session of the broker.
//!
//! - I/O runs on a tokio runtime, one task per connection; the broker's processors stay
//!   its pinned threads, joined through the async door: a task waits for room in a
//!   processor's queue as a future, never blocking a runtime thread, and no lock is taken
//!   on a message's path.
//! - Payload bytes live in a preallocated [`PayloadStore`] while the broker carries their
//!   handles; each slot is freed when the message's outcome and every consumer share are
//!   done with it.
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

#![forbid(unsafe_code)]

mod config;
mod connection;
mod link;
mod outbound;
mod payloads;
mod server;

pub use config::{Limits, LimitsError};
pub use payloads::{PayloadStore, TooLarge};
pub use server::{Server, ServerBuilder, ServerError, ServerStats};
