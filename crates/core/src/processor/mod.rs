//! A processor: one OS thread draining one bounded queue of events for the clients it
//! owns.
//!
//! # The loop
//!
//! 1. Retry the [outbox](crate::outbox): hand on the events this processor's clients
//!    dispatched to queues that were full.
//! 2. Pop events until the queue is empty, handling each (see below); after each run,
//!    [linger](LINGER) a microsecond and look once more. Every `max_batch` events, flush
//!    the flush list (the flush contract on [`Client`]) and retry the outbox.
//! 3. The queue is drained: flush the flush list, retry the outbox.
//! 4. If shutdown asked this processor to stop (only after its [gate](crate::gate) is
//!    closed and empty, so nothing more can arrive), the queue and the outbox are empty
//!    and no client asked to be flushed again, drop the clients and exit.
//! 5. Wait for work by the pool's [`WaitStrategy`], then go to 1. Parking follows the wake
//!    protocol of [`wake`](crate::wake). While the outbox holds events or a client asked
//!    to be flushed again, the park is a short timed one, so that the retries happen.
//!
//! The loop never waits for another processor: that is what makes cycles of processors
//! that dispatch to each other through bounded queues unable to deadlock (see
//! [`outbox`](crate::outbox)).
//!
//! Handling an event: a callback or message for a client looks the client up by its key
//! (a stale key is counted and the event dropped), hands it the event, and puts it on the
//! flush list once; a dispatcher callback flushes the list, then runs. Every call into
//! user code (handlers, flushes, callbacks, and the drops of clients and of stale events)
//!
//! # Files
//!
//! * `shared.rs`: [`ProcessorShared`], the state other threads see, and the processor's
//!   side of the stop and sleep protocol.
//! * `gate_entry.rs`: a producer's entry in the gate, settled whatever happens.
//! * `push.rs`: how events get into the queue: from application threads (waiting as a
//!   dispatch says), through the async door, and from other processors by their outboxes.
//! * `current.rs`: which processor the current thread is.
//! * `runner.rs`: [`Runner`], the thread's own state, the loop above and its one turn.
//! * `delivery.rs`: handling an event: the client table, deliveries and flushes.
//! * `timers.rs`: the processor's side of its timers.
//! * `wait.rs`: waiting for work between two turns.
//! * `drive.rs`: a producer that runs a parked processor's turn (driven pools); `parked.rs`:
//!   the state a parked processor lends it.
//! * `end_of_life.rs`: dropping the clients at the end, and handing on what they dispatch.
//! * `tuning.rs`: the loop's tuned constants, with how to retune them.
//! * `contain.rs`: every call into user code, with its panic contained.

mod contain;
mod current;
mod delivery;
mod drive;
mod end_of_life;
mod gate_entry;
mod parked;
mod push;
mod runner;
mod shared;
mod timers;
mod tuning;
mod wait;

pub(crate) use current::current_processor;
#[cfg(all(loom, test))]
pub(crate) use current::{current_outbox_len, set_current};
pub(crate) use drive::never_drive;
#[cfg(all(loom, test))]
pub(crate) use parked::Parked;
pub(crate) use push::Door;
pub(crate) use runner::Runner;
pub(crate) use shared::ProcessorShared;
