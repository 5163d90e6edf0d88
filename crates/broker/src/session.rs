//! Session clients (on session processors): a producer's and a consumer's connection.
//!
//! Both follow the flush contract: they batch on the event path and send on flush. A
//! producer session collects its application's publishes and sends the PUTs on flush, and
//! collects ACKs and reports them to the application on flush; a consumer session collects
//! PUSHes, hands the batch to the application on flush, then confirms each message.
//!
//! # Calling the application
//!
//! Both sessions call their application's handler on flush, with a batch taken out of the
//! session first: the batch is swapped with a preallocated spare (no allocation), and the
//! producer's credits for it are given back, before the handler runs. So whatever the
//! handler does, the batch is handed over once:
//!
//! * it may panic: the session catches the panic (counted in
//!   [`SessionStats::handler_panics`](crate::SessionStats::handler_panics)), and a consumer
//!   still confirms every message of the batch;
//! * it may `send` again from inside `on_ack`, even at a cap of 1: the credits of the batch
//!   are free already, so the send does not wait for the very thread that is running it.
//!
//! # When a dispatch comes back `Full`
//!
//! A session runs on a processor thread, and a processor never waits for another: a
//! dispatch whose target queue is full waits in the processor's outbox, and only when that
//! outbox is full too does it come back `Full`. Then nothing is lost and nothing is
//! reported: a producer session keeps the PUTs at the front of its batch, a consumer
//! session keeps the confirms, each in a table preallocated for the most it can hold, and
//! the session asks to be flushed again (`Context::flush_again`) to send them, in order,
//! before anything newer.

// What an application hands its sessions: its handlers, and how its producer sends.
mod config;
pub use config::{AckHandler, DeliveryHandler, FlushStrategy, ProducerConfig};
// The producer's session: publishes out as PUTs, ACKs back as outcomes.
mod producer;
pub(crate) use producer::ProducerSession;
// The consumer's session: PUSHes in, handed to the application, confirmed.
mod consumer;
pub(crate) use consumer::{ConsumerSession, Pacing};
