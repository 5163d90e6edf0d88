//! Closing a producer: [`Producer::close`] (and its `Drop`), and the protocol that orders
//! the session's unregistration after every publish that raced the close.
//!
//! # Closing a producer, and the calls that race it
//!
//! Closing unregisters the producer's session, which frees its client slot and its tables:
//! a message that reached the session after that would be lost. So the unregistration is
//! ordered after every publish that passed the closed check, with `Producer::state`, one
//! word that holds two flags and the count of calls inside `Producer::enqueue`:
//!
//! 1. A publishing call enters by a compare-and-swap that adds one to the count only while
//!    `CLOSED` is clear (so no call enters once it is set), dispatches its message, and
//!    leaves by subtracting one.
//! 2. `close` sets `CLOSED` (later calls are refused with `Closed`), gives the messages in flight
//!    their wait, sends the session `Close` (everything still without an outcome is
//!    reported then), and sets `RETIRED`.
//! 3. The session is retired (sent `Retire`) by whoever brings the word to
//!    `CLOSED | RETIRED` with a count of zero: `close`, if no call was inside when it set
//!    `RETIRED`, or else the last call to leave. Exactly one of them sees that transition,
//!    since every change of the word is a read-modify-write. The session unregisters
//!    itself once the ACKs of every PUT it sent have come (counted `late_acks`).
//!
//! A call inside when `CLOSED` was set may reach the session after its `Close`: the session
//! reports such a message `Closed`, and the message still reaches it before the
//! unregistration. Neither side ever waits for the other.

use std::sync::atomic::Ordering;
use std::time::Duration;

use zerodispatch_core::{DispatchError, Event};

use crate::protocol::BrokerMsg;

use super::super::stepped::{dispatch_waiting, run_until_idle};
use super::Producer;
use super::ticker::stop_ticker;

// Named in the docs only.
#[cfg(doc)]
use crate::broker::Broker;
#[cfg(doc)]
use crate::error::SendError;
#[cfg(doc)]
use crate::stats::SessionStats;

/// `Producer::state`: closed; no call enters `enqueue` any more.
pub(super) const CLOSED: usize = 1 << (usize::BITS - 1);
/// `Producer::state`: `close` has sent the session `Close`; the session may go once no call
/// is inside `enqueue`.
const RETIRED: usize = 1 << (usize::BITS - 2);
/// `Producer::state`: the bits that count the calls inside `enqueue`.
const INSIDE: usize = RETIRED - 1;

impl Producer {
    /// Leaves `enqueue` (step 1), unregistering the session if this is the last call out
    /// after `close` has finished (step 3).
    fn leave(&self) {
        // AcqRel: release, so that this call's dispatch happens before the unregistration
        // by whoever does it; acquire, so that if it is this call, `close`'s `Close`
        // happens before it.
        let before = self.state.fetch_sub(1, Ordering::AcqRel);
        if before == CLOSED | RETIRED | 1 {
            self.unregister();
        }
    }

    /// Step 3: tells the session that no publish comes any more (`Retire`, behind every
    /// publish dispatched). It unregisters itself once the ACKs of all the PUTs it sent have
    /// come, so that those arriving after the close are counted (`late_acks`), not dropped
    /// unseen by the dispatcher.
    fn unregister(&self) {
        // Perhaps in a drop on a tokio worker (a future's, or the producer's): a drop
        // cannot be async, and this dispatch waits only for room in the session's queue.
        let retired = zerodispatch_core::allow_blocking(|| {
            dispatch_waiting(
                &self.dispatcher,
                self.stepped,
                self.session,
                Event::Message(BrokerMsg::Retire),
            )
        });
        if let Err(e) = retired {
            tracing::debug!(
                producer = self.key.id.0,
                ?e,
                "the session was not retired (shutting down: the dispatcher drops it)"
            );
        }
    }

    /// Closes the producer; it is the one way to close one, and dropping it calls it with
    /// a wait of 1 s. Every message taken by `send`, `try_send` or `publish` before this
    /// call gets exactly one outcome in `on_ack`, which is one of:
    ///
    /// * its real one (`Stored`, a rejection, `TimedOut`) if that comes within `wait`: the
    ///   close first sends the session's batch to its queue (a timer producer's too,
    ///   without waiting for its tick), so every message published before it goes;
    /// * `NotSent` if it could not be sent to its queue before the close: with a zero
    ///   `wait` (or on a processor thread), what was still in the session's batch; else
    ///   what a full outbox kept back for all of `wait`;
    /// * `Closed` if it was sent and had no outcome when `wait` ran out (an outcome that
    ///   comes later is dropped).
    ///
    /// A message that races this call from another thread is refused
    /// ([`SendError::Closed`], handed back) or, taken, gets its outcome as above (`Closed`
    /// if it reaches the session after the close). Later calls to `send`, `try_send` and
    /// `publish` are refused with `Closed`, and closing again does nothing and returns
    /// `true`.
    ///
    /// Returns whether every message in flight had its outcome reported (`on_ack`
    /// returned) within `wait`. If the broker is shutting down, its session reports what
    /// it holds `Closed` as it is dropped, and the wait sees those outcomes too.
    ///
    /// The session then frees its tables and stays only to count the ACKs still to come
    /// for the messages it sent ([`SessionStats::late_acks`]); once the last has come, it
    /// unregisters itself and its client slot is free. Its counters stay in
    /// [`Broker::session_stats`].
    ///
    /// A named producer's name is free again when this call returns (the next
    /// [`Broker::open_named_producer`] of it succeeds); until then it is refused with
    /// `NameInUse`. Its messages still on their way to their queues are deduplicated
    /// against the next producer's as ever.
    ///
    /// On one of the broker's processor threads (in `on_ack` or `on_delivery`, or a
    /// dispatcher callback) it does not wait at all, whatever `wait` says: that thread
    /// may be the one the outcomes must come through. What is in flight is reported
    /// `Closed` at once. Nor on a tokio runtime's worker thread (with the core's feature
    /// `tokio`: a producer dropped in a task), which it would stall: there it hands the
    /// close on (waiting, at most, for room in the session's queue) and returns.
    ///
    /// A producer with a ticker (a timer flush or a confirm timeout) gives its ticker's place
    /// on its session processor back before this call returns, whatever `wait` says (it
    /// waits for that processor's next turn, which frees the cancelled timer): a timed
    /// producer opened next finds the place free. On a processor thread or a tokio worker,
    /// where it does not wait, the place is free at that turn, after it returns.
    ///
    /// "Not sent yet", at a close without a wait, means still in the session's batch: with
    /// timer aggregation, the messages waiting for the tick; with dynamic send, only those
    /// that reach the session in the same instant as the close (the session sends its
    /// batch as soon as its queue drains).
    pub fn close(&self, wait: Duration) -> bool {
        // Step 2 of the protocol. A swap of the flag (`fetch_or`), not a compare-and-swap:
        // the count may change under it. Relaxed, as entering (see `enqueue`).
        if self.state.fetch_or(CLOSED, Ordering::Relaxed) & CLOSED != 0 {
            return true;
        }
        let on_processor = self.on_processor_thread();
        let may_wait = !on_processor && zerodispatch_core::may_block();
        zerodispatch_core::allow_blocking(|| self.close_as(wait, may_wait))
    }

    /// The rest of [`close`](Self::close), once closed: waits for the outcomes only if
    /// `may_wait`.
    fn close_as(&self, wait: Duration, may_wait: bool) -> bool {
        let drained = if wait.is_zero() || !may_wait {
            // No wait: the `Close` below drains as well.
            self.credits.unreported() == 0
        } else {
            // Refused only when the broker is shutting down: the session then reports what
            // it holds as the dispatcher drops it, which the wait sees as well.
            let _ = dispatch_waiting(
                &self.dispatcher,
                self.stepped,
                self.session,
                Event::Message(BrokerMsg::Drain),
            );
            if self.stepped {
                // Its processors run on this thread alone: they run until idle, the clock
                // still (`Broker::start_stepped`).
                let _ = run_until_idle(&self.dispatcher, self.session.processor());
                self.credits.unreported() == 0
            } else {
                self.credits.wait_reported(wait)
            }
        };
        let told = dispatch_waiting(
            &self.dispatcher,
            self.stepped,
            self.session,
            Event::Message(BrokerMsg::Close),
        );
        if let Some(ticker) = self.ticker.lock().unwrap_or_else(|e| e.into_inner()).take() {
            // Before the name is freed and this returns: a producer opened next finds the
            // ticker's place free.
            stop_ticker(ticker, may_wait, self.stepped);
        }
        // Step 3. AcqRel: release, so that the `Close` above happens before the
        // unregistration if the last call to leave does it (its `fetch_sub` acquires);
        // acquire, so that the dispatches of the calls that left (each `fetch_sub` releases)
        // happen before it if this call does it.
        if self.state.fetch_or(RETIRED, Ordering::AcqRel) & INSIDE == 0 {
            self.unregister();
        }
        match told {
            // Shutting down: the session reports what it holds `Closed` as the dispatcher
            // drops it.
            Ok(()) | Err(DispatchError::ShutDown(_)) => {}
            Err(e) => {
                // On a processor thread whose outbox is full: the session reports
                // everything `Closed` as it is dropped at the unregistration (or at
                // shutdown, if that too found the outbox full).
                tracing::warn!(
                    producer = self.key.id.0,
                    ?e,
                    "Close not delivered to the session"
                );
            }
        }
        if let Some(names) = &self.names {
            names
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .close(self.key.id);
        }
        drained
    }
}

impl Drop for Producer {
    fn drop(&mut self) {
        self.close(Duration::from_secs(1));
    }
}

/// A call inside `Producer::enqueue`'s close protocol across an await (step 1 of the
/// protocol in the module's doc): it leaves when dropped, so a future dropped mid-dispatch
/// leaves too, and takes back the acceptance of a message it did not hand over.
pub(super) struct Inside<'a> {
    producer: &'a Producer,
    /// Whether the message was handed to the session (or, false, is to be taken back).
    handed: bool,
}

impl<'a> Inside<'a> {
    /// Enters, unless the producer is closed.
    pub(super) fn enter(producer: &'a Producer) -> Option<Self> {
        // As in `enqueue`: a compare-and-swap, relaxed.
        let mut now = producer.state.load(Ordering::Relaxed);
        loop {
            if now & CLOSED != 0 {
                return None;
            }
            match producer.state.compare_exchange_weak(
                now,
                now + 1,
                Ordering::Relaxed,
                Ordering::Relaxed,
            ) {
                Ok(_) => {
                    return Some(Self {
                        producer,
                        handed: false,
                    });
                }
                Err(seen) => now = seen,
            }
        }
    }

    /// Leaves, the message handed over or not.
    pub(super) fn finish(mut self, handed: bool) {
        self.handed = handed;
    }
}

impl Drop for Inside<'_> {
    fn drop(&mut self) {
        if !self.handed {
            self.producer.credits.reported(1);
        }
        self.producer.leave();
    }
}
